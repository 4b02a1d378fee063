"""InferenceSampler vs detectron2's InferenceSampler's algorithm, run the way it is written
there: the block is a ``range`` and ``__iter__`` is a generator doing ``yield from`` it. Ours
hands out the range's own iterator (its position is read back from it, for ``state_dict``).

Rank 0 of 8 reads its whole block of a dataset of N = 1e6 and 1e7, timed per repeat in-process.
"""

from __future__ import annotations

from collections.abc import Iterator

from distsampling import InferenceSampler

from ._harness import Comparison
from .bench_infinite import WORLD, per_index


class Original:
    """The original's structure: sizes per rank summed into a range, a generator over it."""

    def __init__(self, size: int, rank: int, world: int) -> None:
        shard_size, left = divmod(size, world)
        shard_sizes = [shard_size + int(r < left) for r in range(world)]
        begin = sum(shard_sizes[:rank])
        self.local_indices = range(begin, min(sum(shard_sizes[: rank + 1]), size))

    def __iter__(self) -> Iterator[int]:
        yield from self.local_indices


def ours(timer, n: int) -> dict:
    return per_index(timer, lambda: InferenceSampler(range(n), WORLD, 0), n // WORLD)


def theirs(timer, n: int) -> dict:
    return per_index(timer, lambda: Original(n, 0, WORLD), n // WORLD)


def suite(large: bool) -> list[Comparison]:
    return [
        Comparison(
            title=f"InferenceSampler, N={n:.0e}, world 8, rank 0 reads its block",
            contenders={
                "original (generator over a range)": "bench_inference:theirs",
                "distsampling": "bench_inference:ours",
            },
            baseline="original (generator over a range)",
            params={"n": n},
            note="per_index_us: median of 5 in-process repeats; spread_%: (max - min) / median of the repeats",
        )
        for n in [10**6, 10**7]
    ]
