"""Properties of distsampling.growing.remote.RemoteSource: it reads whole remote rows, or says what is wrong.

Row ``r`` of remote file ``j`` is the int32 pair ``[j, r]``, so every read proves where it came from.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from s3_server import rows as s3_rows

from distsampling.growing.remote import RemoteSource
from distsampling.growing.retry import RemoteUnavailableError

moto_settings = pytest.importorskip("moto.settings")
pytestmark = pytest.mark.timeout(120)  # a server that never answers ends the test, not the suite

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


def test_a_truncated_source_file_raises_naming_it_when_opened(tmp_path):
    """Invariant: a remote file shorter than its header promises is refused at open, named."""
    np.save(tmp_path / "a.npy", np.zeros((4, 2), np.int32))
    with open(tmp_path / "a.npy", "r+b") as f:
        f.truncate(128 + 3 * 8 + 1)  # rows 0..2 whole, row 3 cut short
    with pytest.raises(
        ValueError,
        match=rf"{tmp_path / 'a.npy'} is truncated: its header promises 160 bytes, but it holds 153",
    ):
        RemoteSource(tmp_path)


def test_a_file_cut_short_after_it_was_opened_is_never_read_as_a_sample(tmp_path):
    """Invariant: a read that returns less than a sample is never returned as one."""
    np.save(tmp_path / "a.npy", np.zeros((4, 2), np.int32))
    remote = RemoteSource(tmp_path, deadline=0.3)
    with open(tmp_path / "a.npy", "r+b") as f:
        f.truncate(128 + 3 * 8 + 1)
    np.testing.assert_array_equal(remote.read(0, 2), [0, 0])
    with pytest.raises(RemoteUnavailableError, match=rf"{tmp_path / 'a.npy'}: .* read 1 of the 8"):
        remote.read(0, 3)
    remote.close()


@pytest.mark.parametrize(
    "dtype",
    ["<U3", "|S2", "|V4", "<M8[s]", "<m8[s]", [("a", "<i4"), ("b", "<f4")]],
    ids=["unicode", "bytes", "void", "datetime", "timedelta", "structured"],
)
def test_a_file_of_non_numbers_is_refused_at_open_naming_it(tmp_path, dtype):
    """Invariant: strings, void, datetimes and records are refused with the file and the dtype."""
    np.save(tmp_path / "a.npy", np.zeros((3, 2), dtype))
    with pytest.raises(
        ValueError,
        match=rf"{tmp_path / 'a.npy'} should hold numbers \(bool, int, uint, float or complex\), "
        rf"but it holds dtype",
    ):
        RemoteSource(tmp_path)


def test_a_file_of_objects_is_refused_at_open_naming_it(tmp_path):
    """Invariant: a pickled object array (dtype 'O') is refused, never unpickled."""
    np.save(tmp_path / "a.npy", np.array([[1, "x"], [2, None]], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=rf"{tmp_path / 'a.npy'} should hold numbers .* '\|O'"):
        RemoteSource(tmp_path)


@given(data=st.data())
def test_big_endian_files_read_as_the_same_numbers_in_native_order(tmp_path_factory, data):
    """Invariant: a '>' file reads the same values as its native twin, in native byte order."""
    kind = data.draw(st.sampled_from(["f4", "i4", "u2", "f8", "c8"]))
    values = np.arange(12).reshape(4, 3).astype(kind) * 3
    root = tmp_path_factory.mktemp("endian")
    np.save(root / "a.npy", values.astype(">" + kind))
    np.save(root / "b.npy", values)  # native: the two files hold the same kind of sample
    remote = RemoteSource(root)
    assert remote.dtype == np.dtype(kind) and remote.dtype.isnative
    k, row = data.draw(st.integers(0, 1)), data.draw(st.integers(0, 3))
    got = remote.read(k, row)
    assert got.dtype.isnative
    np.testing.assert_array_equal(got, values[row])
    remote.close()


@given(data=st.data())
def test_parts_split_the_files_disjointly_and_cover_them(tmp_path_factory, data):
    """Invariant: parts (0, n), ..., (n - 1, n) hold disjoint files whose union is every file."""
    files = data.draw(st.integers(1, 7))
    root = tmp_path_factory.mktemp("parts")
    for j in range(files):
        np.save(root / f"f{j}.npy", np.full((1, 1), j, np.int32))
    n = data.draw(st.integers(1, files))
    parts = [RemoteSource(root, part=(i, n)) for i in range(n)]
    held = [[int(p.read(k, 0)[0]) for k in range(len(p.files))] for p in parts]
    assert sorted(j for h in held for j in h) == list(range(files))
    assert [len(h) for h in held] == [len(range(i, files, n)) for i in range(n)]


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"part": (3, 3)}, ValueError, r"part\[0\] should be in the interval \[0, 2\], but got"),
        ({"part": (0, 0)}, ValueError, r"part\[1\] should be >= 1, but got part\[1\]=0"),
        ({"part": (0, 4)}, ValueError, r"at most 3 parts .* but got part=\(0, 4\)"),
        ({"part": 2}, TypeError, r"part should be a pair \(i, n\), but got part=2"),
        ({"deadline": 0}, ValueError, r"deadline should be a positive finite .* deadline=0"),
        ({"deadline": float("inf")}, ValueError, r"but got deadline=inf"),
        ({"deadline": "1"}, ValueError, r"but got deadline='1'"),
        ({"storage_options": {"key": "k"}}, ValueError, r"storage_options are for a URL source"),
        ({"storage_options": "k"}, TypeError, r"storage_options should be a dict"),
    ],
)
def test_bad_arguments_raise_naming_them(tmp_path, kwargs, error, message):
    """Invariant: every bad argument is refused with its name and value."""
    for j in range(3):
        np.save(tmp_path / f"f{j}.npy", np.zeros((2, 2), np.int32))
    with pytest.raises(error, match=message):
        RemoteSource(tmp_path, **kwargs)


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
    handles.append(remote._open[2][0])  # local files: one open handle each
    remote.close()
    assert all(f.closed for f in handles) and not remote._open
    np.testing.assert_array_equal(remote.read(2, 4), [2, 4])
    assert os.path.basename(remote.files[2]) == "f2.npy"


# --- a real S3 API (moto's server on 127.0.0.1), read through s3fs ---------------------------

S3_ROWS = {0: 4, 1: 6, 2: 5}


@pytest.fixture
def bucket(s3_server):
    """``(server, url)``: three files of whole-row-checkable samples in s3://data/train."""
    url = s3_server.put_arrays(
        "data/train", {f"f{j}.npy": s3_rows(j, n) for j, n in S3_ROWS.items()}
    )
    return s3_server, url


def test_an_s3_source_reads_every_row_as_written(bucket):
    """Invariant: over s3://, read(j, r) is row r of file j, whole, for every row."""
    server, url = bucket
    remote = RemoteSource(url, storage_options=server.options())
    assert remote.files == [f"{url}/f{j}.npy" for j in S3_ROWS]
    for j, n in S3_ROWS.items():
        assert remote.rows(j) == n
        for r in range(n):
            np.testing.assert_array_equal(remote.read(j, r), s3_rows(j, n)[r])


def test_reading_one_s3_sample_is_one_ranged_get_of_its_bytes(bucket, caplog):
    """Invariant: read() sends one GET with a Range (206 Partial Content), never the whole file."""
    server, url = bucket
    remote = RemoteSource(url, storage_options=server.options())
    remote.rows(1)  # open file 1 (header and size) first
    caplog.set_level(logging.INFO, logger="werkzeug")  # the server logs every request it serves
    caplog.clear()
    remote.read(1, 3)
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", r.getMessage()) for r in caplog.records]  # no colours
    requests = [line for line in lines if "/data/train/" in line]
    assert len(requests) == 1, requests
    assert '"GET /data/train/f1.npy HTTP/1.1" 206' in requests[0]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "s3://no-such-bucket/train",
            r"source should be an existing bucket and prefix, but got "
            r"source='s3://no-such-bucket/train' \(not found\)",
        ),
        ("s3://data/no-such-prefix", r"source='s3://data/no-such-prefix' \(not found\)"),
    ],
)
def test_a_missing_bucket_or_prefix_raises_naming_the_url(bucket, url, message):
    """Invariant: a bucket or prefix that does not exist is named in a FileNotFoundError."""
    server, _ = bucket
    with pytest.raises(FileNotFoundError, match=message):
        RemoteSource(url, storage_options=server.options())


def test_a_key_deleted_after_listing_raises_naming_its_url(bucket):
    """Invariant: a missing key is a FileNotFoundError naming s3://bucket/key, at once."""
    server, url = bucket
    remote = RemoteSource(url, storage_options=server.options())
    server.filesystem().rm(f"{url}/f2.npy")
    with pytest.raises(
        FileNotFoundError, match=rf"{url}/f2.npy does not exist \(no such bucket, key or file\)"
    ):
        remote.read(2, 0)
    assert remote.retries == 0  # not retried: it will not come back by waiting


def test_bad_credentials_raise_naming_the_url(bucket, monkeypatch):
    """Invariant: credentials the server refuses give a PermissionError naming the URL."""
    server, url = bucket
    monkeypatch.setattr(moto_settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)  # the server checks keys
    with pytest.raises(PermissionError, match=rf"{url}: access denied; check the credentials"):
        RemoteSource(url, storage_options=server.options(key="wrong", secret="wrong"))


def test_an_s3_server_down_past_the_deadline_raises_naming_the_url(bucket):
    """Invariant: connection failures are retried until the deadline, then named with the URL.
    (The deadline leaves room for a retry: s3fs's own first attempt at a stopped server can
    take over a second on a busy machine, which at deadline=1.0 left no retry to count.)"""
    server, url = bucket
    remote = RemoteSource(url, storage_options=server.options(), deadline=4.0)
    remote.rows(0)
    server.stop()
    with pytest.raises(
        RemoteUnavailableError, match=rf"{url}/f0.npy: the storage kept failing for .* deadline=4.0"
    ):
        remote.read(0, 1)
    assert remote.retries >= 1


def test_an_s3_server_restarted_during_a_read_is_retried_until_it_answers(bucket):
    """Invariant: a read started while the server is down returns the whole row once it is back."""
    server, url = bucket
    remote = RemoteSource(url, storage_options=server.options(), deadline=60.0)
    remote.rows(2)
    server.stop()
    restart = threading.Timer(1.0, server.start)
    restart.start()
    try:
        np.testing.assert_array_equal(remote.read(2, 4), s3_rows(2, 5)[4])
    finally:
        restart.join()
    assert remote.retries >= 1
