"""One encode per codec for every peer of a session (webrtc.fanout), on real aiortc encoders and PyAV frames."""

from __future__ import annotations

import fractions
import threading

import av
import numpy as np

from gbuffer.formats.pictures import yuv420p
from webrtc.encoders import EncoderSettings
from webrtc.fanout import CACHE_FRAMES, FanOut, SharedEncoder


def frames(n: int, start: int = 0) -> list[av.VideoFrame]:
    out = []
    for i in range(start, start + n):
        rgb = np.full((32, 64, 3), (i * 9) % 256, np.uint8)
        frame = yuv420p(rgb)
        frame.pts, frame.time_base = i * 3000, fractions.Fraction(1, 90_000)
        out.append(frame)
    return out


def test_every_sender_gets_the_same_payloads_from_one_encode():
    shared = SharedEncoder("video/H264", EncoderSettings(fps=30))
    results: dict[int, list] = {i: [] for i in range(4)}

    def sender(i: int, todo: list[av.VideoFrame]) -> None:  # aiortc calls encode() from executor threads
        for frame in todo:
            results[i].append(shared.encode(frame, force_keyframe=False))
    todo = frames(10)
    threads = [threading.Thread(target=sender, args=(i, todo)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert shared.frames_encoded == 10
    assert all(results[i] == results[0] for i in range(4))
    assert all(payloads for payloads, _ in results[0])


def test_a_keyframe_asked_for_after_its_frame_went_out_is_the_next_frame():
    for mime in ("video/H264", "video/VP8"):
        shared = SharedEncoder(mime, EncoderSettings(fps=30))
        first, second, third, fourth = frames(4)
        shared.encode(first)
        shared.encode(second)
        cached = shared.encode(second, force_keyframe=True)  # already out: answered from the cache...
        assert cached is shared.encode(second) and cached[0]
        shared.encode(third)                                 # ...and the next frame is the keyframe
        assert third.pict_type == av.video.frame.PictureType.I, mime
        assert shared.encode(fourth)[0] and fourth.pict_type != av.video.frame.PictureType.I, mime
        assert shared.frames_encoded == 4


def test_a_sender_far_behind_skips_frames_instead_of_encoding_the_past():
    shared = SharedEncoder("video/H264", EncoderSettings(fps=30))
    old = frames(CACHE_FRAMES + 3)
    for frame in old:
        shared.encode(frame)
    assert shared.encode(old[0]) == ([], 0)  # out of the cache and older than the newest: skipped
    assert shared.frames_encoded == len(old)


def test_watchers_that_lag_skip_ahead_and_ask_for_a_keyframe():
    fanout = FanOut()
    fanout.encoders.settings = EncoderSettings(fps=30)
    track = fanout.track()
    encoder = fanout.encoders.install(type("Sender", (), {})(), "video/H264")
    encoder._keyframe_due = False
    for frame in frames(40):
        fanout.publish(frame)
    assert len(track._frames) <= 30 and encoder._keyframe_due
    track.stop()
    assert track not in fanout.tracks
