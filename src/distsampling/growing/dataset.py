r"""SnapshotDataset: a map-style dataset over one epoch's :class:`~distsampling.growing.cache.Snapshot`.

Sample ``i`` is row ``i - start`` of the shard whose samples start at ``start``. Shards are
memory-mapped (:func:`~distsampling.growing.snapshot.load_shard`): a sample is a byte range of the page
cache, with no decoding and no pickling of sample data.

What crosses a process boundary, with ``num_workers > 0``:

- to each worker, once: the dataset, i.e. the snapshot (paths and counts: a few hundred bytes).
  The memory maps are never pickled; each process opens its own on first use.
- back to the main process, per batch: which buffer holds it. :meth:`SnapshotDataset.__getitems__`
  fills one of the worker's few reused shared-memory buffers
  (:class:`~distsampling.BatchBuffers`) with ``os.preadv`` from the shard files: the kernel
  copies page cache -> shared pages, with no memory map of the shards in the worker.
  The main process maps each buffer once; a batch then crosses as a few dozen bytes, with no
  copy and no unpickling of sample bytes in the training process. A buffer is reused only once
  no tensor views the batch it held.
  Pass ``collate_fn=collate_batch`` so the batch is not stacked again.

References:
    torch/utils/data/dataset.py (Dataset, ``__getitems__``), torch/utils/data/_utils/fetch.py
    (_MapDatasetFetcher), torch/utils/data/_utils/collate.py (default_collate's shared memory),
    torch/multiprocessing/reductions.py (a shared storage crosses as its file descriptor).
"""

from __future__ import annotations

import io
import math
import os
import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.multiprocessing import get_sharing_strategy
from torch.utils.data import Dataset, get_worker_info
from torch.utils.data._utils.collate import default_collate

from .._checks import check_int
from ..resume.state import check_state
from .buffers import BatchBuffers, _new_shared_block
from .snapshot import CorruptShardError, Snapshot

__all__ = ["SnapshotDataset", "collate_batch"]

_THREADED_COPY_BYTES = 8 << 20  # runs from this size on are copied by torch on every thread


class SnapshotDataset(Dataset[torch.Tensor]):
    r"""The samples of one snapshot, as tensors of shape ``sample_shape``, read memory-mapped.

    Works with any ``num_workers`` (each process opens its own memory maps), ``pin_memory`` and
    ``persistent_workers``. A shard that is missing, truncated or holds another number of samples
    than the snapshot lists raises (:class:`~distsampling.growing.snapshot.CorruptShardError` naming the file)
    when it is first read.

    Args:
        snapshot: the shards of one epoch, e.g. ``cache.snapshot(epoch)``.
        buffers: how many batch buffers each process keeps and reuses
            (:class:`~distsampling.BatchBuffers`): a batch reuses one only once
            no tensor views the batch it held; with none free it gets a fresh block. ``0``:
            a fresh block per batch.

    Examples:
        >>> import tempfile
        >>> root = tempfile.mkdtemp()
        >>> for k in range(2):  # two shards of 3 samples of shape (2,)
        ...     np.save(f"{root}/{k}.npy", np.arange(6, dtype=np.float32).reshape(3, 2) + 10 * k)
        >>> ds = SnapshotDataset(Snapshot(0, ((f"{root}/0.npy", 3), (f"{root}/1.npy", 3))))
        >>> len(ds), ds[4]
        (6, tensor([12., 13.]))
        >>> ds.__getitems__([0, 5])  # one (2, 2) batch, read shard by shard
        tensor([[ 0.,  1.],
                [14., 15.]])
    """

    def __init__(self, snapshot: Snapshot, buffers: int = 4) -> None:
        if not isinstance(snapshot, Snapshot):
            raise TypeError(
                "snapshot should be a distsampling.Snapshot (e.g. cache.snapshot(epoch)), "
                f"but got snapshot={snapshot!r} of type {type(snapshot).__name__}"
            )
        self.snapshot = snapshot
        # starts[k] = first sample of shard k; ends[k] = one past its last (both (num_shards,))
        self._starts = np.asarray(snapshot.starts(), dtype=np.int64)
        self._ends = self._starts + np.asarray([n for _, n in snapshot.shards], dtype=np.int64)
        self._len = int(self._ends[-1]) if len(self._ends) else 0
        # shard number -> its memory map as a tensor, per process (the training process reads these)
        self._maps: dict[int, torch.Tensor] = {}
        # shard number -> (its open file, where its sample bytes start), per process (workers)
        self._files: dict[int, tuple[io.FileIO, int]] = {}
        self._offsets: dict[int, int] = {}  # shard number -> where its sample bytes start
        # batch buffers lent and reused per process (growing/buffers.py), made on first read
        self.buffers = check_int("buffers", buffers, low=0)
        self._pool: BatchBuffers | None = None
        self.position = 0  # samples read through this object (in this process) this epoch

    def __len__(self) -> int:
        return self._len

    # --- reading --------------------------------------------------------------------------------

    def _shard(self, k: int) -> torch.Tensor:
        """Shard ``k`` (``(n_k, *sample_shape)``) over its memory map, opened once per process."""
        if k not in self._maps:
            path = self.snapshot.shards[k][0]
            array = self.snapshot.load(k)  # np.memmap, read-only; CorruptShardError if damaged
            self._offsets[k] = array.offset  # where its sample bytes start in the file
            with warnings.catch_warnings():  # torch warns that the map is read-only: only read here
                warnings.simplefilter("ignore", UserWarning)
                shard = torch.from_numpy(array)  # no copy: a view of the page cache
            if self._maps:  # every shard of a snapshot must hold the same kind of sample
                first = next(iter(self._maps.values()))
                if (shard.shape[1:], shard.dtype) != (first.shape[1:], first.dtype):
                    raise ValueError(
                        f"shards of one snapshot should share sample_shape {tuple(first.shape[1:])} "
                        f"and dtype {first.dtype}, but shard {path} has "
                        f"{tuple(shard.shape[1:])}, {shard.dtype}"
                    )
            self._maps[k] = shard  # load_shard checked C order: a row is one byte range
        return self._maps[k]

    def _file(self, k: int) -> tuple[io.FileIO, int]:
        """Shard ``k``'s file, open for ``preadv``, and where its samples start; once per process.

        Like a map, an open file stays readable after the cache evicts (unlinks) the shard.
        """
        if k not in self._files:
            f = open(self.snapshot.shards[k][0], "rb", buffering=0)  # kept open: read per batch
            self._shard(k)  # checks the shard (CorruptShardError) and notes its data offset
            self._files[k] = f, self._offsets[k]
        return self._files[k]

    def _locate(self, indices: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(shard numbers, rows in those shards)`` for ``indices``, both ``(B,)``."""
        idx = np.asarray([_as_index(i) for i in indices], dtype=np.int64)  # (B,)
        idx = np.where(idx < 0, idx + self._len, idx)  # negative indices count from the end
        bad = (idx < 0) | (idx >= self._len)
        if bad.any():
            i = indices[int(np.argmax(bad))]
            raise IndexError(f"index should be in [0, {self._len}), but got index={i}")
        shard = np.searchsorted(self._ends, idx, side="right")  # first shard ending after idx
        return shard, idx - self._starts[shard]

    def __getitem__(self, index: int) -> torch.Tensor:
        (k,), (row,) = self._locate([index])
        self.position += 1
        # clone copies the row out of the page cache: the tensor owns writable memory
        return self._shard(int(k))[row].clone()

    def __getitems__(self, indices: Sequence[int]) -> torch.Tensor:
        r"""Read a whole batch into one tensor of shape ``(len(indices), *sample_shape)``.

        Each run of consecutive rows of one shard is one copy. In a DataLoader worker the batch
        is in shared memory from the start, so sending it to the main process copies nothing.
        """
        shard, rows = self._locate(indices)
        self.position += len(indices)
        if len(indices) == 0:  # (0, *sample_shape) in the shards' dtype, as stacking would give
            if not self._len:  # no shard, so no sample shape or dtype to give
                return torch.empty(0)
            return torch.empty((0, *self._shard(0).shape[1:]), dtype=self._shard(0).dtype)
        first = self._shard(int(shard[0]))
        shape = (len(indices), *first.shape[1:])
        dtype = torch.empty(0, dtype=first.dtype).numpy().dtype
        runs = list(_runs(shard, rows))
        in_worker = get_worker_info() is not None
        if in_worker and get_sharing_strategy() != "file_descriptor":  # no fd: a fresh block
            storage = _new_shared_block(math.prod(shape) * first.element_size())
            out = torch.empty(0, dtype=first.dtype).set_(storage).view(shape)
            self._read(runs, out)
            return out
        # a buffer of this process's pool: in shared memory in a worker, so that torch sends
        # the main process only which buffer it is (see growing/buffers.py for when it is reused)
        if self._pool is None or self._pool.pid != os.getpid():  # a new (or forked) process
            self._pool = BatchBuffers(self.buffers, shared=in_worker)
        out = self._pool.batch(shape, dtype)
        if in_worker:  # the kernel copies page cache -> shared pages (one core, no map)
            self._read(runs, out)
        else:  # in the training process: plain memory, torch's copy_ on every thread
            self._copy(runs, out)
        return out

    def _copy(self, runs: list[tuple[int, int, int, int]], out: torch.Tensor) -> None:
        """``out[j : j + n] = shard k[row : row + n]`` per run.

        A large run goes to torch's ``copy_``, which splits it over every thread; a small one
        (e.g. one sample of a shuffled batch) to numpy's single-threaded memcpy: handing 1 MiB
        to a thread pool costs more than it saves, and far more when other processes hold the
        cores (we measured 30x on a loaded 2-core machine).
        """
        row_bytes = out[0].nbytes if len(out) else 0
        for j, k, row, n in runs:
            src = self._shard(k)[row : row + n]  # (n, *sample_shape)
            if n * row_bytes >= _THREADED_COPY_BYTES:
                out[j : j + n].copy_(src)
            else:
                np.copyto(out[j : j + n].numpy(), src.numpy())

    def _read(self, runs: list[tuple[int, int, int, int]], out: torch.Tensor) -> None:
        """Read each run from its shard file straight into ``out`` (``os.preadv``).

        The kernel copies page cache -> the batch's pages: one copy per run, and the worker never
        maps the shards (a copy out of a map first faults in each 4 KiB page of it).
        """
        dst = memoryview(out.numpy()).cast("B")  # the whole batch, (B * row_bytes,)
        row_bytes = len(dst) // len(out)
        for j, k, row, n in runs:
            f, start = self._file(k)
            view, offset = dst[j * row_bytes : (j + n) * row_bytes], start + row * row_bytes
            while view:  # preadv may read less than asked (e.g. past 2 GiB): go on
                got = os.preadv(f.fileno(), [view], offset)
                if not got:  # the file shrank since it was checked
                    raise CorruptShardError(
                        f"shard {self.snapshot.shards[k][0]} is truncated or corrupt: it ends "
                        f"at byte {offset}, inside sample {row} of {self.snapshot.shards[k][1]}"
                    )
                view, offset = view[got:], offset + got

    # --- resuming: which epoch's snapshot, and how far this process has read in it -----------

    def state_dict(self) -> dict[str, int | str]:
        r"""This dataset's place in its epoch: a small JSON-serialisable dict.

        ``epoch``, ``samples`` and ``shards`` name the snapshot and must match on resume;
        ``position`` counts the samples read through this object in this process (a
        DataLoader worker counts its own; torchdata's ``StatefulDataLoader`` saves each
        worker's). Which samples come next is the sampler's state, not the dataset's.

        Examples:
            >>> import tempfile
            >>> root = tempfile.mkdtemp()
            >>> np.save(f"{root}/0.npy", np.zeros((4, 2), np.float32))
            >>> ds = SnapshotDataset(Snapshot(3, ((f"{root}/0.npy", 4),)))
            >>> _ = ds.__getitems__([0, 1])
            >>> ds.state_dict()
            {'kind': 'SnapshotDataset', 'version': 1, 'epoch': 3, 'samples': 4, 'shards': 1, 'position': 2}
        """
        return {
            "kind": "SnapshotDataset",
            "version": 1,
            **self._identity(),
            "position": self.position,
        }

    def load_state_dict(self, state: dict) -> None:
        r"""Resume from :meth:`state_dict`: the same snapshot, counting on from ``position``.

        Args:
            state: what :meth:`state_dict` returned (after ``json`` or ``torch.save``).

        Raises:
            ValueError: the state names another snapshot (epoch, samples or shards differ),
                or ``position`` is negative. ``position`` has no upper bound: a sampler with
                replacement, or torch's padding, reads more samples than the snapshot holds.
        """
        check_state(state, "SnapshotDataset", 1, self._identity())
        if "position" not in state:
            raise KeyError(
                f"state has no 'position': it is not a SnapshotDataset state (got {state!r})"
            )
        self.position = check_int("position", state.get("position"), low=0)

    def _identity(self) -> dict[str, int]:
        return {"epoch": self.snapshot.epoch, "samples": self._len, "shards": len(self._starts)}

    # --- pickling: the snapshot crosses process boundaries, the memory maps never do ------------

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_maps": {}, "_files": {}, "_pool": None}

    def __repr__(self) -> str:
        return f"SnapshotDataset(epoch={self.snapshot.epoch}, shards={len(self.snapshot.shards)}, samples={self._len})"


def _as_index(i: object) -> int:
    """``i`` as an ``int``: Python and numpy integers and 0-d integer tensors (as a sampler over
    ``torch.randperm(n)`` yields them) are indices; bools, floats and longer tensors are not."""
    if isinstance(i, torch.Tensor) and (i.ndim or i.dtype == torch.bool or i.is_floating_point()):
        raise TypeError(f"index should be an integer, but got index={i!r} of type Tensor")
    if isinstance(i, torch.Tensor):
        return int(i)
    return check_int("index", i)


def _runs(shard: np.ndarray, rows: np.ndarray) -> Iterator[tuple[int, int, int, int]]:
    """Split a batch into runs of consecutive rows of one shard.

    Yields ``(position in the batch, shard, first row, length)``; e.g. shards ``[0, 0, 1]``,
    rows ``[4, 5, 0]`` give ``(0, 0, 4, 2)`` and ``(2, 1, 0, 1)``.
    """
    # a run starts at 0 and wherever the shard changes or the row does not follow the last one
    starts = np.flatnonzero(np.r_[True, (np.diff(shard) != 0) | (np.diff(rows) != 1)])  # (R,)
    lengths = np.diff(np.r_[starts, len(shard)])  # (R,)
    return zip(starts.tolist(), shard[starts].tolist(), rows[starts].tolist(), lengths.tolist())


def collate_batch(batch: torch.Tensor | list) -> torch.Tensor | object:
    r"""Collate for a dataset with ``__getitems__``: a ready batch tensor passes through untouched.

    ``default_collate`` would stack the rows of an already stacked batch again (a full copy);
    anything else (a list of samples) goes to ``default_collate``.

    Args:
        batch: what the dataset's ``__getitems__`` (or a list of its ``__getitem__``) returned.

    Examples:
        >>> b = torch.zeros(2, 3)
        >>> collate_batch(b) is b
        True
        >>> collate_batch([torch.zeros(3), torch.ones(3)]).shape
        torch.Size([2, 3])
    """
    if isinstance(batch, torch.Tensor):
        return batch
    return default_collate(batch)
