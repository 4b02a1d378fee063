"""A producer killed at any instant never hangs the training process (distsampling.growing.producer).

Nothing the producer process shares with its parent can be left held by a SIGKILL: its counters
and stop flag hold no lock, its error report is one atomic pipe write, the cache's lock is an
``flock`` (released by the kernel). Two kinds of test:

- **Placed kills**: the private seam of ``distsampling/growing/_park.py`` parks the producer
  process where it uses each shared object (``_DISTSAMPLING_PARK=<point>:<file>``); the test
  SIGKILLs it there, then calls one method of the parent. Every (point, method) pair must return
  or raise within ``DEADLINE`` seconds: each call runs in a thread, and one still running at the
  deadline fails the test (``@pytest.mark.timeout`` bounds the whole test too).
- **Random kills**: for each of a few seeds, 30 producers in a row on one cache are killed at
  random moments; after each kill every method of the parent returns or raises in time, and
  the cache lists exactly the shards counted (plus at most the one being counted).

And one more way a lock could outlive its use: a producer forked while another thread holds the
cache's ``flock`` must not keep the parent's lock (its copy of the lock file is closed at fork).

The producers are forked (``context="fork"``: milliseconds to start); the seam and the shared
objects are the same as under ``spawn``, which one placed kill checks too.
"""

from __future__ import annotations

import ctypes
import multiprocessing.sharedctypes
import multiprocessing.synchronize
import os
import random
import re
import select
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import test_producer
from hypothesis import given
from test_producer import RAM_DIR

from distsampling import NodeFeed
from distsampling.growing import _park, manifest
from distsampling.growing import producer as producer_module
from distsampling.growing.cache import ShardCache
from distsampling.growing.producer import Producer
from distsampling.growing.snapshot import load_shard
from strategies import traceback_texts

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL and fork: Linux")

dirs = test_producer.dirs  # the fixture: a remote of int32 pairs and an empty cache directory
DEADLINE = 20.0  # seconds a parent's call may take after the kill (it takes milliseconds)
K = 4  # samples per shard
KILLED = r"the producer process died with exit code -9 \(SIGKILL\) without reporting an error"
FAILED = r"the producer process failed: ValueError: samples should have sample_shape \(3,\)"


def write_wide_remote(root: str) -> None:
    """Remote files ``f0.npy, f1.npy``, 64 rows of 4 KiB: row ``r`` of file ``j`` is
    ``[j, r, 0, 0, ...]`` (1024 int32)."""
    for j in range(2):
        data = np.zeros((64, 1024), np.int32)
        data[:, 0], data[:, 1] = j, np.arange(64)
        np.save(os.path.join(root, f"f{j}.npy"), data)


def within(seconds: float, call: Callable[[], Any]) -> tuple[str, Any]:
    """``("returned", value)`` or ``("raised", error)`` of ``call()``; fails the test if it is
    still running after ``seconds`` (a hang), instead of waiting for it."""
    out: list = []

    def run() -> None:
        try:
            out.append(("returned", call()))
        except BaseException as err:  # reported to the test
            out.append(("raised", err))

    thread = threading.Thread(target=run, daemon=True)  # a hung call is left behind
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"the call hung: still running {seconds} s later")
    return out[0]


def wait_for(path: str, seconds: float = 60.0) -> int:
    """The pid the parked process wrote to ``path``."""
    deadline = time.monotonic() + seconds
    while not os.path.exists(path):
        assert time.monotonic() < deadline, f"the producer never parked ({path})"
        time.sleep(0.002)
    with open(path) as f:
        return int(f.read())


def sigkill(pid: int) -> None:
    """SIGKILL ``pid`` (a child of this process) and wait until it has died, without reaping it
    (its ``multiprocessing.Process`` reaps it, as after any kill)."""
    os.kill(pid, signal.SIGKILL)
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)


# --- placed kills --------------------------------------------------------------------------------

# the parent's calls, each with what it does after the kill: ("returns", expected value) or
# ("raises", the message's pattern; None: that of the point). p: the Producer, cache: its cache.
PRODUCER_CALLS: dict[str, Callable] = {
    "written": lambda p, cache: p.written,
    "retries": lambda p, cache: p.retries,
    "check": lambda p, cache: p.check(),
    "join": lambda p, cache: p.join(),  # no timeout: it must not wait for a dead process
    "stop": lambda p, cache: p.stop(),
    "with-exit": lambda p, cache: p.__exit__(None, None, None),  # leaving `with` cleanly
    "snapshot": lambda p, cache: len(cache.snapshot(0)),  # the trainer's call: the cache's flock
}
FEED_CALLS: dict[str, Callable] = {
    "feed.loader": lambda feed: feed.loader(0),  # waits for data: reads the producer
    "feed.close": lambda feed: feed.close(),
    "feed.with-exit": lambda feed: feed.__exit__(None, None, None),
}


def expected(point: str, call: str) -> tuple[str, Any]:
    """What ``call`` does once the producer was killed parked at ``point``."""
    if call in ("written", "retries"):
        return "returns", 0  # every point is reached before the first count
    if call == "snapshot":  # samples listed: the shard of a pending count is committed already
        return "returns", {"written": K, "errors": 2}.get(point, 0)  # errors: the odd shard
    error = FAILED if point == "errors" else KILLED  # "errors": it reported, then was killed
    if call == "feed.loader":
        return "raises", "epoch 0 cannot start on every rank:\nnode 0: " + error
    return "raises", error


def open_cache(point: str, local: str) -> ShardCache:
    """The cache on ``local``; at ``errors``, holding a shard of another sample shape (the
    producer's first shard is then refused: it fails, reports, and parks)."""
    cache = ShardCache(local, capacity_bytes=1 << 20)
    if point == "errors":
        cache.add(np.zeros((2, 3), np.float32))
    return cache


def assert_outcome(outcome: tuple[str, Any], want: tuple[str, Any]) -> None:
    how, got = outcome
    if want[0] == "returns":
        assert how == "returned", f"raised {got!r}"
        assert got == want[1]
    else:
        assert how == "raised", f"returned {got!r}, but should raise {want[1]!r}"
        assert isinstance(got, RuntimeError), repr(got)
        assert re.match(want[1], str(got)), str(got)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("call", list(PRODUCER_CALLS))
@pytest.mark.parametrize("point", _park.POINTS)
def test_a_producer_killed_where_it_uses_a_shared_object_never_hangs_its_parent(
    dirs, monkeypatch, point, call
):
    """Invariant: the producer SIGKILLed while it uses each shared object (a counter, the stop
    flag, the cache's flock, the error pipe): each call of the parent returns or raises within
    DEADLINE, with the count so far, the shards committed, or the signal's name."""
    remote, local = dirs
    parked = os.path.join(local, "parked")  # a name the cache ignores
    monkeypatch.setenv(_park.ENV, f"{point}:{parked}")
    cache = open_cache(point, local)
    producer = Producer(remote, cache, samples_per_shard=K, context="fork")
    try:
        sigkill(wait_for(parked))
        assert_outcome(
            within(DEADLINE, lambda: PRODUCER_CALLS[call](producer, cache)), expected(point, call)
        )
    finally:
        producer.process.kill()
        producer.process.join(DEADLINE)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("call", list(FEED_CALLS))
@pytest.mark.parametrize("point", _park.POINTS)
def test_a_node_feed_whose_producer_was_killed_where_it_uses_a_shared_object_never_hangs(
    dirs, monkeypatch, point, call
):
    """Invariant: NodeFeed's calls that read its producer (the next epoch's loader, close, the
    end of ``with``) raise within DEADLINE, naming the signal (or the reported error), after
    its producer is SIGKILLed at each point."""
    remote, local = dirs
    parked = os.path.join(local, "parked")
    monkeypatch.setenv(_park.ENV, f"{point}:{parked}")
    open_cache(point, local)
    feed = NodeFeed(
        remote,
        local,
        capacity_bytes=1 << 20,
        samples_per_shard=K,
        batch_size=2,
        producer_options={"context": "fork"},
    )
    process = feed.producer.process
    try:
        sigkill(wait_for(parked))
        assert_outcome(within(DEADLINE, lambda: FEED_CALLS[call](feed)), expected(point, call))
    finally:
        process.kill()
        process.join(DEADLINE)


@pytest.mark.timeout(120)
def test_a_spawned_producer_killed_holding_its_counter_is_reported_by_every_call(dirs, monkeypatch):
    """Invariant: the same under the default start method (spawn: the shared objects are
    pickled to a fresh interpreter): after a SIGKILL while it updates its count of shards, every
    call of the parent returns or raises within DEADLINE."""
    remote, local = dirs
    parked = os.path.join(local, "parked")
    monkeypatch.setenv(_park.ENV, f"written:{parked}")
    cache = open_cache("written", local)
    producer = Producer(remote, cache, samples_per_shard=K)
    try:
        sigkill(wait_for(parked))
        for call in PRODUCER_CALLS:
            outcome = within(DEADLINE, lambda: PRODUCER_CALLS[call](producer, cache))  # noqa: B023
            assert_outcome(outcome, expected("written", call))
    finally:
        producer.process.kill()
        producer.process.join(DEADLINE)


def test_nothing_the_producer_process_is_handed_holds_a_lock(dirs):
    """Invariant: no object the Producer shares with its process is (or holds) a multiprocessing lock,
    event, condition, semaphore or synchronized value; its two counters are int64 at 8-byte
    aligned addresses (one load or store each: read without a lock)."""
    remote, local = dirs
    cache = ShardCache(local, capacity_bytes=1 << 20)
    producer = Producer(remote, cache, samples_per_shard=K, max_shards=1, context="fork")
    try:
        held = [v for k, v in vars(producer).items() if k != "process"]  # what it shares
        inner = [v for obj in held if hasattr(obj, "__dict__") for v in vars(obj).values()]
        assert len(held) >= 4  # the stop flag, two counters, the error pipe (and the rest)
        for obj in held + inner:
            assert not isinstance(
                obj,
                multiprocessing.synchronize.SemLock | multiprocessing.sharedctypes.SynchronizedBase,
            ), obj
            assert not hasattr(obj, "get_lock"), obj
        for counter in (producer._written, producer._retried):
            assert ctypes.sizeof(counter) == 8 and ctypes.addressof(counter) % 8 == 0
    finally:
        producer.join(timeout=60)


def test_the_park_seam_refuses_a_bad_value_naming_it(monkeypatch):
    """Invariant: a mistyped _DISTSAMPLING_PARK is an error naming the variable and the value,
    not a test that silently never parks."""
    monkeypatch.setenv(_park.ENV, "writen:/tmp/x")
    with pytest.raises(
        ValueError, match=r"_DISTSAMPLING_PARK should be <point>:<file> .* 'writen:/tmp/x'"
    ):
        _park.arm()


@pytest.mark.timeout(120)
def test_stop_kills_a_producer_that_does_not_stop_in_time_and_that_is_no_failure(dirs, monkeypatch):
    """Invariant: a producer that does not end within stop()'s timeout (parked, past the stop
    flag) is killed by stop(), which then returns: its own kill is not a failure, for stop() or
    for a later check() or join(); the shard it committed stays listed."""
    remote, local = dirs
    parked = os.path.join(local, "parked")
    monkeypatch.setenv(_park.ENV, f"written:{parked}")
    cache = ShardCache(local, capacity_bytes=1 << 20)
    producer = Producer(remote, cache, samples_per_shard=K, context="fork")
    try:
        wait_for(parked)
        assert within(DEADLINE, lambda: producer.stop(timeout=0.5)) == ("returned", None)
        assert producer.process.exitcode == -signal.SIGKILL  # killed by stop() itself
        assert within(DEADLINE, producer.check) == ("returned", None)
        assert within(DEADLINE, producer.join) == ("returned", None)
        assert producer.written == 0 and [n for _, n in cache.shards()] == [K]
    finally:
        producer.process.kill()
        producer.process.join(DEADLINE)


# --- the cache's lock across a fork --------------------------------------------------------------


@pytest.mark.timeout(120)
def test_a_producer_forked_while_a_thread_holds_the_cache_lock_does_not_keep_it(dirs):
    """Invariant: a producer forked while another thread of the training process holds the
    cache's flock commits its shards, and the parent takes the lock again, within DEADLINE: the
    child closes its copy of the lock file at the fork (kept open, it would share the lock, and
    hold it, for as long as the child lives)."""
    remote, local = dirs
    cache = ShardCache(local, capacity_bytes=1 << 20)
    inside, leave = threading.Event(), threading.Event()

    def hold() -> None:
        with manifest.locked(local):
            inside.set()
            leave.wait(60)

    holder = threading.Thread(target=hold)
    holder.start()
    assert inside.wait(60)
    producer = Producer(remote, cache, samples_per_shard=K, max_shards=2, context="fork")
    leave.set()
    holder.join(60)
    try:
        assert within(DEADLINE, producer.join) == ("returned", None)
        assert within(DEADLINE, lambda: [n for _, n in cache.shards()]) == ("returned", [K, K])
    finally:
        producer.process.kill()
        producer.process.join(DEADLINE)


# --- the error report: one atomic pipe write ---------------------------------------------------


@given(text=traceback_texts)
def test_an_error_report_fits_one_atomic_pipe_write_and_keeps_its_cause(text):
    """Invariant: the report the producer sends is at most PIPE_BUF bytes with the pipe's 4-byte
    header (one write: a kill cannot cut it, and the producer never blocks on a full pipe); a
    report that fits is sent whole; else its last line, the cause, is kept (its start, if long)."""
    report = producer_module._report(text)
    assert len(report) + 4 <= select.PIPE_BUF
    data = text.encode("utf-8", "replace")
    if len(data) + 4 <= select.PIPE_BUF:
        assert report == data
    else:
        cause = (text.rstrip().splitlines() or [""])[-1].encode("utf-8", "replace")
        last = report.rsplit(b"\n", 1)[-1]
        assert cause.startswith(last) and len(last) >= min(len(cause), (select.PIPE_BUF - 4) // 4)


def _fail_with_a_long_traceback(*args, **kwargs):
    """Raise under 800 frames, two functions in turn (no "[Previous line repeated]"): a traceback
    of about 100 KB, more than a pipe holds (64 KiB): sent whole, it would block the producer."""

    def ping(n):
        return pong(n - 1) if n else _refuse()

    def pong(n):
        return ping(n - 1)

    ping(800)


def _refuse():
    raise ValueError("the cache refused the shard")


@pytest.mark.timeout(120)
def test_a_producer_failing_with_a_long_traceback_is_reported_by_join_without_a_timeout(
    dirs, monkeypatch
):
    """Invariant: a failure whose traceback is longer than a pipe holds reaches join() (no
    timeout) within DEADLINE, its cause named: the report is cut to fit one write, so the
    producer never waits for a parent that reads only once the producer has ended."""
    remote, local = dirs
    cache = ShardCache(local, capacity_bytes=1 << 20)
    monkeypatch.setattr(ShardCache, "add", _fail_with_a_long_traceback)  # the forked child too
    producer = Producer(remote, cache, samples_per_shard=K, context="fork")
    try:
        how, err = within(DEADLINE, producer.join)
        assert how == "raised" and isinstance(err, RuntimeError)
        first = str(err).splitlines()[0]
        assert first == "the producer process failed: ValueError: the cache refused the shard"
        assert "bytes of traceback, cut to fit" in str(err)
    finally:
        producer.process.kill()
        producer.process.join(DEADLINE)


# --- random kills ------------------------------------------------------------------------------


@pytest.mark.timeout(240)
@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_30_producers_killed_at_random_moments_never_hang_the_parent_nor_tear_the_cache(seed):
    """Invariant: 30 producers in a row on one cache, each SIGKILLed at a random moment
    (starting, reading, writing, committing, counting): every call of the parent returns or
    raises within DEADLINE, each kill is reported with SIGKILL, the cache then lists exactly
    the shards counted (plus at most the one whose count the kill cut off), and every listed
    shard is whole."""
    rng = random.Random(seed)
    with (
        tempfile.TemporaryDirectory(dir=RAM_DIR) as remote,
        tempfile.TemporaryDirectory(dir=RAM_DIR) as local,
    ):
        write_wide_remote(remote)  # 4 KiB samples: 32 KiB shards
        cache = ShardCache(local, capacity_bytes=1 << 30)  # never evicts: every shard stays
        listed = 0
        for kill in range(30):
            producer = Producer(
                remote, cache, samples_per_shard=8, seed=1000 * seed + kill, context="fork"
            )
            try:
                time.sleep(rng.uniform(0.0, 0.06))  # a random moment of its life
                sigkill(producer.process.pid)
                for call in ("written", "retries", "check", "join", "stop"):
                    outcome = within(DEADLINE, lambda: PRODUCER_CALLS[call](producer, cache))  # noqa: B023
                    if call in ("written", "retries"):
                        assert outcome[0] == "returned"
                    else:
                        assert_outcome(outcome, ("raises", KILLED))
            finally:
                producer.process.kill()
                producer.process.join(DEADLINE)
            how, shards = within(DEADLINE, lambda: ShardCache(local, 1 << 30).shards())
            assert how == "returned"  # reopened: what the kill left is cleaned up
            now = len(shards)
            assert now - listed in (producer.written, producer.written + 1), (kill, now, listed)
            listed = now
            files = sorted(n for n in os.listdir(local) if n.endswith(".npy"))
            assert files == sorted(os.path.basename(p) for p, _ in shards)  # none torn, none stray
        samples = np.concatenate([load_shard(p, n) for p, n in cache.shards()])
        assert len(samples) == 8 * listed
        assert np.all(samples[:, 0] < 2) and np.all(samples[:, 1] < 64) and not samples[:, 2:].any()
