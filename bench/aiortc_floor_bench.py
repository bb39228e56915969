"""The glass-to-glass floor: a bare aiortc H.264 track from one process to a viewer, with nothing of the studio.

A sender process makes frames of the size asked at aiortc's own pace (`VideoStreamTrack.next_timestamp`: 30 fps;
a flat picture with the frame stamp, webrtc/stamp.py), timing each as it hands it to aiortc's default H.264
encoder; the viewer in this process decodes them and reads the
stamp back. Floor = the frame made → its picture decoded, on one machine and clock. bench/webrtc_bench.py measures
the studio the same way (its frames start when the render starts), so the studio's glass-to-glass over this floor
is what the studio adds: rendering, pacing and its encoder settings (issue 44's goal: ≤ 1.5× the floor).

    python -m bench.aiortc_floor_bench --size 416x224 --seconds 10
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import sys
import time

import numpy as np

from bench.harness import parser, size, write_json


def sender(conn, width: int, height: int) -> None:
    """The sending process: answers the offer it is sent, then streams until told to stop, and sends back when
    each frame index was made."""
    import av
    from aiortc import RTCPeerConnection, RTCSessionDescription, VideoStreamTrack

    from webrtc.stamp import stamp_index

    made: dict[int, float] = {}

    class Stamped(VideoStreamTrack):
        def __init__(self) -> None:
            super().__init__()
            self.index = 0
            self.picture = np.full((height, width, 3), 96, np.uint8)

        async def recv(self):
            pts, time_base = await self.next_timestamp()
            index = self.index
            self.index += 1
            frame = av.VideoFrame.from_ndarray(stamp_index(self.picture, index), format="rgb24")
            frame.pts, frame.time_base = pts, time_base
            made[index % 65536] = time.time()
            return frame

    async def main() -> None:
        pc = RTCPeerConnection()
        pc.addTrack(Stamped())
        offer = conn.recv()
        await pc.setRemoteDescription(RTCSessionDescription(offer, "offer"))
        await pc.setLocalDescription(await pc.createAnswer())
        conn.send(pc.localDescription.sdp)
        await asyncio.get_running_loop().run_in_executor(None, conn.recv)    # "stop"
        conn.send(made)
        await pc.close()

    asyncio.run(main())


async def measure(width: int, height: int, warmup: float, seconds: float) -> dict:
    from aiortc import RTCPeerConnection, RTCRtpSender, RTCSessionDescription
    from aiortc.mediastreams import MediaStreamError

    from gbuffer.formats.pictures import rgb24
    from webrtc.stamp import read_stamp

    ours, theirs = multiprocessing.Pipe()
    process = multiprocessing.get_context("spawn").Process(target=sender, args=(theirs, width, height))
    process.start()
    pc = RTCPeerConnection()
    transceiver = pc.addTransceiver("video", direction="recvonly")
    transceiver.setCodecPreferences([c for c in RTCRtpSender.getCapabilities("video").codecs
                                     if c.mimeType == "video/H264"])
    decoded: list[tuple[int | None, float]] = []

    async def read(track) -> None:
        while True:
            try:
                frame = await track.recv()
            except MediaStreamError:
                return
            decoded.append((read_stamp(rgb24(frame)), time.time()))

    pc.on("track", lambda track: asyncio.get_running_loop().create_task(read(track)))
    await pc.setLocalDescription(await pc.createOffer())
    loop = asyncio.get_running_loop()
    ours.send(pc.localDescription.sdp)
    answer = await loop.run_in_executor(None, ours.recv)
    await pc.setRemoteDescription(RTCSessionDescription(answer, "answer"))
    await asyncio.sleep(warmup)
    t0 = time.time()
    await asyncio.sleep(seconds)
    ours.send("stop")
    made = await loop.run_in_executor(None, ours.recv)
    await pc.close()
    process.join(10)
    window = [(stamp, at) for stamp, at in decoded if at >= t0 and stamp is not None and stamp in made]
    latency = [(at - made[stamp]) * 1e3 for stamp, at in window]
    return {"size": f"{width}x{height}", "target_fps": 30.0, "frames": len(window),
            "fps": round(len(window) / seconds, 2),
            "floor_p50_ms": round(float(np.percentile(latency, 50)), 1) if latency else None,
            "floor_p95_ms": round(float(np.percentile(latency, 95)), 1) if latency else None}


def main() -> int:
    ap = parser(__doc__, full_help=True)
    ap.add_argument("--size", type=size, default=(416, 224))
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    args = ap.parse_args()
    result = asyncio.run(measure(*args.size, args.warmup, args.seconds))
    print(json.dumps(result))
    write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
