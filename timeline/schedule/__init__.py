"""Schedules: frame-accurate prompt timelines (versioned JSON), their imports, and the built-in schedules.

`Schedule.conditioning_at(frame)` is what the rollout asks every frame; a live session plays a `LiveTimeline`,
which also takes the switches made while it plays. See docs/schedule.md.
"""

from timeline.schedule.errors import ScheduleError, ScheduleImportWarning
from timeline.schedule.io import (FORMATS, builtin_names, load_builtin, load_schedule, parse_schedule_text,
                                schedule_from_data, schedule_from_value)
from timeline.schedule.live import LiveTimeline
from timeline.schedule.model import MAX_FRAMES, SCHEDULE_VERSION, PromptSpec, Schedule, Segment, Transition, mix

__all__ = ["FORMATS", "LiveTimeline", "MAX_FRAMES", "SCHEDULE_VERSION", "PromptSpec", "Schedule", "ScheduleError",
           "ScheduleImportWarning", "Segment", "Transition", "builtin_names", "load_builtin", "load_schedule",
           "mix", "parse_schedule_text", "schedule_from_data", "schedule_from_value"]
