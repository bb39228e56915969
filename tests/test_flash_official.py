"""Loading what the AlayaRenderer-Flash model card describes (issue 10), on tiny sizes: `flash inspect`, config
passthrough, the partial over every key, prefixed / renamed checkpoints, text-sink tolerance, G-buffer encoder
families, TAEHV decoder alignment, the sampler as data and meta-device loading."""

from __future__ import annotations

import json
import shutil
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from renderer import RendererError, create_renderer
from renderer.flash import checkpoint
from renderer.flash.config import TINY, FlashConfig, get_config
from renderer.flash.decoder import DecoderStream, TinyDecoder
from renderer.flash.families import match_family, state_shapes
from renderer.flash.gbuffer_encoder import ENCODER_FAMILIES, GBufferEncoder
from renderer.flash.history import LatentHistory
from renderer.flash.pipeline import FlashPipeline
from renderer.flash.probe import edge_overlap
from renderer.flash.sampler import FewStepSampler
from renderer.flash.taehv import MemBlock, StreamMemory, init_signal_preserving, taehv_encoder
from renderer.flash.weights import (GBUFFER_ENCODER, TINY_DECODER, TRANSFORMER_CONFIG, TRANSFORMER_INDEX,
                                    TRANSFORMER_PARTIAL, TRANSFORMER_WEIGHTS, WeightsError, WeightsPlan)
from studio.cli import main as cli
from tests.test_flash import make_frames, one_torch_thread  # noqa: F401 (autouse fixture)
from tests.test_flash_weights import broken, render_two_chunks, weights_dir  # noqa: F401 (fixtures)

PROMPT = "a green jungle world"          # cached by the weights_dir fixture


def rgb_of(renderer) -> np.ndarray:
    return render_two_chunks(renderer)


def inspect_json(root, capsys) -> tuple[int, dict]:
    code = cli(["flash", "inspect", str(root), "--json"])
    return code, json.loads(capsys.readouterr().out)


# ---- 1. inspect ------------------------------------------------------------------------------------------------
def test_inspect_reads_headers_only_and_says_the_directory_loads(weights_dir, capsys, monkeypatch):
    def no_data(*_a, **_k):
        raise AssertionError("inspect read tensor data")

    monkeypatch.setattr(checkpoint, "load_tensor", no_data)
    code, report = inspect_json(weights_dir, capsys)
    assert code == 0 and report["loads"] and report["text_sink"] == "used"
    enc = report["files"][GBUFFER_ENCODER]
    assert enc["verdict"] == "loads" and enc["family"] == "grouped" and enc["dtypes"] == {"F32": enc["tensors"]}
    assert enc["bytes"] == sum(v.numel() * 4 for v in load_file(weights_dir / GBUFFER_ENCODER).values())
    assert enc["card"]["bytes"] == 37e6 and enc["card"]["agrees"] is False       # tiny is not the card's size
    tree = report["files"]["transformer/"]["tree"]
    assert tree["blocks"]["patterns"]["blocks.N.attn1.to_q.weight"] == {"count": 2, "example_shape": [128, 128]}
    assert cli(["flash", "inspect", str(weights_dir)]) == 0
    assert "transformer_partial.safetensors: loads" in capsys.readouterr().out


def test_inspect_lists_what_does_not_fit_and_exits_2(broken, capsys):
    state = load_file(broken / GBUFFER_ENCODER)
    state["encoder.0.weight"] = torch.zeros(3, 3, 3, 3)
    save_file(state, str(broken / GBUFFER_ENCODER))
    (broken / TINY_DECODER).unlink()
    code, report = inspect_json(broken, capsys)
    assert code == 2 and not report["loads"]
    enc = report["files"][GBUFFER_ENCODER]
    assert enc["verdict"] == "does not load" and enc["family"] == "unknown"
    assert enc["mismatched"] == ["encoder.0.weight (3, 3, 3, 3) != (40, 3, 3, 3)"]
    assert "file is missing" in report["files"][TINY_DECODER]["errors"][0]


def test_inspect_reports_an_unknown_encoder_layout_by_its_key_pattern(broken, capsys):
    save_file({"stem.0.weight": torch.zeros(8, 15, 3, 3), "heads.3.proj.weight": torch.zeros(16, 8)},
              str(broken / GBUFFER_ENCODER))
    code, report = inspect_json(broken, capsys)
    assert code == 2
    assert "matches no G-buffer encoder family (key pattern: heads.N.proj.weight, stem.N.weight)" in \
        report["files"][GBUFFER_ENCODER]["notes"][0]


def test_sharded_bf16_and_prefixed_checkpoints_load_like_the_plain_one(broken, capsys):
    plain = rgb_of(create_renderer("flash", weights=broken, chunk_size=8, dtype="fp32"))
    base = load_file(broken / TRANSFORMER_WEIGHTS)
    keys = sorted(base)
    shards = {"diffusion_pytorch_model-00001-of-00002.safetensors": keys[: len(keys) // 2],
              "diffusion_pytorch_model-00002-of-00002.safetensors": keys[len(keys) // 2:]}
    for name, part in shards.items():                       # sharded, bf16, keys under 'model.'
        save_file({f"model.{k}": base[k].to(torch.bfloat16) for k in part}, str(broken / "transformer" / name))
    (broken / TRANSFORMER_INDEX).write_text(json.dumps(
        {"weight_map": {f"model.{k}": name for name, part in shards.items() for k in part}}))
    (broken / TRANSFORMER_WEIGHTS).unlink()
    partial = load_file(broken / TRANSFORMER_PARTIAL)
    save_file({f"module.transformer.{k}": v for k, v in partial.items()}, str(broken / TRANSFORMER_PARTIAL))
    code, report = inspect_json(broken, capsys)
    assert code == 0 and report["files"]["transformer/"]["dtypes"] == {"BF16": len(keys)}
    loaded = create_renderer("flash", weights=broken, chunk_size=8, dtype="fp32")
    assert loaded.describe()["text_sink"] == "used"
    # the partial (fp32) overrides its keys; the rest went through bf16
    assert torch.equal(loaded.pipeline.transformer.patch_embedding.weight, partial["patch_embedding.weight"])
    assert torch.equal(loaded.pipeline.transformer.proj_out.weight, base["proj_out.weight"].to(torch.bfloat16).float())
    assert np.abs(rgb_of(loaded).astype(int) - plain).mean() < 8      # bf16 rounding only


def test_a_key_map_hook_renames_checkpoint_keys(broken):
    partial = load_file(broken / TRANSFORMER_PARTIAL)
    save_file({k.replace("text_sink.", "sink_module."): v for k, v in partial.items()},
              str(broken / TRANSFORMER_PARTIAL))
    with pytest.warns(UserWarning, match="text_sink: unused"):
        assert FlashPipeline.from_dir(broken, device="cpu").text_sink_status == "unused"
    pipe = FlashPipeline.from_dir(broken, device="cpu", key_map=lambda k: k.replace("sink_module.", "text_sink."))
    assert pipe.text_sink_status == "used" and torch.equal(pipe.transformer.text_sink.slots, partial["text_sink.slots"])


# ---- 2. config passthrough -------------------------------------------------------------------------------------
HELIOS_TINY = dict(patch_size=(1, 2, 2), num_attention_heads=4, attention_head_dim=32, in_channels=96, out_channels=16,
                   text_dim=32, freq_dim=32, ffn_dim=256, num_layers=2, rope_dim=(12, 10, 10), rope_theta=500.0,
                   is_amplify_history=True, zero_history_timestep=False, history_scale_mode="scalar")


def stock_directory(broken):
    """transformer/ written by diffusers' own save_pretrained; a partial of its own Flash keys (no sink)."""
    from diffusers.models.transformers.transformer_helios import HeliosTransformer3DModel

    torch.manual_seed(11)
    stock = HeliosTransformer3DModel(**HELIOS_TINY).eval()
    for p in stock.parameters():                  # non-trivial values everywhere (some are zero-initialised)
        p.data.add_(torch.randn_like(p) * 0.02)
    shutil.rmtree(broken / "transformer")
    stock.save_pretrained(broken / "transformer", safe_serialization=True)
    state = stock.state_dict()
    save_file({k: v.contiguous() for k, v in state.items() if k.startswith(("patch_", "norm_out."))},
              str(broken / TRANSFORMER_PARTIAL))
    return stock


def history_inputs(t=2):
    torch.manual_seed(4)
    history = LatentHistory((4, 2, 1), 96, 4, 8, torch.device("cpu"), torch.float32)
    history.push(torch.randn(1, 16, 3, 4, 8), torch.randn(1, 80, 3, 4, 8))
    return history.inputs(t)


def test_every_helios_config_key_reaches_the_model_and_outputs_equal_stock_diffusers(broken):
    stock = stock_directory(broken)
    with pytest.warns(UserWarning, match="text_sink: unused"):
        pipe = FlashPipeline.from_dir(broken, device="cpu")
    model = pipe.transformer
    for key in ("rope_theta", "is_amplify_history", "zero_history_timestep", "history_scale_mode"):
        assert model.config[key] == HELIOS_TINY[key], key
    assert pipe.config.helios["rope_theta"] == 500.0
    torch.manual_seed(5)
    x, prompt = torch.randn(1, 96, 2, 4, 8), torch.randn(1, 8, 32)
    timestep = torch.tensor([700.0])
    with torch.no_grad():
        ours = model(x, timestep, prompt, **history_inputs().kwargs(), return_dict=False)[0]
        theirs = stock(x, timestep, prompt, **history_inputs().kwargs(), return_dict=False)[0]
    assert torch.equal(ours, theirs)


def test_a_config_key_helios_does_not_have_is_named(broken):
    config = json.loads((broken / TRANSFORMER_CONFIG).read_text())
    config["sink_gate"] = 1
    (broken / TRANSFORMER_CONFIG).write_text(json.dumps(config))
    with pytest.raises(WeightsError, match="config.json: sink_gate: not an argument of HeliosTransformer3DModel"):
        FlashPipeline.from_dir(broken, device="cpu")
    config.pop("sink_gate")
    config["flash"]["sigma_max"] = 2
    (broken / TRANSFORMER_CONFIG).write_text(json.dumps(config))
    with pytest.raises(WeightsError, match=r"config.json: sigma_max: Input should be less than or equal to 1"):
        FlashPipeline.from_dir(broken, device="cpu")


# ---- 3. the partial over every key -----------------------------------------------------------------------------
def test_the_partial_may_override_any_key_even_with_another_shape(broken):
    base = load_file(broken / TRANSFORMER_WEIGHTS)
    wrong = torch.zeros(base["proj_out.weight"].shape[0], 7)            # transformer/ has it in another shape
    right = torch.randn_like(base["proj_out.weight"])
    ffn = torch.randn_like(base["blocks.1.ffn.net.0.proj.weight"])
    save_file(base | {"proj_out.weight": wrong}, str(broken / TRANSFORMER_WEIGHTS))
    with pytest.raises(WeightsError, match=r"1 shape mismatch\(es\): proj_out.weight \(64, 7\) != \(64, 128\)"):
        FlashPipeline.from_dir(broken, device="cpu")
    partial = load_file(broken / TRANSFORMER_PARTIAL)
    save_file(partial | {"proj_out.weight": right, "blocks.1.ffn.net.0.proj.weight": ffn},
              str(broken / TRANSFORMER_PARTIAL))
    plan = WeightsPlan(broken)
    assert plan.ok and "1 with another shape: proj_out.weight" in plan.files[TRANSFORMER_PARTIAL].notes[0]
    model = FlashPipeline.from_dir(broken, device="cpu").transformer
    assert torch.equal(model.proj_out.weight, right) and torch.equal(model.blocks[1].ffn.net[0].proj.weight, ffn)


# ---- 5. text-sink tolerance ------------------------------------------------------------------------------------
def test_a_foreign_sink_is_left_out_with_one_warning_and_shows_as_unused(broken, capsys):
    partial = load_file(broken / TRANSFORMER_PARTIAL)
    foreign = {k: v for k, v in partial.items() if not k.startswith("text_sink.")}
    foreign |= {f"blocks.{i}.attn2.sink_tokens": torch.randn(4, 128) for i in range(2)}
    save_file(foreign, str(broken / TRANSFORMER_PARTIAL))
    code, report = inspect_json(broken, capsys)
    assert code == 0 and report["text_sink"] == "unused"
    notes = report["files"][TRANSFORMER_PARTIAL]["notes"]
    assert any("blocks.N.attn2.sink_tokens match no sink layout" in n for n in notes)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        renderer = create_renderer("flash", weights=broken, chunk_size=8)
    assert [str(w.message).count("text_sink: unused") for w in caught] == [1]
    assert renderer.describe()["text_sink"] == "unused" and renderer.pipeline.transformer.text_sink is None
    assert rgb_of(renderer).shape == (16, 32, 64, 3)


def test_a_slots_only_sink_is_a_known_family(broken):
    partial = load_file(broken / TRANSFORMER_PARTIAL)
    save_file({k: v for k, v in partial.items() if not k.startswith("text_sink.proj")},
              str(broken / TRANSFORMER_PARTIAL))
    pipe = FlashPipeline.from_dir(broken, device="cpu")
    assert pipe.text_sink_status == "used" and pipe.transformer.text_sink.proj is None
    assert WeightsPlan(broken).files[TRANSFORMER_PARTIAL].family == "text sink: slots"


# ---- 4. G-buffer encoder families ------------------------------------------------------------------------------
def random_taehv_encoder(width: int, latent: int = 16) -> nn.Sequential:
    encoder = taehv_encoder(width, latent)
    init_signal_preserving(encoder)
    return encoder


def branch_state(attr: str, width: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    return {f"{attr}.{k}.{n}": v for k in range(5) for n, v in random_taehv_encoder(width).state_dict().items()}


def shared_state(width: int, latent: int) -> dict[str, torch.Tensor]:
    torch.manual_seed(2)
    state = {f"encoder.{n}": v for n, v in random_taehv_encoder(width, latent).state_dict().items()}
    return state | {"fusion.weight": torch.randn(80, 5 * latent, 1, 1) * 0.2, "fusion.bias": torch.zeros(80)}


@pytest.mark.parametrize("state,family", [
    (lambda: branch_state("branches", 8), "branches"),
    (lambda: branch_state("encoders", 12), "branches"),
    (lambda: shared_state(8, 6), "shared"),
])
def test_encoder_families_are_built_from_the_checkpoint(broken, state, family):
    state = state()
    save_file(state, str(broken / GBUFFER_ENCODER))
    pipe = FlashPipeline.from_dir(broken, device="cpu")
    enc = pipe.gbuffer_encoder
    assert enc.family == family and {k: tuple(v.shape) for k, v in enc.state_dict().items()} == \
        {k: tuple(v.shape) for k, v in state.items()}
    assert sum(isinstance(m, MemBlock) for m in enc.modules()) == (15 if family == "branches" else 3) * 3
    frames = torch.rand(1, 12, 5, 3, 32, 64)
    with torch.no_grad():
        whole = enc(frames, StreamMemory())
        memory = StreamMemory()
        chunked = torch.cat([enc(frames[:, i:i + 4], memory) for i in (0, 4, 8)], dim=2)
    assert whole.shape == (1, 80, 3, 4, 8)
    scale = whole.abs().max()
    assert (whole - chunked).abs().max() <= 1e-5 * scale            # TAEHV memory carried across chunks
    fresh = enc(frames[:, 4:], StreamMemory())                       # ... and it matters: no memory differs
    assert (whole[:, :, 1:] - fresh).abs().max() > 1e-3 * scale
    assert rgb_of(create_renderer("flash", weights=broken, chunk_size=8)).shape == (16, 32, 64, 3)


def test_encoder_input_range_is_a_setting():
    enc = GBufferEncoder.grouped(4)
    frames = torch.rand(1, 4, 5, 3, 16, 16)
    with torch.no_grad():
        unit = enc(frames)
        enc.input_range = "-1..1"
        signed = enc(frames)
        enc.input_range = "0..1"
        assert torch.equal(signed, enc(frames * 2 - 1))              # the same encoder fed [-1, 1]
    assert not torch.allclose(unit, signed)
    r = create_renderer("flash", gbuffer_input_range="-1..1")
    assert r.pipeline.gbuffer_encoder.input_range == "-1..1" and r.describe()["gbuffer_input_range"] == "-1..1"
    with pytest.raises(RendererError, match="^gbuffer_input_range: Input should be '0..1' or '-1..1'"):
        create_renderer("flash", gbuffer_input_range="0..255")


def test_a_grouped_encoder_that_steps_in_its_stem_loads_as_the_one_that_was_trained():
    """nano's encoder steps 2x in its stem instead of its third stage: the same layer indices and shapes, so only
    the biases tell the loader which convs step. The rebuilt encoder must be the trained one, output for output."""
    frames = torch.rand(1, 8, 5, 3, 32, 48)
    for stem in (1, 2):
        torch.manual_seed(stem)
        enc = GBufferEncoder.grouped(4, stem_stride=stem)
        family, rebuilt = match_family(ENCODER_FAMILIES, state_shapes(enc))
        rebuilt.load_state_dict(enc.state_dict(), assign=True)
        strides = [m.stride[0] for m in rebuilt.modules() if isinstance(m, nn.Conv2d) and m.kernel_size == (3, 3)]
        assert family.name == "grouped" and strides[0] == stem and strides.count(2) == 3
        with torch.no_grad():
            assert torch.equal(rebuilt(frames), enc(frames)) and enc(frames).shape == (1, 80, 2, 4, 6)
    assert GBufferEncoder.for_config(get_config("nano")).encoder[0].stride == (2, 2)
    with pytest.raises(ValueError, match="stem_stride must be 1 or 2"):
        GBufferEncoder.grouped(4, stem_stride=4)


# ---- 6. decoder alignment --------------------------------------------------------------------------------------
def taehv_decode_reference(decoder: nn.Sequential, latents: torch.Tensor, trim: bool) -> torch.Tensor:
    """madebyollin/taehv's decode_video, written from the public algorithm: NTCHW, every block in parallel over
    time, a MemBlock's past = its input shifted by one step (zeros first), clamp, drop 3 start-up frames."""
    n, t, c, h, w = latents.shape
    x = latents.reshape(n * t, c, h, w)
    for block in decoder:
        if isinstance(block, MemBlock):
            seq = x.reshape(n, -1, *x.shape[1:])
            past = F.pad(seq, (0, 0, 0, 0, 0, 0, 1, 0))[:, : seq.shape[1]]
            x = block(x, past.reshape(x.shape))
        else:
            x = block(x)
    x = x.reshape(n, -1, *x.shape[1:]).clamp(0, 1)
    return x[:, 3:] if trim else x


@pytest.mark.parametrize("trim", [False, True])
def test_decoder_alignment_matches_taehv_whole_and_chunked(trim):
    torch.manual_seed(0)
    decoder = TinyDecoder((16, 8, 8, 8)).eval()
    latents = torch.randn(1, 16, 5, 4, 6)
    with torch.no_grad():
        reference = taehv_decode_reference(decoder.decoder, latents.transpose(1, 2), trim)
        whole = decoder(latents, DecoderStream(trim))
        stream = DecoderStream(trim)
        chunked = torch.cat([decoder(latents[:, :, i:i + 2], stream) for i in (0, 2, 4)], dim=1)
    assert whole.shape == reference.shape == (1, 20 - 3 * trim, 3, 32, 48)
    assert torch.equal(whole, reference)
    assert torch.allclose(chunked, reference, atol=2e-4)              # chunking reorders float sums only


def test_trimmed_alignment_delays_the_gbuffer_stream_by_three_frames():
    plain = create_renderer("flash", prompts=[PROMPT], chunk_size=8)
    taehv = create_renderer("flash", prompts=[PROMPT], chunk_size=8, trim_startup_frames=True)
    assert taehv.describe()["latency_frames"] == 3 and plain.describe()["latency_frames"] == 0
    frames = make_frames(16)
    seen = []
    original = taehv.pipeline.encode_gbuffer
    taehv.pipeline.encode_gbuffer = lambda x, memory=None: seen.append(x.clone()) or original(x, memory)
    out = rgb_of(taehv)
    assert out.shape == (16, 32, 64, 3)
    stream = torch.cat(seen, dim=1)[0]                                # what the encoder saw, (16, 5, 3, H, W)
    expected = torch.from_numpy(np.stack([f.data for f in frames])).permute(0, 1, 4, 2, 3).float() / 255
    assert torch.equal(stream[:3], expected[:1].expand(3, -1, -1, -1, -1))   # 3 start-up copies of frame 0
    assert torch.equal(stream[3:], expected[:13])                      # then frame p-3 at position p
    assert not np.array_equal(out, rgb_of(plain))


def test_edge_overlap_finds_the_offset_of_a_shifted_video():
    torch.manual_seed(0)
    t = 12
    gbuffer = torch.zeros(t + 3, 5, 3, 32, 32)
    for i in range(t + 3):                                            # a square moving 2 px per frame
        gbuffer[i, :, :, 8:20, 2 + 2 * i: 14 + 2 * i] = 1.0
    video = gbuffer[:, 0]                                             # "rendered" = albedo of the same frame
    assert max(edge_overlap(video[:t], gbuffer[:t]).items(), key=lambda kv: kv[1])[0] == 0
    late = torch.cat([video[:1].expand(3, -1, -1, -1), video[:t - 3]])   # raw frame i + 3 shows frame i
    scores = edge_overlap(late, gbuffer[:t])
    assert max(scores.items(), key=lambda kv: kv[1])[0] == 3 and scores[3] > 2 * scores[0]


def test_inspect_probe_scores_both_alignments(weights_dir, tmp_path, capsys, monkeypatch):
    window = np.stack([f.data for f in make_frames(8, 64, 32)])
    np.save(tmp_path / "window-00.npy", window)
    assert cli(["flash", "inspect", str(weights_dir), "--json", "--probe", str(tmp_path / "window-00.npy"),
                "--device", "cpu"]) == 0
    probe = json.loads(capsys.readouterr().out)["probe"]
    assert set(probe["edge_overlap_by_offset"]) == {"0", "1", "2", "3"} and probe["size"] == [64, 32]
    # weights whose raw decoded frames show the geometry itself, at once or 3 frames late: the probe must tell
    geometry = torch.from_numpy(window[:, [1, 3]]).float().div(255).mean(1).permute(0, 3, 1, 2)   # (T, 3, H, W)
    late = torch.cat([geometry[:1].expand(3, -1, -1, -1), geometry[:-3]])
    for shown, better in ((geometry, "trim_startup_frames=false"), (late, "trim_startup_frames=true")):
        monkeypatch.setattr(FlashPipeline, "decode", lambda self, latent, stream, shown=shown: shown[None])
        assert cli(["flash", "inspect", str(weights_dir), "--json", "--probe", str(tmp_path / "window-00.npy"),
                    "--device", "cpu"]) == 0
        assert json.loads(capsys.readouterr().out)["probe"]["better"] == better
    np.save(tmp_path / "bad.npy", window[:, :3])
    assert cli(["flash", "inspect", str(weights_dir), "--probe", str(tmp_path / "bad.npy")]) == 2
    assert "expected a uint8 (T, 5, H, W, 3) window" in capsys.readouterr().err


# ---- 7. the sampler as data ------------------------------------------------------------------------------------
def test_renoise_update_and_sigma_max_recover_a_flow_exactly():
    sampler = FewStepSampler(num_steps=3, shift=3.0, sigma_max=0.999, update="renoise")
    sigmas = sampler.sigmas()
    assert abs(float(sigmas[0]) - 0.999) < 1e-6 and sigmas[-1] == 0
    x0 = torch.randn(1, 16, 1, 4, 4)
    x, noise = sampler.add_noise(x0, torch.randn_like(x0), sigmas[0]), torch.randn_like(x0)
    for s, s_next in zip(sigmas[:-1].tolist(), sigmas[1:].tolist()):
        v = (x - x0) / s                                             # the exact velocity at x
        x = sampler.step(x, v, s, s_next, lambda: noise)
        if s_next > 0:
            assert torch.allclose(x, sampler.add_noise(x0, noise, s_next), atol=1e-5)   # re-noised, fresh noise
    assert torch.allclose(x, x0, atol=1e-5)


def test_sampler_settings_come_from_the_config_and_settings_override_them(broken):
    config = json.loads((broken / TRANSFORMER_CONFIG).read_text())
    config["flash"] |= {"num_steps": 2, "sigma_max": 0.999, "sampler_update": "renoise", "timestep_shift": 3.0}
    (broken / TRANSFORMER_CONFIG).write_text(json.dumps(config))
    described = create_renderer("flash", weights=broken).describe()
    assert (described["num_steps"], described["sigma_max"], described["sampler_update"],
            described["timestep_shift"]) == (2, 0.999, "renoise", 3.0)
    over = create_renderer("flash", weights=broken, sampler_update="euler", num_steps=3, sigma_max=1.0)
    assert (over.pipeline.sampler.update, over.pipeline.sampler.num_steps, over.pipeline.config.sigma_max) == \
        ("euler", 3, 1.0)
    a, b = rgb_of(create_renderer("flash", weights=broken, chunk_size=8)), rgb_of(over)
    assert not np.array_equal(a, b)


def test_flash_config_json_round_trips_through_pydantic():
    data = json.loads(json.dumps(TINY.to_json()))            # tuples become lists in JSON
    assert FlashConfig.from_json(data) == TINY
    with pytest.raises(RendererError, match=r"^x.json: rope_dim: Tuple should have at most 3 items"):
        FlashConfig.from_json({"name": "tiny", "rope_dim": [1, 2, 3, 4]}, "x.json")


# ---- 9. loading builds on the meta device ----------------------------------------------------------------------
def test_loading_never_materialises_a_randomly_initialised_model(weights_dir, monkeypatch):
    devices = []
    original = nn.Linear.reset_parameters

    def record(self):
        devices.append(self.weight.device.type)
        return original(self)

    monkeypatch.setattr(nn.Linear, "reset_parameters", record)
    pipe = FlashPipeline.from_dir(weights_dir, device="cpu", dtype=torch.bfloat16)
    assert devices and set(devices) == {"meta"}
    dtypes = {p.dtype for n, p in pipe.transformer.named_parameters() if "time_embedder" not in n
              and "norm" not in n and "scale_shift_table" not in n}
    assert dtypes == {torch.bfloat16}
    assert pipe.transformer.condition_embedder.time_embedder.linear_1.weight.dtype == torch.float32   # diffusers'
    assert not any(t.is_meta for t in [*pipe.transformer.parameters(), *pipe.transformer.buffers()])


def test_sampler_and_alignment_settings_reach_the_cli_and_the_server(weights_dir, tmp_path, capsys):
    from studio.cli import build_parser
    from studio.commands.serve import settings_from_args

    args = build_parser().parse_args(["serve", "--renderer", "flash", "--weights", str(weights_dir),
                                      "--renderer-option", "sampler_update=renoise",
                                      "--renderer-option", "sigma_max=0.999", "--renderer-option", "num_steps=2"])
    options = settings_from_args(args).renderer_options
    assert options == {"sampler_update": "renoise", "sigma_max": 0.999, "num_steps": 2,
                       "unknown_prompt": "presets", "chunk_size": 4, "threads": 1, "weights": str(weights_dir)}
    assert create_renderer("flash", **options).describe()["sampler_update"] == "renoise"
    assert cli(["serve", "--renderer", "flash", "--renderer-option", "num_steps=0", "--port", "1"]) == 2
    assert "--renderer-option: num_steps: Input should be greater than or equal to 1" in capsys.readouterr().err
    assert cli(["serve", "--renderer-option", "num_steps"]) == 2
    assert "'num_steps' is not KEY=VALUE" in capsys.readouterr().err
    out = tmp_path / "out.mp4"
    assert cli(["render", "demo", "--prompt", "cyberpunk", "-o", str(out), "--renderer", "flash", "--weights",
                str(weights_dir), "--renderer-option", "trim_startup_frames=true", "--renderer-option", "num_steps=1",
                "--frames", "8", "--size", "64x32", "--no-progress", "--device", "cpu"]) == 0
    assert out.stat().st_size > 0
