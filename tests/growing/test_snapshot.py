"""Properties of distsampling.growing.snapshot: where each sample of a snapshot lives, and damaged shards.

The model of a snapshot is the flat list of ``(shard path, row)`` of every sample, in order.
"""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from distsampling.growing.cache import ShardCache
from distsampling.growing.dataset import SnapshotDataset
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


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"samples": "4"}, TypeError, "samples should be an integer, but got samples='4'"),
        ({"samples": 0}, ValueError, "samples should be >= 1, but got samples=0"),
        ({"samples": 5.0}, TypeError, "samples should be an integer, but got samples=5.0"),
        ({"crc32": -1}, ValueError, r"crc32 should be in the interval \[0, 4294967295\]"),
        ({"sample_shape": ("2",)}, TypeError, "sample_shape should be an integer"),
    ],
)
def test_a_bad_argument_to_load_shard_is_blamed_not_the_healthy_file(shard, kwargs, error, message):
    """Invariant: load_shard checks its arguments before the file, so the error names the
    argument and never calls a healthy shard corrupt."""
    with pytest.raises(error, match=message):
        load_shard(shard, **kwargs)
    assert load_shard(shard, 5).shape == (5, 2)  # the file is fine


# --- what a cache's snapshot records: shape, dtype, crc32 ----------------------------------------


@pytest.fixture
def cached(tmp_path):
    """A cache of two shards of 4 float32 samples of shape (3,): shard k holds the value k."""
    cache = ShardCache(tmp_path, capacity_bytes=10**6)
    for k in range(2):
        cache.add(np.full((4, 3), k, np.float32))
    return cache


def test_a_damaged_first_shard_is_blamed_by_itself_not_the_healthy_one(cached):
    """Invariant: a shard is compared with the snapshot's recorded shape and dtype, so the
    damaged shard is named whichever shard a process opens first; the healthy one reads."""
    snap = cached.snapshot(0)
    first = snap.shards[0][0]
    np.save(first, np.zeros((4, 3), np.float64))  # same samples, another dtype in its header
    dataset = SnapshotDataset(snap)
    with pytest.raises(
        CorruptShardError,
        match=rf"shard {first} should hold samples of shape \(3,\) and dtype <f4 \(as the "
        r"snapshot records\), but it holds \(3,\), <f8",
    ):
        dataset[0]  # the damaged one, opened first
    assert float(dataset[7][0]) == 1.0  # the healthy one reads
    np.save(first, np.zeros((4, 2), np.float32))  # another sample shape
    with pytest.raises(CorruptShardError, match=rf"shard {first} should hold samples of shape"):
        SnapshotDataset(snap)[0]
    assert float(SnapshotDataset(snap)[4][0]) == 1.0  # opened first: fine


def test_a_flipped_data_byte_fails_the_checksum_naming_the_file(cached):
    """Invariant: any changed byte of a shard's samples is caught when a process opens it."""
    snap = cached.snapshot(0)
    path = snap.shards[1][0]
    with open(path, "r+b") as f:
        f.seek(128 + 17)  # a byte of sample 1 (after the 128-byte header)
        byte = f.read(1)
        f.seek(128 + 17)
        f.write(bytes([byte[0] ^ 0x01]))
    with pytest.raises(CorruptShardError, match=rf"shard {path} fails its checksum: crc32 0x"):
        SnapshotDataset(snap)[4]
    assert float(SnapshotDataset(snap)[0][0]) == 0.0  # the other shard is fine
    unchecked = cached.snapshot(0, verify=False)  # the same snapshot, read without the check
    assert unchecked == snap and SnapshotDataset(unchecked)[4].shape == (3,)


def test_a_shard_swapped_for_another_fails_the_checksum(cached):
    """Invariant: a whole, valid shard of the same size in another's place is caught too."""
    snap = cached.snapshot(0)
    (a, _), (b, _) = snap.shards
    os.replace(b, a)  # shard 1's file now under shard 0's name
    with pytest.raises(CorruptShardError, match=rf"shard {a} fails its checksum"):
        snap.load(0)
    with pytest.raises(FileNotFoundError):
        snap.load(1)


def test_a_snapshot_records_one_checksum_per_shard():
    """Invariant: checksums, when given, pair with the shards and are crc32 values."""
    with pytest.raises(
        ValueError, match=r"checksums should hold one crc32 per shard \(2\), but got 1"
    ):
        Snapshot(0, (("/a.npy", 1), ("/b.npy", 1)), checksums=(5,))
    with pytest.raises(TypeError, match="verify should be a boolean value, but got verify=1"):
        Snapshot(0, (), verify=1)


def test_a_shard_changed_after_its_check_is_checked_again(cached):
    """Invariant: the crc32 is read once per file and process, but a file written since (or
    another renamed in its place) is checked again on its next open."""
    snap = cached.snapshot(0)
    path = snap.shards[0][0]
    snap.load(0)  # checked: a second open does not read the file again
    snap.load(0)
    with open(path, "r+b") as f:
        f.seek(128)
        f.write(b"\x01")
    with pytest.raises(CorruptShardError, match=rf"shard {path} fails its checksum"):
        snap.load(0)


def test_a_worker_process_checks_the_shards_it_opens(cached):
    """Invariant: each DataLoader worker checks the crc32 of a shard it opens; a flipped byte
    reaches the training loop as CorruptShardError naming the file."""
    snap = cached.snapshot(0)
    path = snap.shards[1][0]
    with open(path, "r+b") as f:
        f.seek(128 + 40)
        f.write(b"\xff")
    loader = torch.utils.data.DataLoader(SnapshotDataset(snap), batch_size=8, num_workers=2)
    with pytest.raises(CorruptShardError, match=rf"shard {path} fails its checksum"):
        list(loader)
