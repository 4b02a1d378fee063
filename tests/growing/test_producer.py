"""Properties of distsampling.growing.producer: what it writes, its bandwidth cap, and SIGKILL safety.

Every remote sample is the int32 pair ``(file number, row)``, so a sample found in the cache proves
it was copied whole from a real row of the source. Processes are bounded by timeouts.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import tempfile
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distsampling.growing import producer as producer_module
from distsampling.growing import writer
from distsampling.growing.cache import ShardCache
from distsampling.growing.producer import Producer, produce
from distsampling.growing.remote import RemoteSource
from distsampling.growing.snapshot import load_shard
from strategies import shard_samples

RAM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None  # same properties, free fsyncs
ROWS = (3, 7, 5)  # rows of the three remote files


def write_remote(root: str, rows=ROWS) -> None:
    """Remote files ``f0.npy, f1.npy, ...``: row ``r`` of file ``j`` is ``[j, r]``."""
    for j, n in enumerate(rows):
        data = np.stack([np.full(n, j, np.int32), np.arange(n, dtype=np.int32)], axis=1)
        np.save(os.path.join(root, f"f{j}.npy"), data)


def cached_samples(cache: ShardCache) -> np.ndarray:
    return np.concatenate([load_shard(p, n) for p, n in cache.shards()])


def assert_whole_remote_rows(samples: np.ndarray, rows=ROWS) -> None:
    """Every sample is an actual row of the remote: file j in range, row < rows[j]."""
    assert samples.shape[1:] == (2,) and samples.dtype == np.int32
    for j, r in samples:
        assert 0 <= j < len(rows) and 0 <= r < rows[j], (j, r)


@pytest.fixture
def dirs():
    with (
        tempfile.TemporaryDirectory(dir=RAM_DIR) as remote,
        tempfile.TemporaryDirectory(dir=RAM_DIR) as local,
    ):
        write_remote(remote)
        yield remote, local


@given(k=shard_samples, shards=st.integers(1, 4), seed=st.integers(0, 2**32))
def test_produce_writes_max_shards_of_whole_remote_rows_reproducibly(k, shards, seed):
    """Invariant: max_shards shards of k samples, each a real remote row; same seed, same data."""
    got = []
    for _ in range(2):
        with (
            tempfile.TemporaryDirectory(dir=RAM_DIR) as remote,
            tempfile.TemporaryDirectory(dir=RAM_DIR) as local,
        ):
            write_remote(remote)
            cache = ShardCache(local, capacity_bytes=10**6)
            assert (
                produce(remote, cache, samples_per_shard=k, seed=seed, max_shards=shards) == shards
            )
            assert [n for _, n in cache.shards()] == [k] * shards
            got.append(cached_samples(cache))
    assert_whole_remote_rows(got[0])
    np.testing.assert_array_equal(got[0], got[1])


class FakeClock:
    """Stands in for the producer's ``time``: only sleep() moves it; it logs every sleep."""

    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.sleeps.append(seconds)
        self.now += seconds


@given(bandwidth=st.floats(1.0, 1e4), k=shard_samples, shards=st.integers(1, 3))
def test_the_bandwidth_cap_paces_every_read(bandwidth, k, shards):
    """Invariant: after the i-th sample (8 bytes each) the clock reads exactly 8 i / bandwidth."""
    with (
        tempfile.TemporaryDirectory(dir=RAM_DIR) as remote,
        tempfile.TemporaryDirectory(dir=RAM_DIR) as local,
        pytest.MonkeyPatch.context() as mp,
    ):
        write_remote(remote)
        clock = FakeClock()
        mp.setattr(producer_module, "time", clock)
        cache = ShardCache(local, capacity_bytes=10**6)
        produce(remote, cache, samples_per_shard=k, bandwidth=bandwidth, max_shards=shards)
    assert len(clock.sleeps) == k * shards  # one pause per sample read
    assert clock.now == pytest.approx(8 * k * shards / bandwidth)
    assert clock.sleeps == pytest.approx([8 / bandwidth] * (k * shards))  # never a burst


def test_an_fsspec_url_is_a_remote_too(dirs):
    """Invariant: a memory:// URL (fsspec) serves the same rows as a local directory."""
    fsspec = pytest.importorskip("fsspec")
    remote, local = dirs
    fs = fsspec.filesystem("memory")
    for name in os.listdir(remote):
        with open(os.path.join(remote, name), "rb") as src, fs.open(f"/remote/{name}", "wb") as dst:
            dst.write(src.read())
    url = RemoteSource("memory://remote")
    disk = RemoteSource(remote)
    assert url.sample_shape == disk.sample_shape == (2,)
    for j, n in enumerate(ROWS):
        for r in range(n):
            np.testing.assert_array_equal(url.read(j, r), disk.read(j, r))
    cache = ShardCache(local, capacity_bytes=10**6)
    produce("memory://remote", cache, samples_per_shard=4, max_shards=2)
    assert_whole_remote_rows(cached_samples(cache))


def test_a_background_producer_fills_the_cache_while_snapshots_stay_frozen(dirs):
    """Invariant: the process commits max_shards shards; an earlier snapshot does not change."""
    remote, local = dirs
    cache = ShardCache(local, capacity_bytes=10**6)
    early = cache.snapshot(0)
    with Producer(remote, cache, samples_per_shard=4, max_shards=5) as producer:
        producer.join(timeout=120)
    assert producer.process.exitcode == 0 and producer.written == 5
    assert cache.snapshot(0) == early and len(early) == 0
    assert len(cache.snapshot(1)) == 20
    assert_whole_remote_rows(cached_samples(cache))


def test_stop_ends_a_running_producer_between_shards(dirs):
    """Invariant: stop() ends an unbounded producer cleanly; every counted shard is committed."""
    remote, local = dirs
    cache = ShardCache(local, capacity_bytes=10**6)
    producer = Producer(remote, cache, samples_per_shard=2, bandwidth=800.0, context="fork")
    deadline = time.monotonic() + 60
    while producer.written < 1 and time.monotonic() < deadline:
        time.sleep(0.01)
    producer.stop(timeout=60)
    assert producer.process.exitcode == 0  # it returned, it was not killed
    assert len(cache.shards()) == producer.written >= 1


# --- SIGKILL mid-write -------------------------------------------------------------------------


def _killed_mid_write(remote: str, local: str, done: mp.Queue) -> None:
    """Child: commit two shards, then write half of a third and hang until killed."""
    cache = ShardCache(local, capacity_bytes=10**6)
    for _ in range(2):
        done.put(os.path.basename(cache.add(RemoteSource(remote).read(1, 0)[None].repeat(4, 0))))

    def write_half_and_hang(f, header, array):
        f.write(header + array.tobytes()[: array.nbytes // 2])
        f.flush()
        done.put("mid-write")
        time.sleep(600)  # SIGKILLed here

    writer._write_npy = write_half_and_hang
    cache.add(np.zeros((4, 2), np.int32))


def test_sigkill_mid_write_shows_no_torn_shard_and_loses_no_completed_one(dirs):
    """Invariant: after SIGKILL during a write, snapshots list only the completed shards, intact."""
    remote, local = dirs
    ctx = mp.get_context("fork")
    done = ctx.Queue()
    child = ctx.Process(target=_killed_mid_write, args=(remote, local, done))
    child.start()
    try:
        committed = [done.get(timeout=60) for _ in range(2)]
        assert done.get(timeout=60) == "mid-write"
        torn = [n for n in os.listdir(local) if n.startswith(".tmp-") and n.endswith(".npy")]
        assert len(torn) == 1  # the half-written shard exists, under its temporary name
        os.kill(child.pid, signal.SIGKILL)
    finally:
        child.join(timeout=60)
    assert child.exitcode == -signal.SIGKILL
    # nothing torn is visible: the only shard files are the completed ones
    assert sorted(n for n in os.listdir(local) if n.startswith("shard-")) == committed
    # opening the cache cleans up the dead writer's file; snapshots list the completed shards
    cache = ShardCache(local, capacity_bytes=10**6)
    assert not any(n.startswith(".tmp-") for n in os.listdir(local))
    assert [os.path.basename(p) for p, _ in cache.snapshot(0).shards] == committed
    np.testing.assert_array_equal(cached_samples(cache), np.tile([1, 0], (8, 1)))


def _write_half_and_hang(f, header, array):
    f.write(header + array.tobytes()[: array.nbytes // 2])
    f.flush()
    time.sleep(600)  # SIGKILLed here


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_producer_killed_mid_write_leaves_no_temporary_file_once_joined(dirs, monkeypatch):
    """Invariant: join() reaps a killed producer (no zombie) and deletes its temporary file,
    without waiting for a later ShardCache to be opened."""
    remote, local = dirs
    cache = ShardCache(local, capacity_bytes=10**6)
    monkeypatch.setattr(writer, "_write_npy", _write_half_and_hang)  # the forked child hangs
    producer = Producer(remote, cache, samples_per_shard=4, context="fork")
    try:
        deadline = time.monotonic() + 60
        while not any(n.startswith(".tmp-") for n in os.listdir(local)):
            assert time.monotonic() < deadline, "the producer never started its shard"
            time.sleep(0.01)
        os.kill(producer.process.pid, signal.SIGKILL)
        with pytest.raises(RuntimeError, match=r"died with exit code -9 \(SIGKILL\)"):
            producer.join(timeout=60)
        assert producer.process.exitcode == -signal.SIGKILL  # reaped
        assert sorted(os.listdir(local)) == [".lock", "manifest.json"]
    finally:
        producer.process.kill()
        producer.process.join(timeout=60)
    assert cache.shards() == []


def _short_write(f, header, array):
    f.write(header)
    raise OSError(f"{array.nbytes} requested and {array.nbytes // 2} written")  # numpy's words


def test_a_full_disk_in_the_producer_is_re_raised_by_join_in_words(dirs, monkeypatch):
    """Invariant: a short write in the producer process reaches join() as the cache's full-disk
    error, in its first line (the cache and the bytes named), and leaves no temporary file. The same on a real
    full tmpfs: tests/growing/test_writer.py."""
    remote, local = dirs
    cache = ShardCache(local, capacity_bytes=10**6)
    monkeypatch.setattr(writer, "_write_npy", _short_write)  # the forked child inherits it
    producer = Producer(remote, cache, samples_per_shard=4, context="fork")
    with pytest.raises(
        RuntimeError,
        match=r"^the producer process failed: OSError: \[Errno 28\] no space left on the "
        rf"device for a shard of {128 + 4 * 8} bytes in the cache {local} \(",
    ):
        producer.join(timeout=60)
    assert sorted(os.listdir(local)) == [".lock", "manifest.json"]


# SIGKILL at random moments, 30 times a seed, and at each point where the process uses what it
# shares with the training process: tests/growing/test_faults.py


# --- bad input ---------------------------------------------------------------------------------


def test_a_source_without_npy_files_raises(tmp_path):
    """Invariant: an empty source is refused before any process starts."""
    with pytest.raises(ValueError, match=r"source should hold \.npy files, but got none in"):
        Producer(str(tmp_path), ShardCache(tmp_path, capacity_bytes=100), samples_per_shard=1)


def test_a_cache_that_is_not_a_shard_cache_raises(dirs):
    """Invariant: a path where a ShardCache belongs is refused in the caller, naming it."""
    remote, local = dirs
    for run in (produce, Producer):
        with pytest.raises(
            TypeError, match=f"cache should be a distsampling.ShardCache, but got cache='{local}'"
        ):
            run(remote, local, samples_per_shard=1)


def test_a_capacity_smaller_than_one_shard_raises_in_the_caller(dirs):
    """Invariant: a shard that could never fit is refused before any process starts."""
    remote, local = dirs
    cache = ShardCache(local, capacity_bytes=100)
    for run in (produce, Producer):
        with pytest.raises(
            ValueError,
            match=r"capacity_bytes should be at least the size of one shard \(20 samples of 8 "
            r"bytes\), but got capacity_bytes=100",
        ):
            run(remote, cache, samples_per_shard=20)
    assert sorted(os.listdir(local)) == [".lock", "manifest.json"]  # no shard written
    assert cache.shards() == []


def test_a_failure_in_the_producer_process_is_raised_by_join_with_its_traceback(dirs):
    """Invariant: the child's exception does not vanish: join() raises it, naming the cause."""
    remote, local = dirs
    cache = ShardCache(local, capacity_bytes=10**6)
    cache.add(np.zeros((2, 3), np.float32))  # the remote holds int32 pairs: add() will refuse
    producer = Producer(remote, cache, samples_per_shard=2, max_shards=1, context="fork")
    with pytest.raises(
        RuntimeError, match=r"(?s)the producer process failed:.*sample_shape \(3,\)"
    ):
        producer.join(timeout=60)
    with pytest.raises(RuntimeError, match="the producer process failed"):
        producer.stop()  # and again, for whoever calls stop()
    assert producer.process.exitcode == 1 and producer.written == 0


def test_a_bad_context_raises_naming_it(dirs):
    """Invariant: context must be a start method of this platform."""
    remote, local = dirs
    with pytest.raises(ValueError, match=r"context should be one of .* but got context='threads'"):
        Producer(
            remote, ShardCache(local, capacity_bytes=10**6), samples_per_shard=1, context="threads"
        )


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"samples_per_shard": 0},
            ValueError,
            "samples_per_shard should be >= 1, but got samples_per_shard=0",
        ),
        ({"samples_per_shard": 1.5}, TypeError, "samples_per_shard should be an integer"),
        (
            {"bandwidth": 0},
            ValueError,
            "bandwidth should be a positive number .* but got bandwidth=0",
        ),
        ({"bandwidth": True}, ValueError, "but got bandwidth=True"),
        ({"bandwidth": "fast"}, ValueError, "but got bandwidth='fast'"),
        ({"max_shards": 0}, ValueError, "max_shards should be >= 1, but got max_shards=0"),
        ({"seed": -1}, ValueError, "seed should be >= 0, but got seed=-1"),
    ],
)
def test_bad_arguments_raise_naming_the_argument(dirs, kwargs, error, message):
    """Invariant: each bad argument gives an error naming it and its value."""
    remote, local = dirs
    args = {"samples_per_shard": 2, "max_shards": 1} | kwargs
    with pytest.raises(error, match=message):
        produce(remote, ShardCache(local, capacity_bytes=10**6), **args)
