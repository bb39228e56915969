"""Quotas that hold under concurrency (issue 42, finding 6): with `--max-uploads 2`, six parallel PUTs gave five
200s, and with `--disk-quota-mb 20` four parallel 7.8 MB uploads left 26 MB stored, because space was checked
before streaming and ownership recorded after. Uploads now reserve their place and bytes first, then write, and
release on failure. Real sockets, uploads sent together from threads, a visitor streaming beside them."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import httpx
import numpy as np

from helpers.browser import ADMIN
from helpers.bystander import Bystander
from studio.server import Settings
from studio.server.access import DiskLimits
from studio.server.background import BackgroundServer
from studio.ui import mount_ui


def npy_bytes(frames: int) -> bytes:
    """A valid .npy window of `frames` 100x100 frames: 150 KB a frame."""
    buf = io.BytesIO()
    np.save(buf, np.random.default_rng(frames).integers(0, 256, (frames, 5, 100, 100, 3), dtype=np.uint8))
    return buf.getvalue()


def studio(tmp_path, limits: DiskLimits) -> BackgroundServer:
    server = BackgroundServer(Settings(port=0, admin_token=ADMIN, data_dir=tmp_path / "data", disk=limits))
    mount_ui(server.app, cache_dir=tmp_path / "cache", upload_limit=16 * 2**20, prewarm_thumbnails=False)
    return server


def put_together(url: str, auth: dict, bodies: dict[str, bytes]) -> dict[str, int]:
    """PUT every body at once, one thread each; → {name: status}."""
    def put(name: str) -> int:
        return httpx.put(f"{url}/api/ui/uploads/{name}", content=bodies[name], headers=auth, timeout=120).status_code

    with ThreadPoolExecutor(len(bodies)) as pool:
        return dict(zip(bodies, pool.map(put, bodies)))


def stored(tmp_path) -> list:
    return sorted((tmp_path / "data" / "uploads").glob("*.npy"))


def test_six_parallel_uploads_give_exactly_the_visitors_two_places(tmp_path):
    with studio(tmp_path, DiskLimits(max_uploads=2)) as server, Bystander(server) as victim:
        body = npy_bytes(8)
        statuses = put_together(server.url, victim.viewer.auth, {f"u{i}.npy": body for i in range(6)})
        assert sorted(statuses.values()) == [200, 200, 429, 429, 429, 429], statuses
        assert len(stored(tmp_path)) == 2
        victim.assert_unharmed()


def test_four_parallel_uploads_never_pass_the_disk_quota(tmp_path):
    quota = 20 * 2**20
    with studio(tmp_path, DiskLimits(disk_quota=quota)) as server, Bystander(server) as victim:
        body = npy_bytes(52)                                      # 7.8 MB each
        statuses = put_together(server.url, victim.viewer.auth, {f"big{i}.npy": body for i in range(4)})
        assert set(statuses.values()) <= {200, 507} and 1 <= list(statuses.values()).count(200) <= 2, statuses
        assert sum(p.stat().st_size for p in stored(tmp_path)) <= quota
        assert not list((tmp_path / "data" / "uploads").glob(".*"))    # no partial file left behind
        victim.assert_unharmed()


def test_the_same_name_twice_at_once_is_one_upload_and_a_409(tmp_path):
    with studio(tmp_path, DiskLimits()) as server:
        from helpers.loop import LoopThread
        from helpers.watch import start_owner

        loop = LoopThread()
        try:
            owner = loop.run(start_owner(server.url, size="64x32"))
            slow = npy_bytes(40)
            with ThreadPoolExecutor(2) as pool:
                first = pool.submit(httpx.put, f"{server.url}/api/ui/uploads/same.npy", content=slow,
                                    headers=owner.auth, timeout=120)
                second = pool.submit(httpx.put, f"{server.url}/api/ui/uploads/same.npy", content=slow,
                                     headers=owner.auth, timeout=120)
                codes = sorted([first.result().status_code, second.result().status_code])
            # together: one writes it and the other is told it is in flight; one after the other: both 200
            assert codes in ([200, 409], [200, 200]), codes
            assert [p.name for p in stored(tmp_path)] == ["same.npy"]
            loop.run(owner.close())
        finally:
            loop.close()
