"""Training and evaluation: paired recordings → train codec → train (checkpoints, resume, LoRA, torchrun) →
eval (PSNR / SSIM / flicker) → the trained directory streams in a live studio session. Tiny sizes, real files,
real subprocesses; every stage of the CI pipeline must work or a test here fails."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image
from safetensors.torch import load_file

from gbuffer.formats import write_npy_windows
from gbuffer.frame import GBufferFrame
from renderer import create_renderer
from studio.cli import main
from training.bookkeeping import draw_loss_curve
from training.codec import Codec, TinyEncoder, load_codec, random_crops, scale_latents_to_unit
from training.data import PairedClips, load_recording
from training.metrics import StreamMetrics, psnr, ssim
from training.targets import CodecTargets, LatentCache

SIZE = "64x32"
ROOT = Path(__file__).resolve().parents[1]


def cli(*args: str) -> int:
    return main([str(a) for a in args])


@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, Path]:
    """Paired engine recordings from `record --rgb`: two training seeds and one held out."""
    d = tmp_path_factory.mktemp("pairs")
    out = {"a": d / "seed1.gbuf.zip", "b": d / "seed2.gbuf.zip", "held": d / "seed3.gbuf.zip"}
    for path, seed, frames in zip(out.values(), (1, 2, 3), (24, 24, 16)):
        assert cli("record", "--frames", frames, "--size", SIZE, "--seed", seed, "--rgb", "--fps", 15,
                   "-o", path) == 0
    return out


@pytest.fixture(scope="module")
def codec(recordings, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("codec")
    assert cli("train", "codec", recordings["a"], recordings["b"], "--config", "tiny", "--size", SIZE,
               "--steps", 3, "--checkpoint-every", 2, "--log-every", 1, "-o", out, "--no-progress") == 0
    return out


@pytest.fixture(scope="module")
def trained(recordings, codec, tmp_path_factory) -> Path:
    """4 steps, checkpoint every 2, then --resume to 6 (self-rollout from step 3 on, absolute)."""
    out = tmp_path_factory.mktemp("tiny-model")
    common = ("train", recordings["a"], recordings["b"], "--config", "tiny", "--codec", codec, "--size", SIZE,
              "--chunks", 2, "--checkpoint-every", 2, "--log-every", 1, "--rollout-start", 3,
              "--rollout-share", 1, "-o", out, "--no-progress")
    assert cli(*common, "--steps", 4) == 0
    assert cli(*common, "--steps", 6, "--resume") == 0
    return out


def held_out_outputs(weights: Path, recording: Path) -> tuple[list, list, list]:
    """The trained model's frames of `recording` rendered by a plain session (seed 0, `original`, chunk by
    chunk), with the recording's RGB and albedo: what eval must have scored."""
    from gbuffer.formats import open_sequence
    from prompt_presets.resolve import conditioning_for

    renderer = create_renderer("flash", weights=str(weights), device="cpu")
    outputs = []
    with open_sequence(recording) as source, renderer.open_session(source.width, source.height, seed=0) as session:
        frames = list(source)
        for start in range(0, len(frames), renderer.chunk_size):
            chunk = frames[start:start + renderer.chunk_size]
            outputs.extend(session.render(chunk, [conditioning_for("original")] * len(chunk)).rgb)
    return outputs, [f.rgb for f in frames], [f.channel("albedo") for f in frames]


def reference_psnr(truth: np.ndarray, output: np.ndarray) -> float:
    from skimage.metrics import peak_signal_noise_ratio

    return peak_signal_noise_ratio(truth, output, data_range=255)


def reference_ssim(truth: np.ndarray, output: np.ndarray) -> float:
    from skimage.metrics import structural_similarity

    return structural_similarity(truth, output, channel_axis=-1, gaussian_weights=True, sigma=1.5,
                                 use_sample_covariance=False, data_range=255)


# ---- the pipeline -----------------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.gl
def test_train_codec_writes_a_taehv_codec_with_its_log(codec):
    state = load_file(codec / "tiny_decoder" / "taew2_1_ft.safetensors")
    assert "encoder.0.weight" in state and "encoder.17.weight" in state and "decoder.1.weight" in state
    meta = json.loads((codec / "codec.json").read_text())
    assert meta["decoder_channels"] == [32, 16, 8, 8] and meta["step"] == 3
    log = [json.loads(line) for line in (codec / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3] and all(r["psnr"] > 0 for r in log)
    assert 0.5 < log[0]["latent_std"] < 2          # started at unit scale (scale_latents_to_unit), not ~0.05
    assert Image.open(codec / "loss.png").size == (720, 400)


def test_the_codec_starts_with_latents_of_unit_scale():
    torch.manual_seed(0)
    codec, clips = Codec(8, (32, 16, 8, 8)), torch.rand(2, 8, 3, 32, 64)
    before = scale_latents_to_unit(codec, clips)
    with torch.no_grad():
        after = float(codec.encode(clips).std())
    assert before < 0.3 and abs(after - 1) < 1e-3


def test_a_fresh_codec_passes_its_input_through_with_every_memblock_an_identity():
    """The init a deep TAEHV stack trains from: under PyTorch's default init a decoded frame kept ~4 % of its
    input's spread, and a codec trained on sixteen styles never left mid grey (BENCHMARKS.md)."""
    from renderer.flash.taehv import MemBlock

    torch.manual_seed(0)
    codec, clips = Codec(8, (32, 16, 8, 8)), torch.rand(2, 8, 3, 32, 64)
    blocks = [m for m in codec.modules() if isinstance(m, MemBlock)]
    inputs = [torch.rand(3, b.conv[0].in_channels // 2, 5, 5) for b in blocks]    # >= 0, as after a ReLU
    assert len(blocks) == 18 and all(torch.equal(b(x.clone(), torch.rand_like(x)), x) for b, x in zip(blocks, inputs))
    scale_latents_to_unit(codec, clips)
    with torch.no_grad():
        out = codec.decode(codec.encode(clips))
    assert abs(float(out.mean()) - 0.5) < 0.1                        # starts around mid grey...
    assert float(out.std()) > 0.2 * float(clips.std())               # ...and already depends on its input
    mine, others = out[0] - out[0].mean(), clips[0] - clips[0].mean()
    assert float((mine * others).mean()) != 0


def test_codec_crops_are_each_clips_own_and_lie_on_the_latent_grid():
    clips = torch.arange(2 * 8 * 3 * 32 * 64, dtype=torch.float32).reshape(2, 8, 3, 32, 64)
    crops = random_crops(clips, 16, torch.Generator().manual_seed(0))
    assert crops.shape == (2, 8, 3, 16, 16)
    for clip, crop in zip(clips, crops):
        y, x = divmod(int(crop[0, 0, 0, 0] - clip[0, 0, 0, 0]), 64)
        assert y % 8 == 0 and x % 8 == 0 and torch.equal(crop, clip[..., y:y + 16, x:x + 16])
    assert random_crops(clips, 0, torch.Generator()) is clips and random_crops(clips, 64, torch.Generator()) is clips


def test_train_codec_refuses_a_crop_off_the_latent_grid(capsys):
    for crop in ("12", "-8"):
        assert main(["train", "codec", "missing.gbuf.zip", "--crop", crop, "-o", "unused"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--crop" in err[0] and "multiple of 8" in err[0], err


@pytest.mark.slow
@pytest.mark.gl
def test_train_resumes_and_writes_the_official_layout_with_its_bookkeeping(trained):
    for name in ("transformer/config.json", "transformer/diffusion_pytorch_model.safetensors",
                 "transformer_partial.safetensors", "gbuf_small_encoder.safetensors",
                 "tiny_decoder/taew2_1_ft.safetensors", "text_embeddings.safetensors", "loss.png"):
        assert (trained / name).is_file(), name
    log = [json.loads(line) for line in (trained / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4, 5, 6]          # resumed at 4, nothing lost or repeated
    assert [r["stage"] for r in log] == ["flow"] * 3 + ["rollout"] * 3
    assert all(r["self_rollout"] for r in log[3:]) and all(np.isfinite(r["loss"]) for r in log)
    assert sorted(p.name for p in (trained / "checkpoints").iterdir()) == ["step-000004.pt", "step-000006.pt"]
    config = json.loads((trained / "transformer/config.json").read_text())
    assert config["flash"]["name"] == "tiny" and config["in_channels"] == 96


@pytest.mark.slow
@pytest.mark.gl
def test_resuming_gives_the_weights_of_an_uninterrupted_run(recordings, codec, trained, tmp_path):
    straight = tmp_path / "straight"
    assert cli("train", recordings["a"], recordings["b"], "--config", "tiny", "--codec", codec, "--size", SIZE,
               "--chunks", 2, "--checkpoint-every", 100, "--rollout-start", 3, "--rollout-share", 1,
               "--steps", 6, "-o", straight, "--no-progress") == 0
    a = load_file(trained / "transformer/diffusion_pytorch_model.safetensors")
    b = load_file(straight / "transformer/diffusion_pytorch_model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], msg=key)


@pytest.mark.slow
@pytest.mark.gl
def test_eval_scores_the_trained_model_on_a_held_out_recording(trained, recordings, tmp_path):
    report = tmp_path / "eval.json"
    assert cli("eval", trained, recordings["held"], "--json", report, "--markdown", tmp_path / "eval.md",
               "--side-by-side", tmp_path / "videos", "--baselines", "--conv-minutes", 0.02) == 0
    result = json.loads(report.read_text())
    overall = result["overall"]
    assert overall["frames"] == 16 and {"psnr", "ssim", "flicker", "flicker_ratio"} <= overall.keys()
    # eval scores what the model streams, by the textbook definitions (scikit-image's, computed here)
    outputs, truth, albedo = held_out_outputs(trained, recordings["held"])
    assert overall["psnr"] == pytest.approx(np.mean([reference_psnr(t, o) for o, t in zip(outputs, truth)]), abs=2e-3)
    assert overall["ssim"] == pytest.approx(np.mean([reference_ssim(t, o) for o, t in zip(outputs, truth)]), abs=2e-4)
    assert result["recordings"][0]["recording"] == "seed3.gbuf.zip"
    assert result["per_prompt"][0]["frames"] == 16
    assert set(result["baselines"]) == {"albedo", "reference_original", "per_pixel", "codec", "conv",
                                        "per_pixel_by_prompt", "codec_by_prompt", "conv_by_prompt"}
    assert result["baselines"]["albedo"]["psnr"] == pytest.approx(
        np.mean([reference_psnr(t, a) for a, t in zip(albedo, truth)]), abs=2e-3)
    # the per-pixel map was fitted on the model's own training recordings (named in its directory), not seed 3
    assert [r["recording"] for r in result["per_pixel_fit"]["recordings"]] == ["seed1.gbuf.zip", "seed2.gbuf.zip"]
    # trained without --refiner: no refiner to switch off, but a refiner fitted on zero latents all the same
    assert set(result["not_computed"]) == {"lpips", "clip_score", "fvd", "decoder_only"}
    assert set(result["ablations"]) == {"no_transformer", "no_transformer_fit"}
    assert "| **overall** | 16 |" in (tmp_path / "eval.md").read_text()
    import av

    with av.open(str(tmp_path / "videos" / "seed3.gbuf.zip.side-by-side.mp4")) as video:
        stream = video.streams.video[0]
        assert (stream.width, stream.height) == (3 * 64, 32)
        assert sum(1 for _ in video.decode(stream)) == 16


@pytest.mark.slow
@pytest.mark.gl
def test_the_trained_directory_streams_in_a_live_studio_session(trained, recordings, tmp_path):
    from studio.server import Settings
    from studio.server.background import BackgroundServer
    from webrtc.client import StudioViewer

    data = tmp_path / "data"
    data.mkdir()
    (data / "held.gbuf.zip").write_bytes(recordings["held"].read_bytes())
    settings = Settings(port=0, max_sessions=1, data_dir=data, renderer="flash",
                        renderer_options={"weights": str(trained)}, connect_timeout_s=30)

    async def scenario(url: str) -> None:
        async with StudioViewer(url, size=SIZE, fps=15, source="held.gbuf.zip", prompt="original") as viewer:
            hello = await viewer.wait_message("hello", timeout=120)
            assert (hello["width"], hello["height"]) == (64, 32)
            frames = await viewer.wait_frames(8, timeout=180)
            assert all(f.rgb.shape == (32, 64, 3) for f in frames)

    with BackgroundServer(settings) as server:
        asyncio.run(scenario(server.url))


@pytest.mark.slow
@pytest.mark.gl
def test_lora_fine_tune_of_our_weights_merges_into_the_official_layout(trained, recordings, tmp_path):
    out = tmp_path / "lora"
    assert cli("train", recordings["a"], "--config", "tiny", "--weights", trained, "--size", SIZE, "--chunks", 2,
               "--steps", 2, "--lora-rank", 2, "--lora-alpha", 4, "--lr", 0.05, "-o", out, "--no-progress") == 0
    assert (out / "lora_adapter" / "adapter_config.json").is_file()
    base = load_file(trained / "transformer/diffusion_pytorch_model.safetensors")
    merged = load_file(out / "transformer/diffusion_pytorch_model.safetensors")
    assert base.keys() == merged.keys()                                # no lora_ keys left after merging
    changed = [k for k in base if not torch.equal(base[k], merged[k])]
    assert changed and all(k.split(".")[-2] in ("to_q", "to_k", "to_v", "0") for k in changed)
    torch.testing.assert_close(base["proj_out.weight"], merged["proj_out.weight"])   # frozen outside LoRA
    renderer = create_renderer("flash", weights=str(out), device="cpu")
    with renderer.open_session(64, 32) as session:
        from prompt_presets.resolve import conditioning_for
        from gbuffer.formats import open_sequence

        with open_sequence(recordings["held"]) as source:
            frames = [source[i] for i in range(renderer.chunk_size)]
        rgb = session.render(frames, [conditioning_for("original")] * len(frames)).rgb
    assert rgb.shape == (renderer.chunk_size, 32, 64, 3)


@pytest.mark.slow
@pytest.mark.gl
def test_torchrun_runs_the_distributed_code_path_in_one_gloo_process(trained, recordings, codec, tmp_path):
    out = tmp_path / "ddp"
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "1", "-m", "studio.cli",
         "train", str(recordings["a"]), "--config", "tiny", "--codec", str(codec), "--size", SIZE, "--chunks", "2",
         "--steps", "2", "-o", str(out), "--no-progress"],
        cwd=ROOT, capture_output=True, text=True, timeout=900, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "trained 2 steps" in proc.stderr
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert log[-1]["step"] == 2
    assert (out / "transformer_partial.safetensors").is_file()


# ---- bad input: one line, exit 2 --------------------------------------------------------------------------

def unpaired(tmp_path: Path, frames: int = 16) -> Path:
    rng = np.random.default_rng(0)
    write_npy_windows((GBufferFrame(i, i / 30, rng.integers(0, 256, (5, 32, 64, 3), dtype=np.uint8))
                       for i in range(frames)), tmp_path / "plain")
    return tmp_path / "plain"


def test_training_refuses_bad_input_in_one_line(tmp_path, capsys):
    from training.codec import Codec, save_codec

    plain = unpaired(tmp_path)
    codec = tmp_path / "codec"
    save_codec(Codec(8, (32, 16, 8, 8)), codec, {})
    four = tmp_path / "four.npy"
    np.save(four, np.zeros((8, 4, 32, 64, 3), np.uint8))
    bad_json = tmp_path / "prompts.json"
    bad_json.write_text('{"*": "cyberpunk",')
    empty_prompt = tmp_path / "empty.json"
    empty_prompt.write_text('{"*": "  "}')
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    cases = [
        ((plain, "--codec", codec), "has no RGB stream: record it with"),
        ((four, "--codec", codec), r"four.npy: shape is \(8, 4, 32, 64, 3\), expected \(T, 5, H, W, 3\)"),
        (("--codec", codec), "the dataset is empty"),
        ((plain, "--codec", codec, "--prompts", bad_json), "prompts.json: prompt file is not valid JSON"),
        ((plain, "--codec", codec, "--prompts", empty_prompt), r"empty.json: \*: String should have at least"),
        ((plain, "--codec", codec, "-o", blocker / "out"), "output directory is not writable"),
        ((plain,), "training from scratch needs RGB latents: give --codec"),
        ((plain, "--config", "full", "--codec", codec), "fine-tuned from its weights"),
        ((plain, "--weights", tmp_path / "nowhere"), "weights directory does not exist"),
        ((plain, "--codec", tmp_path / "nowhere"), "no codec.json"),
        ((plain, "--codec", codec, "--size", "60x32"), "multiple"),
        ((plain, "--codec", codec, "--lora-targets", ","), "--lora-targets: give at least one"),
    ]
    for args, message in cases:
        argv = ["train", *[str(a) for a in args]]
        for flag, value in (("--config", "tiny"), ("--size", SIZE), ("-o", str(tmp_path / "out")), ("--steps", "1")):
            if flag not in argv:
                argv += [flag, value]
        if args and args[0] == "--codec":                       # no recording at all
            with pytest.raises(SystemExit) as exc:
                main(argv)
            assert exc.value.code == 2 and "required: RECORDING" in capsys.readouterr().err
            continue
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error: "), err
        assert __import__("re").search(message, err[0]), (message, err[0])


def test_a_recording_too_short_for_one_clip_is_an_empty_dataset(tmp_path, capsys):
    from training.codec import Codec, save_codec

    rng = np.random.default_rng(1)
    frames = [GBufferFrame(i, i / 30, rng.integers(0, 256, (5, 32, 64, 3), dtype=np.uint8),
                           rgb=rng.integers(0, 256, (32, 64, 3), dtype=np.uint8)) for i in range(6)]
    write_npy_windows(frames, tmp_path / "short")
    save_codec(Codec(8, (32, 16, 8, 8)), tmp_path / "codec", {})
    code = main(["train", str(tmp_path / "short"), "--config", "tiny", "--codec", str(tmp_path / "codec"),
                 "--size", SIZE, "--steps", "1", "-o", str(tmp_path / "out")])
    assert code == 2
    assert "has 6 frames; a training clip needs 24" in capsys.readouterr().err
    code = main(["train", str(tmp_path / "short"), "--config", "nano", "--codec", str(tmp_path / "codec"),
                 "--size", SIZE, "--steps", "1", "-o", str(tmp_path / "out")])
    assert code == 2 and "codec decoder widths [32, 16, 8, 8] differ from config nano's" in capsys.readouterr().err


def test_eval_refuses_a_recording_without_rgb(tmp_path, capsys):
    from renderer.flash.pipeline import FlashPipeline

    FlashPipeline.random("tiny", device="cpu").save(tmp_path / "w")
    assert main(["eval", str(tmp_path / "w"), str(unpaired(tmp_path))]) == 2
    assert "has no RGB stream to score against" in capsys.readouterr().err


def test_a_corrupt_checkpoint_is_refused_on_resume(recordings, codec, tmp_path, capsys):
    out = tmp_path / "out"
    (out / "checkpoints").mkdir(parents=True)
    (out / "checkpoints" / "step-000002.pt").write_bytes(b"not a checkpoint")
    assert main(["train", str(recordings["a"]), "--config", "tiny", "--codec", str(codec), "--size", SIZE,
                 "--chunks", "2", "--steps", "3", "-o", str(out), "--resume", "--no-progress"]) == 2
    assert "step-000002.pt: not a readable checkpoint" in capsys.readouterr().err


# ---- pieces -----------------------------------------------------------------------------------------------

def test_the_rgb_encoder_has_taehv_names_and_shapes():
    encoder = TinyEncoder(8)
    keys = set(encoder.state_dict())
    assert {"encoder.0.weight", "encoder.2.conv.weight", "encoder.4.conv.0.weight", "encoder.12.conv.weight",
            "encoder.17.weight"} <= keys
    assert encoder(torch.rand(2, 8, 3, 32, 64)).shape == (2, 16, 2, 4, 8)


@pytest.mark.slow
@pytest.mark.gl
def test_cached_targets_are_each_recordings_latents_streamed_in_order(recordings, codec):
    """The trainer encodes each recording once (LatentCache) instead of every clip every step: block by block
    with the encoder's memory carried, which must equal one pass over the whole recording; a clip's targets are a
    slice, and clips start on latent boundaries."""
    rec = load_recording(recordings["a"], 64, 32, "original")                 # 24 frames
    targets = CodecTargets(load_codec(codec).encoder_module())
    whole = targets(rec.rgb[None].float() / 255)[0]                           # (16, 6, 4, 8), one pass
    streamed = targets.recording(rec.rgb, block=8)
    torch.testing.assert_close(streamed, whole, rtol=0, atol=1e-5 * float(whole.abs().max()))
    cache = LatentCache(targets, [rec])
    torch.testing.assert_close(cache.clips([(0, 8)], 16)[0], whole[:, 2:6])
    fresh = targets(rec.rgb[None, 8:24].float() / 255)[0]                   # the clip alone, no memory before it
    assert (fresh - whole[:, 2:]).abs().max() > 1e-3 * whole.abs().max()     # so the memory is what the cache adds
    clips = PairedClips([rec], 16, start_stride=4)
    assert [s for _, s in clips.starts] == [0, 4, 8]


def test_metrics_follow_their_definitions():
    rng = np.random.default_rng(2)
    a = rng.integers(0, 256, (24, 32, 3), dtype=np.uint8)
    assert psnr(a, a) == 100.0 and ssim(a, a) == pytest.approx(1.0)
    b = np.clip(a.astype(int) + 16, 0, 255).astype(np.uint8)
    assert psnr(a, b) == pytest.approx(10 * np.log10(255 ** 2 / np.mean((a.astype(float) - b) ** 2)))
    assert ssim(a, 255 - a) < 0
    truth = [rng.integers(0, 256, (16, 16, 3), dtype=np.uint8) for _ in range(4)]
    exact, frozen = StreamMetrics(), StreamMetrics()
    for t in truth:
        exact.update(t, t)
        frozen.update(truth[0], t)
    assert exact.summary()["flicker"] == 0 and exact.summary()["flicker_ratio"] == 0
    assert frozen.summary()["flicker_ratio"] == pytest.approx(1.0) and frozen.summary()["motion_ratio"] == 0


def test_the_loss_curve_is_a_png_even_for_a_short_log(tmp_path):
    draw_loss_curve([], tmp_path / "empty.png")
    draw_loss_curve([{"step": i, "loss": 1 / i, "stage": "flow" if i < 5 else "rollout"} for i in range(1, 9)],
                    tmp_path / "loss.png")
    colours = {c for _, c in Image.open(tmp_path / "loss.png").getcolors(1 << 16)}
    assert (30, 80, 200) in colours and (220, 120, 40) in colours            # the smoothed curve, the stage line
    assert (30, 80, 200) not in {c for _, c in Image.open(tmp_path / "empty.png").getcolors(1 << 16)}
    assert not list(tmp_path.glob("*.tmp"))


def test_serving_imports_neither_training_nor_peft():
    """The default studio (reference renderer) loads neither the training stack nor peft (nor diffusers); the
    flash renderer never loads training/ (diffusers itself imports peft when it is installed: see the report)."""
    code = ("import sys; from studio.cli import build_parser; build_parser(); "
            "from studio.server.app import create_app; from studio.server import Settings; "
            "import studio.commands.serve; create_app(Settings()); "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('training', 'peft', 'diffusers')]; "
            "assert not bad, bad; import renderer.flash.renderer; "
            "bad = [m for m in sys.modules if m.split('.')[0] == 'training']; assert not bad, bad; print('clean')")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "clean" in proc.stdout, proc.stderr[-1500:]


def tiny_clip_dir(root: Path) -> Path:
    """A Hugging Face CLIP directory made here (random weights, byte-level vocabulary): the local weights
    `--clip-weights` takes, without any download."""
    import transformers
    from transformers import CLIPConfig, CLIPModel, CLIPProcessor, CLIPTokenizer

    # the image processor without torchvision (not a dependency here)
    image_processor = getattr(transformers, "CLIPImageProcessorPil", transformers.CLIPImageProcessor)
    root.mkdir()
    # byte-level BPE's alphabet (GPT-2's byte → printable character map), each character a token, no merges
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    chars = [chr(b) for b in printable] + [chr(256 + i) for i in range(256 - len(printable))]
    vocab = {c: i for i, c in enumerate(chars)} | {c + "</w>": len(chars) + i for i, c in enumerate(chars)}
    vocab |= {"<|startoftext|>": len(vocab), "<|endoftext|>": len(vocab) + 1}
    (root / "vocab.json").write_text(json.dumps(vocab))
    (root / "merges.txt").write_text("#version: 0.2\n")
    tokenizer = CLIPTokenizer(str(root / "vocab.json"), str(root / "merges.txt"))
    layers = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2)
    config = CLIPConfig(text_config=dict(vocab_size=len(vocab), max_position_embeddings=77, **layers),
                        vision_config=dict(image_size=32, patch_size=8, **layers), projection_dim=16)
    CLIPModel(config).save_pretrained(root)
    CLIPProcessor(image_processor=image_processor(size={"shortest_edge": 32}, crop_size={"height": 32, "width": 32}),
                  tokenizer=tokenizer).save_pretrained(root)
    return root


def tiny_i3d_file(path: Path) -> Path:
    """A TorchScript video feature extractor with I3D's signature: (B, 3, T, 224, 224) -> (B, 8)."""
    class TinyI3D(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv3d(3, 8, kernel_size=(2, 16, 16), stride=(2, 16, 16))

        def forward(self, videos: torch.Tensor) -> torch.Tensor:
            return self.conv(videos).mean(dim=(2, 3, 4))

    torch.manual_seed(0)
    torch.jit.script(TinyI3D()).save(str(path))
    return path


def reference_clip_score(clip_dir: Path, weights: Path, recording: Path) -> float:
    """CLIP score written out here (100 x max(cos(image, text), 0), averaged over the frames) with the model
    and processor alone, on the frames the trained model streams."""
    from transformers import CLIPModel, CLIPProcessor

    from prompt_presets.resolve import resolve_prompt

    model, processor = CLIPModel.from_pretrained(clip_dir).eval(), CLIPProcessor.from_pretrained(clip_dir)
    text = processor(text=[resolve_prompt("original").text], return_tensors="pt", padding=True, truncation=True,
                     max_length=77)
    outputs, _, _ = held_out_outputs(weights, recording)
    with torch.no_grad():
        t = model.get_text_features(**text)
        i = model.get_image_features(pixel_values=processor(images=outputs, return_tensors="pt")["pixel_values"])
    t, i = (x if isinstance(x, torch.Tensor) else x.pooler_output for x in (t, i))
    cos = torch.nn.functional.cosine_similarity(i, t, dim=-1)
    return float((100 * cos.clamp_min(0)).mean())


def test_eval_computes_clip_score_and_fvd_from_local_weights(trained, recordings, tmp_path, capsys):
    report = tmp_path / "eval.json"
    clip_dir, i3d = tiny_clip_dir(tmp_path / "clip"), tiny_i3d_file(tmp_path / "i3d.pt")
    assert cli("eval", trained, recordings["held"], "--json", report, "--clip-weights", clip_dir,
               "--i3d-weights", i3d, "--fvd-clip-frames", "4") == 0
    result = json.loads(report.read_text())
    overall = result["overall"]
    assert overall["clip_score"] == pytest.approx(reference_clip_score(clip_dir, trained, recordings["held"]), abs=1e-3)
    assert overall["fvd_clips"] == 4 and overall["fvd"] >= 0
    assert result["recordings"][0]["fvd"] == overall["fvd"]               # one recording: the same clips
    assert set(result["not_computed"]) == {"lpips"}
    assert "clip_score | fvd |" in capsys.readouterr().out
    # weights that are not what they claim are one line each
    (tmp_path / "not-a-model.pt").write_bytes(b"nope")
    for flag, value, says in (("--clip-weights", tmp_path / "empty", "not a local CLIP directory"),
                              ("--i3d-weights", tmp_path / "not-a-model.pt", "not a TorchScript I3D")):
        assert main(["eval", str(trained), str(recordings["held"]), flag, str(value)]) == 2
        err = capsys.readouterr().err.strip()
        assert says in err and "\n" not in err, err


def test_frechet_distance_follows_its_definition():
    from scipy import linalg

    from training.reference_metrics import frechet_distance

    rng = np.random.default_rng(0)
    a, b = rng.normal(size=(200, 6)), rng.normal(loc=0.5, scale=1.3, size=(150, 6))
    s_a, s_b = np.cov(a, rowvar=False), np.cov(b, rowvar=False)
    expected = ((a.mean(0) - b.mean(0)) ** 2).sum() + np.trace(s_a + s_b - 2 * linalg.sqrtm(s_a @ s_b).real)
    assert frechet_distance(a, b) == pytest.approx(expected, rel=1e-6)
    assert frechet_distance(a, a) == pytest.approx(0.0, abs=1e-6)
