"""The one atomic-write helper: a reader sees the old file or the whole new one, never a part."""

from __future__ import annotations

import pytest

from gbuffer.formats.common import AtomicFile, atomic_path, write_atomic


def test_a_committed_file_replaces_the_old_one_and_a_discarded_one_leaves_it(tmp_path):
    path = tmp_path / "a.bin"
    write_atomic(path, b"old")
    target = AtomicFile(path, ".part")
    target.tmp.write_bytes(b"half")
    assert path.read_bytes() == b"old"           # while writing, readers see the old file
    target.discard()
    assert path.read_bytes() == b"old" and not target.tmp.exists()
    target.tmp.write_bytes(b"new")
    assert target.commit() == path and path.read_bytes() == b"new" and not target.tmp.exists()


def test_an_interrupted_block_leaves_no_file_and_hidden_temporaries_start_with_a_dot(tmp_path):
    path = tmp_path / "b.bin"
    with pytest.raises(RuntimeError), atomic_path(path) as tmp:
        tmp.write_bytes(b"partial")
        raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    assert AtomicFile(path, ".part", hidden=True).tmp.name == ".b.bin.part"
