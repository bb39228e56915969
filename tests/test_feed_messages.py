"""The studio's text messages to an engine as models (gbuffer/feed/messages.py): each kind parses to its model,
the data channel's messages stay dicts, and a malformed one is one line naming what is wrong."""

from __future__ import annotations

import pytest

from gbuffer.feed.messages import EngineInput, SessionEvent, Welcome, parse_studio_text
from gbuffer.feed.protocol import FeedError


def test_each_feed_message_parses_to_its_model_and_round_trips():
    welcome = Welcome(protocol=2, source="feed:kart", max_fps=60, max_pixels=2_073_600, session_id="abc")
    assert parse_studio_text(welcome.text()) == welcome
    assert "owner_key" not in welcome.wire()                      # what a message lacks is left out, not null
    driven = EngineInput(steer=-0.5, throttle=1.0, brake=0.0, reset=False, session_id="abc")
    assert parse_studio_text(driven.text()) == driven
    event = SessionEvent(event="session_ended", session_id="abc")
    assert parse_studio_text(event.text()) == event
    assert parse_studio_text('{"type": "ack", "request": "preset"}') == {"type": "ack", "request": "preset"}


@pytest.mark.parametrize("text, line", [
    ("{not json", "the studio sent text that is not JSON"),
    ("[1, 2]", "the studio sent a JSON list, not an object"),
    ('{"type": "input", "steer": "left", "throttle": 1, "brake": 0, "reset": false}',
     "the studio's input message: steer: Input should be a valid number"),
    ('{"type": "event", "event": "session_paused"}', "the studio's event message: event: Input should be"),
    ('{"type": "welcome", "protocol": 1}', "the studio's welcome message: source: Field required"),
])
def test_a_malformed_studio_message_is_one_line(text, line):
    with pytest.raises(FeedError) as refused:
        parse_studio_text(text)
    assert line in str(refused.value) and "\n" not in str(refused.value)
