r"""A local shard cache that grows every epoch and evicts its oldest shards beyond a byte capacity.

A background producer (:mod:`distsampling.producer`) keeps adding shards while training runs;
each epoch trains on a frozen :class:`Snapshot` of the shards present when it starts.

- **Shard**: one ``.npy`` file holding ``(k, *sample_shape)`` samples, read memory-mapped. It is
  written under a temporary name, flushed to disk, then renamed: a reader never sees half a shard.
- **Manifest** (``manifest.json``): the committed shards in sequence order, the snapshots still
  pinned and the shards retired but still pinned. It is rewritten atomically (temporary file, then
  ``os.replace``) under a file lock, so the producer and the training processes can share a cache.
- **Eviction** is FIFO: after each add, the oldest shards leave the cache until the live bytes fit
  ``capacity_bytes``. A retired shard that a pinned snapshot lists is deleted only when
  :meth:`ShardCache.end_epoch` unpins the last such snapshot (disk use may then exceed the capacity
  by those shards, at most one epoch's worth).

**The snapshot rule across ranks and workers.** ``snapshot(epoch)`` is frozen the *first* time any
process calls it for that epoch and written into the manifest; every later call, from any rank or
any process sharing the cache directory, returns that same snapshot. So no barrier is needed for
ranks on one machine: each calls ``cache.snapshot(epoch)`` and all get the same shards in the same
order, and a :class:`~distsampling.DistributedSampler` over it partitions correctly. DataLoader
workers receive the (picklable) snapshot with the dataset and never call it. Call
``end_epoch(epoch)`` once every rank has finished that epoch (after a barrier); it is idempotent,
and ``snapshot(epoch)`` after ``end_epoch(epoch)`` is an error, so a late rank cannot silently get
a different snapshot. With one cache per node (no shared file system) the shard sets differ per
node: there, build the snapshot on rank 0 and ``torch.distributed.broadcast_object_list`` it onto a
shared file system, or give each node its own sampler.

The lock is ``fcntl.flock`` (POSIX only).

References:
    TensorFlow's TFRecord-writing sampler pattern in the user's question (seed 004);
    numpy/lib/format.py (the ``.npy`` header read by :func:`load_shard`).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import errno
import fcntl
import json
import os
import re
from collections.abc import Iterator

import numpy as np

from ._validate import check_int

__all__ = ["CorruptShardError", "ShardCache", "Snapshot", "load_shard"]

_MANIFEST = "manifest.json"
_SHARD = re.compile(r"^shard-(\d{10})\.npy$")
_TMP = re.compile(r"^\.tmp-(\d+)-")


@dataclasses.dataclass(frozen=True)
class Snapshot:
    r"""The shards one epoch trains on: ``(absolute path, number of samples)`` in sample order.

    Sample ``i`` of the snapshot is row ``i - start`` of the shard whose samples start at
    ``start``; :meth:`locate` finds it. ``len(snapshot)`` is the total number of samples.

    Examples:
        >>> snap = Snapshot(epoch=0, shards=(("/c/a.npy", 3), ("/c/b.npy", 2)))
        >>> len(snap), snap.locate(4)
        (5, ('/c/b.npy', 1))
    """

    epoch: int
    shards: tuple[tuple[str, int], ...]

    def __len__(self) -> int:
        return sum(n for _, n in self.shards)

    def starts(self) -> list[int]:
        """Index of the first sample of each shard: ``[0, n0, n0 + n1, ...]``."""
        out, total = [], 0
        for _, n in self.shards:
            out.append(total)
            total += n
        return out

    def locate(self, index: int) -> tuple[str, int]:
        """Return ``(shard path, row in that shard)`` of sample ``index``."""
        index = check_int("index", index, low=0, high=len(self) - 1)
        starts = self.starts()
        k = bisect.bisect_right(starts, index) - 1  # last shard starting at or before index
        return self.shards[k][0], index - starts[k]


class CorruptShardError(ValueError):
    """A shard file is truncated, not a ``.npy`` file, or holds a different number of samples."""


def load_shard(path: str, samples: int | None = None) -> np.ndarray:
    r"""Memory-map one shard; raise :class:`CorruptShardError` naming the file if it is damaged.

    Args:
        path: the shard's ``.npy`` file.
        samples: the number of samples the shard must hold (as listed in a :class:`Snapshot`).

    Examples:
        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "s.npy")
        >>> np.save(path, np.zeros((4, 2), np.float32))
        >>> load_shard(path, samples=4).shape
        (4, 2)
        >>> with open(path, "r+b") as f:
        ...     _ = f.truncate(100)
        >>> load_shard(path)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        distsampling.cache.CorruptShardError: shard .../s.npy is truncated or corrupt: ...
    """
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
        if not isinstance(array, np.ndarray) or array.ndim < 1:
            raise ValueError("it does not hold an array of samples")
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError) as err:  # bad magic/header, or shorter than its data
        raise CorruptShardError(f"shard {path} is truncated or corrupt: {err}") from err
    if samples is not None and array.shape[0] != samples:
        raise CorruptShardError(
            f"shard {path} should hold {samples} samples, but it holds {array.shape[0]}"
        )
    return array


class ShardCache:
    r"""A directory of shards with a manifest, a byte capacity and FIFO eviction.

    Args:
        root: an existing directory (``FileNotFoundError`` if missing).
        capacity_bytes: the most bytes of live shards kept (shard file sizes, headers included).

    Examples:
        >>> import tempfile
        >>> cache = ShardCache(tempfile.mkdtemp(), capacity_bytes=2 * 1024)
        >>> for k in range(3):  # each shard: 128 + 8 * 4 * 4 = 256 bytes on disk
        ...     _ = cache.add(np.full((8, 4), k, np.float32))
        >>> snap = cache.snapshot(epoch=0)
        >>> len(snap), [n for _, n in snap.shards]
        (24, [8, 8, 8])
        >>> cache.snapshot(epoch=0) == snap  # frozen: the same for every rank and process
        True
    """

    def __init__(self, root: str | os.PathLike, capacity_bytes: int) -> None:
        root = os.path.abspath(os.fspath(root))
        if not os.path.isdir(root):
            raise FileNotFoundError(f"root should be an existing directory, but got root={root!r}")
        self.root = root
        self.capacity_bytes = check_int("capacity_bytes", capacity_bytes, low=1)
        with self._locked() as m:
            self._recover(m)

    # --- the manifest, read and written under an exclusive lock ------------------------------

    @contextlib.contextmanager
    def _locked(self, undo: list[str] | None = None) -> Iterator[dict]:
        """Hold the cache's lock; yield the manifest; write it back (atomically) on success.

        If writing the manifest fails, the files named in ``undo`` are removed (still under the
        lock), so the directory matches the manifest that stays in force.
        """
        with open(os.path.join(self.root, ".lock"), "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            path = os.path.join(self.root, _MANIFEST)
            if os.path.exists(path):
                with open(path) as f:
                    manifest = json.load(f)
            else:  # a new cache
                manifest = {"next_seq": 0, "shards": [], "retired": [], "pins": {}, "ended": []}
            before = json.dumps(manifest, sort_keys=True)
            yield manifest
            if json.dumps(manifest, sort_keys=True) != before:
                tmp = os.path.join(self.root, f".tmp-{os.getpid()}-manifest.json")
                try:
                    with open(tmp, "w") as f:
                        json.dump(manifest, f)
                        f.flush()
                        os.fsync(f.fileno())
                    os.replace(tmp, path)  # atomic: readers see the old or the new manifest
                except BaseException as err:
                    for file in [tmp, *(undo or [])]:
                        with contextlib.suppress(FileNotFoundError):
                            os.remove(file)  # the old manifest stays in force, and is true
                    if isinstance(err, OSError) and err.errno == errno.ENOSPC:
                        raise _no_space(self.root, "the manifest") from err
                    raise

    def _recover(self, m: dict) -> None:
        """Delete what a killed writer left: temporary files of dead processes, unlisted shards."""
        listed = {s["name"] for s in m["shards"] + m["retired"]}
        for name in os.listdir(self.root):
            tmp = _TMP.match(name)
            if (tmp and not _alive(int(tmp.group(1)))) or (
                _SHARD.match(name) and name not in listed
            ):
                os.remove(os.path.join(self.root, name))

    # --- public API ---------------------------------------------------------------------------

    def add(self, samples: np.ndarray) -> str:
        """Write ``samples`` (``(k, *sample_shape)``, ``k >= 1``) as one shard; return its path.

        The shard is committed (listed in the manifest) when this returns; then the oldest shards
        are evicted until the live bytes fit the capacity.
        """
        if (
            not isinstance(samples, np.ndarray)
            or samples.ndim < 1
            or samples.shape[0] < 1
            or samples.dtype.hasobject
        ):
            raise ValueError(
                "samples should be a numpy array (not of objects) of shape (k, *sample_shape) "
                f"with k >= 1, but got samples={_describe(samples)}"
            )
        self._check_fits(samples.nbytes)  # refuse before writing when the data alone is too big
        # 1. write under a temporary name (outside the lock: writing is the slow part)
        tmp = os.path.join(self.root, f".tmp-{os.getpid()}-{os.urandom(4).hex()}.npy")
        try:
            with open(tmp, "wb") as f:
                np.lib.format.write_array(f, np.ascontiguousarray(samples), allow_pickle=False)
                f.flush()
                os.fsync(f.fileno())  # on disk before the rename makes it visible
            size = os.path.getsize(tmp)
            self._check_fits(size)  # the header included
        except BaseException as err:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)  # the cache is as before: no temporary file, manifest untouched
            if isinstance(err, OSError) and err.errno == errno.ENOSPC:
                raise _no_space(self.root, "a shard") from err
            raise
        # 2. commit: rename and list it in the manifest, in one critical section
        undo: list[str] = []  # the renamed shard, removed again if the manifest cannot be written
        with self._locked(undo) as m:
            kind = [list(samples.shape[1:]), samples.dtype.str]
            if m.get("kind") not in (None, kind):
                os.remove(tmp)
                raise ValueError(
                    f"samples should have sample_shape {tuple(m['kind'][0])} and dtype "
                    f"{m['kind'][1]} like the cached shards, but got samples={_describe(samples)}"
                )
            m["kind"] = kind
            name = f"shard-{m['next_seq']:010d}.npy"
            os.replace(tmp, os.path.join(self.root, name))
            undo.append(os.path.join(self.root, name))
            m["next_seq"] += 1
            m["shards"].append({"name": name, "samples": int(samples.shape[0]), "bytes": size})
            self._evict(m)
        return os.path.join(self.root, name)

    def _check_fits(self, size: int) -> None:
        if size > self.capacity_bytes:
            raise ValueError(
                f"capacity_bytes should be at least the size of one shard ({size} bytes), "
                f"but got capacity_bytes={self.capacity_bytes}"
            )

    def snapshot(self, epoch: int) -> Snapshot:
        """Freeze (the first time) and return the shards epoch ``epoch`` trains on; pins them."""
        epoch = check_int("epoch", epoch, low=0)
        with self._locked() as m:
            if epoch in m["ended"]:
                raise ValueError(f"epoch {epoch} already ended, but got snapshot(epoch={epoch})")
            key = str(epoch)
            if key not in m["pins"]:  # the first caller freezes the live shards, in FIFO order
                m["pins"][key] = [[s["name"], s["samples"]] for s in m["shards"]]
            shards = m["pins"][key]
        return Snapshot(epoch, tuple((os.path.join(self.root, n), k) for n, k in shards))

    def end_epoch(self, epoch: int) -> None:
        """Unpin epoch ``epoch``'s snapshot and delete retired shards no snapshot still lists."""
        epoch = check_int("epoch", epoch, low=0)
        with self._locked() as m:
            m["pins"].pop(str(epoch), None)
            if epoch not in m["ended"]:
                m["ended"].append(epoch)
            self._delete_unpinned(m)

    def shards(self) -> list[tuple[str, int]]:
        """The live shards, oldest first: ``(path, number of samples)``."""
        with self._locked() as m:
            return [(os.path.join(self.root, s["name"]), s["samples"]) for s in m["shards"]]

    def live_bytes(self) -> int:
        """Bytes of the shards not evicted (at most ``capacity_bytes``)."""
        with self._locked() as m:
            return sum(s["bytes"] for s in m["shards"])

    # --- eviction -----------------------------------------------------------------------------

    def _evict(self, m: dict) -> None:
        """Retire the oldest shards until the live bytes fit; delete those no snapshot pins."""
        while sum(s["bytes"] for s in m["shards"]) > self.capacity_bytes:
            m["retired"].append(m["shards"].pop(0))  # FIFO: the oldest goes first
        self._delete_unpinned(m)

    def _delete_unpinned(self, m: dict) -> None:
        pinned = {name for shards in m["pins"].values() for name, _ in shards}
        for s in [s for s in m["retired"] if s["name"] not in pinned]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(self.root, s["name"]))
            m["retired"].remove(s)

    def __repr__(self) -> str:
        return f"ShardCache(root={self.root!r}, capacity_bytes={self.capacity_bytes})"


def _alive(pid: int) -> bool:
    """Whether process ``pid`` exists (its temporary file may still be being written)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _no_space(root: str, what: str) -> OSError:
    return OSError(
        errno.ENOSPC,
        f"no space left on the device while writing {what} into {root} "
        "(the cache is unchanged; free space or lower capacity_bytes)",
    )


def _describe(x: object) -> str:
    if isinstance(x, np.ndarray):
        return f"array(shape={x.shape}, dtype={x.dtype})"
    return f"{x!r} of type {type(x).__name__}"
