"""Takes: record what a live session played (recorder.py), keep the room to finish them (reserve.py), list and
open them (store.py). A take is re-rendered by `alaya-studio render TAKE` and replayed live as source take:ID."""

from studio.takes.recorder import TakeError, TakeInfo, TakeRecorder, schedule_as_played
from studio.takes.store import TAKE_PREFIX, Take, TakeStarter, TakeStore, TakeSummary, is_take, open_take

__all__ = ["TAKE_PREFIX", "Take", "TakeError", "TakeInfo", "TakeRecorder", "TakeStarter", "TakeStore", "TakeSummary",
           "is_take", "open_take", "schedule_as_played"]
