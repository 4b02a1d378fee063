r"""A local shard cache that grows every epoch and evicts its oldest shards beyond a byte capacity.

A background producer (:mod:`distsampling.growing.producer`) keeps adding shards while training runs;
each epoch trains on a frozen :class:`~distsampling.growing.snapshot.Snapshot` of the shards present when
it starts.

- **Shard**: one ``.npy`` file of ``(k, *sample_shape)`` samples (:mod:`distsampling.growing.snapshot`).
  It is written under a temporary name, fsynced, then renamed: no reader ever sees half a shard.
- **Manifest** (``manifest.json``): the committed shards in sequence order, the pinned snapshots
  and the retired shards they still list. It is rewritten atomically (temporary file, fsync,
  ``os.replace``, fsync of the directory) under a file lock, so the producer and the training
  processes can share a cache. A shard counts once the manifest lists it.
- **Eviction** is FIFO: after each add (and when a cache is opened), the oldest shards leave the
  cache until the live bytes fit ``capacity_bytes``. A retired shard that a pinned snapshot lists
  is deleted only when :meth:`ShardCache.end_epoch` unpins the last such snapshot, so the disk
  may hold, beyond the capacity, the retired shards of the epochs not yet ended.

**The snapshot rule across ranks and workers.** ``snapshot(epoch)`` is frozen the *first* time any
process calls it for that epoch and written into the manifest; every later call, from any rank or
any process sharing the cache directory, returns that same snapshot. So ranks need no barrier and
no broadcast: each calls ``cache.snapshot(epoch)`` and all get the same shards in the same order,
and a :class:`~distsampling.DistributedSampler` over it partitions correctly. DataLoader workers
receive the (picklable) snapshot with the dataset and never call it. Call ``end_epoch(epoch)``
once every rank has finished that epoch (after a barrier); it is idempotent, and
``snapshot(epoch)`` after it is an error, so a late rank cannot silently get another snapshot.
This needs one cache directory for all ranks (one machine, or a shared file system with working
``flock``). With a cache local to each node, the nodes hold different samples: give each node its
own sampler over its own cache (``num_replicas`` = ranks per node, ``rank`` = local rank).

Every process opening a cache should pass the same ``capacity_bytes``. The lock is
``fcntl.flock`` (POSIX only).

References:
    the TFRecord-writing sampler of a dataset that grows every epoch from remote storage; the
    write-then-rename commit of LMDB / git objects; torch.utils.data.DistributedSampler (needs equal lengths).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import socket
from collections.abc import Iterator

import numpy as np

from .._validate import check_int
from .snapshot import Snapshot

__all__ = ["ShardCache"]

_MANIFEST = "manifest.json"
_SHARD = re.compile(r"^shard-(\d{10})\.npy$")
#: a temporary file: ``.tmp-<pid>-<host>-<what>``; only its own host can tell whether pid is alive
_TMP = re.compile(r"^\.tmp-(\d+)-(\w+)-")
_HOST = re.sub(r"\W", "_", socket.gethostname()) or "host"


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
        gone: list[str] = []
        with self._locked(delete=gone) as m:
            self._recover(m)
            self._evict(m, gone)  # opened with a smaller capacity: fit it now

    # --- the manifest, read and written under an exclusive lock ------------------------------

    @contextlib.contextmanager
    def _locked(
        self, undo: list[str] | None = None, delete: list[str] | None = None
    ) -> Iterator[dict]:
        """Hold the cache's lock; yield the manifest; write it back (atomically) on success.

        The files named in ``delete`` (evicted shards) are removed once the new manifest is in
        force, those in ``undo`` (a new shard) if it could not be written: either way the
        directory always matches the manifest in force.
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
                tmp = _tmp_path(self.root, "manifest.json")
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
                _fsync_dir(self.root)  # the renames (shard, manifest) survive a power cut
            for file in delete or []:  # unlisted now: safe to delete (or left for _recover)
                with contextlib.suppress(FileNotFoundError):
                    os.remove(file)

    def _recover(self, m: dict) -> None:
        """Delete what a killed writer left: temporary files of dead processes, unlisted shards."""
        listed = {s["name"] for s in m["shards"] + m["retired"]}
        for name in os.listdir(self.root):
            tmp = _TMP.match(name)
            if (tmp and tmp.group(2) == _HOST and not _alive(int(tmp.group(1)))) or (
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
        tmp = _tmp_path(self.root, f"{os.urandom(4).hex()}.npy")
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
        gone: list[str] = []  # the evicted shards, deleted once the manifest no longer lists them
        with self._locked(undo, gone) as m:
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
            self._evict(m, gone)
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
        gone: list[str] = []
        with self._locked(delete=gone) as m:
            m["pins"].pop(str(epoch), None)
            if epoch not in m["ended"]:
                m["ended"].append(epoch)
            self._unlist_unpinned(m, gone)

    def shards(self) -> list[tuple[str, int]]:
        """The live shards, oldest first: ``(path, number of samples)``."""
        with self._locked() as m:
            return [(os.path.join(self.root, s["name"]), s["samples"]) for s in m["shards"]]

    def live_bytes(self) -> int:
        """Bytes of the shards not evicted (at most ``capacity_bytes``)."""
        with self._locked() as m:
            return sum(s["bytes"] for s in m["shards"])

    # --- eviction -----------------------------------------------------------------------------

    def _evict(self, m: dict, gone: list[str]) -> None:
        """Retire the oldest shards until the live bytes fit; unlist those no snapshot pins."""
        while sum(s["bytes"] for s in m["shards"]) > self.capacity_bytes:
            m["retired"].append(m["shards"].pop(0))  # FIFO: the oldest goes first
        self._unlist_unpinned(m, gone)

    def _unlist_unpinned(self, m: dict, gone: list[str]) -> None:
        """Drop retired shards no snapshot lists from ``m``; add their paths to ``gone``.

        The files are deleted by :meth:`_locked` only after the manifest without them is in
        force: a failed write leaves the old manifest, and every file it lists, in place.
        """
        pinned = {name for shards in m["pins"].values() for name, _ in shards}
        for s in [s for s in m["retired"] if s["name"] not in pinned]:
            gone.append(os.path.join(self.root, s["name"]))
            m["retired"].remove(s)

    def __repr__(self) -> str:
        return f"ShardCache(root={self.root!r}, capacity_bytes={self.capacity_bytes})"


def _tmp_path(root: str, what: str) -> str:
    """A temporary file name that says which process on which host writes it."""
    return os.path.join(root, f".tmp-{os.getpid()}-{_HOST}-{what}")


def _fsync_dir(root: str) -> None:
    """Flush a directory's entries (its renames) to disk."""
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


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
