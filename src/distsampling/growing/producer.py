r"""A background process that samples from "remote" storage and fills a :class:`ShardCache`.

:func:`produce` is the loop: pick a random sample of the :class:`~distsampling.growing.remote.RemoteSource`
(a random file, then a random row: one seek and one read, never a whole file), stack
``samples_per_shard`` of them, add them to the cache as one shard, repeat. A bandwidth cap (bytes
per second) makes a local directory behave like slow remote storage. :class:`Producer` runs that
loop in its own process, so its reading and writing never hold the training process's GIL.

A SIGKILL at any moment is safe: a shard becomes visible only by the cache's atomic rename and
manifest commit. Nor can a killed process hang the training process: nothing they share can be
left held. The two counters are plain shared int64 (aligned, one writer: the producer; read
without a lock), the stop flag a plain shared byte (one writer: the parent), the error report
one write of at most ``PIPE_BUF`` bytes down a pipe (atomic: all of it or nothing), and the
cache's lock an ``flock``, which the kernel releases when its holder dies. Once the process has
ended, :meth:`Producer.join` / :meth:`Producer.stop` reap it and delete its temporary file; a
:class:`ShardCache` opened meanwhile deletes it too (a killed process not yet reaped, a zombie,
counts as dead). An error in the process (a full disk, a bad remote file) is re-raised by
:meth:`Producer.join` / :meth:`Producer.stop` in the training process, with its traceback; a
kill, with its signal's name.

References:
    the user's question of a dataset that grows every epoch from remote storage (a sampling
    subprocess writing local shards while training runs);
    multiprocessing.Process / RawValue / Pipe (the process and what it shares: no lock);
    pipe(7) (a write of at most PIPE_BUF bytes is atomic).
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import numbers
import os
import select
import signal
import time
import traceback
from typing import Any

import numpy as np

from .._checks import check_int
from ._park import arm, park
from .cache import ShardCache
from .manifest import remove_temp_files
from .remote import RemoteSource

__all__ = ["Producer", "produce"]


def produce(
    source: str | os.PathLike,
    cache: ShardCache,
    *,
    samples_per_shard: int,
    bandwidth: float | None = None,
    seed: int = 0,
    max_shards: int | None = None,
    stop: Any = None,
    written: Any = None,
    retried: Any = None,
    storage_options: dict[str, Any] | None = None,
    part: tuple[int, int] | None = None,
    deadline: float = 60.0,
) -> int:
    r"""Fill ``cache`` with shards of random remote samples (the loop the :class:`Producer` runs).

    Args:
        source: a directory of ``.npy`` sample files, or an fsspec URL.
        cache: the :class:`ShardCache` to fill.
        samples_per_shard: samples stacked into each shard.
        bandwidth: the most bytes per second read from the source (``None``: no cap).
        seed: seed of the random choice of samples (``>= 0``).
        max_shards: stop after this many shards (``None``: run until ``stop`` is set).
        stop: anything with ``is_set()`` (an event, or the :class:`Producer`'s lock-free flag);
            the loop ends (between shards) once it is set.
        written: a shared counter with a ``value`` (e.g. ``multiprocessing.RawValue("q", 0)``)
            that this loop alone writes: plus one per shard committed.
        retried: the same, set to the number of remote requests retried.
        storage_options: keyword arguments for a URL source's file system (e.g. s3fs's
            ``key``, ``secret``, ``endpoint_url``).
        part: ``(i, n)``: sample only files ``i, i + n, ...`` of the source (one node's part).
        deadline: seconds a remote request retries transient errors (throttling, timeouts,
            connection resets, a server restarting) before the producer fails naming the URL.

    Returns:
        The number of shards written.

    Examples:
        >>> import tempfile
        >>> remote, local = tempfile.mkdtemp(), tempfile.mkdtemp()
        >>> np.save(f"{remote}/a.npy", np.arange(8, dtype=np.float32).reshape(4, 2))
        >>> cache = ShardCache(local, capacity_bytes=1 << 20)
        >>> produce(remote, cache, samples_per_shard=3, max_shards=2)
        2
        >>> [n for _, n in cache.shards()]
        [3, 3]
    """
    remote = RemoteSource(source, storage_options=storage_options, part=part, deadline=deadline)
    samples_per_shard, bandwidth, max_shards = _check(
        cache, remote, samples_per_shard, bandwidth, max_shards, seed
    )
    rng = np.random.default_rng(seed)
    start, read, count = time.monotonic(), 0, 0
    try:
        while max_shards is None or count < max_shards:
            park("stop")  # a test seam (see _park.py): a no-op unless a test asked
            if stop is not None and stop.is_set():
                break
            shard = np.empty((samples_per_shard, *remote.sample_shape), remote.dtype)
            for i in range(samples_per_shard):
                k = int(rng.integers(len(remote.files)))  # a random file, then a random row
                shard[i] = remote.read(k, int(rng.integers(remote.rows(k))))
                park("retried")
                if retried is not None and retried.value != remote.retries:
                    retried.value = remote.retries  # storage failed and came back meanwhile
                read += remote.row_bytes
                if bandwidth is not None:  # sleep until the average rate is back under the cap
                    time.sleep(max(0.0, read / bandwidth - (time.monotonic() - start)))
            cache.add(shard)  # committed (visible to snapshots) when this returns
            count += 1
            if written is not None:
                park("written")
                written.value += 1  # no lock: this loop is its only writer
    finally:
        remote.close()
    return count


class Producer:
    r"""Run :func:`produce` in a background process; ``stop()`` (or leaving ``with``) ends it.

    Args:
        source: a directory of ``.npy`` sample files, or an fsspec URL.
        cache: the :class:`ShardCache` to fill.
        samples_per_shard: samples stacked into each shard.
        bandwidth: the most bytes per second read from the source (``None``: no cap).
        seed: seed of the random choice of samples.
        max_shards: stop after this many shards (``None``: run until stopped).
        context: the multiprocessing start method (``"spawn"`` is safe with torch's threads).
        storage_options: keyword arguments for a URL source's file system (must pickle).
        part: ``(i, n)``: sample only files ``i, i + n, ...`` of the source (one node's part).
        deadline: seconds a remote request retries transient errors before the process fails;
            :meth:`check` (or ``join``/``stop``) then raises its error, naming the URL.

    A process killed (SIGKILL, the out-of-memory killer) at any instant leaves no lock held:
    every method here still returns or raises at once, and ``check``, ``join`` and ``stop``
    raise ``RuntimeError`` naming the signal. The shards it committed stay in the cache; no
    more are written until a new :class:`Producer` is started on it.

    Examples:
        >>> import tempfile
        >>> remote, local = tempfile.mkdtemp(), tempfile.mkdtemp()
        >>> np.save(f"{remote}/a.npy", np.ones((10, 4), np.float32))
        >>> cache = ShardCache(local, capacity_bytes=1 << 20)
        >>> with Producer(remote, cache, samples_per_shard=5, max_shards=3) as p:
        ...     p.join(timeout=60)
        >>> p.written, len(cache.snapshot(epoch=0))
        (3, 15)
    """

    def __init__(
        self,
        source: str | os.PathLike,
        cache: ShardCache,
        *,
        samples_per_shard: int,
        bandwidth: float | None = None,
        seed: int = 0,
        max_shards: int | None = None,
        context: str = "spawn",
        storage_options: dict[str, Any] | None = None,
        part: tuple[int, int] | None = None,
        deadline: float = 60.0,
    ) -> None:
        # fail here, in the caller, on a bad source (not the child)
        remote = RemoteSource(source, storage_options=storage_options, part=part, deadline=deadline)
        remote.close()
        _check(cache, remote, samples_per_shard, bandwidth, max_shards, seed)
        if context not in mp.get_all_start_methods():
            raise ValueError(
                f"context should be one of {mp.get_all_start_methods()}, but got context={context!r}"
            )
        ctx = mp.get_context(context)
        # what the two processes share holds no lock (a lock a killed process held stays held):
        # two int64 counters only the child writes, a byte only the parent writes, and a pipe
        self._stop = _Flag(ctx)
        self._written, self._retried = ctx.RawValue("q", 0), ctx.RawValue("q", 0)
        self._errors, errors = ctx.Pipe(duplex=False)  # the child sends its traceback, if any
        self._failure: str | None = None
        self._stopped_by_kill = False  # stop() killed it after its timeout: not a failure
        self._root = cache.root  # where its temporary files are, to delete them once it ended
        kwargs = {"samples_per_shard": samples_per_shard, "bandwidth": bandwidth, "seed": seed}
        kwargs |= {"max_shards": max_shards, "stop": self._stop, "written": self._written}
        kwargs |= {"retried": self._retried}
        kwargs |= {"storage_options": storage_options, "part": part, "deadline": deadline}
        self.process = ctx.Process(
            target=_run, args=(errors, source, cache, kwargs), daemon=True, name="Producer"
        )
        self.process.start()
        errors.close()  # the child holds its own copy

    @property
    def written(self) -> int:
        """Shards committed to the cache so far."""
        return self._written.value

    @property
    def retries(self) -> int:
        """Remote requests retried so far (throttling, timeouts, connection resets)."""
        return self._retried.value

    def check(self) -> None:
        """Raise ``RuntimeError`` if the process has failed (with its traceback) or was killed.

        Cheap (a poll of a pipe): a training loop calls it between epochs, so that a producer
        that died (storage down past its deadline, a full disk, SIGKILL) stops training with its
        reason instead of leaving the loop to wait for shards that never come.
        """
        if not self.process.is_alive():  # ended, and now reaped (is_alive waits for it)
            remove_temp_files(self._root, self.process.pid)  # what a kill -9 left mid-write
            if self._failure is None:
                # EOF: it ended without a word; OSError: a message cut short (never sent so: a
                # report is one atomic write, see _report)
                with contextlib.suppress(EOFError, OSError):
                    if self._errors.poll():
                        self._failure = self._errors.recv_bytes().decode("utf-8", "replace")
        if self._failure is not None:
            cause = self._failure.rstrip().splitlines()[-1]  # e.g. "OSError: [Errno 28] no space"
            raise RuntimeError(f"the producer process failed: {cause}\n{self._failure}")
        code = self.process.exitcode
        if code not in (None, 0) and not self._stopped_by_kill:  # it died without a word
            raise RuntimeError(
                f"the producer process died with exit code {code} ({_exit_reason(code)}) without "
                "reporting an error: the shards it committed stay in the cache, but no more "
                "are written (start a new Producer on the cache to go on)"
            )

    def join(self, timeout: float | None = None) -> None:
        """Wait for the process to end (at most ``timeout`` s); raise as :meth:`check` does.

        ``RuntimeError`` if it failed (its traceback) or was killed (the signal, e.g.
        ``SIGKILL``). After ``timeout`` with the process still running, it returns.
        """
        self.process.join(timeout)
        self.check()

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the process to stop after its current shard, wait; kill it after ``timeout``.

        Then raise as :meth:`check` does if it had failed or been killed (a kill by ``stop``
        itself, after ``timeout``, is not a failure).
        """
        self._stop.set()
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()  # safe at any moment: no torn shard becomes visible
            self.process.join(timeout)  # a SIGKILL ends it, unless the kernel holds it (D state)
            if self.process.is_alive():
                raise RuntimeError(
                    f"the producer process {self.process.pid} still runs {timeout} s after "
                    "SIGKILL: it waits in the kernel (a hung disk or network file system?)"
                )
            self._stopped_by_kill = True
        self.check()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.stop()
        else:  # already failing: stop the producer, keep the first error
            with contextlib.suppress(RuntimeError):
                self.stop()


class _Flag:
    """A stop flag without a lock: one shared byte, written by the parent only, read by the child.

    (A ``multiprocessing.Event`` holds a lock, which a child killed while reading it would keep.)
    """

    def __init__(self, ctx: Any) -> None:
        self._byte = ctx.RawValue("b", 0)

    def set(self) -> None:
        self._byte.value = 1

    def is_set(self) -> bool:
        return self._byte.value == 1


def _exit_reason(code: int) -> str:
    """``-9`` -> ``"SIGKILL"``; a positive code -> ``"an error"``."""
    if code > 0:
        return "an error"
    try:
        return signal.Signals(-code).name
    except ValueError:  # a number with no name here
        return f"signal {-code}"


def _report(text: str) -> bytes:
    """The traceback as at most ``PIPE_BUF - 4`` bytes (with the pipe's 4-byte header, one atomic
    write: a kill cannot cut it, and it fits an empty pipe, so the child never blocks on a parent
    that reads only once the child has ended). Its last line, the cause, is kept, and as much of
    the rest as fits, its first and last lines first."""
    room = select.PIPE_BUF - 4
    data = text.encode("utf-8", "replace")
    if len(data) <= room:
        return data
    *body, cause = text.rstrip().splitlines() or [""]  # the cause: "OSError: [Errno 28] ..."
    cause_b = cause.encode("utf-8", "replace")[: room // 4]  # a long message: its start
    body_b = "\n".join(body).encode("utf-8", "replace")
    if len(body_b) + 1 + len(cause_b) <= room:  # only the cause was too long
        return body_b + b"\n" + cause_b
    cut = b"\n... (" + str(len(body_b)).encode() + b" bytes of traceback, cut to fit) ...\n"
    keep = room - len(cause_b) - len(cut) - 1  # bytes of the body kept: its head and its tail
    return body_b[: keep // 3] + cut + body_b[len(body_b) - (keep - keep // 3) :] + b"\n" + cause_b


def _run(errors: Any, source: str | os.PathLike, cache: ShardCache, kwargs: dict) -> None:
    """The child's target: :func:`produce`, its traceback sent to the parent if it fails."""
    arm()  # the test seam: park at a point if a test asked (_park.py); else nothing
    try:
        produce(source, cache, **kwargs)
    except BaseException:
        errors.send_bytes(_report(traceback.format_exc()))  # one atomic write
        park("errors")
        raise


def _check(
    cache: ShardCache,
    remote: RemoteSource,
    samples_per_shard: int,
    bandwidth: float | None,
    max_shards: int | None,
    seed: int,
) -> tuple[int, float | None, int | None]:
    """Validate the arguments shared by :func:`produce` and :class:`Producer`."""
    if not isinstance(cache, ShardCache):
        raise TypeError(
            f"cache should be a distsampling.ShardCache, but got cache={cache!r} "
            f"of type {type(cache).__name__}"
        )
    check_int("seed", seed, low=0)  # numpy's generators take non-negative seeds
    samples_per_shard = check_int("samples_per_shard", samples_per_shard, low=1)
    if samples_per_shard * remote.row_bytes > cache.capacity_bytes:  # no shard could ever fit
        raise ValueError(
            f"capacity_bytes should be at least the size of one shard ({samples_per_shard} "
            f"samples of {remote.row_bytes} bytes), but got "
            f"capacity_bytes={cache.capacity_bytes}"
        )
    if bandwidth is not None and (
        isinstance(bandwidth, bool) or not isinstance(bandwidth, numbers.Real) or not bandwidth > 0
    ):
        raise ValueError(
            f"bandwidth should be a positive number of bytes per second or None, "
            f"but got bandwidth={bandwidth!r}"
        )
    if max_shards is not None:
        max_shards = check_int("max_shards", max_shards, low=1)
    return samples_per_shard, bandwidth, max_shards
