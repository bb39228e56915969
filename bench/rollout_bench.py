"""Long rollouts: the 637-frame eight-worlds schedule and a 10,000-frame loop, with FPS and resident memory
(RSS) at the start, middle and end, and a check that no frame index is skipped or repeated.

    python -m bench.rollout_bench [--size 160x96] [--loop-frames 10000] [--source engine|PATH]
                                  [--renderer reference] [--threads 1] [--json out.json]

The rollout is the one the server's session worker and `alaya-studio render` run (timeline.rollout.Rollout):
source → schedule → render session, chunk by chunk. "eight_worlds" plays the built-in schedule once (637
frames); "loop" plays the same schedule looping for --loop-frames frames. The source is the built-in engine on
autopilot (default) or a recorded sequence, started again at its end as the server's loop playback does (the
timeline restarts with it, so a sequence shorter than the schedule only ever shows the schedule's start).
Phases are thirds of the run; RSS is sampled at each phase's end. Growth is judged flat when the RSS at the
end is within max(16 MiB, 5 %) of the RSS after the first third (the first third takes allocator warm-up);
the exit status requires it of the loop only (one eight-worlds pass still meets styles for the first time).
"""

from __future__ import annotations

import os
import sys
import time

import torch

from bench.harness import machine, parser, write_json
from renderer import create_renderer
from timeline.rollout import Rollout
from timeline.schedule import Schedule, load_builtin
from studio.sources import open_source

FLAT_MIB, FLAT_FRACTION = 16, 0.05
os.environ.setdefault("EGL_PLATFORM", "surfaceless")   # read when the engine opens its GL context


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def run(name: str, schedule: Schedule, frames: int, args) -> dict:
    width, height = (int(v) for v in args.size.lower().split("x"))
    source = open_source([args.source], width=width, height=height, fps=30)
    session = create_renderer(args.renderer, **({"device": args.device} if args.device else {})) \
        .open_session(width, height, seed=0)
    rollout = Rollout(source, schedule, session)
    phase_ends = [frames // 3, 2 * frames // 3, frames]
    phases, indices, source_gaps, labels = [], [], 0, set()
    last_source_index = None
    t_phase, done = time.perf_counter(), 0
    rss_start = rss_mib()
    try:
        while done < frames:
            chunk = rollout.next_chunk()
            if not chunk and rollout.recorded:
                rollout.seek(0)  # loop playback, as the server does (the timeline restarts too)
                last_source_index = None
                continue
            for rf in chunk[: frames - done]:
                indices.append(rf.index)
                if last_source_index is not None and rf.gbuffer.index != last_source_index + 1:
                    source_gaps += 1
                last_source_index = rf.gbuffer.index
                labels.add(rf.conditioning.label())
                done += 1
                if done == phase_ends[len(phases)]:
                    now = time.perf_counter()
                    count = done - (phase_ends[len(phases) - 1] if phases else 0)
                    phases.append({"frames": count, "fps": count / (now - t_phase), "rss_mib": rss_mib()})
                    t_phase = now
                    if done == frames:
                        break
    finally:
        rollout.close()
    # every step is +1, or for a recorded source also the wrap to 0 at its end
    timeline_gaps = sum(1 for a, b in zip(indices, indices[1:]) if b != a + 1 and not (rollout.recorded and b == 0))
    growth = phases[-1]["rss_mib"] - phases[0]["rss_mib"]
    return {"rollout": name, "frames": done, "size": args.size, "renderer": args.renderer, "source": args.source,
            "fps": [round(p["fps"], 1) for p in phases], "rss_mib": [round(rss_start, 1)]
            + [round(p["rss_mib"], 1) for p in phases], "rss_growth_mib": round(growth, 1),
            "flat": growth <= max(FLAT_MIB, FLAT_FRACTION * phases[0]["rss_mib"]),
            "timeline_gaps": timeline_gaps, "source_gaps": source_gaps, "prompts_seen": len(labels),
            "first_index": indices[0], "last_index": indices[-1]}


def main() -> int:
    ap = parser(__doc__)
    ap.add_argument("--size", default="160x96", help="WxH of source and render (bigger: 416x224, 832x448)")
    ap.add_argument("--loop-frames", type=int, default=10_000)
    ap.add_argument("--rollouts", nargs="+", default=["eight_worlds", "loop"], choices=["eight_worlds", "loop"])
    ap.add_argument("--source", default="engine", help="'engine' (built-in, autopilot) or a G-buffer sequence path")
    ap.add_argument("--renderer", default="reference")
    ap.add_argument("--device", default=None, help="renderer device (default: the renderer's)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    args = ap.parse_args()
    if args.loop_frames < 3:
        ap.error("--loop-frames must be at least 3 (one per phase)")
    torch.set_num_threads(args.threads)

    eight = load_builtin("eight_worlds")
    plans = {"eight_worlds": (eight, eight.length),
             "loop": (Schedule.from_json({**eight.to_json(), "loop": True}), args.loop_frames)}
    print(f"{'rollout':>12} {'frames':>6} {'FPS start/mid/end':>20} {'RSS MiB at 0/start/mid/end':>28} "
          f"{'growth':>7} {'flat':>5} {'gaps':>5} {'prompts':>7}")
    results = []
    for name in args.rollouts:
        schedule, frames = plans[name]
        r = run(name, schedule, frames, args)
        results.append(r)
        print(f"{r['rollout']:>12} {r['frames']:>6} {'/'.join(f'{v:.0f}' for v in r['fps']):>20} "
              f"{'/'.join(f'{v:.0f}' for v in r['rss_mib']):>28} {r['rss_growth_mib']:>7.1f} "
              f"{'yes' if r['flat'] else 'NO':>5} {r['timeline_gaps'] + r['source_gaps']:>5} {r['prompts_seen']:>7}",
              flush=True)
    write_json(args.json, {"benchmark": "rollout", "threads": args.threads, **machine(), "results": results})
    # A single eight-worlds pass meets each style's effects for the first time (their buffers are allocated
    # then), so its memory may rise; flatness is required of the loop, which replays every style many times.
    ok = all((r["flat"] or r["rollout"] == "eight_worlds") and not r["timeline_gaps"] and not r["source_gaps"]
             for r in results)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
