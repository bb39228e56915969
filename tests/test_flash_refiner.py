"""The G-buffer refiner (renderer/flash/refiner.py): small configs decode at full resolution with the G-buffer's
help. It sees the G-buffer pixel by pixel, the live session hands it the chunk's own frames, a brief fit on a
per-pixel target gets far closer than the decoder alone, it round-trips through the weights layout, and
`flash inspect` names it. Tiny sizes, real files."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from gbuffer.frame import GBufferFrame
from prompt_presets.resolve import conditioning_for, resolve_prompt
from renderer.flash.checkpoint import WeightsError
from renderer.flash.config import TINY
from renderer.flash.decoder import DecoderStream
from renderer.flash.pipeline import FlashPipeline
from renderer.flash.refiner import FEATURES, GBufferRefiner, quadratic_features
from renderer.flash.weights import REFINER, WeightsPlan
from helpers.gbuffer_frames import as_gbuffer, mid_range_frames, renders_alike, whole_and_streamed
from studio.cli import main
from training.data import Recording
from training.refiner_fit import Look, RefinerSettings, fit_refiner

W, H = 64, 32
REFINED = dataclasses.replace(TINY, refiner_looks=2)
ALBEDO = (1, 2, 3)          # feature indices of the albedo's R, G, B (after the constant)


def cli(*args) -> int:
    return main([str(a) for a in args])


def albedo_head(refiner: GBufferRefiner) -> None:
    """Every look's head maps a pixel to its own albedo exactly."""
    with torch.no_grad():
        refiner.head.zero_()
        for c, f in enumerate(ALBEDO):
            refiner.head[:, f, c] = 1.0


def random_frames(n: int, seed: int = 0) -> list[GBufferFrame]:
    return mid_range_frames(n, W, H, seed)


@pytest.fixture
def pipe() -> FlashPipeline:
    """A tiny refined pipeline whose refiner is near "the albedo", with every input weighing a little."""
    p = FlashPipeline.random(REFINED, seed=0, device="cpu")
    albedo_head(p.refiner)
    with torch.no_grad():
        torch.manual_seed(1)
        p.refiner.head.add_(0.01 * torch.randn_like(p.refiner.head))
        p.refiner.context_out.weight.normal_(0, 0.05)
    return p


def test_a_gbuffer_pixel_changes_that_output_pixel_and_only_its_neighbourhood(pipe):
    frames = random_frames(pipe.config.chunk_frames)
    g = as_gbuffer(frames)
    changed = g.clone()
    changed[0, 0, 3, :, 10, 20] = 1 - changed[0, 0, 3, :, 10, 20]          # frame 0, normal, pixel (10, 20)
    latent = torch.randn(1, 16, pipe.config.chunk_latents, H // 8, W // 8, generator=torch.Generator().manual_seed(0))
    prompt = pipe.prompts.conditioning(conditioning_for("polar"))[None]
    a = pipe.decode(latent, DecoderStream(), g, prompt)
    b = pipe.decode(latent, DecoderStream(), changed, prompt)
    diff = (a - b).abs().amax(dim=2)[0]                                      # (T, H, W)
    assert diff[0, 10, 20] > 1e-3
    assert diff[1:].max() == 0                                               # other frames untouched
    far = diff[0].clone()
    far[8:13, 18:23] = 0                                                     # the 5x5 neighbourhood
    assert far.max() == 0
    plain = pipe.decode(latent, DecoderStream())                             # no G-buffer: the decoder's frames
    assert torch.equal(plain, pipe.decoder(latent, DecoderStream()))


def test_the_session_hands_the_refiner_its_own_chunks_gbuffer_frame_for_frame(pipe):
    albedo_head(pipe.refiner)
    with torch.no_grad():
        pipe.refiner.context_out.weight.zero_()
    frames = random_frames(2 * pipe.config.chunk_frames - 3, seed=2)        # a short last chunk, padded inside
    out, parts = whole_and_streamed(pipe, frames, W, H)
    assert [len(p) for p in parts] == [1] * len(frames)                     # each frame leaves once it is refined
    streamed = np.concatenate(parts)
    albedo = np.stack([f.data[0] for f in frames])
    assert out.shape == albedo.shape
    assert np.abs(out.astype(int) - albedo).max() <= 1                      # rounding only
    assert np.array_equal(streamed, out)


def quadratic_target(gbuffer: torch.Tensor) -> torch.Tensor:
    """uint8 (N, 5, 3, H, W) → uint8 (N, 3, H, W): a per-pixel quadratic look (albedo lit by normal.z, dimmed
    by roughness²), no neighbours."""
    g = gbuffer.float() / 255
    albedo, normal, rough = g[:, 0], g[:, 3], g[:, 4]
    rgb = albedo * (0.3 + 0.7 * normal[:, 2:3]) * (1 - 0.5 * rough[:, :1] ** 2)
    return (rgb.clamp(0, 1) * 255).round().to(torch.uint8)


def smooth_recording(frames: int, seed: int) -> Recording:
    """Smooth random G-buffer fields (a few pixels of structure, like geometry) with the quadratic look as RGB."""
    gen = torch.Generator().manual_seed(seed)
    coarse = torch.rand(frames, 15, H // 4, W // 4, generator=gen)
    fine = torch.nn.functional.interpolate(coarse, size=(H, W), mode="bilinear", align_corners=False)
    g = (fine * 255).round().to(torch.uint8).unflatten(1, (5, 3))
    return Recording(f"smooth-{seed}", g, quadratic_target(g), "original")


def test_a_brief_fit_on_a_per_pixel_target_gets_far_closer_than_the_decoder_alone():
    pipe = FlashPipeline.random("tiny", seed=0, device="cpu")
    recordings = [smooth_recording(16, 0)]
    target = lambda k, idx: recordings[k].rgb[idx].permute(0, 2, 3, 1).numpy()    # noqa: E731
    text = resolve_prompt("original").text                                   # in the random model's cache
    looks = [Look("original", text, (text,), [0], target)]
    settings = RefinerSettings(windows=1, window_frames=16, steps=5, pixels=500)
    refiner, report = fit_refiner(pipe, recordings, looks, settings)
    fitted = report["psnr_on_fitted_frames"]
    assert fitted["head"] > fitted["decoded"] + 15                       # the random model's frames are noise
    assert fitted["head"] > 40                                           # the look is in the head's span
    held = smooth_recording(8, 1)                                        # frames it never saw
    decoded = torch.rand(8, 3, H, W, generator=torch.Generator().manual_seed(3))
    prompt = pipe.prompts.prompt(text)[None].expand(8, -1, -1)
    out = refiner(decoded, held.gbuffer.float() / 255, prompt)
    mse = ((out - held.rgb.float() / 255) ** 2).mean()
    assert 10 * torch.log10(1 / mse) > 40


def test_the_head_spans_every_quadratic_map_of_the_gbuffer():
    """Any per-pixel quadratic map of the 15 values (the per-pixel baseline's family) is one head."""
    v = torch.rand(2, 18, 4, 5)
    weights = torch.randn(FEATURES, 3)
    r = GBufferRefiner(looks=1, text_dim=8)
    with torch.no_grad():
        r.head[0] = weights
    out = r.head_map(v, torch.ones(2, 1))
    assert torch.allclose(out, torch.einsum("nfhw,fc->nchw", quadratic_features(v), weights), atol=1e-5)
    # evaluated without the features (c + v.l + v^T Q v): the same map for a blend of looks, frame by frame
    blended = GBufferRefiner(looks=3, text_dim=8)
    with torch.no_grad():
        blended.head.normal_(0, 0.5)
    routing = torch.softmax(torch.randn(2, 3), -1)
    maps = torch.einsum("ns,sfc->nfc", routing, blended.head)
    with torch.no_grad():
        assert torch.allclose(blended.head_map(v, routing),
                              torch.einsum("nfhw,nfc->nchw", quadratic_features(v), maps), atol=1e-5)


def test_routing_follows_the_prompt_and_a_blend_mixes_the_looks():
    r = GBufferRefiner(looks=2, text_dim=4)
    with torch.no_grad():
        r.keys.copy_(torch.eye(4)[:2])
    w = r.routing(torch.tensor([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0.5, 0.5, 0, 0]]))
    assert w[0, 0] > 0.99 and w[1, 1] > 0.99
    assert torch.allclose(w[2], torch.tensor([0.5, 0.5]), atol=1e-4)


def test_the_refiner_round_trips_through_the_weights_layout(pipe, tmp_path):
    pipe.save(tmp_path / "w")
    assert (tmp_path / "w" / REFINER).is_file()
    back = FlashPipeline.from_dir(tmp_path / "w", device="cpu")
    assert back.config.refiner_looks == 2
    for k, v in pipe.refiner.state_dict().items():
        assert torch.equal(back.refiner.state_dict()[k], v), k
    assert renders_alike(pipe, back, random_frames(pipe.config.chunk_frames, seed=4), W, H)
    (tmp_path / "w" / REFINER).unlink()
    with pytest.raises(WeightsError, match=REFINER):
        FlashPipeline.from_dir(tmp_path / "w", device="cpu")


def test_the_official_layout_and_full_config_have_no_refiner(tmp_path):
    plain = FlashPipeline.random("tiny", seed=0, device="cpu")
    assert plain.refiner is None and "refiner" not in plain.parameter_counts()
    plain.save(tmp_path / "plain")
    assert not (tmp_path / "plain" / REFINER).exists()
    assert FlashPipeline.from_dir(tmp_path / "plain", device="cpu").refiner is None
    from renderer.flash.config import FULL

    assert FULL.refiner_looks == 0


def test_flash_inspect_tells_the_variants_apart(pipe, tmp_path, capsys):
    pipe.save(tmp_path / "refined")
    FlashPipeline.random("tiny", seed=0, device="cpu").save(tmp_path / "plain")
    params = pipe.refiner.parameter_count()
    assert cli("flash", "inspect", tmp_path / "refined") == 0
    text = capsys.readouterr().out
    assert f"decoder: TAEHV tiny decoder, widths (32, 16, 8, 8) + G-buffer refiner ({params:,} params)" in text
    assert f"{REFINER}: loads" in text and "not on the card" in text
    assert cli("flash", "inspect", tmp_path / "plain") == 0
    text = capsys.readouterr().out
    assert "decoder: TAEHV tiny decoder, widths (32, 16, 8, 8)\n" in text and "refiner" not in text
    assert cli("flash", "inspect", tmp_path / "refined", "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["files"][REFINER]["verdict"] == "loads"
    assert WeightsPlan(tmp_path / "refined").report()["decoder"].endswith(f"({params:,} params)")


def test_train_refiner_fits_and_exports_it(tmp_path, capsys):
    rec = tmp_path / "a.gbuf.zip"
    assert cli("record", "--frames", 24, "--size", f"{W}x{H}", "--seed", 1, "--rgb", "--fps", 10, "-o", rec) == 0
    assert cli("train", "codec", rec, "--config", "tiny", "--size", f"{W}x{H}", "--steps", 2, "-o", tmp_path / "c",
               "--no-progress") == 0
    out = tmp_path / "m"
    assert cli("train", rec, "--config", "tiny", "--codec", tmp_path / "c", "--size", f"{W}x{H}", "--steps", 2,
               "--chunks", 2, "--styles", "original,polar", "--refiner", "--refiner-windows", 1,
               "--refiner-frames", 8, "--refiner-steps", 3, "-o", out, "--no-progress") == 0
    report = json.loads((out / "refiner_fit.json").read_text())
    assert report["looks"] == ["original", "polar"] and report["routing_accuracy_on_phrasings"] == 1.0
    fitted = report["psnr_on_fitted_frames"]
    assert fitted["head"] > fitted["decoded"] + 5
    assert len((out / "refiner_log.jsonl").read_text().splitlines()) == 1
    plan = WeightsPlan(out)
    assert plan.ok and plan.config.refiner_looks == 2 and plan.files[REFINER].ok
    capsys.readouterr()
    assert cli("train", rec, "--config", "full", "--weights", out, "--refiner", "-o", tmp_path / "f",
               "--no-progress") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--refiner" in err[0] and "small configs" in err[0]


def test_train_refiner_on_recordings_the_transformer_never_saw(tmp_path, capsys):
    """--refiner-on: the head's weight on the decoded colour is fitted where that colour is as good as on new
    frames; eval's per-pixel baseline is then fitted on those recordings too."""
    train, spare = tmp_path / "a.gbuf.zip", tmp_path / "b.gbuf.zip"
    for seed, rec in ((1, train), (2, spare)):
        assert cli("record", "--frames", 16, "--size", f"{W}x{H}", "--seed", seed, "--rgb", "--fps", 10,
                   "-o", rec) == 0
    assert cli("train", "codec", train, "--config", "tiny", "--size", f"{W}x{H}", "--steps", 2,
               "-o", tmp_path / "c", "--no-progress") == 0
    common = ("--config", "tiny", "--codec", tmp_path / "c", "--size", f"{W}x{H}", "--steps", 2, "--chunks", 1,
              "--styles", "original", "--refiner", "--refiner-windows", 1, "--refiner-frames", 8,
              "--refiner-steps", 2, "--no-progress")
    assert cli("train", train, *common, "--refiner-on", spare, "-o", tmp_path / "m") == 0
    report = json.loads((tmp_path / "m" / "refiner_fit.json").read_text())
    assert report["recordings"] == [spare.name] and report["frames"] == 8
    named = json.loads((tmp_path / "m" / "train_settings.json").read_text())
    assert named["transformer_recordings"] == [str(train)]
    assert named["recordings"] == [str(train), str(spare)]           # what eval's per-pixel baseline fits on
    capsys.readouterr()
    for bad, words in (((train,), "a.gbuf.zip is a training recording"), ((tmp_path / "gone.zip",), "gone.zip")):
        assert cli("train", train, *common, "--refiner-on", *bad, "-o", tmp_path / "x") == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and words in err[0] and "--refiner-on" in err[0], err
    without = [a for a in common if a != "--refiner"]
    assert cli("train", train, *without, "--refiner-on", spare, "-o", tmp_path / "y") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "need --refiner" in err[0] and "--refiner-on" in err[0], err


def test_codec_clips_with_styles_are_each_in_one_drawn_style():
    """`train codec --styles`: the codec learns the looks the renderer will decode, not the beauty pass alone."""
    from training.data import PairedClips
    from training.style_targets import style_frames
    from training.styles import StyleTargets

    rec = smooth_recording(8, 5)
    data = PairedClips([rec], clip_frames=4, styles=StyleTargets(("original", "polar"), keep=True))
    clips = data.rgb_clips(6, torch.Generator().manual_seed(0))
    polar = torch.from_numpy(style_frames(rec, "polar")).permute(0, 3, 1, 2).float() / 255
    original = rec.rgb.float() / 255
    seen = set()
    for clip in clips:
        starts = [s for s in range(5) for look, frames in (("polar", polar), ("original", original))
                  if torch.equal(clip, frames[s:s + 4]) and not seen.add(look)]
        assert starts, "a clip that is neither look"
    assert seen == {"original", "polar"}
