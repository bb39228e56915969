"""Who owns which upload and take outlives a restart of the studio (issue 26, studio/server/owners.py): a real
server is stopped and started again on the same data dir, and the visitor who presents its old key finds its
upload and take again while nobody else does; an index that cannot be read makes them the admin's only."""

from __future__ import annotations

import io
import json
import logging

import httpx
import numpy as np

from gbuffer.formats import write_npy_windows
from helpers.browser import AS_ADMIN, studio_with_ui
from helpers.loop import LoopThread
from helpers.watch import start_owner
from renderer.reference.synthetic import synthetic_gbuffer
from studio.server.owners import INDEX_NAME, key_digest


def npy_bytes(frames: int = 2) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.random.default_rng(1).integers(0, 256, (frames, 5, 16, 24, 3), dtype=np.uint8))
    return buf.getvalue()


def sources(studio, headers: dict) -> set[str]:
    return {s["id"] for s in httpx.get(f"{studio.url}/api/ui/sources", headers=headers, timeout=60).json()}


def record_upload_and_take(studio, loop) -> tuple[str, str]:
    """A visitor's session uploads one file and records one take; → (its owner key, the take's id)."""
    owner = loop.run(start_owner(studio.url, source="engine", size="64x32"))
    try:
        put = httpx.put(f"{studio.url}/api/ui/uploads/lap.npy", content=npy_bytes(), headers=owner.auth, timeout=60)
        assert put.status_code == 200, put.text
        take = f"{studio.url}/api/sessions/{owner.session_id}/take"
        mark = len(owner.messages)
        started = httpx.post(take, json={"action": "start"}, headers=owner.auth, timeout=60).json()
        # frames in the take, not only on the screen (frames already on their way when it started are not in it)
        loop.run(owner.wait_until(lambda: any(m.get("type") == "status" and m.get("take", {}).get("frames", 0) >= 3
                                              for m in owner.messages[mark:]), 120, "3 frames in the take"))
        assert httpx.post(take, json={"action": "stop"}, headers=owner.auth, timeout=60).status_code == 200
        loop.run(owner.wait_message("take", state="stopped", timeout=120))
        return owner.owner_key, started["take_id"]
    finally:
        loop.run(owner.close())


def test_a_visitor_finds_its_upload_and_take_after_a_restart_and_nobody_else_does(tmp_path, caplog):
    data = tmp_path / "data"
    write_npy_windows([synthetic_gbuffer(64, 32, i / 30, i) for i in range(8)], data / "seq")
    loop = LoopThread()
    try:
        with studio_with_ui(tmp_path / "cache", data_dir=data, connect_timeout_s=60) as studio:
            key, take_id = record_upload_and_take(studio, loop)
    finally:
        loop.close()
    index = data / INDEX_NAME
    assert key not in index.read_text()                                      # the file is no credential
    assert [v["key_sha256"] for v in json.loads(index.read_text())["visitors"]] == [key_digest(key)]
    mine = {"uploads/lap.npy", f"take:{take_id}"}
    owner, stranger = {"Authorization": f"Bearer {key}"}, {"Authorization": "Bearer made-up"}

    with studio_with_ui(tmp_path / "cache", data_dir=data) as studio:        # the same data dir, a new server
        assert mine <= sources(studio, owner) and mine <= sources(studio, AS_ADMIN)
        assert not mine & (sources(studio, {}) | sources(studio, stranger)) and "seq" in sources(studio, {})
        schedule = f"{studio.url}/api/ui/takes/{take_id}/schedule"
        assert httpx.get(schedule, headers=owner).status_code == 200 and httpx.get(schedule).status_code == 400
        again = httpx.put(f"{studio.url}/api/ui/uploads/lap.npy", content=npy_bytes(3), headers=owner, timeout=60)
        assert again.status_code == 200 and again.json()["frames"] == 3       # its own: replaced, not a 409

    index.write_text('{"version": 1, "visitors": [{"key_sha256": "not a digest"}]}')
    with caplog.at_level(logging.WARNING, "alaya.owners"), studio_with_ui(tmp_path / "cache", data_dir=data) as studio:
        assert not mine & (sources(studio, owner) | sources(studio, {}))     # no known owner: never public
        assert mine <= sources(studio, AS_ADMIN) and "seq" in sources(studio, {})
        taken = httpx.put(f"{studio.url}/api/ui/uploads/lap.npy", content=npy_bytes(), headers=owner, timeout=60)
        assert taken.status_code == 401                     # its key is unknown now: it is no visitor of this run
    warnings = [r.getMessage() for r in caplog.records if r.name == "alaya.owners"]
    assert len(warnings) == 1 and "cannot be used" in warnings[0] and str(data) not in warnings[0]
    assert (data / (INDEX_NAME + ".unreadable")).is_file() and (data / "uploads" / "lap.npy").is_file()
    assert (data / "takes" / take_id).is_dir()                                # nothing stored was lost


def test_the_index_names_files_only_inside_their_folders_and_a_freed_name_changes_hands(tmp_path, caplog):
    from studio.server.access import DiskLimits, Visitors
    from studio.server.owners import Folders

    folders = Folders(tmp_path / "uploads", tmp_path / "takes", tmp_path / INDEX_NAME)
    (tmp_path / "uploads").mkdir()
    (tmp_path / "uploads" / "a.npy").write_bytes(b"x")
    visitors = Visitors(None, DiskLimits(), lambda: folders)
    first, second = visitors.admit(None), visitors.admit(None)
    visitors.record(first, "uploads", tmp_path / "uploads" / "a.npy")
    visitors.record(second, "uploads", tmp_path / "uploads" / "a.npy")       # first deleted it; second uploaded
    assert visitors.owner_of(tmp_path / "uploads" / "a.npy") is second and not first.uploads
    restarted = Visitors(None, DiskLimits(), lambda: folders)
    assert restarted.find(second.key).uploads == [(tmp_path / "uploads" / "a.npy").resolve()]
    assert restarted.find(first.key) is None                                 # it holds nothing: not kept

    digest = "0" * 64
    (tmp_path / "outside.npy").write_bytes(b"x")
    folders.index.write_text(json.dumps({"version": 1, "visitors": [{"key_sha256": digest,
                                                                     "uploads": ["../outside.npy"]}]}))
    with caplog.at_level(logging.WARNING, "alaya.owners"):
        tampered = Visitors(None, DiskLimits(), lambda: folders)
        assert tampered.known == [] and not tampered.may_use(None, tmp_path / "uploads" / "a.npy")
    assert "not a name in the uploads folder" in caplog.text and tampered.may_use(None, tmp_path / "seq.npy")
