"""Regenerate docs/img/eight_worlds.png: one real engine frame rendered in each of the report's eight styles,
plus its G-buffer channels, by the reference renderer. `python docs/make_readme_picture.py`."""

from __future__ import annotations

import sys
from itertools import islice
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gbuffer.engine import EngineSource  # noqa: E402
from gbuffer.frame import CHANNELS  # noqa: E402
from prompt_presets import REPORT_STYLES, conditioning_for  # noqa: E402
from renderer import create_renderer  # noqa: E402

W, H = 416, 224


def label(img: np.ndarray, text: str) -> np.ndarray:
    canvas = Image.fromarray(img)
    ImageDraw.Draw(canvas).text((6, 4), text, fill=(255, 255, 255), stroke_width=2, stroke_fill=(0, 0, 0))
    return np.asarray(canvas)


def main() -> None:
    with EngineSource(width=W, height=H, fps=30, seed=0, autopilot=True) as engine:
        frame = list(islice(engine, 150))[-1]  # a few seconds into the lap
    session = create_renderer("reference").open_session(W, H, seed=0)
    tiles = [label(session.render([frame], [conditioning_for(name)]).rgb[0], name) for name in REPORT_STYLES]
    tiles += [label(frame.channel(c), c) for c in CHANNELS[:4]]
    rows = [np.concatenate(tiles[i:i + 4], axis=1) for i in range(0, 12, 4)]
    out = Path(__file__).parent / "img" / "eight_worlds.png"
    Image.fromarray(np.concatenate(rows, axis=0)).save(out, optimize=True)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
