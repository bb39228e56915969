"""What each client message does to a live session: one small command per message type, in one table.

A command has up to two halves. Its check runs at once on the event loop, where the front door handed the
message in (studio/server/control.py): it refuses a bad message with its UserError, changing nothing, and answers
what needs no rollout (stats, a ping, the stamp). What touches the rollout or the timeline it returns as a `Step`:
a function of this module and the data the check prepared, which the session's worker runs between chunks. The
worker is the timeline's only writer, so no step is written anywhere else.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

from pydantic import BaseModel

from gbuffer.input import PlayerInput
from gbuffer.source import LiveSource
from prompt_presets import Conditioning, PromptSpec, get_preset, resolve_prompt
from prompt_presets.matching import matching_ready
from timeline.rollout import Rollout
from timeline.schedule import Schedule, schedule_from_value
from timeline.schedule.live import LiveTimeline
from timeline.tempo import Tempo, TempoError
from studio.server.take_control import TakeControl
from studio.server.timed_switches import TimedSwitches
from studio.server.worker import SessionWorker
from webrtc import protocol as dc
from webrtc.stamp import stamp_fits

Answer = dc.ServerMessage


@dataclass
class SessionParts:
    """What the commands act on: the session's own parts, handed over by the session when it is made."""

    rollout: Rollout
    timeline: LiveTimeline
    worker: SessionWorker
    takes: TakeControl
    source_name: str
    width: int
    height: int
    stats: Callable[[], dc.StatsReport]     # the session's stats report, made on the event loop
    # the timeline frame the session sends at a wall-clock time (None before its first frame went out)
    frame_at: Callable[[float], float | None]
    keys: dc.KeyState = field(default_factory=dc.KeyState)   # the arrow keys held down now (a page's)
    tempo: Tempo | None = None              # replaced whole on the event loop; steps read it
    screen_delay_s: float = 0.0             # sent → the owner's screen (a `screen_delay` message), 0 until told
    timed: TimedSwitches = field(default_factory=TimedSwitches)   # switches kept on their beat or time

    def place_timed_again(self) -> list[int]:
        """Before each chunk, on the worker: timed switches still to render, placed from the newest frame sent."""
        return self.timed.again(self.rollout.frame_index, self.timeline, self.frame_at, self.screen_delay_s)

    def require_recorded(self, what: str) -> None:
        if not self.rollout.recorded:
            raise dc.ProtocolError(f"'{what}' needs a recorded source; {self.source_name} is live", what)

    def require_live(self, what: str) -> LiveSource:
        source = self.rollout.source
        if not isinstance(source, LiveSource):
            raise dc.ProtocolError(f"'{what}' needs a live source; {self.source_name} is recorded", what)
        return source


@dataclass(frozen=True)
class Step:
    """The part of a command the worker runs: `run(parts, message, data)` → its answer (None: no answer)."""

    run: Callable[[SessionParts, Any, Any], Answer | None]
    data: Any = None
    after_matcher: bool = False     # free text: the preset matcher must be loaded first (the page hears why)
    label: str | None = None        # what it switches to, for the page's `preparing` line
    # what plays, changed: applied in the order asked, so one asked while a free-text switch waits for the
    # matcher waits behind it (else the free text, landing later, would undo a newer tile click)
    in_order: bool = False


Check = Callable[[SessionParts, Any], "Step | Answer | None"]
COMMANDS: dict[str, Check] = {}         # client message type → its check


def command(*kinds: str):
    def register(check: Check) -> Check:
        for kind in kinds:
            if kind in COMMANDS:
                raise TypeError(f"two commands for {kind!r} messages")
            COMMANDS[kind] = check
        return check
    return register


# ---- prompts and the timeline --------------------------------------------------------------------------------

MAX_AHEAD_S = 3600.0          # a switch timed (`at`) further ahead is a clock mistake, not a plan
LATE_S = 1.0                  # one timed this long ago is too: an OSC sender with a wrong clock


@command("prompt", "preset", "blend")
def switch_now(parts: SessionParts, msg) -> Step:
    conditioning = conditioning_from_message(msg)      # an unknown preset is refused here
    free_text = any(p.preset is None for p in conditioning.prompts)
    timed = msg.quantize is not None or msg.at is not None
    if msg.quantize is not None and parts.tempo is None:
        raise dc.ProtocolError(f"quantize {msg.quantize!r} needs the session's tempo first (a 'tempo' message)",
                               msg.type)
    if msg.at is not None and not -LATE_S <= msg.at - time.time() <= MAX_AHEAD_S:
        raise dc.ProtocolError(f"at: {msg.at:.3f} is not within {LATE_S:g} s before and {MAX_AHEAD_S:g} s after "
                               "the studio's clock now", msg.type)
    return Step(_switch_timed if timed else _switch_now, (conditioning, parts.tempo),
                after_matcher=free_text and not matching_ready(), label=conditioning.label(), in_order=True)


def _switch_now(parts: SessionParts, msg, data: tuple[Conditioning, Tempo | None]) -> Answer:
    conditioning = data[0]
    frame = parts.rollout.frame_index
    done = parts.timeline.switch(frame, conditioning, msg.transition)
    return dc.Ack(request=msg.type, frame=frame, transition=msg.transition, label=conditioning.label(),
                  whole_loop=done.whole_loop, until=done.until)


def _switch_timed(parts: SessionParts, msg, data: tuple[Conditioning, Tempo | None]) -> Answer:
    """On the frame the session will send at `at` (default now), moved on to the next beat or bar when asked, less
    the owner's screen delay: placed on the timeline ahead of time, so the new style reaches the screen on the beat,
    and placed again before each chunk as the moment nears (studio/server/timed_switches.py).
    A time whose frame is already rendered moves on to the next beat (or, unquantized, to the next frame not
    rendered)."""
    conditioning, tempo = data
    when = msg.at if msg.at is not None else time.time()
    first = parts.rollout.frame_index            # the next frame not rendered yet
    lead = parts.screen_delay_s                  # sent that much early, it is on screen at `when`
    frame = None
    if msg.quantize is not None and tempo is not None:
        for _ in range(1000):                    # beats until one whose frame is still to render
            when = tempo.next(when, msg.quantize)
            frame = parts.frame_at(when - lead)
            if frame is None or frame >= first:
                break
            when += 1e-3
    else:
        frame = parts.frame_at(when - lead)
    at = first if frame is None else max(first, round(frame))
    parts.timeline.patch(at, conditioning, msg.transition)
    parts.timed.placed(when, parts.timeline, at)   # placed again before each chunk until rendered
    return dc.Ack(request=msg.type, frame=at, transition=msg.transition, label=conditioning.label())


# ---- the show's clock ------------------------------------------------------------------------------------------

@command("tempo")
def tempo(parts: SessionParts, msg) -> Answer:
    parts.tempo = None if msg.bpm is None else Tempo(msg.bpm, time.time(), msg.beats_per_bar)
    return dc.Ack(request="tempo", on=parts.tempo is not None)


@command("screen_delay")
def screen_delay(parts: SessionParts, msg) -> None:
    parts.screen_delay_s = msg.ms / 1e3
    return None


@command("beat")
def beat(parts: SessionParts, msg) -> Answer:
    if parts.tempo is None:
        raise TempoError("a beat needs the session's tempo first (a 'tempo' message with its bpm)", "beat")
    parts.tempo = parts.tempo.beat(time.time(), msg.downbeat)
    return dc.Ack(request="beat")


@command("switch")
def switch_at(parts: SessionParts, msg) -> Step:
    return Step(_switch_at, conditioning_from_specs(msg.prompts, msg.mode), in_order=True)


def _switch_at(parts: SessionParts, msg, conditioning: Conditioning) -> Answer:
    parts.timeline.patch(msg.frame, conditioning, msg.transition)
    return dc.Ack(request="switch", frame=msg.frame, transition=msg.transition, label=conditioning.label())


@command("schedule")
def replace_schedule(parts: SessionParts, msg) -> Step:
    if (msg.schedule is None) == (msg.text is None):
        raise dc.ProtocolError("give exactly one of 'schedule' (JSON) or 'text'", "schedule message")
    # parsed by the worker, not here: a Parseq export evaluates frame by frame, which on the event loop would
    # freeze every session's video and signalling
    return Step(_replace_schedule, in_order=True)


def _replace_schedule(parts: SessionParts, msg, _) -> Answer:
    schedule = schedule_from_message(msg)
    frame = parts.rollout.frame_index
    parts.timeline.replace(schedule, now=frame if msg.from_now else None)
    return dc.Ack(request="schedule", frame=frame)


# ---- playback ----------------------------------------------------------------------------------------------

@command("play", "pause")
def play_pause(parts: SessionParts, msg) -> Step:
    return Step(lambda p, m, _: p.worker.set_paused(m.type == "pause"))


@command("seek")
def seek(parts: SessionParts, msg) -> Step:
    parts.require_recorded("seek")
    return Step(lambda p, m, _: p.worker.seek(m.frame))


@command("loop")
def loop(parts: SessionParts, msg) -> Step:
    return Step(_loop)


def _loop(parts: SessionParts, msg, _) -> Answer:
    parts.worker.set_loop(msg.on)        # it sets the timeline's loop length: the worker's to write
    return dc.Ack(request="loop", on=msg.on)


@command("stamp")
def stamp(parts: SessionParts, msg) -> Answer:
    if msg.on and not stamp_fits(parts.width, parts.height):
        raise dc.ProtocolError(f"{parts.width}x{parts.height} is too small for the frame stamp", "stamp")
    # read per frame as the worker hands frames over: from the next one, which may be one rendered already
    parts.worker.handover.stamp = msg.on
    return dc.Ack(request="stamp", on=msg.on)


@command("take")
def take(parts: SessionParts, msg) -> Answer:
    return parts.takes.start() if msg.action == "start" else parts.takes.stop()


# ---- driving a live source ---------------------------------------------------------------------------------

@command("key")
def key(parts: SessionParts, msg) -> Step:
    parts.require_live("key")
    return Step(_drive, parts.keys.press(msg.key, msg.down))


@command("input")
def analogue_input(parts: SessionParts, msg) -> Step:
    parts.require_live("input")
    return Step(_drive, PlayerInput(msg.steer, msg.throttle, msg.brake, msg.reset))


def _drive(parts: SessionParts, msg, player_input: PlayerInput) -> None:
    source = parts.require_live(msg.type)
    if hasattr(source, "autopilot"):
        source.autopilot = False  # a driver took the wheel
    source.apply_input(player_input)


@command("autopilot")
def autopilot(parts: SessionParts, msg) -> Step:
    parts.require_live("autopilot")
    return Step(_autopilot)


def _autopilot(parts: SessionParts, msg, _) -> Answer:
    source = parts.require_live("autopilot")
    if not hasattr(source, "autopilot"):
        # an engine on the feed drives itself when nobody does: the page's release (Esc) has already let go of
        # every key, so there is nothing to refuse; the ack says no autopilot took over
        if msg.on:
            return dc.Ack(request="autopilot", on=False)
        raise dc.ProtocolError(f"{parts.source_name} has no autopilot to turn off", "autopilot")
    source.autopilot = msg.on
    return dc.Ack(request="autopilot", on=msg.on)


# ---- questions: answered at once, never queued --------------------------------------------------------------

@command("stats")
def stats(parts: SessionParts, msg) -> Answer:
    return parts.stats()


@command("ping")
def ping(parts: SessionParts, msg) -> Answer:
    return dc.Pong.answer(msg.t)


# ---- messages → conditioning and schedules -----------------------------------------------------------------

def conditioning_from_specs(prompts: list[PromptSpec], mode: str = "linear") -> Conditioning:
    return Conditioning(tuple(p.resolve() for p in prompts), mode)  # type: ignore[arg-type]


def conditioning_from_message(msg: BaseModel) -> Conditioning:
    """A prompt / preset / blend message → Conditioning (unknown presets raise PresetError)."""
    if isinstance(msg, dc.SetPrompt):
        return Conditioning((resolve_prompt(msg.text),))
    if isinstance(msg, dc.SetPreset):
        return Conditioning((resolve_prompt(get_preset(msg.name).name),))
    assert isinstance(msg, dc.SetBlend)
    return conditioning_from_specs(msg.prompts, msg.mode)


def schedule_from_message(msg: dc.SetSchedule) -> Schedule:
    value = msg.schedule if msg.schedule is not None else msg.text
    assert value is not None         # the check (replace_schedule) refused a message with neither
    return schedule_from_value(value, "schedule")
