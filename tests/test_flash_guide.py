"""The guided decoder (renderer/flash/guide.py): a G-buffer guide after the TAEHV stack, trained with the codec
(`train codec --guide`). It sees a neighbourhood wide enough to hold a shadow's caster, the live session hands it
the chunk's own G-buffer frames, it round-trips through the weights layout and `flash inspect` names it, and a
guided codec learns a shadow no per-pixel map can draw. Tiny sizes, real files."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from gbuffer.frame import GBufferFrame
from renderer.flash.checkpoint import WeightsError
from renderer.flash.config import TINY
from renderer.flash.decoder import DecoderStream, TinyDecoder
from renderer.flash.guide import GBufferGuide
from renderer.flash.pipeline import FlashPipeline
from renderer.flash.weights import TINY_DECODER, WeightsPlan
from helpers.gbuffer_frames import as_gbuffer, mid_range_frames, renders_alike, whole_and_streamed
from studio.cli import main
from training.baselines import PerPixelFit, codec_reconstruction
from training.codec import load_codec
from training.metrics import psnr

W, H = 64, 32
GUIDED = dataclasses.replace(TINY, guide_width=8)


def cli(*args) -> int:
    return main([str(a) for a in args])


def random_frames(n: int, seed: int = 0) -> list[GBufferFrame]:
    return mid_range_frames(n, W, H, seed)


@pytest.fixture
def pipe() -> FlashPipeline:
    """A tiny guided pipeline whose guide adds something of its own (its output convolution starts at zero)."""
    p = FlashPipeline.random(GUIDED, seed=0, device="cpu")
    with torch.no_grad():
        torch.manual_seed(1)
        p.decoder.guide.out.weight.normal_(0, 0.5)
    return p


def test_the_guide_sees_far_enough_for_a_shadows_caster_and_only_its_own_frame(pipe):
    g = as_gbuffer(random_frames(pipe.config.chunk_frames))
    changed = g.clone()
    changed[0, 0, 1, :, 16, 32] = 1 - changed[0, 0, 1, :, 16, 32]          # frame 0, depth, pixel (16, 32)
    latent = torch.randn(1, 16, pipe.config.chunk_latents, H // 8, W // 8, generator=torch.Generator().manual_seed(0))
    a = pipe.decode(latent, DecoderStream(), g)
    b = pipe.decode(latent, DecoderStream(), changed)
    diff = (a - b).abs().amax(dim=2)[0]                                      # (T, H, W)
    assert diff[1:].max() == 0                                               # other frames untouched
    reach = diff[0].nonzero()
    assert (reach[:, 1].max() - reach[:, 1].min()) >= 32                     # a 32 px neighbourhood at least
    assert torch.equal(pipe.decode(latent, DecoderStream()), pipe.decoder(latent, DecoderStream()))
    guide = GBufferGuide(16)                                                  # the width `train codec` is run with
    for p in guide.parameters():
        torch.nn.init.normal_(p, 0, 0.1)
    x, gb = torch.zeros(1, 3, 96, 160), torch.rand(1, 15, 96, 160, requires_grad=True)
    guide(x, gb)[0, :, 48, 80].sum().backward()
    cols = (gb.grad.abs().sum((0, 1, 2)) > 0).nonzero()
    assert cols.max() - cols.min() + 1 >= 64                                 # what docs/training.md states (76)


def test_the_session_hands_the_guide_its_own_chunks_gbuffer_frame_for_frame(pipe):
    frames = random_frames(2 * pipe.config.chunk_frames - 3, seed=2)        # a short last chunk, padded inside
    out, parts = whole_and_streamed(pipe, frames, W, H)
    assert [len(p) for p in parts] == [1] * len(frames)                     # each frame leaves once it is drawn
    # the depth-first decoder gives its frames up to float rounding (TinyDecoder.frames): a level at most
    assert np.abs(np.concatenate(parts).astype(int) - out).max() <= 1
    plain = dataclasses.replace(GUIDED, guide_width=0)
    stack = TinyDecoder(plain.decoder_channels)
    stack.decoder.load_state_dict(pipe.decoder.decoder.state_dict())
    unguided = FlashPipeline(plain, pipe.transformer, pipe.gbuffer_encoder, stack, pipe.prompts)
    stack_frames, _ = whole_and_streamed(unguided, frames, W, H)
    assert np.abs(stack_frames.astype(int) - out).max() > 8                  # the guide drew something


def test_a_guided_decoder_round_trips_through_the_weights_layout_and_inspect_names_it(pipe, tmp_path, capsys):
    pipe.save(tmp_path / "w")
    back = FlashPipeline.from_dir(tmp_path / "w", device="cpu")
    assert back.config.guide_width == 8 and back.decoder.guide is not None
    for k, v in pipe.decoder.state_dict().items():
        assert torch.equal(back.decoder.state_dict()[k], v), k
    assert renders_alike(pipe, back, random_frames(pipe.config.chunk_frames, seed=4), W, H)
    params = pipe.decoder.guide.parameter_count()
    assert cli("flash", "inspect", tmp_path / "w") == 0
    text = capsys.readouterr().out
    assert f"decoder: TAEHV tiny decoder, widths (32, 16, 8, 8) + G-buffer guide, width 8 ({params:,} params)" in text
    # a decoder file whose guide is cut short is refused, naming the file
    from safetensors.torch import load_file, save_file

    path = tmp_path / "w" / TINY_DECODER
    state = load_file(str(path))
    save_file({k: v for k, v in state.items() if not k.startswith("guide.dec.")}, str(path))
    assert not WeightsPlan(tmp_path / "w").ok
    with pytest.raises(WeightsError, match="taew2_1_ft"):
        FlashPipeline.from_dir(tmp_path / "w", device="cpu")


def shadowed_clips(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 8, 3, H, W) RGB and (n, 8, 5, 3, H, W) G-buffer: the albedo, darkened to a third where a caster stands
    12 px to the left (a depth step the pixel itself does not hold). No per-pixel map of the G-buffer can draw it."""
    gen = torch.Generator().manual_seed(seed)
    g = torch.rand(n, 8, 5, 3, H // 8, W // 8, generator=gen).repeat_interleave(8, -1).repeat_interleave(8, -2)
    casters = torch.rand(n, 8, 1, H // 8, W // 8, generator=gen) > 0.7          # depth steps on 8 px blocks
    g[:, :, 1] = casters.float().repeat_interleave(8, -1).repeat_interleave(8, -2)
    caster = torch.nn.functional.pad(g[:, :, 1, :1], (12, 0))[..., :W]       # the depth 12 px to the left
    rgb = g[:, :, 0] * (1 - (2 / 3) * caster)
    return rgb, g


def rgb_u8(x: torch.Tensor) -> np.ndarray:
    """(N, T, 3, H, W) in [0, 1] → uint8 (N*T, H, W, 3), as the metrics and the per-pixel map read frames."""
    return (x.clamp(0, 1) * 255).round().to(torch.uint8).flatten(0, 1).permute(0, 2, 3, 1).numpy()


def gbuffer_u8(g: torch.Tensor) -> np.ndarray:
    """(N, T, 5, 3, H, W) in [0, 1] → uint8 (N*T, 5, H, W, 3)."""
    return (g * 255).round().to(torch.uint8).flatten(0, 1).permute(0, 1, 3, 4, 2).numpy()


def test_the_guide_learns_a_shadow_no_per_pixel_map_can_draw():
    """The guide alone, fed the frame a zero latent decodes to (mid grey): what it draws then comes from the G-buffer
    it sees, and the shadow's caster is 12 px away from the pixel it darkens."""
    torch.manual_seed(0)
    guide = GBufferGuide(16)
    for m in guide.modules():                    # as `train codec` starts it (training/codec.py init_for_training)
        if isinstance(m, torch.nn.Conv2d) and m is not guide.out:
            torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
    opt = torch.optim.Adam(guide.parameters(), lr=3e-3)
    grey = lambda rgb: torch.full_like(rgb.flatten(0, 1), 0.5)              # noqa: E731
    for step in range(250):                      # 22.9 dB here, the per-pixel map 15.4
        rgb, g = shadowed_clips(1, step)
        loss = torch.nn.functional.mse_loss(guide(grey(rgb), g.flatten(0, 1)), rgb.flatten(0, 1))
        opt.zero_grad()
        loss.backward()
        opt.step()
    rgb, g = shadowed_clips(2, 10_000)                                       # frames it never saw
    with torch.no_grad():
        drawn = guide(grey(rgb), g.flatten(0, 1)).unflatten(0, rgb.shape[:2])
    fit_rgb, fit_g = shadowed_clips(4, 20_000)
    fit = PerPixelFit(pixels=H * W)
    fit.add(gbuffer_u8(fit_g), {"shadowed": rgb_u8(fit_rgb)})
    mapped = fit.solve()["shadowed"].predict(gbuffer_u8(g))
    truth = rgb_u8(rgb)
    ours, theirs = psnr(rgb_u8(drawn), truth), psnr(mapped, truth)
    assert ours > theirs + 3, (ours, theirs)


def test_train_codec_guide_then_train_gives_a_guided_model(tmp_path, capsys):
    rec = tmp_path / "a.gbuf.zip"
    assert cli("record", "--frames", 24, "--size", f"{W}x{H}", "--seed", 1, "--rgb", "--fps", 10, "-o", rec) == 0
    assert cli("train", "codec", rec, "--config", "tiny", "--size", f"{W}x{H}", "--steps", 3, "--guide", 8,
               "-o", tmp_path / "c", "--no-progress") == 0
    assert json.loads((tmp_path / "c" / "codec.json").read_text())["guide_width"] == 8
    ceiling = tmp_path / "ceiling.json"              # the codec's ceiling is the guided decoder's, G-buffer and all
    assert cli("eval", "codec", tmp_path / "c", rec, "--frames", 8, "--json", ceiling) == 0
    assert json.loads(ceiling.read_text())["overall"]["frames"] == 8
    with pytest.raises(ValueError, match="G-buffer"):             # never scored as the TAEHV stack alone
        codec_reconstruction(load_codec(tmp_path / "c"), np.zeros((8, H, W, 3), np.uint8))
    out = tmp_path / "m"
    common = ("--config", "tiny", "--codec", tmp_path / "c", "--size", f"{W}x{H}", "--steps", 2, "--chunks", 1,
              "--styles", "original,polar", "--no-progress")
    assert cli("train", rec, *common, "-o", out) == 0
    plan = WeightsPlan(out)
    assert plan.ok and plan.guide_width == 8
    assert FlashPipeline.from_dir(out, device="cpu").decoder.guide is not None
    capsys.readouterr()
    assert cli("train", rec, *common, "--refiner", "-o", tmp_path / "r") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "guided decoder" in err[0] and "--refiner" in err[0], err
    assert cli("train", "codec", rec, "--config", "tiny", "--size", f"{W}x{H}", "--steps", 1, "--guide", -1,
               "-o", tmp_path / "bad", "--no-progress") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--guide" in err[0], err


def test_the_guides_global_context_reads_the_whole_frame_and_starts_as_the_plain_guide():
    torch.manual_seed(0)
    plain, wide = GBufferGuide(16), GBufferGuide(16, context=True)
    wide.load_state_dict(plain.state_dict(), strict=False)           # all but its context, zero at first
    for p in plain.parameters():
        torch.nn.init.normal_(p, 0, 0.1)
    wide.load_state_dict(plain.state_dict(), strict=False)
    x, gb = torch.rand(1, 3, 96, 256), torch.rand(1, 15, 96, 256)
    assert torch.equal(plain(x, gb), wide(x, gb))                     # a fresh context changes nothing
    for p in wide.ctx.parameters():
        torch.nn.init.normal_(p, 0, 0.1)
    gb.requires_grad_(True)
    wide(x, gb)[0, :, 48, 16].sum().backward()
    cols = (gb.grad.abs().sum((0, 1, 2)) > 0).nonzero()
    assert cols.min() == 0 and cols.max() == 255                      # every column: the whole frame


def far_signal_clips(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(n, 3, 16, 128) decoded frames and their targets: the whole frame brightened or darkened by 0.2, as a white or
    black block at the far left says: a look the frame shows in one place, which every pixel must follow. The
    right half is 56 px and more from the block, beyond the plain guide's reach (38 px each way)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 3, 16, 128, generator=gen) * 0.5 + 0.25
    bright = torch.rand(n, generator=gen) > 0.5
    x[:, :, 4:12, :8] = bright.float()[:, None, None, None]
    return x, x + torch.where(bright[:, None, None, None], 0.2, -0.2)


def test_the_context_follows_a_look_the_frame_shows_far_away_and_the_plain_guide_cannot():
    scores = {}
    for context in (False, True):
        torch.manual_seed(0)
        guide = GBufferGuide(8, context=context)
        for m in guide.modules():                # as `train codec` starts it (training/codec.py init_for_training)
            if isinstance(m, torch.nn.Conv2d) and m is not guide.out:
                torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        opt = torch.optim.Adam(guide.parameters(), lr=3e-3)
        for step in range(200):                  # the plain guide 14.0 dB on the far half, with its context 46
            x, target = far_signal_clips(4, step)
            loss = torch.nn.functional.mse_loss(guide(x, torch.zeros(4, 15, 16, 128)), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        x, target = far_signal_clips(16, 10_000)                              # frames it never saw
        with torch.no_grad():
            drawn = guide(x, torch.zeros(16, 15, 16, 128))
        scores[context] = psnr(rgb_u8(drawn[:, None, ..., 64:]), rgb_u8(target[:, None, ..., 64:]))
    assert scores[True] > scores[False] + 10, scores


def lit_albedo_clips(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(n, 3, 24, 24) decoded frames, their G-buffer (n, 15, 24, 24) and targets: albedo (the G-buffer's first three
    values, sharp noise) times the light the decoded frame carries (a smooth grey ramp across the frame, its level
    and slope drawn per frame): a shader's product, light from the latent and albedo from the G-buffer."""
    gen = torch.Generator().manual_seed(seed)
    level, slope = torch.rand(n, 1, 1, 1, generator=gen), torch.rand(n, 1, 1, 1, generator=gen) - 0.5
    light = (level * 0.6 + 0.2 + slope * 0.4 * torch.linspace(-1, 1, 24)).clamp(0, 1).expand(n, 3, 24, 24)
    gbuffer = torch.rand(n, 15, 24, 24, generator=gen)
    return light, gbuffer, gbuffer[:, :3] * light


def test_the_affine_head_starts_as_the_plain_guide_and_draws_a_product_the_plain_guide_cannot():
    torch.manual_seed(0)
    plain, affine = GBufferGuide(8), GBufferGuide(8, affine=True)
    for p in plain.parameters():
        torch.nn.init.normal_(p, 0, 0.1)
    affine.load_state_dict(plain.state_dict(), strict=False)          # all but its head, zero at first
    x, gb, _ = lit_albedo_clips(2, 0)
    assert torch.equal(plain(x, gb), affine(x, gb))                   # a fresh head changes nothing
    scores = {}
    for form in (False, True):
        torch.manual_seed(0)
        guide = GBufferGuide(8, affine=form)
        for m in guide.modules():                # as `train codec` starts it (training/codec.py init_for_training)
            if isinstance(m, torch.nn.Conv2d) and m is not guide.out and m is not getattr(guide, "coef", None):
                torch.nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
        opt = torch.optim.Adam(guide.parameters(), lr=3e-3)
        for step in range(300):
            x, gb, target = lit_albedo_clips(4, step)
            loss = torch.nn.functional.mse_loss(guide(x, gb), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
        x, gb, target = lit_albedo_clips(16, 10_000)                          # frames it never saw
        with torch.no_grad():
            drawn = guide(x, gb)
        scores[form] = psnr(rgb_u8(drawn[:, None]), rgb_u8(target[:, None]))
    assert scores[True] > scores[False] + 10, scores              # 33.2 dB against 17.3 when written


def test_train_codec_guide_context_gives_a_model_whose_inspect_names_it(tmp_path, capsys):
    rec = tmp_path / "a.gbuf.zip"
    assert cli("record", "--frames", 16, "--size", f"{W}x{H}", "--seed", 1, "--rgb", "--fps", 10, "-o", rec) == 0
    assert cli("train", "codec", rec, "--config", "tiny", "--size", f"{W}x{H}", "--steps", 1, "--guide", 8,
               "--guide-context", "-o", tmp_path / "c", "--no-progress") == 0
    assert json.loads((tmp_path / "c" / "codec.json").read_text())["guide_context"] is True
    assert cli("train", rec, "--config", "tiny", "--codec", tmp_path / "c", "--size", f"{W}x{H}", "--steps", 1,
               "--chunks", 1, "--no-progress", "-o", tmp_path / "m") == 0
    plan = WeightsPlan(tmp_path / "m")
    assert plan.ok and plan.guide_width == 8 and plan.guide_context
    assert FlashPipeline.from_dir(tmp_path / "m", device="cpu").decoder.guide.context
    capsys.readouterr()
    assert cli("flash", "inspect", tmp_path / "m") == 0
    assert "G-buffer guide, width 8, global context" in capsys.readouterr().out
    assert cli("train", "codec", rec, "--config", "tiny", "--size", f"{W}x{H}", "--steps", 1, "--guide-context",
               "-o", tmp_path / "bad", "--no-progress") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--guide-context" in err[0], err
