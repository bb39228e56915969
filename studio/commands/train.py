"""`alaya-studio train`: fine-tune a Flash model on paired recordings; `alaya-studio train codec`: its RGB codec;
`alaya-studio train guide`: refit a guided model's G-buffer guide on the model's own frames.

    alaya-studio train codec RECORDING... --config nano --steps N -o CODEC_DIR [--resume]
    alaya-studio train guide WEIGHTS_DIR [RECORDING...] [--minutes 15] [--styles all] [--window N] [--context]
                             [--no-affine]
    alaya-studio train RECORDING... --config tiny|nano|full [--weights DIR] [--codec CODEC_DIR] --steps N
                       -o OUT_DIR [--resume] [--styles original,PRESET,...|all] [--lora-rank R] ...

The training stack (training/, peft) is imported only when the command runs: `serve` never loads it.
See docs/training.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gbuffer.size import Size
from renderer import check_size
from studio.commands._args import ArgumentError

CONFIG_CHOICES = ("tiny", "nano", "full")


def register(sub) -> None:
    p = sub.add_parser("train", help="train a flash model (or, with 'codec', its RGB codec) on paired recordings",
                       add_help=False, description=__doc__.split("\n\n")[0])
    p.add_argument("argv", nargs=argparse.REMAINDER)
    p.set_defaults(func=run)


def _common(p: argparse.ArgumentParser, default_steps: int) -> None:
    p.add_argument("recordings", nargs="+", metavar="RECORDING",
                   help="paired recordings: .gbuf.zip, .npy windows with .rgb.npy, clip folders with rgb.mp4")
    p.add_argument("--config", choices=CONFIG_CHOICES, default="nano", help="model size (default nano)")
    p.add_argument("--steps", type=int, default=default_steps, help=f"optimiser steps (default {default_steps})")
    p.add_argument("-o", "--output", required=True, help="output directory")
    p.add_argument("--resume", action="store_true", help="continue from the newest checkpoint in the output")
    p.add_argument("--size", default="160x96", help="training size WxH, multiples of 16 (default 160x96)")
    p.add_argument("--batch", type=int, help="clips per step")
    p.add_argument("--lr", type=float, help="learning rate")
    p.add_argument("--checkpoint-every", type=int, default=100, help="steps between checkpoints (default 100)")
    p.add_argument("--log-every", type=int, default=10, help="steps between log lines (default 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", help="torch device (default: this torchrun rank's GPU, else cpu)")
    p.add_argument("--threads", type=int, help="CPU threads for torch (1 is fastest on a busy machine)")
    p.add_argument("--max-minutes", type=float, help="stop early after this much wall time (checkpoint, write)")
    p.add_argument("--no-progress", action="store_true")


def train_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="alaya-studio train", description="Fine-tune a Flash model on paired "
                                "recordings (or train a small one from scratch). See docs/training.md.")
    _common(p, 1000)
    p.add_argument("--weights", help="start from this weights directory (official layout)")
    p.add_argument("--codec", help="RGB codec directory from 'alaya-studio train codec' (from scratch)")
    p.add_argument("--vae", help="local Wan 2.1 VAE directory: RGB targets for official weights")
    p.add_argument("--text-encoder", help="local Wan 2.1 directory with the umT5 text encoder")
    p.add_argument("--prompts", help='JSON {"recording file name" or "*": prompt or preset name}')
    p.add_argument("--styles", help="original,PRESET,... or all: each clip draws a style; 'original' is the "
                   "recording's RGB, any other preset the reference renderer over its G-buffer")
    p.add_argument("--chunks", type=int, default=3, help="chunks per training clip (default 3)")
    p.add_argument("--rollout-start", type=float, default=0.5,
                   help="self-rollout from this step on: a fraction of --steps if below 1, else a step (0.5)")
    p.add_argument("--rollout-share", type=float, default=0.5,
                   help="share of batches with self-rollout history once started (default 0.5)")
    p.add_argument("--discrete-sigma-share", type=float, default=0.5,
                   help="share of noise levels drawn at the sampler's own steps (default 0.5)")
    p.add_argument("--objective", choices=("flow", "meanflow"), default="flow",
                   help="flow matching, or mean flow (average velocity, interval-embedded model) (default flow)")
    p.add_argument("--history-chunks", type=int,
                   help="warm-up chunks that fill the history before the trained ones, 0..N drawn per step "
                        "(default: enough to reach the long tier)")
    p.add_argument("--gan-weight", type=float, default=0.0,
                   help="weight of the patch-GAN term on decoded frames (default 0: off)")
    p.add_argument("--refiner", action=argparse.BooleanOptionalAction, default=False,
                   help="small configs: after the steps fit the G-buffer refiner (full-resolution detail from the "
                        "G-buffer) on the model's own decoded frames and export it (default off)")
    p.add_argument("--refiner-steps", type=int, default=300, help="the refiner's gradient steps (default 300)")
    p.add_argument("--refiner-windows", type=int, default=2,
                   help="streamed windows per recording and style the refiner is fitted on (default 2)")
    p.add_argument("--refiner-frames", type=int, default=24, help="frames per refiner window (default 24)")
    p.add_argument("--refiner-on", nargs="+", default=(), metavar="RECORDING",
                   help="fit the refiner on these paired recordings, which the transformer never trains on "
                        "(default: the training recordings; see docs/training.md)")
    p.add_argument("--lora-rank", type=int, default=0, help="LoRA rank (0: full fine-tuning, the default)")
    p.add_argument("--lora-alpha", type=float, default=16.0)
    p.add_argument("--lora-targets", default="to_q,to_k,to_v,to_out.0",
                   help="comma-separated module names for LoRA (default: attention projections)")
    p.add_argument("--fsdp", action="store_true", help="under torchrun: shard with FSDP instead of DDP")
    p.add_argument("--gradient-checkpointing", action=argparse.BooleanOptionalAction, default=None,
                   help="recompute activations in backward (default: on for CUDA)")
    p.add_argument("--cache-targets", action=argparse.BooleanOptionalAction, default=True,
                   help="encode each recording's RGB with the codec once, not every step (default on)")
    return p


def codec_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="alaya-studio train codec", description="Train a TAEHV-architecture RGB "
                                "encoder/decoder on the RGB frames of paired recordings.")
    _common(p, 2000)
    p.add_argument("--encoder-channels", type=int, help="TAEHV encoder width (default 32)")
    p.add_argument("--crop", type=int, help="train on random square crops of this side, a multiple of 8 "
                   "(default 48; 0: whole frames)")
    p.add_argument("--perceptual", help="local TorchScript perceptual distance f(x, y) on [-1, 1] images")
    p.add_argument("--guide", type=int, metavar="WIDTH",
                   help="a guided decoder: a G-buffer guide of this width after the TAEHV stack, trained with it "
                   "(renderer/flash/guide.py; default 0: none)")
    p.add_argument("--guide-context", action="store_true",
                   help="with --guide: the guide also reads the whole frame's mean features (its global context)")
    p.add_argument("--styles", help="original,PRESET,... or all: each clip in one drawn style (the looks the "
                   "renderer will be trained on; default: the recordings' own RGB)")
    p.add_argument("--from", dest="start_from", metavar="DIR",
                   help="adapt this codec (a 'train codec' output, or a model's weights written by 'train') to "
                   "these recordings instead of starting from scratch; its widths and guide are kept")
    p.add_argument("--freeze-encoder", action="store_true",
                   help="with --from: keep its encoder, so a model trained on that codec's latents still fits "
                   "(docs/training.md, 'Adapting the codec to a game')")
    return p


def _codec_to_adapt(a, config):
    """`--from DIR`'s codec; its widths and guide become this run's, and a flag that names others is refused."""
    from training.codec import load_codec

    initial = load_codec(a.start_from)
    if initial.decoder_channels != tuple(config.decoder_channels):
        raise ArgumentError(f"its decoder widths {list(initial.decoder_channels)} are not config {config.name}'s "
                            f"{list(config.decoder_channels)}", "--config")
    for flag, given, kept in (("--encoder-channels", a.encoder_channels, initial.encoder_channels),
                              ("--guide", a.guide, initial.guide_width),
                              ("--guide-context", a.guide_context or None, initial.guide_context or None)):
        if given is not None and given != kept:
            raise ArgumentError(f"{given} differs from the codec given with --from ({kept}): its widths and guide "
                                "are kept", flag)
    a.encoder_channels, a.guide, a.guide_context = initial.encoder_channels, initial.guide_width, initial.guide_context
    return initial


def guide_parser() -> argparse.ArgumentParser:
    from training.guide_fit import GuideFitSettings as G

    p = argparse.ArgumentParser(prog="alaya-studio train guide", description="Refit a guided model's G-buffer "
                                "guide on the frames its own transformer makes (training/guide_fit.py), in place.")
    p.add_argument("weights", help="a trained flash model with a guided decoder (train codec --guide)")
    p.add_argument("recordings", nargs="*", help="paired recordings (default: the model's training recordings)")
    p.add_argument("--minutes", type=float, default=G.minutes, help=f"fitting budget (default {G.minutes:g})")
    p.add_argument("--styles", help="original,PRESET,... or all (default: the styles the model was trained on)")
    p.add_argument("--every", type=int, default=G.every, help=f"keep every Nth frame (default {G.every})")
    p.add_argument("--window", type=int, default=G.window, metavar="FRAMES",
                   help="each style streams only this many consecutive frames of a recording, the styles' windows "
                   "spread over the drive (default: the whole recording in every style)")
    p.add_argument("--context", action="store_true",
                   help="give a guide without its global context one (zero at first), fitted with the rest")
    p.add_argument("--affine", action=argparse.BooleanOptionalAction, default=G.affine,
                   help="give a guide without its per-pixel affine head one (zero at first), fitted with the rest "
                   "(default; with --no-affine none is added)")
    p.add_argument("--constant-lr", action="store_true",
                   help="keep the learning rate at 1e-3 (default: a cosine from 1e-3 to 0 over --minutes)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help="CPU threads for torch")
    p.add_argument("--no-progress", action="store_true", help="no per-stream and per-100-step lines")
    return p


def run_guide(a) -> int:
    from pathlib import Path

    from renderer import create_renderer
    from training.bookkeeping import read_settings
    from training.eval_frames import open_held_out
    from training.eval_tasks import training_recordings
    from training.guide_fit import GuideFitSettings, refit_guide
    from training.styles import parse_styles

    _threads(a)
    if not a.minutes > 0:
        raise ArgumentError(f"must be above 0, got {a.minutes:g}", "--minutes")
    if a.every < 1:
        raise ArgumentError(f"must be at least 1, got {a.every}", "--every")
    if a.window < 0:
        raise ArgumentError(f"must be 0 (the whole recording) or a number of frames, got {a.window}", "--window")
    weights = Path(a.weights)
    styles = list(parse_styles(a.styles or read_settings(weights).get("styles") or "all"))
    renderer = create_renderer("flash", weights=str(weights), device="cpu", unknown_prompt="presets")
    recordings = [open_held_out(p, None, None) for p in (a.recordings or training_recordings(str(weights)))]
    say = (lambda line: None) if a.no_progress else (lambda line: print(line, file=sys.stderr, flush=True))
    s = GuideFitSettings(minutes=a.minutes, every=a.every, seed=a.seed, window=a.window, context=a.context,
                         affine=a.affine, lr_decay=not a.constant_lr)
    report = refit_guide(renderer, weights, recordings, styles, s, create_renderer("reference"), say)
    print(f"guide refitted: {report['steps']} steps on {report['frames']} frames, probe MSE "
          f"{report['mse_before']:.5f} -> {report['mse_after']:.5f}; written to {a.weights}", file=sys.stderr)
    return 0


def _threads(a) -> None:
    if a.threads is not None:
        if a.threads < 1:
            raise ArgumentError(f"must be at least 1, got {a.threads}", "--threads")
        import torch

        torch.set_num_threads(a.threads)
    if getattr(a, "max_minutes", None) is not None and not a.max_minutes > 0:
        raise ArgumentError(f"must be above 0, got {a.max_minutes}", "--max-minutes")


def run(args) -> int:
    argv = list(args.argv)
    if argv[:1] == ["codec"]:
        return run_codec(codec_parser().parse_args(argv[1:]))
    if argv[:1] == ["guide"]:
        return run_guide(guide_parser().parse_args(argv[1:]))
    return run_train(train_parser().parse_args(argv))


def run_train(a) -> int:
    from training.trainer import Trainer, TrainSettings

    _threads(a)
    width, height = check_size("flash", *Size.parse(a.size, "--size"))
    targets = tuple(t.strip() for t in a.lora_targets.split(",") if t.strip())
    if not targets:
        raise ArgumentError("give at least one module name", "--lora-targets")
    s = TrainSettings(config=a.config, weights=a.weights, codec=a.codec, vae=a.vae, text_encoder=a.text_encoder,
                      prompts=a.prompts, styles=a.styles, width=width, height=height, steps=a.steps,
                      batch=a.batch or TrainSettings.batch, lr=a.lr or TrainSettings.lr, chunks=a.chunks,
                      discrete_sigma_prob=a.discrete_sigma_share, rollout_start=a.rollout_start,
                      rollout_prob=a.rollout_share, lora_rank=a.lora_rank, lora_alpha=a.lora_alpha,
                      lora_targets=targets, checkpoint_every=a.checkpoint_every, log_every=a.log_every,
                      seed=a.seed, device=a.device, fsdp=a.fsdp, gradient_checkpointing=a.gradient_checkpointing,
                      max_minutes=a.max_minutes, cache_targets=a.cache_targets, objective=a.objective,
                      history_chunks=a.history_chunks, gan_weight=a.gan_weight, refiner=a.refiner,
                      refiner_steps=a.refiner_steps, refiner_windows=a.refiner_windows,
                      refiner_frames=a.refiner_frames, refiner_recordings=tuple(a.refiner_on))
    trainer = Trainer(a.recordings, a.output, s, resume=a.resume, progress=not a.no_progress)
    last = trainer.run()
    if trainer.dist.is_main:
        print(f"trained {trainer.step} steps (last loss {last.get('loss', float('nan')):.4f}); weights in "
              f"{a.output} (alaya-studio serve --renderer flash --weights {a.output})", file=sys.stderr)
    return 0


def run_codec(a) -> int:
    from renderer.flash.config import get_config
    from training.bookkeeping import check_output_dir
    from training.codec import CodecSettings, load_perceptual, train_codec
    from training.data import PairedClips
    from training.styles import StyleTargets, parse_styles

    _threads(a)
    width, height = check_size("flash", *Size.parse(a.size, "--size"))
    if width % 16 or height % 16:
        raise ArgumentError(f"size {a.size!r}: sides must be multiples of 16", "--size")
    config = get_config(a.config)
    initial = _codec_to_adapt(a, config) if a.start_from else None
    if a.freeze_encoder and initial is None:
        raise ArgumentError("keeps a trained encoder: give --from DIR too", "--freeze-encoder")
    if initial is None:
        a.encoder_channels = CodecSettings.encoder_channels if a.encoder_channels is None else a.encoder_channels
        a.guide = a.guide or 0
    for name in ("steps", "encoder_channels", "checkpoint_every", "log_every"):
        if getattr(a, name) < 1:
            raise ArgumentError(f"must be at least 1, got {getattr(a, name)}", f"--{name.replace('_', '-')}")
    if a.guide < 0:
        raise ArgumentError(f"must be 0 (none) or a width, got {a.guide}", "--guide")
    if a.guide_context and not a.guide:
        raise ArgumentError("is a part of the guide: give --guide WIDTH too", "--guide-context")
    if a.crop is not None and (a.crop < 0 or a.crop % 8):
        raise ArgumentError(f"must be 0 or a positive multiple of 8 (the latent grid), got {a.crop}", "--crop")
    s = CodecSettings(encoder_channels=a.encoder_channels, decoder_channels=config.decoder_channels,
                      steps=a.steps, batch=a.batch or CodecSettings.batch, lr=a.lr or CodecSettings.lr,
                      crop=CodecSettings.crop if a.crop is None else a.crop, guide_width=a.guide,
                      guide_context=a.guide_context, freeze_encoder=a.freeze_encoder,
                      checkpoint_every=a.checkpoint_every, log_every=a.log_every, seed=a.seed,
                      max_minutes=a.max_minutes, extra={"config": config.name, "size": [width, height],
                                                             "styles": a.styles,
                                                             "adapted_from": a.start_from and Path(a.start_from).name})
    out = check_output_dir(a.output)
    perceptual = load_perceptual(a.perceptual)
    styles = StyleTargets(parse_styles(a.styles), keep=True) if a.styles else None
    data = PairedClips.from_paths(a.recordings, width, height, s.clip_frames, styles=styles)
    final = train_codec(data, out, s, resume=a.resume, perceptual=perceptual, device=a.device or "cpu",
                        progress=not a.no_progress, initial=initial)
    print(f"codec trained {final['step']} steps (reconstruction PSNR {final.get('psnr', float('nan')):.2f} dB); "
          f"written to {a.output}", file=sys.stderr)
    return 0
