"""RGB codec for from-scratch models: the TAEHV encoder, trained with our TAEHV decoder on RGB frames.

The encoder is TAEHV's `encoder` nn.Sequential, block for block, so its state dict reads `encoder.N...` as in
upstream checkpoints (and as `tiny_decoder/taew2_1_ft.safetensors` may hold; the renderer ignores it):

  0 conv  1 ReLU | 2 TPool(2)  3 conv/2  4-6 MemBlock | 7 TPool(2)  8 conv/2  9-11 MemBlock
  12 TPool(1)  13 conv/2  14-16 MemBlock | 17 conv → 16 latent channels
  frames (B, T, 3, H, W) → latent (B, 16, T/4, H/8, W/8)

`train codec` fits encoder + decoder to reconstruct random 48-pixel crops of clips (pixel MSE + L1, plus a
perceptual distance when a local TorchScript one is given) with a light pull of the latents towards zero mean
and unit variance: the flow model starts its sampling from unit Gaussian noise, so latents of that scale make
its job well-posed. `init_for_training` and the crops are what let the deep stack learn at all (docs/training.md).
Output: CODEC_DIR/tiny_decoder/taew2_1_ft.safetensors (encoder.* and decoder.*) and CODEC_DIR/codec.json.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import nn

from gbuffer.formats.common import atomic_path
from renderer.flash.config import TEMPORAL_SCALE
from renderer.flash.decoder import TinyDecoder
from renderer.flash.guide import GBufferGuide, affine_from_shapes, context_from_shapes
from renderer.flash.taehv import MemBlock, StreamMemory, TGrow, TPool, init_signal_preserving, run_stream, taehv_encoder
from renderer.flash.weights import TINY_DECODER
from training import bookkeeping
from training.data import PairedClips
from training.errors import TrainingError

CODEC_JSON = "codec.json"


class TinyEncoder(nn.Module):
    def __init__(self, channels: int = 64):
        super().__init__()
        self.encoder = taehv_encoder(channels)
        init_signal_preserving(self)

    def forward(self, frames: torch.Tensor, memory: StreamMemory | None = None) -> torch.Tensor:
        """frames (B, T, 3, H, W) in [0, 1], T a multiple of 4 → latent (B, 16, T/4, H/8, W/8)."""
        return encode_frames(self.encoder, frames, memory)


def encode_frames(encoder: nn.Sequential, frames: torch.Tensor, memory: StreamMemory | None = None) -> torch.Tensor:
    """TinyEncoder's forward for any encoder stack (the Codec's own too)."""
    b, t = frames.shape[:2]
    assert t % TEMPORAL_SCALE == 0, frames.shape
    x = run_stream(encoder, frames.reshape(b * t, *frames.shape[2:]), b,
                   memory if memory is not None else StreamMemory())
    return x.reshape(b, t // TEMPORAL_SCALE, *x.shape[1:]).transpose(1, 2)


def last_conv(stack: nn.Sequential) -> nn.Conv2d:
    """The convolution a TAEHV encoder or decoder stack ends in (its output layer)."""
    last = stack[-1]
    if not isinstance(last, nn.Conv2d):
        raise TypeError(f"the stack ends in a {type(last).__name__}, not a convolution")
    return last


@dataclass
class CodecSettings:
    encoder_channels: int = 32
    decoder_channels: tuple[int, int, int, int] = (64, 32, 16, 16)
    steps: int = 2000
    batch: int = 8
    clip_frames: int = 8
    crop: int = 48                  # random square crops of this side (a multiple of 8); 0: whole frames
    lr: float = 1e-3
    l1_weight: float = 0.5          # MSE for PSNR, L1 for edges
    latent_weight: float = 0.05     # pull of latents towards mean 0, variance 1
    perceptual_weight: float = 0.1  # only with a perceptual model
    guide_width: int = 0            # > 0: a guided decoder (renderer/flash/guide.py) trained end to end with it
    guide_context: bool = False     # guided: the guide's global context (renderer/flash/guide.py, --guide-context)
    guide_frames: int = 1           # guided: frames per clip drawn through the guide a step (see codec_loss)
    stack_weight: float = 0.25      # guided: the TAEHV stack's own frames also pulled towards the target (below)
    log_every: int = 10
    checkpoint_every: int = 200
    max_minutes: float | None = None  # stop early (checkpoint and write) when this much wall time has passed
    seed: int = 0
    # starting from a codec (`--from`): keep its encoder as it is, so its latent space, which a transformer
    # trained on that codec has learnt, stays; only the decoder (and its guide) adapt to the new frames
    freeze_encoder: bool = False
    extra: dict = field(default_factory=dict)


class Codec(nn.Module):
    def __init__(self, encoder_channels: int, decoder_channels: tuple[int, ...], guide_width: int = 0,
                 guide_context: bool = False, guide_affine: bool = False):
        super().__init__()
        self.encoder = TinyEncoder(encoder_channels).encoder
        self.decoder = TinyDecoder(tuple(decoder_channels)).decoder
        self.guide = GBufferGuide(guide_width, guide_context, guide_affine) if guide_width else None
        self.encoder_channels, self.decoder_channels = encoder_channels, tuple(decoder_channels)
        self.guide_width, self.guide_context = guide_width, bool(guide_width and guide_context)
        self.guide_affine = bool(guide_width and guide_affine)
        init_for_training(self)

    def encode(self, frames: torch.Tensor) -> torch.Tensor:
        return encode_frames(self.encoder, frames)

    def decode(self, latent: torch.Tensor, memory: StreamMemory | None = None) -> torch.Tensor:
        """As TinyDecoder.forward but without its final clamp to [0, 1]: a clamp has no gradient outside the
        range, and a decoder that starts out of range would never come back."""
        b, c, t, h, w = latent.shape
        x = run_stream(self.decoder, latent.transpose(1, 2).reshape(b * t, c, h, w), b,
                       memory if memory is not None else StreamMemory())
        return x.reshape(b, -1, *x.shape[1:])

    def draw(self, stack_frames: torch.Tensor, gbuffer: torch.Tensor) -> torch.Tensor:
        """A guided decoder's frames from the TAEHV stack's (B, T, 3, H, W) and their G-buffer frames
        (B, T, 5, 3, H, W), not clamped, as `decode`."""
        assert self.guide is not None, "draw() is for guided codecs"
        return self.guide(stack_frames.flatten(0, 1), gbuffer.flatten(0, 1)).unflatten(0, stack_frames.shape[:2])

    def decoder_module(self) -> TinyDecoder:
        """A TinyDecoder holding these decoder weights, the guide's too (what the renderer loads)."""
        out = TinyDecoder(self.decoder_channels, self.guide_width, self.guide_context, self.guide_affine)
        out.decoder.load_state_dict(self.decoder.state_dict())
        if self.guide is not None:
            assert out.guide is not None
            out.guide.load_state_dict(self.guide.state_dict())
        return out

    def encoder_module(self) -> TinyEncoder:
        out = TinyEncoder(self.encoder_channels)
        out.encoder.load_state_dict(self.encoder.state_dict())
        return out


def init_for_training(codec: Codec) -> None:
    """A start from which the deep TAEHV stack trains: He init where a ReLU follows, unit gain where none does,
    each MemBlock's residual branch at zero (so every block starts as the identity), and a decoder whose last
    convolution starts small around mid grey.

    PyTorch's default init shrinks the signal layer by layer (a decoded frame kept ~4 % of its input's std),
    and from there a codec trained on sixteen styles never left "every frame mid grey" in 1000 steps (10 dB,
    below each style's mean colour); the renderer's `init_signal_preserving` keeps the signal but, without the
    zero residuals, starts the decoder far out of range."""
    def he(c: nn.Conv2d, relu: bool) -> None:
        nn.init.kaiming_normal_(c.weight, nonlinearity="relu" if relu else "linear")
        if c.bias is not None:
            nn.init.zeros_(c.bias)

    for stack in (codec.encoder, codec.decoder):
        layers = list(stack)
        for i, m in enumerate(layers):
            if isinstance(m, nn.Conv2d):
                he(m, i + 1 < len(layers) and isinstance(layers[i + 1], nn.ReLU))
            elif isinstance(m, (TPool, TGrow)):
                he(m.conv, False)
            elif isinstance(m, MemBlock):
                *inner, last = [c for c in m.conv if isinstance(c, nn.Conv2d)]
                for c in inner:
                    he(c, True)
                nn.init.zeros_(last.weight)
                if last.bias is not None:
                    nn.init.zeros_(last.bias)
                if isinstance(m.skip, nn.Conv2d):
                    he(m.skip, False)
    out = last_conv(codec.decoder)
    with torch.no_grad():
        out.weight.mul_(0.1)
    if out.bias is not None:
        nn.init.constant_(out.bias, 0.5)
    if codec.guide is not None:      # He init inside; its output convolutions stay at zero (it starts as the stack)
        for m in codec.guide.modules():
            if isinstance(m, nn.Conv2d) and m is not codec.guide.out and m is not getattr(codec.guide, "coef", None):
                he(m, True)


def random_crops(clips: torch.Tensor, side: int, generator: torch.Generator) -> torch.Tensor:
    """(B, T, 3, H, W) → (B, T, 3, min(side, H), min(side, W)), each clip cropped at its own place on the
    8-pixel latent grid (whole frames when `side` is 0 or not smaller than them). Many small crops a step, not a few
    whole frames: with sixteen looks, two clips a step pulled the codec a different way each step and it learned
    nothing."""
    b, _, _, h, w = clips.shape
    if not side or (side >= h and side >= w):
        return clips
    sy, sx = min(side, h), min(side, w)
    ys = (torch.randint(0, (h - sy) // 8 + 1, (b,), generator=generator) * 8).tolist()
    xs = (torch.randint(0, (w - sx) // 8 + 1, (b,), generator=generator) * 8).tolist()
    return torch.stack([c[..., y:y + sy, x:x + sx] for c, y, x in zip(clips, ys, xs)])


def crops_with_gbuffer(rgb: torch.Tensor, gbuffer: torch.Tensor | None, side: int, generator: torch.Generator
                       ) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`random_crops` of RGB clips and, where given, their G-buffer frames at the same places."""
    if gbuffer is None:
        return random_crops(rgb, side, generator), None
    both = random_crops(torch.cat([rgb, gbuffer.flatten(2, 3)], 2), side, generator)
    return both[:, :, :3], both[:, :, 3:].unflatten(2, gbuffer.shape[2:4])


def save_codec(codec: Codec, out: Path, extra: dict) -> None:
    (out / TINY_DECODER).parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().float().contiguous() for k, v in codec.state_dict().items()}
    with atomic_path(out / TINY_DECODER) as tmp:
        save_file(state, str(tmp))
    doc = {"encoder_channels": codec.encoder_channels, "decoder_channels": list(codec.decoder_channels),
           "guide_width": codec.guide_width, "guide_context": codec.guide_context,
           "guide_affine": codec.guide_affine, **extra}
    with atomic_path(out / CODEC_JSON) as tmp:
        tmp.write_text(json.dumps(doc, indent=2))


def load_codec(root: str | Path) -> Codec:
    """A codec directory written by `train codec` (encoder and decoder)."""
    root = Path(root)
    meta_path = root / CODEC_JSON
    if not meta_path.is_file():
        raise TrainingError(f"no {CODEC_JSON}: not a directory written by 'alaya-studio train codec'", str(root))
    path = root / TINY_DECODER
    try:
        state = load_file(str(path))
    except (OSError, SafetensorError) as exc:
        raise TrainingError(f"cannot read the codec weights: {exc}", str(path)) from None
    # Whether the guide has its global context or its affine head is read from the tensors, as the renderer
    # reads it (renderer/flash/weights.py): `train guide --context` adds one to a model's decoder file, and a
    # folder written before it also set codec.json's guide_context says false over a file that holds one.
    shapes = {k: tuple(v.shape) for k, v in state.items()}
    context, affine = context_from_shapes(shapes), affine_from_shapes(shapes)
    try:
        meta = json.loads(meta_path.read_text())
        codec = Codec(int(meta["encoder_channels"]), tuple(int(c) for c in meta["decoder_channels"]),
                      int(meta.get("guide_width", 0)), context, affine)
    except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise TrainingError(f"bad {CODEC_JSON} ({type(exc).__name__}: {exc})", str(meta_path)) from None
    expected = codec.state_dict()
    wrong = sorted(set(expected) ^ set(state)) or [k for k in expected if expected[k].shape != state[k].shape]
    if wrong:
        raise TrainingError(f"weights do not fit codec.json ({len(wrong)} keys, first {wrong[0]!r})", str(path))
    codec.load_state_dict(state)
    return codec


# A perceptual distance f(x, y) on images in [-1, 1] → (B,) or a scalar (LPIPS exported with torch.jit).
Perceptual = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def load_perceptual(path: str | Path | None) -> Perceptual | None:
    """A local TorchScript perceptual distance `f(x, y) -> (B,) or scalar` on images in [-1, 1] (e.g. LPIPS
    exported with torch.jit); None when not given. Nothing is downloaded."""
    if path is None:
        return None
    try:
        model = torch.jit.load(str(path), map_location="cpu").eval()
    except (RuntimeError, ValueError, OSError) as exc:
        raise TrainingError(f"not a TorchScript perceptual model ({str(exc).splitlines()[0][:120]})",
                            str(path)) from None
    return model.requires_grad_(False)


def codec_loss(codec: Codec, clips: torch.Tensor, s: CodecSettings, perceptual=None,
               gbuffer: torch.Tensor | None = None) -> tuple[torch.Tensor, dict]:
    """clips (B, T, 3, H, W) → (loss, parts); a guided codec takes their G-buffer frames (B, T, 5, 3, H, W).

    Guided, the loss is the picture's, plus `stack_weight` x the TAEHV stack's own frames against the target: the
    stack's frames stay a picture in [0, 1] (what serving clamps them to before the guide) and the latent keeps
    the target's light and colour rather than a code only the guide can read."""
    z = codec.encode(clips)
    recon = codec.decode(z)
    loss = clips.new_zeros(())
    if codec.guide is not None:
        assert gbuffer is not None, "a guided codec trains on G-buffer frames too"
        loss = s.stack_weight * (F.mse_loss(recon, clips) + s.l1_weight * F.l1_loss(recon, clips))
        # the guide works at full size, and on a CPU its backward pass over every frame of every crop cost 10x
        # the rest of the step: it draws `guide_frames` frames of each clip, drawn at random (torch's seeded RNG)
        pick = torch.randperm(clips.shape[1])[:s.guide_frames].sort().values
        clips, gbuffer = clips[:, pick], gbuffer[:, pick]
        recon = codec.draw(recon[:, pick].clamp(0, 1), gbuffer)
    mse = F.mse_loss(recon, clips)
    parts = {"mse": mse.item(), "psnr": float(-10 * torch.log10(mse.detach().clamp_min(1e-10)))}
    loss = loss + mse + s.l1_weight * F.l1_loss(recon, clips)
    latent = z.mean() ** 2 + (z.var() - 1) ** 2
    loss = loss + s.latent_weight * latent
    parts["latent_std"] = float(z.detach().std())
    if perceptual is not None:
        flat = lambda x: x.flatten(0, 1) * 2 - 1      # noqa: E731 - (B*T, 3, H, W) in [-1, 1]
        p = perceptual(flat(recon), flat(clips)).mean()
        loss = loss + s.perceptual_weight * p
        parts["perceptual"] = p.item()
    return loss, parts


def scale_latents_to_unit(codec: Codec, clips: torch.Tensor) -> float:
    """Data-dependent init: scale the encoder's last convolution so these clips' latents have unit std.

    An untrained encoder's latents are far from unit std (~0.05 under PyTorch's default init, ~0.1
    under `init_for_training`), and the pull towards unit variance is too weak to move them far while
    reconstruction dominates (a loaded run ended at 0.075). The flow model starts its sampling
    from unit noise, so latents that small would be ~1/13 of the noise: the renderer would learn a faint signal.
    Returns the std found before scaling."""
    with torch.no_grad():
        std = float(codec.encode(clips).std())
        last = last_conv(codec.encoder)
        last.weight.div_(std)
        if last.bias is not None:
            last.bias.div_(std)
    return std


def train_codec(data: PairedClips, out: Path, s: CodecSettings, resume: bool = False,
                perceptual=None, device: str = "cpu", progress: bool = True, initial: Codec | None = None) -> dict:
    """Train encoder + decoder on the RGB frames of `data`; write CODEC_DIR; return the final figures.
    `initial`: a trained codec to adapt (its widths are `s`'s; `s.freeze_encoder` keeps its encoder)."""
    from tqdm import tqdm

    torch.manual_seed(s.seed)
    codec = Codec(s.encoder_channels, s.decoder_channels, s.guide_width, s.guide_context).to(device)
    if initial is not None:
        codec.load_state_dict(initial.state_dict())
    if s.freeze_encoder:
        assert initial is not None, "only a trained encoder is worth keeping"
        codec.encoder.requires_grad_(False)
    opt = torch.optim.AdamW([p for p in codec.parameters() if p.requires_grad], lr=s.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(s.seed)
    ckpt = bookkeeping.latest_checkpoint(out) if resume else None
    if ckpt is None and initial is None:  # a fresh start; clips of their own, so `gen` stays as it was
        scale_latents_to_unit(codec, data.rgb_clips(s.batch, torch.Generator().manual_seed(s.seed + 1)).to(device))
    start = 0
    log = bookkeeping.JsonlLog(out / bookkeeping.LOG_FILE, append=resume)
    if ckpt is not None:
        state = bookkeeping.load_checkpoint(ckpt)
        codec.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        gen.set_state(state["generator"])
        start = state["step"]
        log.truncate_after(start)
    bar = tqdm(range(start, s.steps), initial=start, total=s.steps, desc="codec", unit="step", file=sys.stderr,
               disable=not progress, dynamic_ncols=True)
    parts: dict = {}
    t0, done = time.perf_counter(), 0
    for step in bar:
        clips, gbuffer = crops_with_gbuffer(*data.rgb_and_gbuffer_clips(s.batch, gen, codec.guide is not None),
                                            s.crop, gen)
        loss, parts = codec_loss(codec, clips.to(device), s, perceptual,
                                 gbuffer.to(device) if gbuffer is not None else None)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        done += 1
        bar.set_postfix(loss=f"{loss.item():.4f}", psnr=f"{parts['psnr']:.1f}")
        n = step + 1
        out_of_time = s.max_minutes is not None and time.perf_counter() - t0 > 60 * s.max_minutes
        if n % s.log_every == 0 or n == s.steps or out_of_time:
            log.write({"step": n, "loss": loss.item(), **parts, "steps_per_s": done / (time.perf_counter() - t0)})
        if n % s.checkpoint_every == 0 or n == s.steps or out_of_time:
            bookkeeping.save_checkpoint(out, n, {"model": codec.state_dict(), "optimizer": opt.state_dict(),
                                                 "generator": gen.get_state(), "step": n})
            save_codec(codec.cpu(), out, {"settings": {k: v for k, v in asdict(s).items() if k != "extra"},
                                          "step": n, **s.extra})
            codec.to(device)
            bookkeeping.draw_loss_curve(log.records(), out / bookkeeping.LOSS_PNG, title="codec loss")
        if out_of_time:
            bar.close()
            return {"step": n, "stopped": "max_minutes", **parts}
    return {"step": s.steps, **parts}
