"""BatchBalanceClassSampler vs catalyst's BatchBalanceClassSampler's algorithm, run the way it
is written there: per batch, ``random.sample`` of the classes (redrawn until distinct), then per
class ``np.random.choice`` of its member list (with replacement when it is smaller), the epoch
built as a list of lists. Ours draws the whole epoch's uniforms at once (Floyd's algorithm,
vectorised over the batches).

A metric-learning set like Stanford Online Products: 60,000 images of 11,000 classes (2 to 12
images each), batches of 32 classes x 4 images, one epoch (len // 128 batches), one rank.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np

from distsampling import BatchBalanceClassSampler

from ._harness import Comparison
from .bench_infinite import per_index

P, K = 32, 4


def _labels(n: int, classes: int) -> list[int]:
    rng = np.random.default_rng(0)
    sizes = rng.integers(2, 13, size=classes)  # (C,) images per class
    labels = np.repeat(np.arange(classes), sizes)[:n]
    return rng.permutation(labels).tolist()


class Original:
    """The original's structure: global RNGs, one batch at a time, lists of member indices."""

    def __init__(self, labels: list[int], num_classes: int, num_samples: int) -> None:
        self.labels = list(set(labels))
        self.num_classes, self.num_samples = num_classes, num_samples
        self.num_batches = len(labels) // (num_classes * num_samples)
        arr = np.array(labels)
        self.lbl2idx = {c: np.arange(len(arr))[arr == c].tolist() for c in set(labels)}

    def __iter__(self) -> Iterator[list[int]]:
        indices = []
        for _ in range(self.num_batches):
            batch = []
            classes = random.sample(self.labels, self.num_classes)
            while self.num_classes != len(set(classes)):
                classes = random.sample(self.labels, self.num_classes)
            for c in classes:
                replace = self.num_samples > len(self.lbl2idx[c])
                batch += np.random.choice(
                    self.lbl2idx[c], self.num_samples, replace=replace
                ).tolist()
            indices.append(batch)
        return iter(indices)


def _flat(batches) -> Iterator[int]:
    return (i for batch in batches for i in batch)


def ours(timer, n: int, classes: int) -> dict:
    labels = _labels(n, classes)
    s = BatchBalanceClassSampler(labels, P, K, num_replicas=1, rank=0, seed=0)
    return per_index(timer, lambda: _flat(s), len(s) * P * K)


def theirs(timer, n: int, classes: int) -> dict:
    labels = _labels(n, classes)
    s = Original(labels, P, K)
    return per_index(timer, lambda: _flat(s), s.num_batches * P * K, repeats=3)


def suite(large: bool) -> list[Comparison]:
    return [
        Comparison(
            title="BatchBalanceClassSampler, 60,000 images of 11,000 classes, 32 x 4 per batch, one epoch",
            contenders={
                "original (catalyst's loop)": "bench_balanced:theirs",
                "distsampling": "bench_balanced:ours",
            },
            baseline="original (catalyst's loop)",
            params={"n": 60_000, "classes": 11_000},
            note="per_index_us: median of in-process repeats (an epoch each); spread_%: (max - min) / median of the repeats",
        )
    ]
