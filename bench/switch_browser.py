"""`switch_bench --browser`: switch → screen measured by the studio page itself, in Chromium.

The page times every style switch it sends (studio/ui/static/switches.js): from the click leaving the page to the
expected display time of the first stamped picture whose status names another conditioning than the one playing
when it was sent (requestVideoFrameCallback, the stamp read back from that picture: latency.js). This drives that
page: "measure" on, then `switches` clicks on two preset tiles in turn, each at a random moment (0.6–1.2 s apart),
and reads the page's own log. Glass-to-glass comes from the same page over the same run (its g2gLog).

With `bpm`, the page sends the tempo (the studio's downbeat: that moment, on the page's clock) and sets quantize
to "the beat", so each click's switch is placed on the frame the studio sends on the next beat, less the screen
delay the page reports (latency.js, measured from the stamp); the beat error is how far each landing's display time
is from the nearest beat, in frame periods (late is positive).
"""

from __future__ import annotations

import random
import time

import numpy as np

from bench.browser_latency_bench import wait_for
from bench.harness import studio_page
from bench.switch_figures import figures

PRESETS = ("volcano", "polar")
NOW = "performance.timeOrigin + performance.now()"


def measure_in_chromium(url: str, size: str, switches: int, fps: float, warmup: float, seed: int,
                        bpm: float | None = None, transition: int = 0, lead_on: bool = True) -> dict:
    rng = random.Random(seed)
    with studio_page(f"{url}/?size={size}") as page:
        wait_for(page, "window.alayaStudio && window.alayaStudio.lastStatus", 120, "the first frame")
        page.fill("#alaya-transition", str(transition))
        page.check("#alaya-measure")
        wait_for(page, "(window.alayaStudio.latencyNow || {}).samples > 5", 60, "stamped frames")
        time.sleep(warmup)
        anchor, lead = None, None
        if bpm is not None:
            if not lead_on:              # the control: the page never tells the studio its screen delay
                page.evaluate("() => { window.alayaStudio.reportScreenDelay = () => {}; }")
            page.select_option("#alaya-quantize", "beat")
            if lead_on:
                wait_for(page, "window.alayaStudio.reportedDelay !== null", 30, "the page's screen delay sent")
                lead = page.evaluate("window.alayaStudio.reportedDelay")
            anchor = page.evaluate(f"() => {{ const t = {NOW}; "
                                   f"window.alayaStudio.send({{type: 'tempo', bpm: {bpm}}}); return t; }}")
        page.evaluate("() => { const s = window.alayaStudio; s.g2gLog = []; s.switchLog = []; }")
        for i in range(switches):
            time.sleep(rng.uniform(0.6, 1.2))
            page.click(f".alaya-tile[data-preset={PRESETS[i % 2]}]")
            wait_for(page, f"window.alayaStudio.switchLog.filter((s) => s.screen).length > {i}", 30,
                     f"switch {i + 1} on screen")
        landed = page.evaluate("window.alayaStudio.switchLog.filter((s) => s.screen)")
        g2g = np.asarray(page.evaluate("window.alayaStudio.g2gLog.slice()"), float)
    ms = [s["ms"] for s in landed]
    errors = []
    if anchor is not None and bpm is not None:
        period = 60e3 / bpm
        errors = [(s["at"] - anchor - round((s["at"] - anchor) / period) * period) * fps / 1e3 for s in landed]
    return {"size": size, "switches": len(ms), "target_fps": fps, "transition": transition,
            **({"screen_delay_ms": lead} if lead is not None else {}), **figures(ms, g2g, fps, bpm, errors)}
