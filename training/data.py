"""Paired recordings → training clips.

A recording is anything `open_sequence` reads that carries RGB beside its G-buffer (`record --rgb`, a
`.gbuf.zip` with an `rgb/` stream, `.npy` windows with `.rgb.npy` siblings, a clip folder with `rgb.mp4`).
Every frame is decoded once, resized to the training size (as the streaming session resizes) and kept as
uint8 tensors; a clip is `clip_frames` consecutive frames at a random start.

With styles (`--styles`, training/styles.py) each clip also draws a style and one of its phrasings: the clip's
targets are that style's frames and its prompt that phrasing. The draws come from the run's generator, so a
seed gives the same clips, styles and phrasings.

    gbuffer (B, T, 5, 3, H, W) float in [0, 1]     rgb (B, T, 3, H, W) float in [0, 1]     prompt index (B,)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Sequence

import torch
import torch.nn.functional as F
from pydantic import StringConstraints, TypeAdapter

from alaya_errors import validate
from gbuffer.formats import open_sequence
from prompt_presets.resolve import resolve_prompt
from training.errors import TrainingError
from training.styles import StyleTargets, per_clip

DEFAULT_PROMPT = "original"      # the beauty pass is the engine's natural look
DEFAULT_KEY = "*"                # prompt-file key for every recording not named
DECODE_BLOCK = 64                # frames resized at a time (bounds the float copy)

PromptText = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
PROMPT_FILE = TypeAdapter(dict[str, PromptText])


@dataclass
class Recording:
    name: str
    gbuffer: torch.Tensor      # (N, 5, 3, H, W) uint8
    rgb: torch.Tensor          # (N, 3, H, W) uint8
    prompt: str                # the full prompt text (a preset name is resolved)

    def __len__(self) -> int:
        return self.gbuffer.shape[0]


def read_prompt_file(path: str | Path | None) -> dict[str, str]:
    """{recording file name or "*": prompt text or preset name}; a file that does not parse is a TrainingError."""
    if path is None:
        return {}
    path = Path(path)
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise TrainingError(f"cannot read the prompt file: {exc.strerror}", str(path)) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise TrainingError(f"prompt file is not valid JSON: {exc}", str(path)) from None
    return validate(PROMPT_FILE, doc, TrainingError, str(path))


def prompt_for(path: Path, prompts: dict[str, str]) -> str:
    chosen = prompts.get(path.name, prompts.get(DEFAULT_KEY, DEFAULT_PROMPT))
    return resolve_prompt(chosen).text


def _resize(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """uint8 (N, C, h, w) → uint8 (N, C, H, W), antialiased like the session's resize."""
    if x.shape[-2:] == size:
        return x
    y = F.interpolate(x.float(), size=size, mode="bilinear", antialias=True, align_corners=False)
    return y.round().clamp(0, 255).to(torch.uint8)


def load_recording(path: str | Path, width: int, height: int, prompt: str) -> Recording:
    """Decode a paired recording at width x height. Refuses one without RGB, naming the first frame that lacks it."""
    path = Path(path)
    gbuffer: list[torch.Tensor] = []
    rgb: list[torch.Tensor] = []
    with open_sequence(path) as source:
        if not getattr(source, "paired", False):
            raise TrainingError("has no RGB stream: record it with 'alaya-studio record --rgb' (or add rgb.mp4 / "
                                "window-NN.rgb.npy)", str(path))
        block_g: list[torch.Tensor] = []
        block_r: list[torch.Tensor] = []

        def flush() -> None:        # (n, 5, h, w, 3) and (n, h, w, 3) uint8 → resized channel-first blocks
            gbuffer.append(_resize(torch.stack(block_g).permute(0, 1, 4, 2, 3).flatten(0, 1), (height, width)))
            rgb.append(_resize(torch.stack(block_r).permute(0, 3, 1, 2), (height, width)))
            block_g.clear()
            block_r.clear()

        for frame in source:
            if frame.rgb is None:
                raise TrainingError(f"frame {frame.index} has no rgb image", str(path))
            block_g.append(torch.from_numpy(frame.data))
            block_r.append(torch.from_numpy(frame.rgb))
            if len(block_g) == DECODE_BLOCK:
                flush()
        if block_g:
            flush()
    if not gbuffer:
        raise TrainingError("recording has no frames", str(path))
    g = torch.cat(gbuffer).unflatten(0, (-1, 5))
    return Recording(path.name, g, torch.cat(rgb), prompt)


@dataclass
class ClipBatch:
    gbuffer: torch.Tensor                 # (B, T, 5, 3, H, W) float in [0, 1]
    rgb: torch.Tensor | None              # (B, T, 3, H, W) float in [0, 1]; None when not asked for
    prompt: torch.Tensor                  # (B,) index into PairedClips.prompts
    picks: list[tuple[int, int]]          # (recording, start frame) of each clip
    styles: list[str] | None = None       # each clip's style (None: the recording's own prompt and RGB)


class PairedClips:
    """Recordings held in memory; `sample` draws clips of `clip_frames` consecutive frames."""

    def __init__(self, recordings: Sequence[Recording], clip_frames: int, start_stride: int = 1,
                 styles: StyleTargets | None = None):
        if not recordings:
            raise TrainingError("the dataset is empty: give at least one paired recording", "RECORDING")
        short = [r for r in recordings if len(r) < clip_frames]
        if short:
            r = short[0]
            raise TrainingError(f"has {len(r)} frames; a training clip needs {clip_frames} (record more frames)",
                                r.name)
        self.recordings = list(recordings)
        self.clip_frames = clip_frames
        self.styles = styles
        if styles is None:
            self.prompts = sorted({r.prompt for r in self.recordings})
        else:                              # every phrasing of every style; a style's are a run of indices
            self.prompts, self._phrasing_runs = [], []
            for name in styles.names:
                self._phrasing_runs.append((len(self.prompts), len(styles.phrasings(name))))
                self.prompts += styles.phrasings(name)
        # one entry per possible clip start, so long recordings are drawn in proportion to their length; a stride
        # of 4 starts every clip on a latent boundary (targets sliced from a LatentCache)
        self.starts = [(k, s) for k, r in enumerate(self.recordings)
                       for s in range(0, len(r) - clip_frames + 1, start_stride)]

    @classmethod
    def from_paths(cls, paths: Sequence[str | Path], width: int, height: int, clip_frames: int,
                   prompt_file: str | Path | None = None, start_stride: int = 1,
                   styles: StyleTargets | None = None, also_named: Sequence[str | Path] = ()) -> "PairedClips":
        """`also_named`: recordings the prompt file may name besides `paths` (the refiner's, --refiner-on)."""
        if not paths:
            raise TrainingError("the dataset is empty: give at least one paired recording", "RECORDING")
        if styles is not None and prompt_file is not None:
            raise TrainingError("give either --styles (each clip draws a style) or --prompts (one per recording)",
                                "--prompts")
        prompts = read_prompt_file(prompt_file)
        unknown = sorted(set(prompts) - {Path(p).name for p in [*paths, *also_named]} - {DEFAULT_KEY})
        if unknown:
            raise TrainingError(f"names recording(s) not given: {', '.join(unknown)}", str(prompt_file))
        return cls([load_recording(p, width, height, prompt_for(Path(p), prompts)) for p in paths], clip_frames,
                   start_stride, styles)

    @property
    def frames(self) -> int:
        return sum(len(r) for r in self.recordings)

    def clip(self, k: int, start: int, with_rgb: bool = True, style: str | None = None
             ) -> tuple[torch.Tensor, torch.Tensor | None]:
        gbuffer = self.recordings[k].gbuffer[start:start + self.clip_frames].float().div_(255)
        return gbuffer, self._rgb(k, start, style) if with_rgb else None

    def _rgb(self, k: int, start: int, style: str | None = None) -> torch.Tensor:
        r = self.recordings[k]
        if style is None:
            frames = r.rgb
        else:
            assert self.styles is not None, "a style is drawn only in a run with styles"
            frames = self.styles.frames(k, r, style)
        return frames[start:start + self.clip_frames].float().div_(255)

    def _picks(self, batch: int, generator: torch.Generator) -> list[tuple[int, int]]:
        return [self.starts[i] for i in torch.randint(len(self.starts), (batch,), generator=generator).tolist()]

    def sample(self, batch: int, generator: torch.Generator, with_rgb: bool = True) -> ClipBatch:
        """`with_rgb=False` when the targets come from a LatentCache: the RGB frames are then not needed."""
        picks = self._picks(batch, generator)
        styles, prompt = self._draw_styles(picks, generator)
        gbuffer = torch.stack([self.clip(k, s, with_rgb=False)[0] for k, s in picks])
        rgb = (torch.stack([self._rgb(k, s, style) for (k, s), style in zip(picks, per_clip(styles, batch))])
               if with_rgb else None)
        return ClipBatch(gbuffer, rgb, prompt, picks, styles)

    def _draw_styles(self, picks: list[tuple[int, int]], generator: torch.Generator
                     ) -> tuple[list[str] | None, torch.Tensor]:
        """Each clip's style and prompt index: with styles a style, then one of its phrasings, uniformly."""
        if self.styles is None:
            return None, torch.tensor([self.prompts.index(self.recordings[k].prompt) for k, _ in picks])
        names = self.styles.names
        which = torch.randint(len(names), (len(picks),), generator=generator).tolist()
        u = torch.rand(len(picks), generator=generator).tolist()
        prompt = [self._phrasing_runs[i][0] + int(x * self._phrasing_runs[i][1]) for i, x in zip(which, u)]
        return [names[i] for i in which], torch.tensor(prompt)

    def rgb_clips(self, batch: int, generator: torch.Generator) -> torch.Tensor:
        """(B, T, 3, H, W) RGB only (codec training); with styles each clip in one drawn style."""
        return self.rgb_and_gbuffer_clips(batch, generator, with_gbuffer=False)[0]

    def rgb_and_gbuffer_clips(self, batch: int, generator: torch.Generator, with_gbuffer: bool = True
                              ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """As `rgb_clips` (the same draws from `generator`), with each clip's G-buffer frames (B, T, 5, 3, H, W)
        beside it: what a guided decoder's codec trains on."""
        picks = self._picks(batch, generator)
        styles, _ = self._draw_styles(picks, generator)
        rgb = torch.stack([self._rgb(k, s, style) for (k, s), style in zip(picks, per_clip(styles, batch))])
        gbuffer = torch.stack([self.clip(k, s, with_rgb=False)[0] for k, s in picks]) if with_gbuffer else None
        return rgb, gbuffer
