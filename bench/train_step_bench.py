"""Where a training step's time goes: the codec step and the renderer step, part by part, on synthetic clips.

    python -m bench.train_step_bench --config nano --size 160x96 --threads 2 --steps 6
    python -m bench.train_step_bench --stem-stride 1      # nano with the full-resolution G-buffer stem
    python -m bench.train_step_bench --objectives flow,meanflow --threads 1 --clock cpu   # mean flow's JVP
    python -m bench.train_step_bench --warmup 2                                         # history warm-up

Codec step (`train codec`): encode, decode, loss, backward, optimiser. Renderer step (`train`): RGB targets
(the frozen codec encoder, or the cache that replaces it), G-buffer encoder, transformer over the chunks,
backward, optimiser; with and without self-rollout history. Medians over --steps after one warm-up step.
Random weights: the cost of a step does not depend on what the weights are.
"""

from __future__ import annotations

import dataclasses
import statistics
import time

import torch

from bench.harness import parser, write_json
from renderer.flash.config import get_config
from renderer.flash.gbuffer_encoder import GBufferEncoder
from renderer.flash.transformer import FlashTransformer
from training.codec import Codec, CodecSettings, codec_loss
from training.objective import FlashTrainee, ObjectiveSettings


CLOCK = {"wall": time.perf_counter, "cpu": time.process_time}   # cpu: this process's CPU time (a shared machine)


class Stopwatch:
    clock = time.perf_counter

    def __init__(self):
        self.parts: dict[str, list[float]] = {}
        self._t = self.clock()

    def lap(self, name: str) -> None:
        now = self.clock()
        self.parts.setdefault(name, []).append(1000 * (now - self._t))
        self._t = now

    def medians(self) -> dict[str, float]:
        out = {k: round(statistics.median(v[1:] or v), 1) for k, v in self.parts.items()}
        out["total"] = round(sum(out.values()), 1)
        return out


def optimise(watch: Stopwatch, opt: torch.optim.Optimizer, loss: torch.Tensor) -> None:
    opt.zero_grad(set_to_none=True)
    loss.backward()
    watch.lap("backward")
    opt.step()
    watch.lap("optimiser")


def codec_step_ms(config, width: int, height: int, batch: int, clip_frames: int, steps: int) -> dict:
    s = CodecSettings(decoder_channels=tuple(config.decoder_channels), batch=batch, clip_frames=clip_frames)
    codec = Codec(s.encoder_channels, s.decoder_channels)
    opt = torch.optim.AdamW(codec.parameters(), lr=s.lr)
    clips = torch.rand(batch, clip_frames, 3, height, width)
    watch = Stopwatch()
    for _ in range(steps + 1):
        watch.lap("idle")
        loss, _ = codec_loss(codec, clips, s)
        watch.lap("forward (encode, decode, loss)")
        optimise(watch, opt, loss)
    watch.parts.pop("idle")
    return watch.medians()


def renderer_step_ms(config, width: int, height: int, batch: int, chunks: int, steps: int, rollout: bool,
                     objective: str = "flow", warmup: int = 0) -> dict:
    codec = Codec(32, tuple(config.decoder_channels))
    encoder = codec.encoder_module().eval().requires_grad_(False)
    config = dataclasses.replace(config, interval_embedding=objective == "meanflow")
    trainee = FlashTrainee(config, FlashTransformer(config), GBufferEncoder.for_config(config),
                           ObjectiveSettings(chunks, objective=objective))
    opt = torch.optim.AdamW([p for p in trainee.parameters() if p.requires_grad], lr=5e-4)
    frames = (warmup + chunks) * config.chunk_frames
    gbuffer = torch.rand(batch, frames, 5, 3, height, width)
    rgb = torch.rand(batch, frames, 3, height, width)
    prompt = torch.randn(batch, config.text_len, config.text_dim)
    gen = torch.Generator().manual_seed(0)
    watch = Stopwatch()
    for _ in range(steps + 1):
        watch.lap("idle")
        with torch.no_grad():
            target = encoder(rgb)
        watch.lap("RGB targets (codec encoder)")
        loss = trainee(gbuffer, target, prompt, rollout, gen, warmup)
        watch.lap("forward (G-buffer encoder, transformer" + (", self-rollout)" if rollout else ")"))
        optimise(watch, opt, loss)
    watch.parts.pop("idle")
    return watch.medians()


def main() -> None:
    p = parser(__doc__, full_help=True)
    p.add_argument("--config", default="nano")
    p.add_argument("--size", default="160x96")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--chunks", type=int, default=2)
    p.add_argument("--codec-clip", type=int, default=8)
    p.add_argument("--objectives", default="flow", help="comma-separated: flow, meanflow")
    p.add_argument("--warmup", type=int, default=0, help="history warm-up chunks before the trained ones")
    p.add_argument("--stem-stride", type=int, choices=(1, 2), help="override the config's G-buffer stem stride")
    p.add_argument("--clock", choices=tuple(CLOCK), default="wall",
                   help="wall time, or this process's CPU time (steadier on a loaded machine; use --threads 1)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    Stopwatch.clock = staticmethod(CLOCK[a.clock])
    torch.manual_seed(0)
    width, height = (int(v) for v in a.size.split("x"))
    config = get_config(a.config)
    if a.stem_stride:
        config = dataclasses.replace(config, gbuffer_stem_stride=a.stem_stride)
    rows = {"codec": codec_step_ms(config, width, height, a.batch, a.codec_clip, a.steps)}
    for objective in a.objectives.split(","):
        for rollout in (False, True):
            name = f"renderer {objective}, {'self-rollout' if rollout else 'teacher forcing'}"
            rows[name] = renderer_step_ms(config, width, height, a.batch, a.chunks, a.steps, rollout, objective,
                                          a.warmup)
    for name, parts in rows.items():
        print(f"{name}: " + " · ".join(f"{k} {v} ms" for k, v in parts.items()))
    write_json(a.json, {"args": vars(a), "rows": rows})


if __name__ == "__main__":
    main()
