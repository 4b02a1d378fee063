r"""A local shard cache that grows every epoch and evicts its oldest shards beyond a byte capacity.

A background producer (:mod:`distsampling.growing.producer`) keeps adding shards while training runs;
each epoch trains on a frozen :class:`~distsampling.growing.snapshot.Snapshot` of the shards present when
it starts.

This module is the cache's policy: what enters, what leaves, what stays pinned. Its two
mechanisms live beside it, each with its own invariant:

- **Shard** (:mod:`distsampling.growing.writer`): one ``.npy`` file of ``(k, *sample_shape)``
  samples, written under a temporary name with the crc32 of its bytes, fsynced, then renamed:
  no reader ever sees half a shard.
- **Manifest** (:mod:`distsampling.growing.manifest`, ``manifest.json``): the committed shards in
  sequence order with their size and crc32, the pinned snapshots and the retired shards they
  still list. It is rewritten atomically under a file lock, so the producer and the training
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
``flock``). With a cache local to each node, the nodes hold different samples and their
snapshots differ in length: :class:`~distsampling.growing.nodes.NodeFeed` splits each node's
snapshot among its ranks and makes every rank read the same number of samples.

**Invariant of this class.** After every call, the live shards are the newest committed shards
whose bytes fit ``capacity_bytes``, oldest first; every shard a pinned snapshot lists stays on
disk until its epoch ends; no other shard file is kept.

Every process opening a cache should pass the same ``capacity_bytes``. The lock is
``fcntl.flock`` (POSIX only).

References:
    the TFRecord-writing sampler of the user's question (a growing local copy of remote
    data); the write-then-rename commit of LMDB / git objects;
    torch.utils.data.DistributedSampler (needs equal lengths).
"""

from __future__ import annotations

import contextlib
import os

import numpy as np

from .._checks import check_int
from . import manifest
from .snapshot import Snapshot
from .writer import check_samples, describe, npy_header, write_shard

__all__ = ["ShardCache"]


class ShardCache:
    r"""A directory of shards with a manifest, a byte capacity and FIFO eviction.

    Args:
        root: an existing directory (``FileNotFoundError`` if missing). A new cache writes its
            empty manifest at once; a directory with shard files but no manifest is refused
            (:class:`~distsampling.growing.manifest.ManifestError`), never emptied.
        capacity_bytes: the most bytes of live shards kept (shard file sizes, headers included).

    Examples:
        >>> import tempfile
        >>> cache = ShardCache(tempfile.mkdtemp(), capacity_bytes=2 * 1024)
        >>> for k in range(3):  # each shard: 128 + 8 * 4 * 4 = 256 bytes on disk
        ...     _ = cache.add(np.full((8, 4), k, np.float32))
        >>> snap = cache.snapshot(epoch=0)
        >>> len(snap), [n for _, n in snap.shards], snap.sample_shape, snap.dtype
        (24, [8, 8, 8], (4,), '<f4')
        >>> cache.snapshot(epoch=0) == snap  # frozen: the same for every rank and process
        True
        >>> snap.load(2)[0].tolist()  # shard 2, its crc32, shape and dtype checked
        [2.0, 2.0, 2.0, 2.0]
    """

    def __init__(self, root: str | os.PathLike, capacity_bytes: int) -> None:
        root = os.path.abspath(os.fspath(root))
        if not os.path.isdir(root):
            raise FileNotFoundError(f"root should be an existing directory, but got root={root!r}")
        self.root = root
        self.capacity_bytes = check_int("capacity_bytes", capacity_bytes, low=1)
        gone: list[str] = []
        with manifest.locked(root, create=True, delete=gone) as m:
            manifest.recover(root, m)  # what killed writers left
            self._evict(m, gone)  # opened with a smaller capacity: fit it now

    # --- public API ---------------------------------------------------------------------------

    def add(self, samples: np.ndarray) -> str:
        """Write ``samples`` (``(k, *sample_shape)``, ``k >= 1``) as one shard; return its path.

        The shard is committed (listed in the manifest) when this returns; then the oldest shards
        are evicted until the live bytes fit the capacity. Samples are numbers (bool, int, uint,
        float, complex); big-endian arrays are stored in native byte order.
        """
        samples = check_samples(samples)  # (k, *sample_shape), C order, native byte order
        header = npy_header(samples)
        size = len(header) + samples.nbytes  # the file's size on disk
        if size > self.capacity_bytes:  # refuse before writing
            raise ValueError(
                f"capacity_bytes should be at least the size of one shard ({size} bytes), "
                f"but got capacity_bytes={self.capacity_bytes}"
            )
        # 1. write under a temporary name (outside the lock: writing is the slow part)
        tmp, crc = write_shard(self.root, header, samples)
        # 2. commit: rename and list it in the manifest, in one critical section
        undo: list[str] = []  # the renamed shard, removed again if the manifest cannot be written
        gone: list[str] = []  # the evicted shards, deleted once the manifest no longer lists them
        try:
            with manifest.locked(self.root, undo=undo, delete=gone) as m:
                kind = [list(samples.shape[1:]), samples.dtype.str]
                if m.get("kind") not in (None, kind):
                    raise ValueError(
                        f"samples should have sample_shape {tuple(m['kind'][0])} and dtype "
                        f"{m['kind'][1]} like the cached shards, but got "
                        f"samples={describe(samples)}"
                    )
                m["kind"] = kind
                name = f"shard-{m['next_seq']:010d}.npy"
                os.replace(tmp, os.path.join(self.root, name))
                undo.append(os.path.join(self.root, name))
                m["next_seq"] += 1
                m["shards"].append(
                    {"name": name, "samples": int(samples.shape[0]), "bytes": size, "crc32": crc}
                )
                self._evict(m, gone)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):  # not committed: no temporary file left
                os.remove(tmp)
            raise
        return os.path.join(self.root, name)

    def snapshot(self, epoch: int, *, verify: bool = True) -> Snapshot:
        """Freeze (the first time) and return the shards epoch ``epoch`` trains on; pins them.

        The snapshot records each shard's crc32 and the samples' shape and dtype; with
        ``verify=True`` each process checks a shard's crc32 when it first opens it.
        """
        epoch = check_int("epoch", epoch, low=0)
        if not isinstance(verify, bool):
            raise TypeError(f"verify should be a boolean value, but got verify={verify!r}")
        with manifest.locked(self.root) as m:
            if epoch in m["ended"]:
                raise ValueError(f"epoch {epoch} already ended, but got snapshot(epoch={epoch})")
            key = str(epoch)
            if key not in m["pins"]:  # the first caller freezes the live shards, in FIFO order
                m["pins"][key] = [[s["name"], s["samples"], s.get("crc32")] for s in m["shards"]]
            pins = m["pins"][key]
            kind = m["kind"] if pins else [None, None]  # one kind per cache, set by its 1st shard
        crcs = [p[2] if len(p) > 2 else None for p in pins]  # None: written before checksums
        return Snapshot(
            epoch,
            tuple((os.path.join(self.root, p[0]), p[1]) for p in pins),
            sample_shape=None if kind[0] is None else tuple(kind[0]),
            dtype=kind[1],
            checksums=None if None in crcs else tuple(crcs),
            verify=verify,
        )

    def end_epoch(self, epoch: int) -> None:
        """Unpin epoch ``epoch``'s snapshot and delete retired shards no snapshot still lists."""
        epoch = check_int("epoch", epoch, low=0)
        gone: list[str] = []
        with manifest.locked(self.root, delete=gone) as m:
            m["pins"].pop(str(epoch), None)
            if epoch not in m["ended"]:
                m["ended"].append(epoch)
            self._unlist_unpinned(m, gone)

    def shards(self) -> list[tuple[str, int]]:
        """The live shards, oldest first: ``(path, number of samples)``."""
        with manifest.locked(self.root) as m:
            return [(os.path.join(self.root, s["name"]), s["samples"]) for s in m["shards"]]

    def live_bytes(self) -> int:
        """Bytes of the shards not evicted (at most ``capacity_bytes``)."""
        with manifest.locked(self.root) as m:
            return sum(s["bytes"] for s in m["shards"])

    # --- eviction and pins --------------------------------------------------------------------

    def _evict(self, m: dict, gone: list[str]) -> None:
        """Retire the oldest shards until the live bytes fit; unlist those no snapshot pins."""
        while sum(s["bytes"] for s in m["shards"]) > self.capacity_bytes:
            m["retired"].append(m["shards"].pop(0))  # FIFO: the oldest goes first
        self._unlist_unpinned(m, gone)

    def _unlist_unpinned(self, m: dict, gone: list[str]) -> None:
        """Drop retired shards no snapshot lists from ``m``; add their paths to ``gone``.

        The files are deleted by :func:`~distsampling.growing.manifest.locked` only after the
        manifest without them is in force: a failed write leaves the old manifest, and every
        file it lists, in place.
        """
        pinned = {pin[0] for shards in m["pins"].values() for pin in shards}
        for s in [s for s in m["retired"] if s["name"] not in pinned]:
            gone.append(os.path.join(self.root, s["name"]))
            m["retired"].remove(s)

    def __repr__(self) -> str:
        return f"ShardCache(root={self.root!r}, capacity_bytes={self.capacity_bytes})"
