r"""Snapshot: the shards one epoch trains on; load_shard: read one shard, or say which file is bad.

A shard is one ``.npy`` file holding ``(k, *sample_shape)`` samples in C order. A
:class:`Snapshot` lists shards as ``(path, number of samples)``; sample ``i`` of the snapshot is
row ``i - start`` of the shard whose samples start at ``start``. It is a small frozen value (paths
and counts): it pickles in a few hundred bytes, so it crosses to every rank and DataLoader worker
unchanged, and two snapshots are equal when they list the same shards.
:class:`~distsampling.growing.cache.ShardCache` freezes one per epoch;
:class:`~distsampling.SnapshotDataset` reads one.

A snapshot from a cache also records what every shard must hold: the sample shape and dtype, and
each shard's crc32. :meth:`Snapshot.load` checks a shard against that record, so a damaged shard
is blamed by itself, never by comparison with another shard; a flipped byte or a shard swapped
for another fails its crc32.

References:
    numpy/lib/format.py (the ``.npy`` format that :func:`load_shard` memory-maps).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import numbers
import os
import zlib

import numpy as np

from .._checks import check_int

__all__ = ["CorruptShardError", "Snapshot", "load_shard"]

#: the shard files whose crc32 this process has checked: (path, crc32, inode, size, mtime) then.
#: A file changed since (written, or another renamed in its place) has another key: checked again.
_VERIFIED: set[tuple[str, int, int, int, int]] = set()


@dataclasses.dataclass(frozen=True)
class Snapshot:
    r"""The shards one epoch trains on: ``(path, number of samples)`` in sample order.

    Args:
        epoch: the epoch it belongs to (``>= 0``).
        shards: ``(path, n)`` pairs, ``n >= 1``; any sequence, stored as a tuple of tuples.
        sample_shape: the shape every sample has (``None``: not recorded).
        dtype: the dtype every shard has, as ``np.dtype(...).str`` (``None``: not recorded).
        checksums: each shard's crc32 of its sample bytes (``None``: not recorded).
        verify: whether :meth:`load` checks the crc32 (not part of equality).

    Examples:
        >>> snap = Snapshot(epoch=0, shards=[("/c/a.npy", 3), ("/c/b.npy", 2)])
        >>> len(snap), snap.starts(), snap.locate(4)
        (5, [0, 3], ('/c/b.npy', 1))
    """

    epoch: int
    shards: tuple[tuple[str, int], ...]
    sample_shape: tuple[int, ...] | None = None
    dtype: str | None = None
    checksums: tuple[int, ...] | None = None
    verify: bool = dataclasses.field(default=True, compare=False)

    def __post_init__(self) -> None:
        check_int("epoch", self.epoch, low=0)
        if self.sample_shape is not None:
            shape = tuple(check_int("sample_shape", d, low=0) for d in self.sample_shape)
            object.__setattr__(self, "sample_shape", shape)
        if self.dtype is not None:
            object.__setattr__(self, "dtype", np.dtype(self.dtype).str)
        if self.checksums is not None:
            crcs = tuple(check_int("checksums", c, low=0, high=2**32 - 1) for c in self.checksums)
            if len(crcs) != len(self.shards):
                raise ValueError(
                    f"checksums should hold one crc32 per shard ({len(self.shards)}), "
                    f"but got {len(crcs)}"
                )
            object.__setattr__(self, "checksums", crcs)
        if not isinstance(self.verify, bool):
            raise TypeError(f"verify should be a boolean value, but got verify={self.verify!r}")
        shards = []
        for entry in self.shards:
            ok = isinstance(entry, tuple | list) and len(entry) == 2
            if not ok or isinstance(entry[1], bool) or not isinstance(entry[1], numbers.Integral):
                raise TypeError(
                    f"shards should hold (path, number of samples) pairs, but got {entry!r}"
                )
            if entry[1] < 1:
                raise ValueError(f"every shard should hold >= 1 samples, but got {entry!r}")
            shards.append((str(entry[0]), int(entry[1])))
        object.__setattr__(self, "shards", tuple(shards))  # frozen: set once, here

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
        """Return ``(shard path, row in that shard)`` of sample ``index`` (``0 <= index < len``)."""
        index = check_int("index", index)
        if not 0 <= index < len(self):
            raise IndexError(f"index should be in [0, {len(self)}), but got index={index}")
        starts = self.starts()
        k = bisect.bisect_right(starts, index) - 1  # last shard starting at or before index
        return self.shards[k][0], index - starts[k]

    def load(self, k: int) -> np.ndarray:
        """Memory-map shard ``k``, checked against what this snapshot records (see :func:`load_shard`)."""
        path, samples = self.shards[check_int("k", k, low=0, high=len(self.shards) - 1)]
        crc = self.checksums[k] if self.verify and self.checksums is not None else None
        return load_shard(
            path, samples, sample_shape=self.sample_shape, dtype=self.dtype, crc32=crc
        )


class CorruptShardError(ValueError):
    """A shard file is truncated, not a ``.npy`` file, or not what its snapshot records.

    That is: another number of samples, another sample shape or dtype, or another crc32.
    """


def load_shard(
    path: str,
    samples: int | None = None,
    *,
    sample_shape: tuple[int, ...] | None = None,
    dtype: str | np.dtype | None = None,
    crc32: int | None = None,
) -> np.ndarray:
    r"""Memory-map one shard; raise :class:`CorruptShardError` naming the file if it is damaged.

    Each check runs only where its argument is given (``None``: not checked).

    Args:
        path: the shard's ``.npy`` file.
        samples: the number of samples the shard must hold (as listed in a :class:`Snapshot`).
        sample_shape: the shape each of its samples must have.
        dtype: the dtype it must have.
        crc32: the crc32 of its sample bytes (``zlib.crc32``). Checking it reads the whole file,
            once per process: a file unchanged since (same inode, size and mtime) is not read
            again.

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
        distsampling.growing.snapshot.CorruptShardError: shard .../s.npy is truncated or corrupt: ...
    """
    if samples is not None:  # the arguments first: a bad argument never blames a healthy file
        samples = check_int("samples", samples, low=1)
    if sample_shape is not None:
        sample_shape = tuple(check_int("sample_shape", d, low=0) for d in sample_shape)
    if dtype is not None:
        dtype = np.dtype(dtype)
    key = None  # what identifies this file's content, to check its crc32 once per process
    if crc32 is not None:
        crc32 = check_int("crc32", crc32, low=0, high=2**32 - 1)
        with contextlib.suppress(FileNotFoundError):  # stat before opening: a swap changes it
            st = os.stat(path)
            key = (path, crc32, st.st_ino, st.st_size, st.st_mtime_ns)
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)  # reads the header only
        if not isinstance(array, np.ndarray) or array.ndim < 1:
            raise ValueError("it does not hold an array of samples")
    except FileNotFoundError:
        raise
    except (ValueError, OSError, EOFError) as err:  # bad magic/header, or shorter than its data
        raise CorruptShardError(f"shard {path} is truncated or corrupt: {err}") from err
    if not array.flags.c_contiguous:  # a sample must be one byte range of the file
        raise CorruptShardError(
            f"shard {path} should hold a C-order array, but it is Fortran-order"
        )
    if samples is not None and array.shape[0] != samples:
        raise CorruptShardError(
            f"shard {path} should hold {samples} samples, but it holds {array.shape[0]}"
        )
    if (sample_shape is not None and array.shape[1:] != sample_shape) or (
        dtype is not None and array.dtype != dtype
    ):
        shape = array.shape[1:] if sample_shape is None else sample_shape
        kind = array.dtype if dtype is None else dtype
        raise CorruptShardError(
            f"shard {path} should hold samples of shape {shape} and dtype {kind.str} (as the "
            f"snapshot records), but it holds {array.shape[1:]}, {array.dtype.str}"
        )
    if crc32 is not None and key not in _VERIFIED:  # once per file and process
        got = zlib.crc32(array.reshape(-1).view(np.uint8))  # reads every byte
        if got != crc32:
            raise CorruptShardError(
                f"shard {path} fails its checksum: crc32 {got:#010x}, but the manifest recorded "
                f"{crc32:#010x} (a damaged byte, or a shard swapped for another)"
            )
        if key is not None:
            if len(_VERIFIED) >= 1 << 16:  # bounded memory: forget them all, check them again
                _VERIFIED.clear()
            _VERIFIED.add(key)
    return array
