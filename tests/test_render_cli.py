"""`alaya-studio render`: offline rollouts to MP4, checked by decoding the file, not by its existence."""

import json

import numpy as np
import pytest

from studio.cli import main
from media.video import read_mp4_frames


def segment_means(frames, starts, length, margin=20):
    """Mean RGB of the frames well inside each segment (skipping transitions)."""
    ends = list(starts[1:]) + [length]
    return [np.mean([frames[i].mean(axis=(0, 1)) for i in range(s + margin, e - 2)], axis=0)
            for s, e in zip(starts, ends)]


@pytest.mark.slow
def test_record_then_render_eight_worlds_changes_style_at_the_scheduled_frames(tmp_path):
    from timeline.schedule import load_schedule

    rec = tmp_path / "d.gbuf.zip"
    out = tmp_path / "d.mp4"
    metrics = tmp_path / "m.json"
    assert main(["record", "--engine", "demo", "--frames", "640", "--size", "128x64", "-o", str(rec)]) == 0
    assert main(["render", str(rec), "--schedule", "eight-worlds", "-o", str(out), "--metrics", str(metrics),
                 "--no-progress"]) == 0
    frames = read_mp4_frames(out)
    assert len(frames) == 640
    assert frames[0].shape == (64, 128, 3)

    schedule = load_schedule("eight-worlds")
    starts = schedule.boundaries()
    assert len(starts) == 8
    means = segment_means(frames, starts, 637)
    # each world looks different from the one before it
    for a, b in zip(means, means[1:]):
        assert np.abs(a - b).max() > 8, (a, b)
    # and the change happens at the boundary, not somewhere inside a segment
    for s in starts[1:]:
        end_of_transition = s + schedule.segment_at(s).transition.frames
        before = frames[s - 2].astype(float).mean(axis=(0, 1))
        after = frames[end_of_transition + 2].astype(float).mean(axis=(0, 1))
        assert np.abs(before - after).max() > 4
    m = json.loads(metrics.read_text())
    assert m["frames"] == 640 and m["fps"] > 0
    assert [s["frame"] for s in m["segments"]][:1] == [0]


def test_render_demo_with_a_prompt_and_side_by_side(tmp_path):
    out = tmp_path / "p.mp4"
    assert main(["render", "demo", "--prompt", "polar", "--frames", "12", "--size", "96x64", "--side-by-side",
                 "-o", str(out), "--no-progress"]) == 0
    frames = read_mp4_frames(out)
    assert len(frames) == 12
    assert frames[0].shape == (128, 288, 3)  # 3x2 tiles of 96x64
    assert not (tmp_path / "p.mp4.part").exists()


@pytest.mark.parametrize("backend", ["gl", "torch"])
def test_render_runs_either_reference_backend(tmp_path, backend):
    out = tmp_path / f"{backend}.mp4"
    assert main(["render", "demo", "--prompt", "volcano", "--frames", "6", "--size", "96x64", "-o", str(out),
                 "--renderer-option", f"backend={backend}", "--no-progress",
                 "--metrics", str(tmp_path / "m.json")]) == 0
    metrics = json.loads((tmp_path / "m.json").read_text())
    stages = {"gl": {"upload", "shade", "post", "readback"},
              "torch": {"decode", "lighting", "style", "post", "to_uint8"}}
    assert set(metrics["stage_ms_median"]) - {"total"} == stages[backend] and len(read_mp4_frames(out)) == 6


@pytest.mark.parametrize("argv, message", [
    (["render", "nope.npy", "--prompt", "polar", "-o", "{tmp}/x.mp4"], "nope.npy"),
    (["render", "demo", "--prompt", "polar", "--frames", "0", "-o", "{tmp}/x.mp4"], "--frames"),
    (["render", "demo", "--prompt", "polar", "--size", "10x0", "-o", "{tmp}/x.mp4"], "--size"),
    (["render", "demo", "--prompt", "polar", "--renderer", "magic", "-o", "{tmp}/x.mp4"], "magic"),
    (["render", "demo", "--schedule", "{tmp}/missing.json", "-o", "{tmp}/x.mp4"], "missing.json"),
    (["render", "demo", "--prompt", "polar", "--frames", "2", "-o", "{tmp}/no/such/dir/x.mp4"], "does not exist"),
    (["render", "demo", "--prompt", "   ", "--frames", "2", "-o", "{tmp}/x.mp4"], "empty"),
    (["render", "demo", "--prompt", "polar", "--renderer-option", "backend=vulkan", "-o", "{tmp}/x.mp4"],
     "--renderer-option: backend=vulkan is not one of auto, gl, torch"),
    (["render", "demo", "--prompt", "polar", "--renderer-option", "num_steps=2", "-o", "{tmp}/x.mp4"],
     "the reference renderer takes only backend=..., not 'num_steps'"),
])
def test_bad_render_arguments_give_one_line_errors(tmp_path, capsys, argv, message):
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and message in err
    assert "\n" not in err and "Traceback" not in err
