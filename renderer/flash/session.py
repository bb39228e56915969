"""FlashSession: one streaming rollout, chunk by chunk, with bounded history and a stateful decoder.

Per chunk of n <= chunk_size frames (n need not be a multiple of 4: the last group is padded by repeating
the last frame and the output trimmed; the padded group stays in history):
  1. frames → (1, T, 5, 3, H, W) float in [0, 1], resized to the session size if needed
  2. G-buffer encoder → (1, 80, t, h, w),  t = ceil(n / 4); its MemBlock memory (TAEHV-style families) and,
     with trim_startup_frames, a 3-frame delay line carry across chunks (`_encoder_input`)
  3. prompt: the mean of the chunk's per-frame conditioning embeddings (a scheduled transition blends smoothly;
     a switch takes effect at the first chunk that contains the new conditioning); optional history re-cache
  4. few-step denoise (FewStepSampler: steps, shift, sigma_max, euler | renoise) from seeded noise with
     [anchor | long | mid | short] history → clean latent (1, 16, t, h, w)
  5. history.push; stateful decode → (1, 4t, 3, H, W) → first n frames as uint8 (n, H, W, 3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from gbuffer.frame import GBufferFrame
from prompt_presets.conditioning import Conditioning
from renderer.base import RendererError, RenderResult, RenderSession, check_chunk, check_size
from renderer.flash.config import LATENT_CHANNELS, SPATIAL_SCALE, TEMPORAL_SCALE
from renderer.flash.decoder import STARTUP_FRAMES, DecoderStream
from renderer.flash.history import HistoryInputs, LatentHistory
from renderer.flash.pipeline import FlashPipeline
from renderer.flash.taehv import StreamMemory
from renderer.timing import StageClock, peak_memory_bytes, start_chunk


def frames_to_tensor(frames: Sequence[GBufferFrame], width: int, height: int,
                     device: torch.device | str = "cpu") -> torch.Tensor:
    """→ (1, T, 5, 3, H, W) float32 in [0, 1] on `device` (moved as uint8: 4x less to copy), T padded to a
    multiple of 4 by repeating the last frame. Its memory holds each pixel's 15 values side by side, so the
    (T, 15, H, W) view the G-buffer encoder and refiner take is channels-last without a copy."""
    stacked = np.stack([f.data for f in frames] + [frames[-1].data] * (-len(frames) % TEMPORAL_SCALE))
    data = torch.from_numpy(stacked).to(device)                                 # (T, 5, h, w, 3) uint8
    x = data.permute(0, 2, 3, 1, 4).contiguous().permute(0, 3, 4, 1, 2).float().div_(255.0)   # (T, 5, 3, h, w)
    if x.shape[-2:] != (height, width):
        n = x.shape[0]
        x = F.interpolate(x.flatten(0, 1), size=(height, width), mode="bilinear", antialias=True,
                          align_corners=False).clamp_(0, 1).unflatten(0, (n, 5))
    return x.unsqueeze(0)


@dataclass
class PreparedChunk:
    """One session's chunk, ready for the denoising steps."""

    frames: int                              # real frames (the last latent group may be padded)
    prompt: torch.Tensor                     # (1, text_len, text_dim)
    gbuffer_latent: torch.Tensor             # (1, 80, t, h, w)
    noise: torch.Tensor                      # (1, 16, t, h, w), from this session's generator
    history: HistoryInputs
    fresh_noise: Callable[[], torch.Tensor]  # this session's next noise draw (re-noising samplers)
    timer: StageClock
    gbuffer: torch.Tensor | None = None      # (1, T, 5, 3, H, W) in [0, 1]: what a G-buffer refiner sees at decode


class FlashSession(RenderSession):
    def __init__(self, pipeline: FlashPipeline, width: int, height: int, seed: int, chunk_size: int,
                 recache_on_switch: bool = False, overlaps_chunks: bool = False):
        check_size("flash", width, height)
        self.pipeline = pipeline
        self.width, self.height, self.seed, self.chunk_size = width, height, seed, chunk_size
        self.recache_on_switch = recache_on_switch
        cfg = pipeline.config
        self.latent_size = (height // SPATIAL_SCALE, width // SPATIAL_SCALE)
        self.history: LatentHistory | None = LatentHistory(cfg.history_sizes, cfg.in_channels, *self.latent_size,
                                     pipeline.device, pipeline.dtype)
        self.trim_startup_frames = cfg.trim_startup_frames
        self.encoder_memory, self.memory = StreamMemory(), DecoderStream()
        self.delay: torch.Tensor | None = None       # trim mode: the last 3 G-buffer frames, for the next chunk
        self.generator = torch.Generator().manual_seed(seed)
        self.frames_rendered = 0
        self.last_prompt: torch.Tensor | None = None
        # (history version, tokens): the next chunk's history tokens, made after a streamed chunk
        self.ahead: tuple[int, torch.Tensor | None] | None = None
        self.latent_frames = 0                       # of the last chunk started (what the tokens ahead are for)
        # begin_chunk's iterator reads only the decoder's state, so a live worker may overlap it with the next
        # chunk; the renderer turns it on where asked (FlashSettings.overlap_chunks)
        self.overlaps_chunks = overlaps_chunks
        self._cuda = pipeline.device.type == "cuda"

    @property
    def _history(self) -> LatentHistory:
        """The history of an open session (close() drops it)."""
        if self.history is None:
            raise RendererError("this flash session is closed")
        return self.history

    def _noise(self, latent_frames: int) -> torch.Tensor:
        # drawn on the CPU so a seed gives the same noise on every device
        return torch.randn(1, LATENT_CHANNELS, latent_frames, *self.latent_size, generator=self.generator)

    def render(self, frames: Sequence[GBufferFrame], conditioning: Sequence[Conditioning]) -> RenderResult:
        chunk = self.prepare(frames, conditioning)
        with torch.inference_mode():
            latent = self.pipeline.denoise(chunk.noise, chunk.gbuffer_latent, chunk.prompt, chunk.history,
                                           on_step=lambda i: chunk.timer.lap(f"denoise_step_{i}"),
                                           fresh_noise=chunk.fresh_noise)
        return self.finish(chunk, latent)

    # A chunk in three phases, so a batch (renderer/flash/batch.py) can run the middle one for several sessions
    # in one forward pass: prepare (this session's encoder memory, prompt, noise, history), denoise, finish
    # (history, stateful decoder). Each session keeps its own state and draws its own noise, in the same order
    # as alone, so its frames do not depend on the batch it ran in.

    def prepare(self, frames: Sequence[GBufferFrame], conditioning: Sequence[Conditioning]) -> "PreparedChunk":
        check_chunk(self, frames, conditioning)
        history = self._history
        pipe = self.pipeline
        prompt = pipe.prompts.chunk(conditioning).unsqueeze(0).to(pipe.device)   # (1, text_len, text_dim)
        x = frames_to_tensor(frames, self.width, self.height, pipe.device)
        start_chunk(pipe.device)
        timer = StageClock(pipe.device)
        with torch.inference_mode():
            gbuffer_latent = pipe.encode_gbuffer(self._encoder_input(x, len(frames)), self.encoder_memory)
            timer.lap("gbuffer_encode")
            switched = self.last_prompt is not None and not torch.equal(prompt, self.last_prompt)
            if switched and self.recache_on_switch:
                self._recache(prompt)
                timer.lap("recache")
            t = gbuffer_latent.shape[2]
            return PreparedChunk(len(frames), prompt, gbuffer_latent, self._noise(t), history.inputs(t),
                                 lambda: self._noise(t), timer, x)

    def render_stream(self, frames: Sequence[GBufferFrame],
                      conditioning: Sequence[Conditioning]) -> Iterator[RenderResult]:
        """As render(), but each frame leaves as soon as it is ready: the decoder hands a latent frame's frames
        over one by one as it decodes them (depth first, TinyDecoder.frames), and with a G-buffer refiner each is
        refined as it comes. The later frames are decoded while the earlier ones are paced out."""
        yield from self.begin_chunk(frames, conditioning)
        # the chunk's frames are out: the next chunk's history tokens now, not once its frames have arrived
        self.between_chunks()

    def begin_chunk(self, frames: Sequence[GBufferFrame],
                    conditioning: Sequence[Conditioning]) -> Iterator[RenderResult]:
        """The chunk's G-buffer encoder and denoising steps now, the history updated; the decode and refiner in
        the iterator returned. That iterator touches only the decoder's memory, so it may run on another
        thread while the next chunk's begin_chunk runs (renderer/base.py; the live worker's two stages)."""
        chunk = self.prepare(frames, conditioning)
        pipe, timer = self.pipeline, chunk.timer
        with torch.inference_mode():
            latent = pipe.denoise(chunk.noise, chunk.gbuffer_latent, chunk.prompt, chunk.history,
                                  on_step=lambda i: timer.lap(f"denoise_step_{i}"), fresh_noise=chunk.fresh_noise,
                                  history_tokens=self._tokens_ahead())
            self._history.push(latent, chunk.gbuffer_latent)
        self.last_prompt = chunk.prompt
        self.latent_frames = latent.shape[2]
        return self._stream_frames(chunk, latent)

    def between_chunks(self) -> None:
        """The next chunk's history tokens: they depend on the history alone, so they are made before the
        next chunk's frames arrive (dropped if the history changes first)."""
        if self.history is not None and self.latent_frames:
            self.ahead = (self.history.version,
                          self.pipeline.history_tokens_ahead(self.history.inputs(self.latent_frames)))

    def _tokens_ahead(self) -> torch.Tensor | None:
        """The history tokens made after the last streamed chunk, if the history has not changed since (a
        re-cache, a whole-chunk render)."""
        ahead, self.ahead = self.ahead, None
        return ahead[1] if ahead is not None and ahead[0] == self._history.version else None

    def _stream_frames(self, chunk: "PreparedChunk", latent: torch.Tensor) -> Iterator[RenderResult]:
        pipe, timer = self.pipeline, chunk.timer
        for index, frame in enumerate(self._decoded_frames(latent)):
            timer.lap("decode")
            if index >= chunk.frames:       # the padding of a short last group: decoded for the memory, not sent
                continue
            if pipe.draws_from_gbuffer:
                assert chunk.gbuffer is not None        # prepare() always keeps the chunk's G-buffer
                with torch.inference_mode():
                    frame = pipe.from_gbuffer(frame, chunk.gbuffer[:, index:index + 1], chunk.prompt)
                timer.lap("refine")
            self.frames_rendered += 1
            yield self._result(frame[0], timer)
            timer.resume()

    def _decoded_frames(self, latent: torch.Tensor) -> Iterator[torch.Tensor]:
        """The chunk's frames (1, 1, 3, H, W) as the stateful decoder hands them over (every one, to the end:
        the decoder's memory must see the whole latent)."""
        for j in range(latent.shape[2]):
            frames = self.pipeline.decode_frames(latent[:, :, j:j + 1], self.memory)
            while True:
                with torch.inference_mode():    # entered per frame: a yield inside would leave it on for the caller
                    frame = next(frames, None)
                if frame is None:
                    break
                yield frame

    def finish(self, chunk: "PreparedChunk", latent: torch.Tensor) -> RenderResult:
        pipe, timer = self.pipeline, chunk.timer
        with torch.inference_mode():
            self._history.push(latent, chunk.gbuffer_latent)
            rgb = pipe.decode(latent, self.memory, chunk.gbuffer, chunk.prompt)[0, : chunk.frames]
            timer.lap("decode")
        self.last_prompt = chunk.prompt
        self.frames_rendered += chunk.frames
        return self._result(rgb, timer)

    def _result(self, rgb: torch.Tensor, timer: StageClock) -> RenderResult:
        """Frames (n, 3, H, W) in [0, 1] → uint8 (n, H, W, 3), with the chunk's timings so far."""
        out = rgb.permute(0, 2, 3, 1).mul(255.0).round().clamp(0, 255).to(torch.uint8)
        timings = dict(timer.timings)
        timings["denoise"] = sum(v for k, v in timer.timings.items() if k.startswith("denoise_step_"))
        timings["total"] = sum(v for k, v in timer.timings.items() if k != "denoise")
        return RenderResult(out.cpu().numpy(), timings, peak_memory_bytes(self.pipeline.device))

    def _encoder_input(self, x: torch.Tensor, n: int) -> torch.Tensor:
        """x (1, T, 5, 3, H, W), its first n frames real → what the G-buffer encoder sees.

        Default alignment: the chunk itself (latent j = frames 4j..4j+3). TAEHV alignment (trim_startup_frames):
        latent j covers frames 4j-3..4j, so the G-buffer stream is delayed by 3 frames: the rollout starts with 3
        start-up copies of its first frame and each chunk hands its last 3 frames to the next. Output frame p then
        shows G-buffer frame p-3 (3 frames of latency; the first 3 outputs are the start-up frames)."""
        if not self.trim_startup_frames:
            return x
        if self.delay is None:
            self.delay = x[:, :1].expand(-1, STARTUP_FRAMES, *x.shape[2:])
        stream = torch.cat([self.delay, x], dim=1)
        self.delay = stream[:, n:n + STARTUP_FRAMES].clone()
        return stream[:, :x.shape[1]]

    def _recache(self, prompt: torch.Tensor) -> None:
        """Re-render the short history under the new prompt: renoise it half way, finish the steps."""
        history = self._history
        if not history.has_anchor:
            return
        pipe = self.pipeline
        n = history.sizes[2]
        start = pipe.sampler.num_steps // 2
        sigma = float(pipe.sampler.sigmas()[start])
        noisy = pipe.sampler.add_noise(history.recent_rgb(n), self._noise(n).to(pipe.device), sigma)
        clean = pipe.denoise(noisy, history.recent_gbuffer(n), prompt, history.inputs(n),
                             start_step=start, fresh_noise=lambda: self._noise(n))
        history.replace_recent(clean)

    def state_bytes(self) -> int:
        """Bytes held by the history and the decoder memory (constant after the first chunk)."""
        if self.history is None:
            return 0
        return (sum(t.numel() * t.element_size() for t in self.history.tensors().values())
                + self.memory.nbytes() + self.encoder_memory.nbytes()
                + (self.delay.numel() * self.delay.element_size() if self.delay is not None else 0))

    def close(self) -> None:
        self.history = None
        self.encoder_memory, self.memory = StreamMemory(), DecoderStream()
        self.delay = None
        self.last_prompt = None
        self.ahead = None
        if self._cuda:
            torch.cuda.empty_cache()
