"""Regenerate docs/img/studio.png: the studio page as a visitor sees it, from the current build.

Starts `python app.py` as a subprocess, opens /studio in headless Chromium, loads the eight-worlds timeline
(applied live), waits until the stream has played into its third world and the stats have a few seconds of
history, and saves a screenshot of the page. Its figures (FPS, latency) are what this machine gives then.

    python docs/make_studio_picture.py [--out FILE]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.harness import CHROMIUM, CHROMIUM_ARGS, studio  # noqa: E402

SIZE = "416x224"
SHOT_FRAME = 200   # the eight-worlds schedule is in its third world (sandstorm) from frame 160 to 239


def shoot(url: str, out: Path) -> dict:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{url}/studio?size={SIZE}")
            page.wait_for_function("window.alayaStudio?.lastStatus?.frame > 30", timeout=120_000)
            page.click("#tl-eight")      # the eight worlds, applied live: the stream restarts the schedule
            page.wait_for_function("window.alayaStudio.timeline.doc.length === 637", timeout=30_000)
            page.wait_for_function(f"""() => {{ const s = window.alayaStudio.lastStatus;
                return s && s.label === 'sandstorm' && s.frame >= {SHOT_FRAME}; }}""", timeout=120_000)
            page.mouse.move(0, 0)        # no hover highlight in the picture
            page.screenshot(path=str(out), full_page=True)
            status = page.evaluate("window.alayaStudio.lastStatus")
        finally:
            browser.close()
    Image.open(out).convert("RGB").quantize(256).save(out, optimize=True)   # a palette: a quarter of the bytes
    return status


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "img" / "studio.png")
    args = ap.parse_args()
    with studio(max_sessions=2) as st:
        status = shoot(st.url, args.out)
    print(f"wrote {args.out} at frame {status.get('frame')} ({status.get('label')}, {status.get('fps')} fps)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
