"""Issue 42's doors: what the studio's public routes give away (finding 11: Gradio's analytics stay off)."""
from __future__ import annotations

from fastapi.testclient import TestClient

from studio.server import Settings, create_app
from studio.ui import mount_ui


def test_gradio_config_says_analytics_are_off(tmp_path):
    """Finding 11: the studio must phone nowhere, so the page's config must not turn Gradio's analytics on."""
    app = create_app(Settings(data_dir=tmp_path, width=64, height=48, admin_token="a" * 32), player_at_root=False)
    with TestClient(mount_ui(app)) as client:
        config = client.get("/studio/config")
        assert config.status_code == 200
        assert config.json()["analytics_enabled"] is False


def test_gradio_s_own_upload_and_file_routes_are_closed(tmp_path):
    """Finding 4: `gradio_api/upload` stored a stranger's file outside the quota and answered its absolute path;
    `gradio_api/file=` served it back. Only the page's own files pass the mount now, each other door is a 404."""
    app = create_app(Settings(data_dir=tmp_path, width=64, height=48, admin_token="a" * 32), player_at_root=False)
    with TestClient(mount_ui(app, cache_dir=tmp_path / "cache", prewarm_thumbnails=False)) as client:
        for path in ("/studio/gradio_api/upload", "/studio/upload", "/studio/gradio_api/file=/etc/hostname",
                     "/studio/file=/etc/hostname", "/studio/gradio_api/info", "/studio/gradio_api/queue/join"):
            for method in ("GET", "POST"):
                res = client.request(method, path, files={"files": ("x.bin", b"x" * 1024)} if method == "POST"
                                     else None)
                assert res.status_code == 404 and res.json()["error"] == "not found", (method, path)
                assert "/tmp" not in res.text and str(tmp_path) not in res.text
        assert client.get("/studio/").status_code == 200                 # the page itself still loads
        config = client.get("/studio/config").json()
        assert "version" not in config and config["analytics_enabled"] is False


def test_health_tells_strangers_no_version(tmp_path):
    """Finding 11: a version tells an attacker which advisories apply; the admin still sees it."""
    app = create_app(Settings(data_dir=tmp_path, admin_token="a" * 32))
    with TestClient(app) as client:
        assert client.get("/api/health").json()["version"] is None
        admin = client.get("/api/health", headers={"Authorization": f"Bearer {'a' * 32}"}).json()
        assert admin["version"]
        assert client.get("/metrics").status_code == 401
