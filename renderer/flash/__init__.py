"""AlayaRenderer-Flash: streaming G-buffer → RGB video diffusion (4 steps, tiny codecs, text sink).

    config.py           FlashConfig: full (official sizes) and tiny (CPU tests)
    transformer.py      HeliosTransformer3DModel + per-layer text-sink slots
    gbuffer_encoder.py  tiny G-buffer encoders: grouped, five TAEHV branches, shared + fusion
    decoder.py          stateful TAEHV-architecture decoder (loads taew2_1_ft.safetensors)
    text.py             prompt-embedding cache, umT5 encoder, conditioning blends
    sampler.py          few-step flow / mean-flow sampler
    history.py          bounded short/mid/long history + appearance anchor
    weights.py          the official weights layout: WeightsPlan (headers only), meta-device loading, writing
    pipeline.py         FlashPipeline.from_dir(DIR): the modules and one chunk's stages
    session.py          FlashSession: the streaming RenderSession
    batch.py            several sessions' chunks in one forward pass (renderer/batching.py's batch function)
    renderer.py         FlashRenderer: the Renderer backend (registered in renderer/__init__.py)
    settings.py         FlashSettings: the renderer's options (pydantic)
    checkpoint.py       safetensors headers, streaming tensor reads, prefix stripping / key maps
    families.py         modules rebuilt from a checkpoint's key/shape table (G-buffer encoder, text sink)
    taehv.py            TAEHV building blocks shared by the decoder and the G-buffer encoders
    inspect.py          `flash inspect`: the per-file report
    probe.py            the decoder-alignment probe (edge overlap per frame offset)
    benchmark.py        the synthetic G-buffer stream and timed rollout the flash benches share
    learning_check.py   a small learning task that checks the sampler and prompt conditioning
"""

__all__ = ["FlashRenderer"]


def __getattr__(name: str):
    # lazy: renderer.flash.settings / config stay importable without the diffusers stack
    if name == "FlashRenderer":
        from renderer.flash.renderer import FlashRenderer

        return FlashRenderer
    raise AttributeError(name)
