"""Parseq (sd-parseq) export documents as Parseq writes them, for import tests and fuzzing."""

from __future__ import annotations


def parseq_prompt(name, positive, start, end, fade_in=0, fade_out=0, kind="linear", negative=""):
    return {"name": name, "positive": positive, "negative": negative, "allFrames": False, "from": start, "to": end,
            "overlap": {"inFrames": fade_in, "outFrames": fade_out, "type": kind, "custom": "prompt_weight_1"}}


def parseq_export(prompt_list, last_frame=199, output_fps=20, common=""):
    """A v2 export as Parseq (sd-parseq) writes it, trimmed of rendered_frames."""
    return {
        "meta": {"generated_by": "sd_parseq", "version": "0.1.94", "generated_at": "Mon, 11 Mar 2024 10:00:00 GMT",
                 "doc_id": "doc-2f9c", "version_id": "version-51aa"},
        "options": {"input_fps": 30, "bpm": 120, "output_fps": output_fps, "cc_window_width": 0,
                    "cc_window_slide_rate": 1, "cc_use_input": False},
        "managedFields": ["seed", "strength"],
        "displayedFields": ["seed", "strength"],
        "keyframes": [{"frame": 0, "seed": 303, "strength": 0.65, "strength_i": "C"},
                      {"frame": last_frame, "seed": 303, "strength": 0.65}],
        "timeSeries": [],
        "keyframeLock": "frames",
        "prompts": {"format": "v2", "enabled": True,
                    "commonPrompt": {"name": "Common", "positive": common, "negative": "", "allFrames": True,
                                     "from": 0, "to": last_frame,
                                     "overlap": {"inFrames": 0, "outFrames": 0, "type": "none", "custom": ""}},
                    "commonPromptPos": "append",
                    "promptList": prompt_list},
    }
