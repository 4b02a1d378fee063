"""DistributedSampler: ours vs torch's at N = 1e6, 1e7, 1e7 + 3 (padded), 1e8 (--large), world 8.

Time is the whole epoch for one rank (``iter`` plus exhausting it), time to first index is from
``iter`` to the first index out, memory is the peak growth over the epoch.
"""

from __future__ import annotations

import torch.utils.data as tud

from distsampling import DistributedSampler

from ._harness import Comparison, time_epoch


def ours(timer, n: int, world: int) -> None:
    sampler = DistributedSampler(range(n), num_replicas=world, rank=0)
    sampler.set_epoch(1)
    time_epoch(timer, lambda: sampler)


def torch_(timer, n: int, world: int) -> None:
    sampler = tud.DistributedSampler(range(n), num_replicas=world, rank=0)
    sampler.set_epoch(1)
    time_epoch(timer, lambda: sampler)


def suite(large: bool) -> list[Comparison]:
    # N + 3 is not divisible by the world size: both pad the epoch with its head
    sizes = [10**6, 10**7, 10**7 + 3] + ([10**8] if large else [])
    return [
        Comparison(
            title=f"DistributedSampler, N={n:,}{' (padded)' if n % 8 else ''}, world 8, "
            "one rank's epoch",
            contenders={
                "torch": "bench_distributed:torch_",
                "distsampling": "bench_distributed:ours",
            },
            baseline="torch",
            params={"n": n, "world": 8},
        )
        for n in sizes
    ]
