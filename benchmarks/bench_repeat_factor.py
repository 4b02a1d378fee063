"""RepeatFactorSampler vs detectron2's RepeatFactorTrainingSampler's algorithm, run the way it
is written there: per pass, stochastic rounding, then a Python loop that extends a list with
each image index ``int(rep.item())`` times, a tensor of it, ``randperm``, ``.tolist()``, all
in a generator sliced per rank by ``itertools.islice``.

Factors of a long-tailed dataset: 1e5 images, 1,000 categories with image counts falling as a
power law, three categories per image, factors from category frequency with ``t = 0.001``.
Rank 0 of 8 reads two passes' worth, timed per repeat inside one process.
"""

from __future__ import annotations

from collections.abc import Iterator
from itertools import islice

import numpy as np
import torch

from distsampling import RepeatFactorSampler, repeat_factors_from_category_frequency

from ._harness import Comparison
from .bench_infinite import WORLD, per_index


def _factors(n: int) -> torch.Tensor:
    rng = np.random.default_rng(0)
    share = 1.0 / np.arange(1, 1001) ** 1.2  # category c's share of annotations: a long tail
    categories = rng.choice(1000, size=(n, 3), p=share / share.sum())  # (n, 3)
    return repeat_factors_from_category_frequency(categories.tolist(), 0.001)  # (n,) float32


def original(factors: torch.Tensor, rank: int, world: int, seed: int) -> Iterator[int]:
    """The original's structure: stochastic rounding, a list built image by image, shuffled."""
    int_part = torch.trunc(factors)
    frac_part = factors - int_part

    def infinite_indices() -> Iterator[int]:
        g = torch.Generator()
        g.manual_seed(seed)
        while True:
            rands = torch.rand(len(frac_part), generator=g)
            rep_factors = int_part + (rands < frac_part).float()
            indices = []
            for dataset_index, rep_factor in enumerate(rep_factors):
                indices.extend([dataset_index] * int(rep_factor.item()))
            indices = torch.tensor(indices, dtype=torch.int64)
            yield from indices[torch.randperm(len(indices), generator=g)].tolist()

    yield from islice(infinite_indices(), rank, None, world)


def _count(factors: torch.Tensor) -> int:
    return int(2 * factors.sum().item()) // WORLD  # two passes' worth of rank 0's indices


def ours(timer, n: int) -> dict:
    f = _factors(n)
    return per_index(timer, lambda: RepeatFactorSampler(f, WORLD, 0, seed=0), _count(f))


def theirs(timer, n: int) -> dict:
    f = _factors(n)
    return per_index(timer, lambda: original(f, 0, WORLD, 0), _count(f), repeats=3)


def suite(large: bool) -> list[Comparison]:
    sizes = [10**5] + ([10**6] if large else [])
    return [
        Comparison(
            title=f"RepeatFactorSampler, {n:.0e} long-tailed images, world 8, rank 0 reads 2 passes' worth",
            contenders={
                "original (list built image by image)": "bench_repeat_factor:theirs",
                "distsampling": "bench_repeat_factor:ours",
            },
            baseline="original (list built image by image)",
            params={"n": n},
            note="per_index_us: median of in-process repeats; spread_%: (max - min) / median of the repeats",
        )
        for n in sizes
    ]
