r"""SequentialWindowedDataset: shuffle windows of consecutive samples across ranks, not samples.

A time-series model wants runs of ``window`` consecutive samples, yet the epoch should still be
shuffled and split across ranks. So the dataset's items are not samples but *window starts*:
item ``i`` is ``(offset + i * window) % size``, where ``offset`` is drawn per epoch from
``(seed, epoch)``. Any sampler then shuffles and splits the windows as it would samples, and
:func:`window_indices` expands a batch of starts into its ``(batch, window)`` sample indices.

No array of starts exists: an item costs one multiply and one modulo. The epoch is the
dataset's own, as a sampler's: a DataLoader worker's copy keeps the epoch it was made with. So
split the windows with ``DistributedSamplerWrapper(windows, ...)``: its indices are the starts
themselves, drawn at ``iter()``, and a worker needs no epoch (tutorials/windowed.md).

References: torch/utils/data/dataset.py (Dataset); torch/utils/data/distributed.py
(DistributedSampler, whose ``set_epoch`` this mirrors); numpy.random.SeedSequence.
"""

from __future__ import annotations

import operator
from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch.utils.data import Dataset

from ._checks import check_bool, check_int, check_int64

__all__ = ["SequentialWindowedDataset", "epoch_offset", "window_indices"]


def _check_window(window: object, size: int) -> int:
    window = check_int("window", window, low=1)
    if window > size:
        raise ValueError(
            f"window should be <= size={size} (a window cannot be longer than the data), "
            f"but got window={window}"
        )
    return window


def epoch_offset(size: int, seed: int, epoch: int) -> int:
    r"""Return the epoch's offset in ``[0, size)``: a hash of ``(seed, epoch)``, no global RNG read
    (``SeedSequence``'s 128 bits: neighbouring epochs and seeds get unrelated offsets).

    ``size`` is a positive ``int``, ``seed`` and ``epoch`` non-negative ones (alike on every rank).

    Examples:
        >>> [epoch_offset(10, seed=0, epoch=e) for e in range(5)]
        [1, 6, 3, 9, 3]
    """
    size, seed = check_int("size", size, low=1), check_int("seed", seed, low=0)
    epoch = check_int("epoch", epoch, low=0)
    hi, lo = np.random.SeedSequence([seed, epoch]).generate_state(2, dtype=np.uint64).tolist()
    return ((hi << 64) | lo) % size  # 128 bits modulo size: the bias is below 2**-64


def window_indices(
    starts: torch.Tensor | Sequence[int] | np.ndarray, window: int, size: int
) -> torch.Tensor:
    r"""Expand window starts into the ``(batch, window)`` int64 tensor of sample indices mod ``size``.

    Row ``k`` is ``starts[k], ..., starts[k] + window - 1``, wrapped past the end: indexed by it,
    ``series[window_indices(starts, t, len(series))]`` is ``(batch, t, *series.shape[1:])``.

    ``starts``: 1-D integers (a tensor, array or list: a batch of starts); ``window``: the samples
    per window, in ``[1, size]``; ``size``: the samples in the data.

    Examples:
        >>> window_indices([0, 9], window=3, size=10)
        tensor([[0, 1, 2],
                [9, 0, 1]])
    """
    size = check_int64("size", size, low=1)  # as the dataset: the indices are int64
    window = _check_window(window, size)
    try:
        try:
            s = torch.as_tensor(starts)
        except TypeError:  # torch takes no list of numpy's unsigned scalars: numpy's array of them
            s = torch.as_tensor(np.asarray(starts))
    except (TypeError, ValueError, RuntimeError) as err:
        raise TypeError(f"starts should be 1-D integers, but got starts={starts!r}") from err
    if s.numel() == 0:
        s = s.to(torch.int64)  # [] has no integer dtype to infer: an empty batch is still valid
    if s.dtype == getattr(torch, "uint64", None):  # numpy's: wrapped in numpy, exactly
        s = torch.from_numpy((s.numpy() % np.uint64(size)).astype(np.int64))
    if s.dtype.is_floating_point or s.dtype.is_complex or s.dtype == torch.bool:
        raise TypeError(f"starts should be 1-D integers, but got starts={s!r}")
    if s.ndim != 1:
        raise ValueError(f"starts should be 1-D, but got starts of shape {tuple(s.shape)}")
    # (batch, 1) + (window,) broadcasts to (batch, window); % wraps onto [0, size) (Python sign)
    return (s.to(torch.int64)[:, None] + torch.arange(window)) % size


class SequentialWindowedDataset(Dataset[int]):
    r"""Map-style dataset whose item ``i`` is the start of window ``i`` of the current epoch.

    Window ``i`` covers samples ``start, start + 1, ..., start + window - 1`` (mod ``size``),
    with ``start = (offset + i * window) % size``. There are ``ceil(size / window)`` windows:
    the last one wraps and overlaps the first by ``window - size % window`` samples. With
    ``drop_last=True`` there are ``size // window``, none overlaps, and the ``size % window``
    samples just before the offset are left out (a different tail each epoch). The offset is a
    function of ``(seed, epoch)`` only (:func:`epoch_offset`): every rank agrees on it.

    Args:
        size: number of samples in the data, a positive ``int``.
        window: samples per window, in ``[1, size]``.
        seed: base seed, a non-negative ``int``; must be the same on every rank.
        drop_last: drop the wrapping window instead of letting it overlap the first.

    Examples:
        >>> ds = SequentialWindowedDataset(10, window=3)
        >>> ds.set_epoch(8)  # epoch 8 of seed 0 draws offset 0
        >>> len(ds), ds.offset, list(ds)
        (4, 0, [0, 3, 6, 9])
        >>> window_indices(list(ds), ds.window, ds.size).tolist()  # the last window wraps
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 0, 1]]
    """

    def __init__(self, size: int, window: int, seed: int = 0, drop_last: bool = False) -> None:
        self.size = check_int64("size", size, low=1)
        self.window = _check_window(window, self.size)
        self.seed = check_int("seed", seed, low=0)
        self.drop_last = check_bool("drop_last", drop_last)
        # floor(size / window) with drop_last, otherwise ceil: the last window wraps around
        self._len = self.size // self.window if drop_last else -(-self.size // self.window)
        self.set_epoch(0)

    def __getitem__(self, index: int) -> int:
        try:
            i = operator.index(index)  # ints, numpy ints, integer 0-d tensors; not floats
        except TypeError:
            raise TypeError(f"index should be an integer, but got index={index!r}") from None
        if not -self._len <= i < self._len:
            raise IndexError(f"index should be in [{-self._len}, {self._len}), but got index={i}")
        # O(1): window i starts i windows after this epoch's offset, wrapped into [0, size)
        return (self.offset + (i % self._len) * self.window) % self.size

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[int]:  # ours: the epoch's starts, so that it is a sampler too
        return map(self.__getitem__, range(self._len))

    def set_epoch(self, epoch: int) -> None:
        r"""Draw this epoch's offset from ``(seed, epoch)``: call it on every rank, before ``iter``,
        with the same non-negative ``int``."""
        self.epoch = check_int64("epoch", epoch, low=0)  # as torch's sampler: one int
        self.offset = epoch_offset(self.size, self.seed, self.epoch)  # start of window 0

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(size={self.size}, window={self.window}, seed={self.seed}, "
            f"drop_last={self.drop_last})"
        )
