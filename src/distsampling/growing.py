r"""SnapshotDataset: a map-style dataset over one epoch's :class:`~distsampling.cache.Snapshot`.

Sample ``i`` is row ``i - start`` of the shard whose samples start at ``start``. Shards are
memory-mapped (:func:`~distsampling.cache.load_shard`): reading a sample is a copy out of the page
cache, with no decoding and no pickling of sample data.

What crosses a process boundary, with ``num_workers > 0``:

- to each worker, once: the dataset, i.e. the snapshot (paths and counts: a few hundred bytes).
  The memory maps are never pickled; each process opens its own on first use.
- back to the main process, per batch: the batch tensor. :meth:`SnapshotDataset.__getitems__`
  writes the whole batch straight into one shared-memory block, so torch sends only its handle
  (a file descriptor) and the main process maps it: no copy and no unpickling of sample bytes in
  the training process. Pass ``collate_fn=collate_batch`` so the batch is not stacked again.

References:
    torch/utils/data/dataset.py (Dataset, ``__getitems__``), torch/utils/data/_utils/fetch.py
    (_MapDatasetFetcher), torch/utils/data/_utils/collate.py (default_collate's shared memory).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
import torch
from torch.utils.data import Dataset, get_worker_info
from torch.utils.data._utils.collate import default_collate

from ._validate import check_int
from .cache import Snapshot, load_shard

__all__ = ["SnapshotDataset", "collate_batch"]


class SnapshotDataset(Dataset[torch.Tensor]):
    r"""The samples of one snapshot, as tensors of shape ``sample_shape``, read memory-mapped.

    Works with any ``num_workers`` (each process opens its own memory maps), ``pin_memory`` and
    ``persistent_workers``. A shard that is missing, truncated or holds another number of samples
    than the snapshot lists raises (:class:`~distsampling.cache.CorruptShardError` naming the file)
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
        self._maps: dict[int, torch.Tensor] = {}  # shard number -> its memory map, per process

    def __len__(self) -> int:
        return self._len

    # --- reading --------------------------------------------------------------------------------

    def _shard(self, k: int) -> torch.Tensor:
        """Shard ``k`` as a tensor over its memory map (``(n_k, *sample_shape)``), once per process."""
        if k not in self._maps:
            path, samples = self.snapshot.shards[k]
            array = load_shard(path, samples)  # np.memmap, read-only; CorruptShardError if damaged
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
            self._maps[k] = shard
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
        return self._shard(int(k))[row].clone()

    def __getitems__(self, indices: Sequence[int]) -> torch.Tensor:
        r"""Read a whole batch into one tensor of shape ``(len(indices), *sample_shape)``.

        In a DataLoader worker the tensor lives in shared memory from the start, so sending it to
        the main process copies nothing (default_collate does the same for the batches it stacks).
        """
        shard, rows = self._locate(indices)
        if len(indices) == 0:
            return torch.empty(0)
        first = self._shard(int(shard[0]))
        shape = (len(indices), *first.shape[1:])
        if get_worker_info() is None:
            out = torch.empty(shape, dtype=first.dtype)
        else:  # in shared memory: the worker -> main transfer is a file descriptor
            # (_new_shared is private torch API; default_collate allocates its batches this way)
            storage = torch.UntypedStorage._new_shared(math.prod(shape) * first.element_size())
            out = torch.empty(0, dtype=first.dtype).set_(storage).view(shape)
        for j, (k, row) in enumerate(zip(shard.tolist(), rows.tolist())):
            # one copy, page cache -> batch; torch's copy_ releases the GIL, so the worker's
            # thread that hands batches to the main process is never kept waiting behind it
            out[j].copy_(self._shard(k)[row])
        return out

    # --- pickling: the snapshot crosses process boundaries, the memory maps never do ------------

    def __getstate__(self) -> dict:
        return {**self.__dict__, "_maps": {}}

    def __repr__(self) -> str:
        return f"SnapshotDataset(epoch={self.snapshot.epoch}, shards={len(self.snapshot.shards)}, samples={self._len})"


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
