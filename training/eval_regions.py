"""Eval where context matters: `original` scored on shadowed and lit pixels apart, and a warp error from the
recorded geometry. Both need what `record --rgb` stores beside the beauty pass (gbuffer/engine/beauty.py).

    regions.shadow / regions.lit   PSNR and SSIM of each row on `original`, over the surface pixels the sun does
                                   not reach (frame.sun < 128) or does (>= 128); sky is neither. Per frame, then
                                   the mean over frames holding at least MIN_REGION_PIXELS such pixels.
    warp_error                     frame t-1 of a row reprojected into frame t with the recorded depth and camera
                                   (gbuffer/viewpoint.py), then mean |row_t - warped row_t-1| in 8-bit levels over
                                   the pixels both frames see (not sky, inside t-1, depth agreeing within
                                   DEPTH_AGREEMENT). The truth's own figure is the floor: lighting that moves with the
                                   view (specular, the shadow box) and the 8-bit depth keep it above 0.

A *row* is anything scored beside the model: `rows(evaluation)` gives the model (the first noise seed, streamed
again as live), `per_pixel` and `codec` when eval fitted them; callers add more through `extra`
({"row name": frames_fn}, frames_fn(test, task) → uint8 (N, H, W, 3) at the eval size, or None to skip a task).
Recordings made before the sun mask or the camera were recorded still score everything else: what cannot be
computed is named under `not_computed`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np
import torch
import torch.nn.functional as F

from gbuffer.encoding import decode_depth
from gbuffer.formats import open_sequence
from gbuffer.frame import CHANNEL_INDEX, GBufferError
from gbuffer.viewpoint import Viewpoint, project, world_points
from training.data import _resize
from training.metrics import psnr, ssim_map
from training.style_targets import ORIGINAL

RowFrames = Callable[..., "np.ndarray | None"]

SHADOW_BELOW = 128          # frame.sun below this is shadow
MIN_REGION_PIXELS = 16      # a frame with fewer pixels in a region does not score that region
DEPTH_AGREEMENT = 0.08      # relative: the reprojected point and frame t-1's depth there must agree this well
SKY_DEPTH_LEVEL = 1         # depth channel below this (encoded) is sky


@dataclass
class RecordedTruth:
    """What a test recording holds beyond the G-buffer and RGB, at the eval size."""

    sun: np.ndarray | None                 # uint8 (N, H, W)
    cameras: list[Viewpoint] | None
    missing: dict[str, str] = field(default_factory=dict)   # block → why it cannot be computed for this recording


def recorded_truth(test) -> RecordedTruth:
    """The sun masks and cameras of a HeldOutRecording's frames (training/eval_frames.py), resized as its frames
    were. A recording without them, or with a bad one, says so in `missing` instead of failing the eval."""
    n, (h, w) = len(test), tuple(test.recording.gbuffer.shape[-2:])
    suns, cameras = [], []
    missing: dict[str, str] = {}
    try:
        with open_sequence(test.path) as source:
            for i in range(n):
                frame = source.read(i)
                if frame.sun is None:
                    missing.setdefault("regions", f"{test.name} has no sun mask (`record --rgb` of the built-in engine "
                                                       "stores one)")
                else:
                    suns.append(frame.sun)
                camera = Viewpoint.from_meta(frame.meta, f"{test.name}: frame {i}")
                if camera is None:
                    missing.setdefault("warp_error", f"{test.name} has no camera per frame (`record` stores one)")
                else:
                    cameras.append(camera)
    except GBufferError as exc:
        missing.setdefault("regions", str(exc))
        missing.setdefault("warp_error", str(exc))
    sun = None
    if "regions" not in missing:
        sun = _resize(torch.from_numpy(np.stack(suns))[:, None], (h, w))[:, 0].numpy()
    return RecordedTruth(sun, None if "warp_error" in missing else cameras, missing)


# ---- regions ---------------------------------------------------------------------------------------------------

def region_masks(sun: np.ndarray, gbuffer: np.ndarray) -> dict[str, np.ndarray]:
    """{"shadow", "lit"}: bool (N, H, W) surface pixels the sun does not / does reach. gbuffer (N, 5, H, W, 3)."""
    surface = gbuffer[:, CHANNEL_INDEX["depth"], ..., 0] >= SKY_DEPTH_LEVEL
    return {"shadow": surface & (sun < SHADOW_BELOW), "lit": surface & (sun >= SHADOW_BELOW)}


@dataclass
class RegionScore:
    frames: int = 0
    psnr_sum: float = 0.0
    ssim_sum: float = 0.0

    def update(self, output: np.ndarray, truth: np.ndarray, mask: np.ndarray) -> None:
        if mask.sum() < MIN_REGION_PIXELS:
            return
        self.frames += 1
        self.psnr_sum += psnr(output[mask], truth[mask])
        windows = ssim_map(output, truth)
        k = (mask.shape[0] - windows.shape[0]) // 2, (mask.shape[1] - windows.shape[1]) // 2
        centres = mask[k[0]:k[0] + windows.shape[0], k[1]:k[1] + windows.shape[1]]
        self.ssim_sum += float(windows[centres].mean()) if centres.any() else float(windows.mean())

    def merged(self, other: "RegionScore") -> "RegionScore":
        return RegionScore(self.frames + other.frames, self.psnr_sum + other.psnr_sum, self.ssim_sum + other.ssim_sum)

    def summary(self) -> dict:
        if not self.frames:
            return {"frames": 0, "psnr": None, "ssim": None}
        return {"frames": self.frames, "psnr": round(self.psnr_sum / self.frames, 3),
                "ssim": round(self.ssim_sum / self.frames, 4)}


# ---- warp error ------------------------------------------------------------------------------------------------

@dataclass
class Warp:
    """Where each pixel of frame t was in frame t-1: `grid` (H, W, 2) for grid_sample, `valid` bool (H, W)."""

    grid: torch.Tensor
    valid: np.ndarray


def warps(gbuffer: np.ndarray, cameras: list[Viewpoint]) -> list[Warp]:
    """One Warp per consecutive pair (t-1, t), t = 1..N-1, from the recorded depth and camera."""
    encoded = gbuffer[:, CHANNEL_INDEX["depth"], ..., 0]
    depth = decode_depth(encoded).astype(np.float64)
    out = []
    for t in range(1, len(gbuffer)):
        points = world_points(depth[t], cameras[t])
        x, y, z = project(points, cameras[t - 1])
        h, w = encoded.shape[1:]
        col = np.clip(np.floor((x + 1) / 2 * w).astype(np.int64), 0, w - 1)
        row = np.clip(np.floor((1 - y) / 2 * h).astype(np.int64), 0, h - 1)
        seen_before = depth[t - 1][row, col]
        valid = ((encoded[t] >= SKY_DEPTH_LEVEL) & (np.abs(x) < 1) & (np.abs(y) < 1) & (z > 0)
                 & (encoded[t - 1][row, col] >= SKY_DEPTH_LEVEL)
                 & (np.abs(seen_before - z) <= DEPTH_AGREEMENT * z))
        grid = torch.from_numpy(np.stack([x, -y], axis=-1)).float()      # grid_sample's y runs downwards
        out.append(Warp(grid, valid))
    return out


def warp_error_sums(frames: np.ndarray, pair_warps: list[Warp]) -> tuple[float, int]:
    """(sum of |frame_t - warped frame_t-1| over valid pixels and channels, their count)."""
    total, count = 0.0, 0
    for t, warp in enumerate(pair_warps, start=1):
        before = torch.from_numpy(np.ascontiguousarray(frames[t - 1])).permute(2, 0, 1)[None].float()
        warped = F.grid_sample(before, warp.grid[None], mode="bilinear", align_corners=False)[0].permute(1, 2, 0)
        diff = np.abs(frames[t].astype(np.float32) - warped.numpy())[warp.valid]
        total += float(diff.sum())
        count += diff.size
    return total, count


def warp_error(frames: np.ndarray, pair_warps: list[Warp]) -> float | None:
    """Mean |frame_t - warped frame_t-1| in 8-bit levels; None when no pixel is seen by two frames."""
    total, count = warp_error_sums(frames, pair_warps)
    return round(total / count, 4) if count else None


# ---- the blocks in eval's JSON ---------------------------------------------------------------------------------

def rows(evaluation) -> dict[str, RowFrames]:
    """The rows eval has the parts for: the model, and the per-pixel and codec baselines when fitted."""
    from timeline.schedule import Schedule
    from training.baselines import codec_reconstruction
    from training.eval_tasks import BLOCK, render_stream

    def model(test, task) -> np.ndarray:
        out = np.empty((len(test), *test.recording.gbuffer.shape[-2:], 3), np.uint8)
        for r in render_stream(evaluation.renderer, test.source(), Schedule.single(task.prompt, test.fps),
                               evaluation.seeds[0]):
            out[r.index] = r.rgb
        return out

    def per_pixel(test, task) -> np.ndarray:
        return np.concatenate([evaluation.maps[task.target].predict(test.gbuffer(s, s + BLOCK))
                               for s in range(0, len(test), BLOCK)])

    def codec(test, task) -> np.ndarray:
        target = evaluation.targets(test, [task.target])[task.target]
        return codec_reconstruction(evaluation.codec, target, gbuffer=test.recording.gbuffer)

    found: dict[str, RowFrames] = {"model": model}
    if evaluation.maps:
        found["per_pixel"] = per_pixel
    if evaluation.codec is not None:
        found["codec"] = codec
    return found


def context_blocks(evaluation, not_computed: dict, extra: Mapping[str, RowFrames] | None = None) -> dict:
    """{"regions": ..., "warp_error": ...} for an Evaluation (training/eval_run.py); what cannot be computed is
    named in `not_computed` (and its block is None)."""
    from training.eval_tasks import tasks_for

    scored = {**rows(evaluation), **(extra or {})}
    regions = {name: {row: RegionScore() for row in scored} for name in ("shadow", "lit")}
    warp = {row: [0.0, 0] for row in ("truth", *scored)}
    by_prompt: dict[str, dict[str, list]] = {}
    shadow_pixels = surface_pixels = 0
    any_original = any_region = any_warp = False
    for test in evaluation.tests:
        truth = recorded_truth(test)
        for block, why in truth.missing.items():
            not_computed[block] = why if block not in not_computed else f"{not_computed[block]}; {why}"
        gbuffer = test.gbuffer()
        masks = region_masks(truth.sun, gbuffer) if truth.sun is not None else None
        pair_warps = warps(gbuffer, truth.cameras) if truth.cameras is not None and len(test) > 1 else None
        for task in tasks_for(test.path, evaluation.o):
            original = task.target == ORIGINAL
            any_original |= original
            if not ((original and masks is not None) or pair_warps is not None):
                continue
            target = evaluation.targets(test, [task.target])[task.target]
            row_frames = {"truth": target}
            for row, frames_fn in scored.items():
                frames = frames_fn(test, task)
                if frames is not None:
                    row_frames[row] = frames
            if original and masks is not None:
                any_region = True
                shadow_pixels += int(masks["shadow"].sum())
                surface_pixels += int(masks["shadow"].sum() + masks["lit"].sum())
                for name, mask in masks.items():
                    for row in scored:
                        if row in row_frames:
                            for i in range(len(test)):
                                regions[name][row].update(row_frames[row][i], target[i], mask[i])
            if pair_warps is not None:
                any_warp = True
                prompt = by_prompt.setdefault(task.key, {})
                for row, frames in row_frames.items():
                    total, count = warp_error_sums(frames, pair_warps)
                    for sums in (warp.setdefault(row, [0.0, 0]), prompt.setdefault(row, [0.0, 0])):
                        sums[0] += total
                        sums[1] += count
    regions_block: dict[str, Any] | None
    if any_region:
        regions_block = {name: {row: s.summary() for row, s in per_row.items()} for name, per_row in regions.items()}
        regions_block["shadow_fraction"] = round(shadow_pixels / max(surface_pixels, 1), 4)
    else:
        regions_block = None
        if not any_original:
            not_computed.setdefault("regions", "no task is scored against 'original' (add it to --styles)")
    mean = lambda sums: round(sums[0] / sums[1], 4) if sums[1] else None   # noqa: E731
    warp_block = None
    if any_warp:
        warp_block = {row: mean(sums) for row, sums in warp.items()}
        warp_block["by_prompt"] = {k: {row: mean(sums) for row, sums in per.items()} for k, per in by_prompt.items()}
    return {"regions": regions_block, "warp_error": warp_block}
