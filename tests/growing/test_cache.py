"""Properties of distsampling.growing.cache: snapshots, FIFO eviction deferred for pinned shards, faults.

Samples are int32 pairs ``(shard sequence number, row)``, so a read proves which shard and row it
came from. The RuleBasedStateMachine at the end runs random add / snapshot / read / end-epoch
sequences against a plain-Python model of the cache.
"""

from __future__ import annotations

import errno
import json
import multiprocessing as mp
import os
import pickle
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from distsampling.growing import writer
from distsampling.growing.cache import ShardCache
from distsampling.growing.manifest import _HOST
from distsampling.growing.snapshot import Snapshot
from strategies import cache_capacities, non_integers, shard_samples, shard_sizes

#: caches live in RAM where there is a tmpfs: the properties are the same, the fsyncs are free
RAM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None
#: a process id no process has (above the kernel's pid_max): the pid of a dead writer
DEAD_PID = (
    int(open("/proc/sys/kernel/pid_max").read()) + 1 if os.path.exists("/proc") else 2**22 + 1
)


def make_shard(seq: int, k: int) -> np.ndarray:
    """``k`` samples of shape (2,): ``[seq, row]`` (128 + 8k bytes as a .npy file)."""
    return np.stack([np.full(k, seq, np.int32), np.arange(k, dtype=np.int32)], axis=1)


def shard_bytes(k: int) -> int:
    return 128 + 8 * k


def read_all(snapshot: Snapshot) -> np.ndarray:
    """Every sample of a snapshot, in order, each shard checked against its crc32, shape, dtype."""
    return np.concatenate([snapshot.load(k) for k in range(len(snapshot.shards))])


@pytest.fixture
def root():
    with tempfile.TemporaryDirectory(dir=RAM_DIR) as path:
        yield path


# --- snapshots ---------------------------------------------------------------------------------


@given(sizes=shard_sizes, more=shard_sizes)
def test_a_snapshot_is_frozen_at_the_first_call_for_its_epoch(sizes, more):
    """Invariant: later calls for the same epoch, after more adds, return the first snapshot."""
    with tempfile.TemporaryDirectory(dir=RAM_DIR) as root:
        cache = ShardCache(root, capacity_bytes=10**6)
        for seq, k in enumerate(sizes):
            cache.add(make_shard(seq, k))
        first = cache.snapshot(3)
        for seq, k in enumerate(more, start=len(sizes)):
            cache.add(make_shard(seq, k))
        assert ShardCache(root, capacity_bytes=10**6).snapshot(3) == first  # another process view
        assert [n for _, n in first.shards] == sizes
        assert len(cache.snapshot(4)) == sum(sizes) + sum(more)  # a new epoch sees the growth
        assert pickle.loads(pickle.dumps(first)) == first  # crosses to DataLoader workers


def _snapshot_in_child(root: str, epoch: int, out: mp.Queue) -> None:
    out.put(ShardCache(root, capacity_bytes=10**6).snapshot(epoch))


def test_processes_sharing_a_cache_get_the_same_snapshot_while_it_grows(root):
    """Invariant: 'ranks' calling snapshot(e) at different moments during adds agree on it."""
    cache = ShardCache(root, capacity_bytes=10**6)
    cache.add(make_shard(0, 2))
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    ranks = [ctx.Process(target=_snapshot_in_child, args=(root, 1, out)) for _ in range(3)]
    for seq, rank in enumerate(ranks, start=1):
        rank.start()
        cache.add(make_shard(seq, 2))  # the cache grows between the ranks' calls
    got = [out.get(timeout=60) for _ in ranks]
    for rank in ranks:
        rank.join(timeout=60)
    assert len(set(got)) == 1 and got[0] == cache.snapshot(1)


# --- eviction ----------------------------------------------------------------------------------


@given(sizes=shard_sizes, capacity=cache_capacities)
def test_eviction_keeps_the_newest_shards_that_fit_oldest_go_first(sizes, capacity):
    """Invariant: live shards are the longest newest suffix within capacity (FIFO eviction)."""
    with tempfile.TemporaryDirectory(dir=RAM_DIR) as root:
        cache = ShardCache(root, capacity_bytes=capacity)
        paths = [cache.add(make_shard(seq, k)) for seq, k in enumerate(sizes)]
        keep, used = [], 0
        for path, k in reversed(list(zip(paths, sizes, strict=True))):
            if used + shard_bytes(k) > capacity:
                break
            keep.insert(0, (path, k))
            used += shard_bytes(k)
        assert cache.shards() == keep
        assert cache.live_bytes() == used <= capacity
        assert sorted(n for n in os.listdir(root) if n.endswith(".npy")) == sorted(
            os.path.basename(p) for p, _ in keep
        )  # unpinned evicted shards are deleted at once


def test_evicted_shards_of_a_pinned_snapshot_are_deleted_only_when_its_epoch_ends(root):
    """Invariant: eviction never deletes a shard the current snapshot lists; end_epoch does."""
    cache = ShardCache(root, capacity_bytes=2 * shard_bytes(4))
    cache.add(make_shard(0, 4))
    cache.add(make_shard(1, 4))
    snap = cache.snapshot(0)
    cache.add(make_shard(2, 4))
    cache.add(make_shard(3, 4))  # shards 0 and 1 leave the live set, but epoch 0 still reads them
    assert [os.path.basename(p) for p, _ in cache.shards()] == [
        "shard-0000000002.npy",
        "shard-0000000003.npy",
    ]
    np.testing.assert_array_equal(
        read_all(snap), np.concatenate([make_shard(0, 4), make_shard(1, 4)])
    )
    cache.end_epoch(0)
    assert not any(os.path.exists(p) for p, _ in snap.shards)
    cache.end_epoch(0)  # idempotent: every rank may call it


# --- faults and bad input ----------------------------------------------------------------------


def _entries(root: str) -> tuple[list[str], str]:
    with open(os.path.join(root, "manifest.json")) as f:
        return sorted(os.listdir(root)), json.dumps(json.load(f), sort_keys=True)


@pytest.mark.parametrize(
    ("k", "size"),
    [(4, shard_bytes(4)), (20, shard_bytes(20))],  # over by its header; by its data alone
)
def test_capacity_smaller_than_one_shard_raises_and_leaves_the_cache_unchanged(root, k, size):
    """Invariant: a shard larger than the capacity is refused (before any write) with its size on
    disk and the capacity; nothing changes."""
    cache = ShardCache(root, capacity_bytes=shard_bytes(3))
    cache.add(make_shard(0, 3))
    before = _entries(root)
    with pytest.raises(
        ValueError,
        match=rf"capacity_bytes should be at least the size of one shard \({size} bytes\), "
        rf"but got capacity_bytes={shard_bytes(3)}$",
    ):
        cache.add(make_shard(1, k))
    assert _entries(root) == before


@pytest.mark.parametrize(
    "failure",
    [
        OSError(errno.ENOSPC, "No space left on device"),
        OSError(errno.EDQUOT, "Disk quota exceeded"),
        OSError("262144 requested and 258016 written"),  # a short write: numpy's words, no errno
    ],
)
def test_enospc_during_a_write_raises_and_leaves_the_cache_consistent(root, monkeypatch, failure):
    """Invariant: a full disk mid-write (ENOSPC, quota, short write) gives OSError(ENOSPC) naming
    the cache and the bytes; nothing partial, same manifest."""
    cache = ShardCache(root, capacity_bytes=10**6)
    cache.add(make_shard(0, 3))
    before = _entries(root)

    def write_half_then_fill_the_disk(f, header, array):
        f.write(header + array.tobytes()[: array.nbytes // 2])
        raise failure

    monkeypatch.setattr(writer, "_write_npy", write_half_then_fill_the_disk)
    with pytest.raises(
        OSError,
        match=rf"no space left on the device for a shard of {shard_bytes(3)} bytes in the cache "
        rf"{root} \(\d+ bytes free\): the cache is unchanged",
    ) as err:
        cache.add(make_shard(1, 3))
    assert err.value.errno == errno.ENOSPC
    assert _entries(root) == before
    monkeypatch.undo()
    cache.add(make_shard(1, 3))  # the cache still works once space is back
    np.testing.assert_array_equal(read_all(cache.snapshot(0))[3:], make_shard(1, 3))


@pytest.mark.parametrize("capacity", [10**6, shard_bytes(3)])  # the add evicts nothing / shard 0
def test_enospc_while_committing_the_manifest_leaves_the_cache_consistent(
    root, monkeypatch, capacity
):
    """Invariant: a full disk at commit gives OSError(ENOSPC); nothing half-added or half-evicted."""
    cache = ShardCache(root, capacity_bytes=capacity)
    cache.add(make_shard(0, 3))
    before = _entries(root)

    def fill_the_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(json, "dump", fill_the_disk)
    with pytest.raises(
        OSError,
        match=rf"no space left on the device for the manifest \(\d+ bytes\) in the cache {root}",
    ):
        cache.add(make_shard(1, 3))
    monkeypatch.undo()
    assert _entries(root) == before  # no renamed-but-unlisted shard, no temporary manifest
    assert cache.snapshot(0).shards == ((os.path.join(root, "shard-0000000000.npy"), 3),)
    np.testing.assert_array_equal(read_all(cache.snapshot(0)), make_shard(0, 3))  # still there


def test_opening_with_a_smaller_capacity_evicts_the_oldest_but_keeps_pinned_files(root):
    """Invariant: live bytes fit the capacity of the cache as opened; pinned files stay on disk."""
    big = ShardCache(root, capacity_bytes=10**6)
    paths = [big.add(make_shard(seq, 2)) for seq in range(4)]
    pinned = big.snapshot(0)
    small = ShardCache(root, capacity_bytes=2 * shard_bytes(2))
    assert small.shards() == [(p, 2) for p in paths[2:]]
    assert small.live_bytes() <= small.capacity_bytes
    assert all(os.path.exists(p) for p in paths)  # epoch 0 still reads shards 0 and 1
    small.end_epoch(0)
    assert [os.path.exists(p) for p in paths] == [False, False, True, True]
    assert pinned.shards == tuple((p, 2) for p in paths)


@pytest.mark.parametrize("method", ["snapshot", "end_epoch"])
@pytest.mark.parametrize(
    ("epoch", "error"), [(-1, ValueError), (1.0, TypeError), (None, TypeError)]
)
def test_a_bad_epoch_raises_naming_it(root, method, epoch, error):
    """Invariant: snapshot() and end_epoch() take an integer epoch >= 0; the manifest is unchanged."""
    cache = ShardCache(root, capacity_bytes=10**6)
    cache.add(make_shard(0, 1))
    before = _entries(root)
    with pytest.raises(error, match=rf"epoch should be .*but got epoch={epoch!r}"):
        getattr(cache, method)(epoch)
    assert _entries(root) == before


def test_a_missing_root_raises_naming_it(tmp_path):
    """Invariant: a root that does not exist is refused at construction, with its path."""
    missing = str(tmp_path / "nope")
    with pytest.raises(
        FileNotFoundError, match=f"root should be an existing directory, but got root='{missing}'"
    ):
        ShardCache(missing, capacity_bytes=100)


@given(bad=non_integers)
def test_a_non_integer_capacity_raises(bad):
    """Invariant: capacity_bytes must be an int; the error names it and the value."""
    with pytest.raises(
        TypeError, match="capacity_bytes should be an integer, but got capacity_bytes="
    ):
        ShardCache(tempfile.gettempdir(), capacity_bytes=bad)


def test_a_non_positive_capacity_raises(root):
    """Invariant: capacity_bytes must be >= 1."""
    with pytest.raises(ValueError, match="capacity_bytes should be >= 1, but got capacity_bytes=0"):
        ShardCache(root, capacity_bytes=0)


@pytest.mark.parametrize(
    "bad", [np.zeros((0, 2)), np.float32(1.0), [[1, 2]], np.array([[None]], dtype=object)]
)
def test_samples_that_are_not_a_non_empty_array_raise(root, bad):
    """Invariant: add() needs an array of shape (k, ...) with k >= 1; the error names samples."""
    with pytest.raises(
        ValueError,
        match=r"samples should be a numpy array of numbers \(bool, int, uint, float or complex\) "
        r"of shape \(k, \*sample_shape\) with k >= 1, but got samples=",
    ):
        ShardCache(root, capacity_bytes=10**6).add(bad)


def test_samples_of_another_shape_or_dtype_raise(root):
    """Invariant: every shard of a cache has the same sample_shape and dtype."""
    cache = ShardCache(root, capacity_bytes=10**6)
    cache.add(make_shard(0, 2))
    with pytest.raises(
        ValueError, match=r"sample_shape \(2,\) and dtype <i4 like the cached shards"
    ):
        cache.add(np.zeros((2, 3), np.int32))
    assert len(cache.shards()) == 1 and not any(n.startswith(".tmp-") for n in os.listdir(root))


def test_a_snapshot_after_its_epoch_ended_raises(root):
    """Invariant: a late rank cannot get a different snapshot for an ended epoch."""
    cache = ShardCache(root, capacity_bytes=10**6)
    cache.snapshot(0)
    cache.end_epoch(0)
    with pytest.raises(ValueError, match=r"epoch 0 already ended, but got snapshot\(epoch=0\)"):
        cache.snapshot(0)


def test_opening_a_cache_removes_what_a_killed_writer_left(root):
    """Invariant: a dead writer's temporary file and an unlisted (renamed, uncommitted) shard go."""
    cache = ShardCache(root, capacity_bytes=10**6)
    kept = cache.add(make_shard(0, 2))
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    torn = os.path.join(root, f".tmp-{int(dead.stdout)}-{_HOST}-abcd.npy")
    elsewhere = os.path.join(root, f".tmp-{int(dead.stdout)}-{_HOST}x-abcd.npy")
    for path in (torn, elsewhere):
        with open(path, "wb") as f:
            f.write(b"\x93NUMPY half a shard")
    np.save(os.path.join(root, "shard-0000000001.npy"), make_shard(1, 2))  # renamed, not listed
    reopened = ShardCache(root, capacity_bytes=10**6)
    assert reopened.shards() == [(kept, 2)]
    # another host's writer may be alive (this one cannot tell): its temporary file stays
    assert sorted(n for n in os.listdir(root) if n.endswith(".npy")) == [
        os.path.basename(elsewhere),
        "shard-0000000000.npy",
    ]
    assert os.path.basename(reopened.add(make_shard(1, 2))) == "shard-0000000001.npy"


# --- the state machine -------------------------------------------------------------------------


class CacheMachine(RuleBasedStateMachine):
    """Random add / reopen (evict) / crash / snapshot / read / end-epoch against a list model."""

    @initialize(capacity=cache_capacities)
    def open_cache(self, capacity):
        self.root = tempfile.mkdtemp(dir=RAM_DIR)
        self.cache = ShardCache(self.root, capacity_bytes=capacity)
        self.capacity = capacity
        self.live: list[tuple[str, int]] = []  # the model: live shards, oldest first
        self.data: dict[str, np.ndarray] = {}  # what each shard ever written holds
        self.pinned: dict[int, Snapshot] = {}  # snapshots not ended yet
        self.next_epoch = 0

    def fit(self):
        while sum(shard_bytes(n) for _, n in self.live) > self.capacity:
            self.live.pop(0)  # FIFO: the oldest goes first

    @rule(k=shard_samples)
    def add(self, k):
        seq = len(self.data)
        path = self.cache.add(make_shard(seq, k))
        self.data[path] = make_shard(seq, k)
        self.live.append((path, k))
        self.fit()

    @rule(capacity=cache_capacities)
    def reopen(self, capacity):
        """Another process opens the cache, maybe with another capacity: it evicts to fit."""
        self.cache = ShardCache(self.root, capacity_bytes=capacity)
        self.capacity = capacity
        self.fit()

    @rule(k=shard_samples)
    def writer_killed(self, k):
        """A writer died mid-add (a torn temporary file) or mid-commit (an unlisted shard)."""
        seq = len(self.data)  # the sequence number the next add will take
        with open(os.path.join(self.root, f".tmp-{DEAD_PID}-{_HOST}-torn.npy"), "wb") as f:
            f.write(b"\x93NUMPY torn")
        np.save(os.path.join(self.root, f"shard-{seq:010d}.npy"), make_shard(-1, k))
        self.cache = ShardCache(self.root, capacity_bytes=self.capacity)  # the next process

    @rule()
    def snapshot(self):
        snap = self.cache.snapshot(self.next_epoch)
        assert list(snap.shards) == self.live
        self.pinned[self.next_epoch] = snap
        self.next_epoch += 1

    @precondition(lambda self: self.pinned)
    @rule(data=st.data())
    def read(self, data):
        epoch = data.draw(st.sampled_from(sorted(self.pinned)))
        snap = self.pinned[epoch]
        expected = [self.data[p] for p, _ in snap.shards]
        got = read_all(snap) if snap.shards else np.zeros((0, 2), np.int32)
        np.testing.assert_array_equal(got, np.concatenate(expected) if expected else got)

    @precondition(lambda self: self.pinned)
    @rule(data=st.data())
    def end_epoch(self, data):
        epoch = data.draw(st.sampled_from(sorted(self.pinned)))
        self.cache.end_epoch(epoch)
        del self.pinned[epoch]

    @invariant()
    def live_shards_fit_the_capacity_in_fifo_order(self):
        assert self.cache.shards() == self.live
        assert self.cache.live_bytes() <= self.capacity

    @invariant()
    def pinned_shards_exist_and_nothing_else_is_kept(self):
        pinned = {p for s in self.pinned.values() for p, _ in s.shards}
        names = set(os.listdir(self.root)) - {"manifest.json", ".lock"}
        assert {os.path.join(self.root, n) for n in names} == pinned | {p for p, _ in self.live}

    def teardown(self):
        shutil.rmtree(self.root, ignore_errors=True)


TestCacheMachine = CacheMachine.TestCase
TestCacheMachine.settings = settings(settings.default, stateful_step_count=25)
