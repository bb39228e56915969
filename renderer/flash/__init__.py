"""AlayaRenderer-Flash: streaming G-buffer → RGB video diffusion (4 steps, tiny codecs, text sink).

    config.py           FlashConfig: full (official sizes) and tiny (CPU tests)
    transformer.py      HeliosTransformer3DModel + per-layer text-sink slots
    gbuffer_encoder.py  grouped tiny G-buffer encoder (5 branches)
    decoder.py          stateful TAEHV-architecture decoder (loads taew2_1_ft.safetensors)
    text.py             prompt-embedding cache, umT5 encoder, conditioning blends
    sampler.py          few-step flow / mean-flow sampler
    history.py          bounded short/mid/long history + appearance anchor
    weights.py          the official weights layout: strict loading, random init
    pipeline.py         FlashPipeline.from_dir(DIR): the modules and one chunk's stages
    session.py          FlashSession: the streaming RenderSession
    renderer.py         FlashRenderer: the Renderer backend
"""

from renderer.flash.renderer import FlashRenderer

__all__ = ["FlashRenderer"]
