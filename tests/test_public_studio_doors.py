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
