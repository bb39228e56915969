"""What a training run leaves behind besides weights: a JSONL log, a loss-curve PNG, checkpoints.

    OUT/train_log.jsonl          one JSON object per logged step: step, loss, stage, lr, steps_per_s, ...
    OUT/loss.png                 the loss curve (raw and smoothed, log scale), redrawn at every checkpoint
    OUT/checkpoints/step-NNNNNN.pt   model, optimiser and sampling state; `--resume` takes the newest
Every file is written through gbuffer.formats.common.atomic_path, so an interrupted run never leaves a file
that looks complete.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import torch
from PIL import Image, ImageDraw

from gbuffer.formats.common import atomic_path
from training.errors import TrainingError

SETTINGS_FILE = "train_settings.json"   # what `alaya-studio train` was asked, beside the weights it wrote
LOG_FILE = "train_log.jsonl"
LOSS_PNG = "loss.png"
CHECKPOINTS = "checkpoints"
_CHECKPOINT = re.compile(r"step-(\d+)\.pt")


def read_settings(weights: str | Path) -> dict:
    """WEIGHTS_DIR/train_settings.json, or {} where there is none or it does not parse (weights from elsewhere, or
    written before it existed): readers fall back to their defaults, key by key."""
    try:
        settings = json.loads((Path(weights) / SETTINGS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return settings if isinstance(settings, dict) else {}


def check_output_dir(path: str | Path) -> Path:
    """Create OUT_DIR (or accept an existing one) and prove it is writable before any work starts."""
    path = Path(path)
    try:
        path.mkdir(parents=True, exist_ok=True)
        probe = path / ".write-test"
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        raise TrainingError(f"output directory is not writable: {exc.strerror or exc}", str(path)) from None
    return path


class JsonlLog:
    def __init__(self, path: Path, append: bool):
        self.path = path
        if not append:
            path.write_text("")

    def write(self, record: dict) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(record) + "\n")

    def records(self) -> list[dict]:
        if not self.path.is_file():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line.strip()]

    def truncate_after(self, step: int) -> None:
        """On resume: drop records logged after the checkpoint (they will be logged again)."""
        kept = [r for r in self.records() if r.get("step", 0) <= step]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))


def draw_loss_curve(records: list[dict], path: Path, key: str = "loss", title: str = "training loss") -> None:
    """A plain PNG of `key` against `step` (log scale): raw points in grey, an exponential moving average in
    blue; stage changes marked by vertical lines. No plotting library needed."""
    points = [(r["step"], r[key]) for r in records if key in r and r[key] is not None and r[key] > 0]
    w, h, margin = 720, 400, 56
    image = Image.new("RGB", (w, h), "white")
    draw = ImageDraw.Draw(image)
    draw.text((margin, 12), title, fill="black")
    if len(points) >= 2:
        steps = [s for s, _ in points]
        logs = [math.log10(v) for _, v in points]
        lo, hi = min(logs), max(logs)
        hi = hi if hi > lo else lo + 1
        s0, s1 = steps[0], steps[-1] if steps[-1] > steps[0] else steps[0] + 1

        def xy(step: float, value: float) -> tuple[float, float]:
            return (margin + (step - s0) / (s1 - s0) * (w - 2 * margin),
                    h - margin - (value - lo) / (hi - lo) * (h - 2 * margin))

        draw.rectangle([margin, margin, w - margin, h - margin], outline="black")
        for decade in range(math.floor(lo), math.ceil(hi) + 1):
            if lo <= decade <= hi:
                y = xy(s0, decade)[1]
                draw.line([margin, y, w - margin, y], fill=(225, 225, 225))
                draw.text((4, y - 6), f"1e{decade}", fill="black")
        stages = [(r["step"], r.get("stage")) for r in records if "stage" in r]
        for (_, a), (step, b) in zip(stages, stages[1:]):
            if a != b:
                x = xy(step, lo)[0]
                draw.line([x, margin, x, h - margin], fill=(220, 120, 40))
                draw.text((x + 3, margin + 2), str(b), fill=(220, 120, 40))
        for x, y in (xy(s, v) for s, v in zip(steps, logs)):
            draw.ellipse([x - 1.5, y - 1.5, x + 1.5, y + 1.5], fill=(150, 150, 150))
        keep = min(0.95, 1 - 4 / len(logs)) if len(logs) > 4 else 0.0   # short logs: follow the points
        ema, smooth = logs[0], []
        for v in logs:
            ema = keep * ema + (1 - keep) * v
            smooth.append(ema)
        draw.line([xy(s, v) for s, v in zip(steps, smooth)], fill=(30, 80, 200), width=2)
        draw.text((margin, h - margin + 8), f"step {steps[0]}", fill="black")
        draw.text((w - margin - 80, h - margin + 8), f"step {steps[-1]}", fill="black")
    with atomic_path(path) as tmp:
        image.save(tmp, format="PNG")


def checkpoint_path(out: Path, step: int) -> Path:
    return out / CHECKPOINTS / f"step-{step:06d}.pt"


def latest_checkpoint(out: Path) -> Path | None:
    found = sorted((int(m.group(1)), p) for p in (out / CHECKPOINTS).glob("step-*.pt")
                   if (m := _CHECKPOINT.fullmatch(p.name)))
    return found[-1][1] if found else None


def save_checkpoint(out: Path, step: int, state: dict, keep: int = 2) -> Path:
    """Write step-NNNNNN.pt atomically and keep only the newest `keep` checkpoints."""
    path = checkpoint_path(out, step)
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        torch.save(state, tmp)
    old = sorted(p for p in path.parent.glob("step-*.pt") if _CHECKPOINT.fullmatch(p.name))[:-keep]
    for p in old:
        p.unlink(missing_ok=True)
    return path


def load_checkpoint(path: Path) -> dict:
    try:
        return torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - a truncated or foreign file raises pickle/zip errors of many kinds
        raise TrainingError(f"not a readable checkpoint ({type(exc).__name__}: {str(exc)[:120]})", str(path)) from None
