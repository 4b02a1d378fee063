"""WeightedBalanceClassSampler vs torch's WeightedRandomSampler at equal length: N = 1e6, 1e7
labels of 10 classes; and 70,000, 100,000 and 1,000,000 classes of 1 to 3 samples each.

Both start from the same labels (an int64 tensor; 10 classes with sizes halving from one class
to the next, or many classes of 1, 2 and 3 samples, shuffled) and the same per-class weights
(10 classes: all 1, balance them; many classes: a random float each, so no two weights tie and
every count is a largest-remainder rounding of its own). torch needs per-sample weights
``w_c / n_c``; ours takes the class weights. Time is building the sampler plus one whole epoch of
``N`` indices; time to first index counts from the start too; memory is peak growth.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.utils.data as tud

from distsampling import WeightedBalanceClassSampler

from ._harness import Comparison, time_epoch

CLASSES = 10


def _labels(n: int) -> torch.Tensor:
    shares = 0.5 ** np.arange(CLASSES)
    rng = np.random.default_rng(0)
    return torch.from_numpy(rng.choice(CLASSES, size=n, p=shares / shares.sum()))  # (n,) int64


def _many(classes: int) -> tuple[torch.Tensor, list[float]]:
    """Labels of ``classes`` classes of 1, 2 and 3 samples in turn, shuffled, ``(N,)`` int64
    (``N`` about ``2 * classes``), and a random weight per class."""
    rng = np.random.default_rng(0)
    sizes = 1 + np.arange(classes) % 3  # (C,)
    labels = rng.permutation(np.repeat(np.arange(classes), sizes))  # (N,)
    return torch.from_numpy(labels), rng.random(classes).tolist()


def ours_many(timer, classes: int, draws: int) -> None:
    labels, weight = _many(classes)
    time_epoch(timer, lambda: WeightedBalanceClassSampler(labels, weight, length=draws, seed=0))


def torch_many(timer, classes: int, draws: int) -> None:
    labels, weight = _many(classes)
    weight = torch.tensor(weight, dtype=torch.double)

    def build() -> tud.WeightedRandomSampler:
        per_sample = (weight / torch.bincount(labels, minlength=classes))[labels]  # (N,)
        generator = torch.Generator().manual_seed(0)
        return tud.WeightedRandomSampler(per_sample, draws, generator=generator)

    time_epoch(timer, build)


def ours(timer, n: int) -> None:
    labels, weight = _labels(n), [1.0] * CLASSES
    time_epoch(timer, lambda: WeightedBalanceClassSampler(labels, weight, length=n, seed=0))


def torch_(timer, n: int) -> None:
    labels, weight = _labels(n), torch.ones(CLASSES, dtype=torch.double)

    def build() -> tud.WeightedRandomSampler:
        per_sample = (weight / torch.bincount(labels, minlength=CLASSES))[labels]  # (n,)
        return tud.WeightedRandomSampler(per_sample, n, generator=torch.Generator().manual_seed(0))

    time_epoch(timer, build)


def suite(large: bool) -> list[Comparison]:
    few = [
        Comparison(
            title=f"Class-weighted epoch, N={n:.0e} labels, {n:.0e} draws, 10 classes",
            contenders={
                "torch WeightedRandomSampler": "bench_weighted:torch_",
                "distsampling": "bench_weighted:ours",
            },
            baseline="torch WeightedRandomSampler",
            params={"n": n},
            note="build + one epoch",
        )
        for n in [10**6, 10**7]
    ]
    many = [
        Comparison(
            title=f"Class-weighted epoch, {c:,} classes of 1 to 3 samples, {2 * c:,} draws, "
            "a random weight per class",
            contenders={
                "torch WeightedRandomSampler": "bench_weighted:torch_many",
                "distsampling": "bench_weighted:ours_many",
            },
            baseline="torch WeightedRandomSampler",
            params={"classes": c, "draws": 2 * c},  # about as many draws as samples
            note="build + one epoch",
        )
        for c in [70_000, 100_000, 1_000_000]
    ]
    return few + many
