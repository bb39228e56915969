"""`alaya-studio schedule import|validate|show` and the built-in eight-worlds schedule."""

from __future__ import annotations

import json
import re

import pytest

from prompt_presets import REPORT_STYLES
from studio.cli import main
from timeline.schedule import Schedule, ScheduleError, builtin_names, load_builtin, load_schedule
from timeline.schedule.io import BUILTIN_DIR

FLASH_CHUNK = 16          # frames per flash chunk; the report switches style every five chunks


# ---- the report's demo ---------------------------------------------------------------------------------------

def test_eight_worlds_reproduces_the_reports_demo():
    s = load_builtin("eight_worlds")
    assert s.length == 637 and not s.loop
    every = 5 * FLASH_CHUNK                                               # 80 frames
    assert s.boundaries() == tuple(range(0, 8 * every, every))
    assert 7 * every < s.length <= 8 * every                              # all eight worlds fit in 637 frames
    assert [seg.prompts[0].preset for seg in s.segments] == list(REPORT_STYLES)
    assert all(seg.transition.kind == "linear" and seg.transition.frames == FLASH_CHUNK for seg in s.segments[1:])
    assert s.conditioning_at(636).dominant.preset == "infrared"


def test_eight_worlds_by_any_name():
    by_path = load_schedule(str(BUILTIN_DIR / "eight_worlds.json"))
    assert load_schedule("eight-worlds") == load_schedule("eight_worlds") == load_builtin("Eight Worlds") == by_path
    assert "eight_worlds" in builtin_names()
    with pytest.raises(ScheduleError, match="unknown built-in schedule 'nine-worlds'; built-ins: eight_worlds"):
        load_builtin("nine-worlds")


# ---- CLI -----------------------------------------------------------------------------------------------------

def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["schedule", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_validate_prints_segments_and_length(capsys):
    assert run(capsys, "validate", "eight-worlds") == (0, "ok: 8 segments, 637 frames\n", "")


def test_import_keyframes_writes_a_schedule_that_validates(tmp_path, capsys):
    src = tmp_path / "prompts.txt"
    src.write_text('"0": "cyberpunk",\n"60": "a glass city --neg blurry",\n')
    out = tmp_path / "show.json"
    code, stdout, stderr = run(capsys, "import", str(src), "-o", str(out), "--blend", "--fps", "24",
                               "--length", "120")
    assert code == 0
    assert stdout == f"wrote {out}: 2 segments, 120 frames\n"
    assert stderr.startswith("warning: ") and "negative prompt (--neg) at keyframe 60 was dropped" in stderr
    s = Schedule.from_json(out.read_text())
    assert (s.fps, s.length, s.boundaries()) == (24, 120, (0, 1))
    assert s.segments[1].transition.frames == 60
    assert run(capsys, "validate", str(out))[:2] == (0, "ok: 2 segments, 120 frames\n")


def test_import_prints_json_without_output(tmp_path, capsys):
    src = tmp_path / "k.json"
    src.write_text('{"0": "polar", "30": "volcano"}')
    code, stdout, _ = run(capsys, "import", str(src), "--format", "keyframes")
    assert code == 0
    assert json.loads(stdout)["segments"][1] == {"start": 30, "prompts": [{"preset": "volcano", "weight": 1.0}],
                                                 "mode": "linear",
                                                 "transition": {"kind": "cut", "frames": 0, "easing": "linear"}}


def test_show_prints_frame_segment_and_weights(capsys):
    code, stdout, _ = run(capsys, "show", "eight-worlds", "--frames", "79:97:8,636")
    assert code == 0
    assert stdout.splitlines() == [
        "  frame  segment  mode    prompts",
        "     79        0  linear  cyberpunk 1.0000",
        "     87        1  linear  cyberpunk 0.5000 + volcano 0.5000",
        "     95        1  linear  volcano 1.0000",
        "    636        7  linear  infrared 1.0000",
    ]


def test_show_defaults_to_each_switch(capsys):
    _, stdout, _ = run(capsys, "show", "eight-worlds")
    frames = [int(line.split()[0]) for line in stdout.splitlines()[1:]]
    assert frames == sorted({*range(0, 640, 80), *range(95, 640, 80), 636})


@pytest.mark.parametrize("argv, message", [
    (["validate", "no/such/file.json"], r"^error: no/such/file\.json: no such file or built-in schedule"),
    (["show", "eight-worlds", "--frames", "1:x"], r"^error: --frames: '1:x' is not a frame or a:b:step"),
    (["show", "eight-worlds", "--frames", "0:10:0"], r"^error: --frames: step must be at least 1"),
    (["show", "eight-worlds", "--frames", "0:100000"], r"^error: --frames: selects more than 10000 frames"),
    (["show", "eight-worlds", "--frames", "5:5"], r"^error: --frames: '5:5' selects no frames"),
])
def test_bad_cli_input_is_one_line_and_exit_2(capsys, argv, message):
    code, _, stderr = run(capsys, *argv)
    assert code == 2
    assert len(stderr.splitlines()) == 1
    assert re.match(message, stderr), stderr


def test_bad_files_are_one_line_errors_with_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"version": 1, "segments": [{"start": 0, "prompt": "polar"},
                                                          {"start": 0, "prompt": "volcano"}]}))
    binary = tmp_path / "clip.mp4"
    binary.write_bytes(b"\x00\x00\x00\x18ftypmp42\xff\xfe")
    keyframes = tmp_path / "k.txt"
    keyframes.write_text('"0": "polar"')
    cases = [
        (["validate", str(bad)], f"error: {bad}: segments[1].start: 0 is not after segments[0].start (0); "
                                 "segments must be sorted with distinct starts"),
        (["validate", str(tmp_path)], f"error: {tmp_path}: is a folder, not a schedule file"),
        (["validate", str(binary)], f"error: {binary}: not a text file (UTF-8 expected)"),
        (["import", str(keyframes), "--length", "0"], "error: --length: must be a positive number of frames, got 0"),
        (["import", str(keyframes), "-o", str(tmp_path / "missing" / "o.json")],
         f"error: {tmp_path / 'missing' / 'o.json'}: cannot write: No such file or directory"),
    ]
    for argv, message in cases:
        code, _, stderr = run(capsys, *argv)
        assert (code, stderr) == (2, message + "\n"), argv


def test_schedule_without_an_action_shows_usage(capsys):
    code, _, stderr = run(capsys)
    assert code == 2 and "import" in stderr and "validate" in stderr and "show" in stderr
