"""Properties of distsampling.growing.remote.RemoteSource: it reads whole remote rows, or says what is wrong.

Row ``r`` of remote file ``j`` is the int32 pair ``[j, r]``, so every read proves where it came from.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distsampling.growing.remote import RemoteSource

ROWS = (3, 7, 5)


@pytest.fixture
def remote(tmp_path):
    for j, n in enumerate(ROWS):
        data = np.stack([np.full(n, j, np.int32), np.arange(n, dtype=np.int32)], axis=1)
        np.save(tmp_path / f"f{j}.npy", data)
    return RemoteSource(tmp_path)


@given(data=st.data())
def test_read_returns_the_row_asked_for(tmp_path_factory, data):
    """Invariant: read(j, r) == [j, r] for every file j and row r < rows(j)."""
    root = tmp_path_factory.mktemp("remote")
    for j, n in enumerate(ROWS):
        np.save(root / f"f{j}.npy", np.stack([np.full(n, j), np.arange(n)], 1).astype(np.int32))
    source = RemoteSource(root)
    j = data.draw(st.integers(0, len(ROWS) - 1))
    r = data.draw(st.integers(0, ROWS[j] - 1))
    assert source.rows(j) == ROWS[j]
    np.testing.assert_array_equal(source.read(j, r), [j, r])
    source.close()


@pytest.mark.parametrize(
    ("k", "row", "error", "message"),
    [
        (3, 0, ValueError, r"k should be in the interval \[0, 2\], but got k=3"),
        (-1, 0, ValueError, r"k should be in the interval \[0, 2\], but got k=-1"),
        (0, 3, ValueError, r"row should be in the interval \[0, 2\], but got row=3"),
        (0, 1.0, TypeError, r"row should be an integer, but got row=1.0"),
    ],
)
def test_a_file_or_row_out_of_range_raises_naming_it(remote, k, row, error, message):
    """Invariant: read(k, row) needs 0 <= k < len(files) and 0 <= row < rows(k)."""
    with pytest.raises(error, match=message):
        remote.read(k, row)


def test_a_missing_source_raises_naming_it(tmp_path):
    """Invariant: a source directory that does not exist is refused with its path."""
    missing = str(tmp_path / "nope")
    with pytest.raises(
        FileNotFoundError,
        match=f"source should be an existing directory, but got source='{missing}'",
    ):
        RemoteSource(missing)


def test_a_source_without_npy_files_raises_naming_it(tmp_path):
    """Invariant: an empty source is refused."""
    with pytest.raises(ValueError, match=r"source should hold \.npy files, but got none in"):
        RemoteSource(tmp_path)


def test_source_files_of_different_sample_shapes_raise_naming_the_file(tmp_path):
    """Invariant: all remote files must hold samples of one shape and dtype."""
    np.save(tmp_path / "a.npy", np.zeros((2, 3), np.float32))
    np.save(tmp_path / "b.npy", np.zeros((2, 4), np.float32))
    with pytest.raises(ValueError, match=rf"but {tmp_path / 'b.npy'} holds \(4,\), float32"):
        RemoteSource(tmp_path).read(1, 0)


def test_a_truncated_source_file_raises_naming_it(tmp_path):
    """Invariant: a remote file shorter than its header says gives an error naming the file."""
    np.save(tmp_path / "a.npy", np.zeros((4, 2), np.int32))
    with open(tmp_path / "a.npy", "r+b") as f:
        f.truncate(128 + 3 * 8 + 1)  # rows 0..2 whole, row 3 cut short
    remote = RemoteSource(tmp_path)
    remote.read(0, 2)
    with pytest.raises(ValueError, match=rf"{tmp_path / 'a.npy'} is truncated: its sample 3"):
        remote.read(0, 3)


def test_a_file_that_is_not_npy_raises_naming_it(tmp_path):
    """Invariant: garbage where a .npy header belongs is reported with the file's path."""
    (tmp_path / "a.npy").write_bytes(b"not a numpy file at all")
    with pytest.raises(ValueError, match=rf"{tmp_path / 'a.npy'} should be a \.npy file, but"):
        RemoteSource(tmp_path)


@pytest.mark.parametrize(
    "array", [np.zeros((0, 2), np.int32), np.asfortranarray(np.zeros((3, 2), np.int32))]
)
def test_an_empty_or_fortran_order_file_raises_naming_it(tmp_path, array):
    """Invariant: a file must hold >= 1 samples in C order (a sample is one byte range)."""
    np.save(tmp_path / "a.npy", array)
    with pytest.raises(ValueError, match=rf"{tmp_path / 'a.npy'} should hold a C-order array"):
        RemoteSource(tmp_path)


def test_a_url_without_fsspec_raises_saying_what_to_install(monkeypatch):
    """Invariant: a URL source without fsspec names the source and the missing package."""
    monkeypatch.setitem(sys.modules, "fsspec", None)  # import fsspec now raises ImportError
    with pytest.raises(ImportError, match="source='s3://b/d' is a URL, which needs fsspec"):
        RemoteSource("s3://b/d")


def test_close_closes_every_open_file(remote):
    """Invariant: after close() no file handle is held, and reading reopens what it needs."""
    handles = [remote._open[0][0]]
    remote.read(2, 4)
    handles.append(remote._open[2][0])
    remote.close()
    assert all(f.closed for f in handles) and not remote._open
    np.testing.assert_array_equal(remote.read(2, 4), [2, 4])
    assert os.path.basename(remote.files[2]) == "f2.npy"
