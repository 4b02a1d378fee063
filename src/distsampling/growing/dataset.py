r"""SnapshotDataset: a map-style dataset over one epoch's :class:`~distsampling.growing.cache.Snapshot`.

Sample ``i`` is row ``i - start`` of the shard whose samples start at ``start``. Shards are
memory-mapped (:func:`~distsampling.growing.snapshot.load_shard`): a sample is a byte range of the page
cache, with no decoding and no pickling of sample data.

What crosses a process boundary, with ``num_workers > 0``:

- to each worker, once: the dataset, i.e. the snapshot (paths and counts: a few hundred bytes).
  The memory maps are never pickled; each process opens its own on first use.
- back to the main process, per batch: the batch tensor. :meth:`SnapshotDataset.__getitems__`
  allocates the batch in shared memory and fills it with ``os.pwrite`` on its file descriptor:
  the kernel copies page cache -> shared pages, so the worker never faults in (nor zero-fills)
  the 4 KiB pages of a fresh block one by one. Torch then sends only the descriptor; the main
  process maps the same pages: no copy and no unpickling of sample bytes in the training process.
  Pass ``collate_fn=collate_batch`` so the batch is not stacked again.

References:
    torch/utils/data/dataset.py (Dataset, ``__getitems__``), torch/utils/data/_utils/fetch.py
    (_MapDatasetFetcher), torch/utils/data/_utils/collate.py (default_collate's shared memory),
    torch/multiprocessing/reductions.py (a shared storage crosses as its file descriptor).
"""

from __future__ import annotations

import errno
import math
import os
import warnings
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.multiprocessing import get_sharing_strategy
from torch.utils.data import Dataset, get_worker_info
from torch.utils.data._utils.collate import default_collate

from .._validate import check_int
from .snapshot import Snapshot

__all__ = ["SnapshotDataset", "collate_batch"]


class SnapshotDataset(Dataset[torch.Tensor]):
    r"""The samples of one snapshot, as tensors of shape ``sample_shape``, read memory-mapped.

    Works with any ``num_workers`` (each process opens its own memory maps), ``pin_memory`` and
    ``persistent_workers``. A shard that is missing, truncated or holds another number of samples
    than the snapshot lists raises (:class:`~distsampling.growing.snapshot.CorruptShardError` naming the file)
    when it is first read.

    Args:
        snapshot: the shards of one epoch, e.g. ``cache.snapshot(epoch)``.

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

    def __init__(self, snapshot: Snapshot) -> None:
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
        # shard number -> (its memory map as a tensor, the same bytes as a memoryview), per process
        self._maps: dict[int, tuple[torch.Tensor, memoryview]] = {}

    def __len__(self) -> int:
        return self._len

    # --- reading --------------------------------------------------------------------------------

    def _shard(self, k: int) -> tuple[torch.Tensor, memoryview]:
        """Shard ``k`` (``(n_k, *sample_shape)``) over its memory map, opened once per process."""
        if k not in self._maps:
            path = self.snapshot.shards[k][0]
            array = self.snapshot.load(k)  # np.memmap, read-only; CorruptShardError if damaged
            with warnings.catch_warnings():  # torch warns that the map is read-only: only read here
                warnings.simplefilter("ignore", UserWarning)
                shard = torch.from_numpy(array)  # no copy: a view of the page cache
            if self._maps:  # every shard of a snapshot must hold the same kind of sample
                first = next(iter(self._maps.values()))[0]
                if (shard.shape[1:], shard.dtype) != (first.shape[1:], first.dtype):
                    raise ValueError(
                        f"shards of one snapshot should share sample_shape {tuple(first.shape[1:])} "
                        f"and dtype {first.dtype}, but shard {path} has "
                        f"{tuple(shard.shape[1:])}, {shard.dtype}"
                    )
            self._maps[k] = shard, memoryview(array).cast("B")  # load_shard checked C order
        return self._maps[k]

    def _locate(self, indices: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Return ``(shard numbers, rows in those shards)`` for ``indices``, both ``(B,)``."""
        idx = np.asarray([check_int("index", i) for i in indices], dtype=np.int64)  # (B,)
        idx = np.where(idx < 0, idx + self._len, idx)  # negative indices count from the end
        bad = (idx < 0) | (idx >= self._len)
        if bad.any():
            i = indices[int(np.argmax(bad))]
            raise IndexError(f"index should be in [0, {self._len}), but got index={i}")
        shard = np.searchsorted(self._ends, idx, side="right")  # first shard ending after idx
        return shard, idx - self._starts[shard]

    def __getitem__(self, index: int) -> torch.Tensor:
        (k,), (row,) = self._locate([index])
        # clone copies the row out of the page cache: the tensor owns writable memory
        return self._shard(int(k))[0][row].clone()

    def __getitems__(self, indices: Sequence[int]) -> torch.Tensor:
        r"""Read a whole batch into one tensor of shape ``(len(indices), *sample_shape)``.

        Each run of consecutive rows of one shard is one copy. In a DataLoader worker the batch
        is in shared memory from the start, so sending it to the main process copies nothing.
        """
        shard, rows = self._locate(indices)
        if len(indices) == 0:
            return torch.empty(0)
        first = self._shard(int(shard[0]))[0]
        shape = (len(indices), *first.shape[1:])
        runs = list(_runs(shard, rows))
        if get_worker_info() is None:  # in the training process: plain memory
            out = torch.empty(shape, dtype=first.dtype)
            self._copy(runs, out)
            return out
        # in a worker: in shared memory, so torch sends the main process only a handle
        # (_new_shared is private torch API; default_collate allocates its batches this way)
        out_bytes = math.prod(shape) * first.element_size()
        storage = torch.UntypedStorage._new_shared(out_bytes)
        out = torch.empty(0, dtype=first.dtype).set_(storage).view(shape)
        if get_sharing_strategy() == "file_descriptor":  # Linux's default: the block has an fd
            self._pwrite(runs, storage, out_bytes // len(indices))
        else:
            self._copy(runs, out)
        return out

    def _copy(self, runs: list[tuple[int, int, int, int]], out: torch.Tensor) -> None:
        """``out[j : j + n] = shard k[row : row + n]`` per run; torch's copy_ uses every thread."""
        for j, k, row, n in runs:
            out[j : j + n].copy_(self._shard(k)[0][row : row + n])

    def _pwrite(
        self, runs: list[tuple[int, int, int, int]], storage: torch.UntypedStorage, row_bytes: int
    ) -> None:
        """Write each run into the shared block through its file descriptor (``os.pwrite``).

        The kernel copies page cache -> shared pages and allocates them as it goes: unlike a
        copy into the fresh mapping, no page fault and no zero-fill per 4 KiB page.
        """
        # the block's own descriptor (private torch API): not ours to close
        fd, _ = storage._share_fd_cpu_()
        try:
            for j, k, row, n in runs:
                data = self._shard(k)[1][row * row_bytes : (row + n) * row_bytes]
                offset = j * row_bytes
                while data:  # pwrite may write less than asked (e.g. past 2 GiB): go on
                    written = os.pwrite(fd, data, offset)
                    data, offset = data[written:], offset + written
        except OSError as err:
            if err.errno == errno.ENOSPC:  # /dev/shm is full (a container's default is 64 MB)
                raise OSError(
                    errno.ENOSPC,
                    f"no space left in shared memory (/dev/shm) for a batch of "
                    f"{storage.nbytes()} bytes: enlarge it (docker run --shm-size=...) or lower "
                    "batch_size or prefetch_factor",
                ) from err
            raise

    # --- pickling: the snapshot crosses process boundaries, the memory maps never do ------------

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_maps": {}}

    def __repr__(self) -> str:
        return f"SnapshotDataset(epoch={self.snapshot.epoch}, shards={len(self.snapshot.shards)}, samples={self._len})"


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
