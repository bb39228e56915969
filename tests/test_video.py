"""MP4 export: frames survive the round trip, and failures never leave a file that looks finished."""

import os

import numpy as np
import pytest

from media.video import Mp4Writer, VideoWriteError, read_mp4_frames


def gradient(h, w, shift):
    y, x = np.mgrid[0:h, 0:w]
    return np.stack([(x * 4 + shift) % 256, (y * 4) % 256, np.full_like(x, 128)], -1).astype(np.uint8)


def test_round_trip_keeps_frame_count_size_and_content(tmp_path):
    out = tmp_path / "a.mp4"
    with Mp4Writer(out, 64, 48, 30) as w:
        for k in range(10):
            w.write(gradient(48, 64, 10 * k))
    frames = read_mp4_frames(out)
    assert len(frames) == 10 and frames[0].shape == (48, 64, 3)
    err = np.abs(frames[5].astype(int) - gradient(48, 64, 50).astype(int)).mean()
    assert err < 6  # crf 18 H.264 of a smooth gradient


def test_disk_full_is_a_clear_error_and_leaves_no_output(tmp_path):
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    out = tmp_path / "full.mp4"
    os.symlink("/dev/full", tmp_path / "full.mp4.part")  # every write to the partial file fails with ENOSPC
    with pytest.raises(VideoWriteError, match="full.mp4"):
        with Mp4Writer(out, 64, 48, 30) as w:
            for k in range(60):
                w.write(gradient(48, 64, k))
    assert not out.exists()


def test_an_exception_mid_export_drops_the_partial_file(tmp_path):
    out = tmp_path / "b.mp4"
    with pytest.raises(RuntimeError):
        with Mp4Writer(out, 64, 48, 30) as w:
            w.write(gradient(48, 64, 0))
            raise RuntimeError("renderer failed")
    assert not out.exists() and not (tmp_path / "b.mp4.part").exists()


@pytest.mark.parametrize("kwargs, message", [
    ({"width": 63, "height": 48}, "even"),
])
def test_bad_sizes_and_paths(tmp_path, kwargs, message):
    with pytest.raises(VideoWriteError, match=message):
        Mp4Writer(tmp_path / "c.mp4", fps=30, **kwargs)
    with pytest.raises(VideoWriteError, match="does not exist"):
        Mp4Writer(tmp_path / "nope" / "c.mp4", 64, 48, 30)
    with pytest.raises(VideoWriteError, match="directory"):
        Mp4Writer(tmp_path, 64, 48, 30)
    w = Mp4Writer(tmp_path / "d.mp4", 64, 48, 30)
    with pytest.raises(VideoWriteError, match="shape"):
        w.write(np.zeros((10, 10, 3), np.uint8))
    with pytest.raises(VideoWriteError, match="no frames"):
        w.close()
    assert not (tmp_path / "d.mp4").exists()
