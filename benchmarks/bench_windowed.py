"""SequentialWindowedDataset: one epoch of ``__getitem__`` over n = 1e6 samples, windows of 16.

Three ways to serve window starts, each timed from ``set_epoch`` to the last item of the epoch
(62,500 items, read in dataset order as a sampler would, one ``dataset[i]`` at a time):

- *per-item rebuild*: the first design of the user's question. Every item re-seeds an RNG,
  redraws the offset and rebuilds the whole array of starts, then picks one: O(n / t) per item.
- *once-per-epoch array*: the user's second design. ``set_epoch`` rebuilds the array of starts
  once; an item is one array lookup. O(n / t) memory.
- *distsampling*: no array; an item is ``(offset + i * t) % n``.

The extra figure ``per_item_us`` is the epoch's time divided by the number of items.
"""

from __future__ import annotations

import numpy as np

from distsampling import SequentialWindowedDataset

from ._harness import Comparison


class PerItemRebuild:
    """Starts rebuilt inside every ``__getitem__`` from a freshly seeded RNG (the slow design)."""

    def __init__(self, size: int, window: int) -> None:
        self.size, self.window, self.seed = size, window, 0
        self.grid = np.arange(0, size, window)  # (ceil(size / window),)

    def set_epoch(self, epoch: int) -> None:
        self.seed = epoch

    def __len__(self) -> int:
        return len(self.grid)

    def __getitem__(self, index: int) -> int:
        offset = np.random.default_rng(self.seed).integers(self.size)
        return ((self.grid + offset) % self.size)[index]  # a new (len,) array for one item


class OncePerEpochArray:
    """Starts rebuilt once per epoch; an item is an array lookup (the fast array design)."""

    def __init__(self, size: int, window: int) -> None:
        self.size, self.window = size, window
        self.grid = np.arange(0, size, window)  # (ceil(size / window),)
        self.starts = self.grid

    def set_epoch(self, epoch: int) -> None:
        offset = np.random.default_rng(epoch).integers(self.size)
        self.starts = (self.grid + offset) % self.size

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, index: int) -> int:
        return self.starts[index]


def _epoch(timer, dataset) -> dict[str, float]:
    timer.start()
    dataset.set_epoch(1)
    m = len(dataset)
    dataset[0]
    timer.first()
    for i in range(1, m):
        dataset[i]
    timer.stop()
    return {"per_item_us": (timer.t_end - timer.t0) / m * 1e6}


def rebuild(timer, n: int, t: int) -> dict[str, float]:
    return _epoch(timer, PerItemRebuild(n, t))


def array(timer, n: int, t: int) -> dict[str, float]:
    return _epoch(timer, OncePerEpochArray(n, t))


def ours(timer, n: int, t: int) -> dict[str, float]:
    return _epoch(timer, SequentialWindowedDataset(n, t))


def suite(large: bool) -> list[Comparison]:
    out = []
    for n in [10**6] + ([10**7] if large else []):
        contenders = {"once-per-epoch array": "bench_windowed:array"}
        if n <= 10**6:  # O((n / t)^2) per epoch: minutes at 1e7
            contenders["per-item rebuild"] = "bench_windowed:rebuild"
        contenders["distsampling"] = "bench_windowed:ours"
        out.append(
            Comparison(
                title=f"SequentialWindowedDataset, n={n:.0e}, t=16, one epoch of __getitem__",
                contenders=contenders,
                baseline="once-per-epoch array",
                params={"n": n, "t": 16},
            )
        )
    return out
