"""Properties of distsampling.growing.snapshot: where each sample of a snapshot lives, and damaged shards.

The model of a snapshot is the flat list of ``(shard path, row)`` of every sample, in order.
"""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distsampling.growing.snapshot import CorruptShardError, Snapshot, load_shard
from strategies import shard_sizes


@given(sizes=shard_sizes, index=st.integers(0, 10**6))
def test_locate_finds_the_shard_and_row_of_every_sample(sizes, index):
    """Invariant: sample i of a snapshot is row i - start of the shard whose samples start there."""
    snap = Snapshot(0, tuple((f"/s{j}.npy", k) for j, k in enumerate(sizes)))
    flat = [(f"/s{j}.npy", row) for j, k in enumerate(sizes) for row in range(k)]
    assert len(snap) == len(flat) == sum(sizes)
    i = index % len(flat)
    assert snap.locate(i) == flat[i]
    assert pickle.loads(pickle.dumps(snap)) == snap


@given(sizes=shard_sizes)
def test_shards_given_as_lists_are_stored_as_an_equal_hashable_tuple(sizes):
    """Invariant: Snapshot(e, [[p, n], ...]) == Snapshot(e, ((p, n), ...)), and it is hashable."""
    as_lists = Snapshot(1, [[f"/s{j}.npy", k] for j, k in enumerate(sizes)])
    as_tuples = Snapshot(1, tuple((f"/s{j}.npy", k) for j, k in enumerate(sizes)))
    assert as_lists == as_tuples and hash(as_lists) == hash(as_tuples)


@pytest.mark.parametrize("index", [-1, 5, 100])
def test_locate_out_of_range_raises_index_error_naming_it(index):
    """Invariant: only 0 <= index < len(snapshot) has a place."""
    snap = Snapshot(0, (("/a.npy", 3), ("/b.npy", 2)))
    with pytest.raises(IndexError, match=rf"index should be in \[0, 5\), but got index={index}$"):
        snap.locate(index)


PAIRS = r"shards should hold \(path, number of samples\) pairs, but got "


@pytest.mark.parametrize(
    ("shards", "error", "message"),
    [
        (
            (("/a.npy", 0),),
            ValueError,
            r"every shard should hold >= 1 samples, but got \('/a.npy', 0\)",
        ),
        ((("/a.npy", 1.5),), TypeError, PAIRS + r"\('/a.npy', 1.5\)"),
        ((("/a.npy", True),), TypeError, PAIRS + r"\('/a.npy', True\)"),
        (("/a.npy",), TypeError, PAIRS + "'/a.npy'"),
    ],
)
def test_bad_shards_raise_naming_the_entry(shards, error, message):
    """Invariant: each entry is a (path, n >= 1) pair; the error shows the bad entry."""
    with pytest.raises(error, match=message):
        Snapshot(0, shards)


@pytest.mark.parametrize(("epoch", "error"), [(-1, ValueError), ("0", TypeError)])
def test_bad_epoch_raises_naming_it(epoch, error):
    """Invariant: a snapshot's epoch is an integer >= 0."""
    with pytest.raises(error, match=rf"epoch should be .*but got epoch={epoch!r}"):
        Snapshot(epoch, ())


# --- damaged shards: load_shard names the file -------------------------------------------------


@pytest.fixture
def shard(tmp_path):
    path = str(tmp_path / "shard-0.npy")
    np.save(path, np.arange(10, dtype=np.int32).reshape(5, 2))
    return path


def test_a_truncated_shard_raises_naming_the_file(shard):
    """Invariant: a shard cut short gives CorruptShardError with its path, not garbage data."""
    with open(shard, "r+b") as f:
        f.truncate(os.path.getsize(shard) - 3)
    with pytest.raises(CorruptShardError, match=f"shard {shard} is truncated or corrupt"):
        load_shard(shard, 5)


def test_a_corrupt_shard_raises_naming_the_file(shard):
    """Invariant: a shard whose header is overwritten gives CorruptShardError with its path."""
    with open(shard, "r+b") as f:
        f.write(b"garbage!")
    with pytest.raises(CorruptShardError, match=f"shard {shard} is truncated or corrupt"):
        load_shard(shard)


def test_a_shard_with_the_wrong_number_of_samples_raises_naming_the_file(shard):
    """Invariant: a shard replaced by a shorter valid .npy is caught against its snapshot entry."""
    np.save(shard, np.zeros((4, 2), np.int32))
    with pytest.raises(
        CorruptShardError, match=f"shard {shard} should hold 5 samples, but it holds 4"
    ):
        load_shard(shard, 5)


def test_a_fortran_order_shard_raises_naming_the_file(shard):
    """Invariant: a sample must be one byte range of its shard, so Fortran order is refused."""
    np.save(shard, np.asfortranarray(np.zeros((5, 2), np.int32)))
    with pytest.raises(CorruptShardError, match=f"shard {shard} should hold a C-order array"):
        load_shard(shard, 5)


def test_a_scalar_npy_file_is_not_a_shard(shard):
    """Invariant: a 0-d array holds no samples."""
    np.save(shard, np.float32(1.0))
    with pytest.raises(CorruptShardError, match="it does not hold an array of samples"):
        load_shard(shard)


def test_a_missing_shard_raises_file_not_found_naming_it(tmp_path):
    """Invariant: a shard deleted too early is a FileNotFoundError with its path."""
    with pytest.raises(FileNotFoundError, match=r"gone\.npy"):
        load_shard(str(tmp_path / "gone.npy"))
