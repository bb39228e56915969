"""Regenerate the nano demonstration's pictures (BENCHMARKS.md, "The neural renderer, proven"):

    docs/img/nano-styles-codec-loss.png, -train-loss.png, -refiner-loss.png   the runs' train_log.jsonl curves
    docs/img/nano-styles.png   one held-out frame in three styles: G-buffer albedo | target | per-pixel map | nano

`python docs/make_nano_pictures.py CODEC_DIR NANO_DIR HELD_OUT_RECORDING [--frame N] [--styles a,b,c]`
(the per-pixel map is fitted on the model's own training recordings, as `eval --baselines` fits it).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from prompt_presets.resolve import conditioning_for  # noqa: E402
from renderer import create_renderer  # noqa: E402
from training.bookkeeping import draw_loss_curve  # noqa: E402
from training.eval_frames import open_held_out  # noqa: E402
from training.eval_run import fit_per_pixel  # noqa: E402
from training.eval_tasks import training_recordings  # noqa: E402
from training.style_targets import gbuffer_frames, style_frames  # noqa: E402

IMG = Path(__file__).parent / "img"


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def label(img: np.ndarray, text: str) -> np.ndarray:
    canvas = Image.fromarray(np.ascontiguousarray(img))
    ImageDraw.Draw(canvas).text((4, 3), text, fill=(255, 255, 255), stroke_width=2, stroke_fill=(0, 0, 0))
    return np.asarray(canvas)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("codec", type=Path)
    p.add_argument("nano", type=Path)
    p.add_argument("held_out", type=Path)
    p.add_argument("--frame", type=int, default=40)
    p.add_argument("--styles", default="original,cyberpunk,polar")
    a = p.parse_args()
    draw_loss_curve(records(a.codec / "train_log.jsonl"), IMG / "nano-styles-codec-loss.png", title="codec loss")
    draw_loss_curve(records(a.nano / "train_log.jsonl"), IMG / "nano-styles-train-loss.png", title="nano training loss")
    draw_loss_curve(records(a.nano / "refiner_log.jsonl"), IMG / "nano-styles-refiner-loss.png",
                    title="G-buffer refiner, context branch (MSE)")
    styles = a.styles.split(",")
    test = open_held_out(a.held_out, None, a.frame + 1)
    rec = test.recording
    reference = create_renderer("reference")
    size = tuple(rec.gbuffer.shape[-1:-3:-1])
    maps, _ = fit_per_pixel(training_recordings(str(a.nano)), [test], styles, size, reference, 0)
    flash = create_renderer("flash", weights=str(a.nano), device="cpu")
    frames = gbuffer_frames(rec, range(a.frame + 1))
    chunk = flash.chunk_size
    rows = []
    for style in styles:
        with flash.open_session(size[0], size[1], seed=0) as session:
            out = np.concatenate([session.render(frames[i:i + chunk], [conditioning_for(style)] *
                                                 len(frames[i:i + chunk])).rgb for i in range(0, len(frames), chunk)])
        target = style_frames(rec, style, [a.frame], renderer=reference)[0]
        per_pixel = maps[style].predict(np.ascontiguousarray(frames[a.frame].data))
        rows.append(np.concatenate([label(frames[a.frame].channel("albedo"), "albedo"), label(target, style),
                                    label(per_pixel, "per-pixel"), label(out[a.frame], "nano")], axis=1))
    out = IMG / "nano-styles.png"
    Image.fromarray(np.concatenate(rows, axis=0)).save(out, optimize=True)
    print(f"wrote {out} and the three curves")


if __name__ == "__main__":
    main()
