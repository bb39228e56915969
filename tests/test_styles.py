"""`train --styles`: 'original' is the recording's RGB, every other style the reference renderer over the same
G-buffer (the teacher); targets are made once per recording and style, from G-buffers read once; each clip draws
a style and one of its phrasings, the same ones for the same seed; a style that is no preset is refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import training.data
import training.styles
from gbuffer.formats import GbufZipWriter
from gbuffer.frame import GBufferFrame
from prompt_presets.phrasings import phrasings
from prompt_presets.presets import preset_names
from prompt_presets.resolve import conditioning_for
from renderer.reference import ReferenceRenderer
from studio.cli import main
from training.codec import TinyEncoder
from training.data import PairedClips
from training.errors import TrainingError
from training.style_targets import TARGET_FPS
from training.styles import StyleTargets, parse_styles
from training.targets import CodecTargets, LatentCache

H, W, FRAMES = 32, 48, 12


def smooth_gbuffer(rng: np.random.Generator, n: int) -> np.ndarray:
    """(n, 5, H, W, 3) uint8: a ground plane below a sky band, so the styles have surfaces and sky to change."""
    g = np.zeros((n, 5, H, W, 3), np.uint8)
    g[:, 0] = rng.integers(60, 200, (n, 1, 1, 3))                     # albedo
    g[:, 1, H // 3:] = np.linspace(40, 250, H - H // 3, dtype=np.uint8)[None, :, None, None]   # depth; sky is 0
    g[:, 3] = (128, 230, 128)                                          # normals up
    g[:, 4] = 150                                                      # roughness
    return g


def write_recording(path: Path, rng: np.random.Generator) -> Path:
    with GbufZipWriter(path, fps=10) as writer:
        for i, data in enumerate(smooth_gbuffer(rng, FRAMES)):
            writer.write(GBufferFrame(i, i / 10, data, rgb=rng.integers(0, 256, (H, W, 3), dtype=np.uint8)))
    return path


@pytest.fixture
def recordings(tmp_path, rng) -> list[Path]:
    return [write_recording(tmp_path / f"r{i}.gbuf.zip", rng) for i in range(2)]


def reference_frames(recording, style: str) -> np.ndarray:
    """The teacher, drawn here straight through a reference session (not through training/), frame i at i / fps."""
    session = ReferenceRenderer().open_session(W, H)
    frames = [GBufferFrame(i, i / TARGET_FPS, g.permute(0, 2, 3, 1).numpy()) for i, g in enumerate(recording.gbuffer)]
    return np.concatenate([session.render(frames[i:i + 4], [conditioning_for(style)] * 4).rgb
                           for i in range(0, len(frames), 4)])


def test_styles_name_presets_by_any_spelling_or_all():
    assert parse_styles("original, Cyberpunk,lava,original") == ("original", "cyberpunk", "volcano")
    assert parse_styles("all") == tuple(preset_names())
    with pytest.raises(TrainingError, match="unknown style 'sepia'"):
        parse_styles("original,sepia")


def test_an_unknown_style_is_refused_in_one_line_before_anything_loads(tmp_path, capsys):
    out = tmp_path / "out"
    code = main(["train", str(tmp_path / "absent.gbuf.zip"), "--config", "tiny", "--codec", str(tmp_path),
                 "--styles", "original,sepia", "--steps", "1", "-o", str(out)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    assert "--styles" in err and "unknown style 'sepia'" in err
    assert not out.exists()


def test_styles_and_a_prompt_file_are_refused_together(recordings, tmp_path):
    (tmp_path / "p.json").write_text('{"*": "cyberpunk"}')
    with pytest.raises(TrainingError, match="either --styles"):
        PairedClips.from_paths(recordings, W, H, 8, tmp_path / "p.json", styles=StyleTargets(("original",)))


def test_a_style_target_is_the_reference_renderer_over_the_recordings_own_gbuffer(recordings):
    data = PairedClips.from_paths(recordings[:1], W, H, 8, styles=StyleTargets(("original", "cyberpunk"), keep=True))
    rec = data.recordings[0]
    original = data._rgb(0, 4, "original")
    torch.testing.assert_close(original, rec.rgb[4:12].float() / 255)
    cyber = data._rgb(0, 4, "cyberpunk")
    expected = torch.from_numpy(reference_frames(rec, "cyberpunk")[4:12]).permute(0, 3, 1, 2).float() / 255
    torch.testing.assert_close(cyber, expected)
    assert (cyber - original).abs().mean() > 0.05                   # a restyle, not the beauty pass


def test_each_recording_and_style_is_rendered_and_encoded_once_from_gbuffers_read_once(recordings, monkeypatch):
    opened, rendered = [], []
    real_open, real_render = training.data.open_sequence, training.styles.style_frames
    monkeypatch.setattr(training.data, "open_sequence", lambda p: opened.append(Path(p).name) or real_open(p))
    monkeypatch.setattr(training.styles, "style_frames",
                        lambda rec, s, **kw: rendered.append(s) or real_render(rec, s, **kw))
    styles = StyleTargets(("original", "polar", "volcano"))
    data = PairedClips.from_paths(recordings, W, H, 8, start_stride=4, styles=styles)
    torch.manual_seed(0)
    targets = CodecTargets(TinyEncoder(8))
    cache = LatentCache(targets, data.recordings, styles=styles)
    assert sorted(opened) == ["r0.gbuf.zip", "r1.gbuf.zip"]                  # each G-buffer read once
    assert sorted(rendered) == ["polar", "polar", "volcano", "volcano"]      # each (recording, style) drawn once
    assert set(cache.latents) == {(k, s) for k in (0, 1) for s in styles.names}
    polar = torch.from_numpy(reference_frames(data.recordings[1], "polar")).permute(0, 3, 1, 2)
    want = targets.recording(polar)[:, 1:3]                                   # frames 4..11 → latents 1, 2
    got = cache.clips([(1, 4), (1, 4)], 8, ["polar", "original"])
    torch.testing.assert_close(got[0], want)
    assert (got[1] - want).abs().max() > 1e-3                                 # the style picks the targets


def test_each_clip_draws_a_style_and_one_of_its_phrasings_the_same_for_a_seed(recordings):
    styles = StyleTargets(("original", "polar", "infrared"), keep=True)
    data = PairedClips.from_paths(recordings, W, H, 8, start_stride=4, styles=styles)

    def draws(seed: int) -> list[tuple[str, str]]:
        gen = torch.Generator().manual_seed(seed)
        out = []
        for _ in range(30):
            batch = data.sample(2, gen, with_rgb=False)
            out += [(s, data.prompts[i]) for s, i in zip(batch.styles, batch.prompt.tolist())]
        return out

    first = draws(7)
    assert first == draws(7) and first != draws(8)
    assert {s for s, _ in first} == set(styles.names)
    assert all(text in phrasings(style) for style, text in first)
    assert len({text for _, text in first}) > len(styles.names)         # several phrasings per style are trained


def test_a_model_trained_on_two_styles_follows_its_prompt_towards_each(recordings, tmp_path):
    """A few dozen steps of a tiny model on polar and volcano: with the same G-buffer and the same noise, the
    latent it samples for each style's prompt is nearer that style's target than the other's (and so is the one
    for a paraphrase it never saw)."""
    from renderer.flash.config import TINY
    from renderer.flash.pipeline import FlashPipeline
    from renderer.flash.session import FlashSession
    from training.codec import Codec, load_codec, save_codec, scale_latents_to_unit

    rec = training.data.load_recording(recordings[0], W, H, "original")
    styled = {s: torch.from_numpy(reference_frames(rec, s)).permute(0, 3, 1, 2) for s in ("polar", "volcano")}
    torch.manual_seed(0)
    codec = Codec(8, TINY.decoder_channels)       # untrained; with no biases its latents keep the picture's content
    with torch.no_grad():
        for conv in (m for m in codec.encoder.modules() if isinstance(m, torch.nn.Conv2d) and m.bias is not None):
            conv.bias.zero_()
    scale_latents_to_unit(codec, torch.stack([f[:8] for f in styled.values()]).float() / 255)
    save_codec(codec, tmp_path / "codec", {})
    out = tmp_path / "model"
    assert main(["train", str(recordings[0]), "--config", "tiny", "--codec", str(tmp_path / "codec"),
                 "--size", f"{W}x{H}", "--chunks", "1", "--steps", "40", "--batch", "2", "--lr", "2e-3",
                 "--styles", "polar,volcano", "--rollout-start", "1000", "--checkpoint-every", "1000",
                 "--no-progress", "-o", str(out)]) == 0

    encoder = CodecTargets(load_codec(tmp_path / "codec").encoder_module())
    targets = {s: encoder.recording(f)[:, :2] for s, f in styled.items()}    # the first chunk's latents
    pipe = FlashPipeline.from_dir(out, device="cpu")
    frames = [GBufferFrame(i, i / TARGET_FPS, rec.gbuffer[i].permute(0, 2, 3, 1).numpy()) for i in range(8)]

    def sample(prompt: str) -> torch.Tensor:
        session = FlashSession(pipe, W, H, 5, 8)                           # the same noise for every prompt
        chunk = session.prepare(frames, [conditioning_for(prompt)] * 8)
        with torch.inference_mode():
            return pipe.denoise(chunk.noise, chunk.gbuffer_latent, chunk.prompt, chunk.history)[0]

    for style, other, prompt in (("polar", "volcano", "polar"), ("volcano", "polar", "volcano"),
                                 ("polar", "volcano", "a land of endless ice at the end of the world")):
        got = sample(prompt)
        near, far = (got - targets[style]).pow(2).mean(), (got - targets[other]).pow(2).mean()
        assert near < 0.5 * far, (prompt, float(near), float(far))
