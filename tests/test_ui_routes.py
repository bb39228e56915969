"""The UI's REST routes (/api/ui/...) on the real app: gallery thumbnails, sources and uploads, schedule
import for the timeline editor, render-to-MP4 jobs. The browser side is tests/test_ui_browser.py."""

from __future__ import annotations

import io
import json
import pkgutil
import time
import typing

import av
import httpx
import numpy as np
import pytest
from fastapi.testclient import TestClient
from PIL import Image

from helpers.routes import api_routes
from prompt_presets import preset_names
from studio.server import Settings, create_app
from studio.ui import mount_ui, routes
from studio.ui.thumbnails import ThumbnailCache
from studio.ui.uploads import UploadError, check_name


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("data")
    rng = np.random.default_rng(7)
    np.save(d / "window-00.npy", rng.integers(0, 256, (4, 5, 32, 48, 3), dtype=np.uint8))
    (d / "notes.txt").write_text("not a sequence")
    return d


ADMIN = "admin-token-for-the-ui-route-tests"


@pytest.fixture(scope="module")
def client(data_dir, tmp_path_factory):
    """As the admin: uploads and render jobs need a key (tests/test_access.py tries them as visitors)."""
    app = create_app(Settings(data_dir=data_dir, width=64, height=48, admin_token=ADMIN), player_at_root=False)
    mount_ui(app, cache_dir=tmp_path_factory.mktemp("cache"), upload_limit=200_000,
             prewarm_thumbnails=False)
    with TestClient(app, headers={"Authorization": f"Bearer {ADMIN}"}) as c:
        yield c


def npy_bytes(shape=(2, 5, 16, 24, 3)) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.random.default_rng(1).integers(0, 256, shape, dtype=np.uint8))
    return buf.getvalue()


def test_root_redirects_to_the_studio_page(client):
    res = client.get("/", follow_redirects=False)
    assert res.status_code in (302, 307) and res.headers["location"] == "/studio/"
    assert client.get("/?size=320x176", follow_redirects=False).headers["location"] == "/studio/?size=320x176"
    page = client.get("/studio/")
    assert page.status_code == 200 and "/ui/static/studio.js" in page.text


def test_gallery_lists_every_preset_with_a_rendered_thumbnail(client):
    tiles = client.get("/api/ui/presets").json()
    assert [t["name"] for t in tiles] == preset_names()
    first, second = (client.get(t["thumbnail"]) for t in tiles[:2])
    assert first.headers["content-type"] == "image/png"
    a, b = (np.asarray(Image.open(io.BytesIO(r.content)).convert("RGB"), np.float32) for r in (first, second))
    assert a.shape == (112, 192, 3)
    assert a.std() > 10                                  # a rendered scene, not a flat placeholder
    assert np.abs(a - b).mean() > 10                     # two styles look different


def test_thumbnails_are_prewarmed_into_the_disk_cache(tmp_path):
    cache = ThumbnailCache(tmp_path)
    cache.prewarm(["polar"]).join(60)
    assert cache.path("polar").is_file() and not cache.path("volcano").exists()
    assert ThumbnailCache(tmp_path).png("polar") == cache.path("polar").read_bytes()   # served from disk


def test_unknown_preset_thumbnail_is_a_one_line_error(client):
    res = client.get("/api/ui/presets/no_such_style/thumbnail.png")
    assert res.status_code == 400
    assert "unknown preset 'no_such_style'" in res.json()["error"] and "\n" not in res.json()["error"]


def test_sources_list_the_engine_and_recorded_sequences(client):
    ids = [s["id"] for s in client.get("/api/ui/sources").json()]
    assert ids[0] == "engine" and "window-00.npy" in ids and "notes.txt" not in ids


def test_a_valid_upload_becomes_a_source(client):
    res = client.put("/api/ui/uploads/mine.npy", content=npy_bytes())
    assert res.status_code == 200, res.text
    assert res.json() == {"source": "uploads/mine.npy", "frames": 2, "width": 24, "height": 16, "fps": 30.0}
    assert "uploads/mine.npy" in [s["id"] for s in client.get("/api/ui/sources").json()]


@pytest.mark.parametrize("name, body, message", [
    ("broken.npy", b"\x93NUMPY garbage", "broken.npy: "),
    ("wrong.npy", npy_bytes((2, 4, 16, 24, 3)), "wrong.npy: "),
    ("clip.gbuf.zip", b"PK not really a zip", "clip.gbuf.zip: "),
    ("empty.npy", b"", "the file is empty"),
    ("huge.npy", b"\0" * 300_000, "larger than the upload limit of 0.2 MiB"),
    ("movie.mp4", b"1234", "is not a sequence file"),
    (".hidden.npy", b"1234", "file name: use letters"),
])
def test_a_bad_upload_is_refused_with_one_line_and_not_kept(client, data_dir, name, body, message):
    res = client.put(f"/api/ui/uploads/{name}", content=body)
    assert res.status_code == 400, res.text
    error = res.json()["error"]
    assert message in error and "\n" not in error
    assert not (data_dir / "uploads" / name).exists()


@pytest.mark.parametrize("name, body, damaged, technical", [
    ("version.npy", b"\x93NUMPY g" + bytes(300), True, "(32, 103)"),            # bytes 6-7: format version 32.103
    ("cut.npy", npy_bytes()[:2000], True, "truncated"),
    ("flat.npy", npy_bytes((32, 103)), False, "(32, 103)"),                     # an image, not a window
])
def test_a_corrupt_upload_is_refused_in_visitor_words_with_the_detail_in_the_json(client, name, body, damaged,
                                                                                    technical):
    res = client.put(f"/api/ui/uploads/{name}", content=body)
    assert res.status_code == 400, res.text
    refusal = res.json()
    words = "damaged or cut short" if damaged else "holds no G-buffer frames the studio can play"
    assert refusal["error"].startswith(f"{name}: ") and words in refusal["error"], refusal
    assert technical not in refusal["error"] and "(T, 5" not in refusal["error"]
    assert technical in refusal["detail"], refusal                                     # for tools, not the page


def test_upload_names_are_checked():
    with pytest.raises(UploadError, match="file name: use letters"):
        check_name("../escape.npy")
    assert check_name("run_01.gbuf.zip") == "run_01.gbuf.zip"


def test_keyframe_text_and_parseq_import_to_schedule_json(client):
    answer = client.post("/api/ui/schedule/import", json={"text": '0: "cyberpunk", 120: "volcano"'}).json()
    doc = answer["schedule"]
    assert [s["start"] for s in doc["segments"]] == [0, 120] and doc["version"] == 1
    assert answer["warnings"] == []                                      # nothing lost, nothing to say
    parseq = {"prompts": {"format": "v2", "enabled": True, "commonPrompt": {"positive": "", "negative": ""},
                          "commonPromptPos": "append",
                          "promptList": [{"name": "P1", "positive": "polar", "negative": "", "allFrames": False,
                                          "from": 0, "to": 59, "overlap": {"inFrames": 0, "outFrames": 0,
                                                                           "type": "none", "custom": ""}},
                                         {"name": "P2", "positive": "volcano", "negative": "", "allFrames": False,
                                          "from": 60, "to": 119, "overlap": {"inFrames": 0, "outFrames": 0,
                                                                             "type": "none", "custom": ""}}]},
              "options": {"output_fps": 30}, "keyframes": [{"frame": 0}, {"frame": 119}]}
    res = client.post("/api/ui/schedule/import", json={"text": json.dumps(parseq)})
    assert res.status_code == 200, res.text
    assert len(res.json()["schedule"]["segments"]) >= 2 and res.json()["warnings"] == []
    parseq["prompts"]["promptList"][1]["negative"] = "blurry"
    res = client.post("/api/ui/schedule/import", json={"text": json.dumps(parseq)})
    assert res.status_code == 200, res.text
    assert [w for w in res.json()["warnings"] if "negative prompts were dropped" in w], res.json()["warnings"]


def test_an_import_says_what_it_could_not_carry_over(client):
    """Issue 45, finding 7: back-filled frames, a dropped negative prompt and a name that is no style's were
    imported without a word."""
    res = client.post("/api/ui/schedule/import", json={"text": '30: "polar", 90: "volcano --neg blurry"'})
    assert res.status_code == 200, res.text
    answer = res.json()
    assert [(s["start"], s["prompts"]) for s in answer["schedule"]["segments"]] == [
        (0, [{"preset": "polar", "weight": 1.0}]), (90, [{"preset": "volcano", "weight": 1.0}])]
    back_filled, negative = answer["warnings"]
    assert "first keyframe is 30" in back_filled and "frames 0..29" in back_filled, back_filled
    assert "keyframe 90 was dropped" in negative and "--neg" in negative, negative
    assert not [w for w in answer["warnings"] if w.startswith("import:") or "\n" in w]   # one line each, no path

    answer = client.post("/api/ui/schedule/import", json={"text": '0: "nosuchstyle", 40: "vulcano"'}).json()
    assert [s["prompts"][0] for s in answer["schedule"]["segments"]] == [
        {"text": "nosuchstyle", "weight": 1.0}, {"text": "vulcano", "weight": 1.0}]       # it still plays
    nosuch, vulcano = answer["warnings"]
    assert "'nosuchstyle'" in nosuch and "no style's name" in nosuch and "free text" in nosuch, nosuch
    assert "did you mean 'volcano'?" in vulcano, vulcano
    # free text of several words is meant as free text: no note
    assert client.post("/api/ui/schedule/import", json={"text": '0: "a castle at dusk"'}).json()["warnings"] == []


def test_a_bad_schedule_names_the_field(client):
    res = client.post("/api/ui/schedule/validate",
                      json={"version": 1, "segments": [{"start": 5, "prompt": "cyberpunk"}]})
    assert res.status_code == 400
    assert "segments[0].start" in res.json()["error"]
    res = client.post("/api/ui/schedule/import", json={"text": "{not json"})
    assert res.status_code == 400 and "\n" not in res.json()["error"]


def test_eight_worlds_is_the_637_frame_demo(client):
    doc = client.get("/api/ui/schedules/eight_worlds").json()
    assert doc["length"] == 637 and len(doc["segments"]) == 8
    assert client.get("/api/ui/schedules/nine_worlds").status_code == 400


def test_render_job_writes_a_playable_mp4_with_progress(client):
    schedule = {"version": 1, "fps": 30, "length": 8,
                "segments": [{"start": 0, "prompt": "polar"}, {"start": 4, "prompt": "volcano"}]}
    job = client.post("/api/ui/renders", json={"schedule": schedule, "source": "window-00.npy"}).json()
    assert job["state"] == "running" and job["frames"] == 8
    deadline = time.monotonic() + 60
    while job["state"] == "running" and time.monotonic() < deadline:
        time.sleep(0.2)
        job = client.get(f"/api/ui/renders/{job['id']}").json()
    assert job["state"] == "done", job
    assert job["progress"] == 1.0
    video = client.get(job["download"])
    assert video.headers["content-type"] == "video/mp4"
    with av.open(io.BytesIO(video.content)) as container:
        frames = list(container.decode(video=0))
    assert len(frames) == 4                               # the recording ends after 4 frames
    assert (frames[0].width, frames[0].height) == (64, 48)   # the size a live session of this server has


@pytest.mark.parametrize("body, message", [
    ({"source": "nowhere.npy"}, "no sequence 'nowhere.npy'"),
    ({"frames": 10**7}, "frames: "),
    ({"renderer": "magic"}, "unknown renderer 'magic'"),
])
def test_a_bad_render_request_is_refused(client, body, message):
    schedule = {"version": 1, "segments": [{"start": 0, "prompt": "polar"}]}
    res = client.post("/api/ui/renders", json={"schedule": schedule, "frames": 4, **body})
    assert res.status_code in (400, 422), res.text
    assert message in res.json()["error"]


def test_a_bad_render_size_is_refused_and_unknown_jobs_are_404(client):
    schedule = {"version": 1, "segments": [{"start": 0, "prompt": "polar"}]}
    res = client.post("/api/ui/renders", json={"schedule": schedule, "frames": 4, "size": "9000x9000"})
    assert res.status_code in (400, 422) and res.json()["where"] == "size" and "9000x9000" in res.json()["error"]
    assert client.get("/api/ui/renders/nope").status_code == 404


def test_inspector_of_an_unknown_session_is_404(client):
    res = client.get("/api/ui/sessions/nope/inspector.png")
    assert res.status_code == 404 and "no live session 'nope'" in res.json()["error"]


def test_a_connected_external_engine_is_offered_as_a_source(tmp_path):
    from gbuffer.feed.client import FeedClient
    from studio.server.background import BackgroundServer

    server = BackgroundServer(Settings(port=0))
    mount_ui(server.app, cache_dir=tmp_path, prewarm_thumbnails=False)
    with server, FeedClient(f"{server.ws_url}/api/engine/feed", name="kart2", width=64, height=48, fps=30):
        choices = httpx.get(f"{server.url}/api/ui/sources").json()
    assert {"id": "feed:kart2", "title": "External engine kart2 (64x48)", "kind": "feed"} in choices


def test_config_serves_the_easing_curves_the_schedule_renders(client):
    from timeline.schedule.easing import EASINGS

    curves = client.get("/api/ui/config").json()["easing_curves"]
    assert set(curves) == set(EASINGS)
    for name, points in curves.items():
        assert points == pytest.approx([EASINGS[name](k / 16) for k in range(17)], abs=1e-6)


def test_config_gives_the_page_the_limits_the_server_validates_with(client):
    """Issue 45, finding 8: each number field's max comes from the constant the server checks that value with."""
    from studio.ui.jobs import MAX_JOB_FRAMES
    from timeline.schedule import MAX_FRAMES
    from webrtc.protocol import MAX_SWITCH_FRAMES

    assert client.get("/api/ui/config").json()["limits"] == {
        "switch_transition_frames": MAX_SWITCH_FRAMES, "block_transition_frames": MAX_FRAMES,
        "render_frames": MAX_JOB_FRAMES}


def test_prompt_text_means_the_same_preset_everywhere(client):
    assert client.get("/api/ui/prompt", params={"text": "LAVA"}).json()["preset"] == "volcano"
    assert client.get("/api/ui/prompt", params={"text": "Holy Gold"}).json()["maps_to"] == [["holy_gold", 1.0]]
    free = client.get("/api/ui/prompt", params={"text": "molten rock under an ash sky"}).json()
    assert free["preset"] is None and abs(sum(w for _, w in free["maps_to"]) - 1) < 0.01
    assert client.get("/api/ui/prompt", params={"text": ""}).status_code == 422
    bad = client.post("/api/ui/schedule/validate", json={"version": 1, "segments": [
        {"start": 0, "prompts": [{"text": "Holy Gold"}]}]}).json()
    assert bad["segments"][0]["prompts"] == [{"preset": "holy_gold", "weight": 1.0}]


def test_docs_document_every_route_with_its_answer_and_tag(client):
    """Each route's success answer has a schema (a response model, or the media type of its file, HTML or SDP),
    and each sits under a tag, so /docs describes the whole API."""
    def named(schema: dict) -> bool:      # a model, a list of models, or a list of names (/api/presets)
        return "$ref" in schema or "$ref" in schema.get("items", {}) or schema.get("items") == {"type": "string"}

    paths = client.get("/openapi.json").json()["paths"]
    undocumented = []
    for path, operations in paths.items():
        for method, op in operations.items():
            code, ok = next((code, r) for code, r in op["responses"].items() if code.startswith("2"))
            content = ok.get("content", {})
            documented = code == "204" if not content else (
                "application/json" not in content or named(content["application/json"]["schema"]))
            if not op.get("tags") or not documented:
                undocumented.append(f"{method.upper()} {path}")
    assert undocumented == []
    assert "application/sdp" in paths["/whep/{session_id}"]["post"]["responses"]["201"]["content"]
    assert paths["/api/sessions/{session_id}/schedule"]["get"]["responses"]["200"]["content"][
        "application/json"]["schema"] == {"$ref": "#/components/schemas/Schedule"}


def test_docs_and_favicon_are_served_from_the_package(client):
    page = client.get("/docs").text
    assert "/docs-assets/swagger-ui-bundle.js" in page and "cdn" not in page
    assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    icon = client.get("/favicon.ico")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")


def test_each_ui_route_module_is_one_concern_and_the_package_includes_them_all(client):
    """studio/ui/routes/: a module per concern, each saying its concern in its docstring and declaring its routes
    on its own router; the package's `router` includes every one, and what the app serves under /api/ui is
    exactly what they declare (a module left out, or a route declared twice, fails here)."""
    modules = {m.name for m in pkgutil.iter_modules(routes.__path__)} - {"deps"}
    assert {concern.__name__.rsplit(".", 1)[1] for concern in routes.CONCERNS} == modules
    declared = []
    for concern in routes.CONCERNS:
        assert concern.__doc__ and concern.router.prefix == "", concern.__name__
        assert concern.router.routes and all(r.endpoint.__module__ == concern.__name__ for r in concern.router.routes)
        declared += [(method, "/api/ui" + r.path) for r in concern.router.routes for method in r.methods]
    served = [(method, path) for path, r in api_routes(client.app) if path.startswith("/api/ui/")
              for method in r.methods]
    assert sorted(declared) == sorted(set(declared)) == sorted(served)


def test_ui_routes_return_their_response_models():
    """A route that declares a response model is written to return that model, not a dict: the answer, /docs and
    the type checker all read one definition."""
    for concern in routes.CONCERNS:
        for route in concern.router.routes:
            if route.response_model is not None:
                returns = typing.get_type_hints(route.endpoint)["return"]
                assert route.response_model in (returns, *typing.get_args(returns)), (route.path, returns)
