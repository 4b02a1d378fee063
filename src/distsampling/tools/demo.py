r"""``make demo``: print who reads what for the users' own examples, then prove it live.

Each example has a *builder*: ``builder(rank, world, epoch, **kwargs)`` builds that rank's
sampler for that epoch and returns what it yields. The tour prints the plan (every rank's
indices, all computed in this one process). Then a real 2-process ``torch.distributed`` group
(gloo) runs the same builders, one rank per process and each process with a *different*
global RNG state, gathers what every rank actually yields, and checks it equals the plan.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from ..weighted import WeightedBalanceClassSampler
from ..wrapper import DistributedSamplerWrapper
from .launch import run_world
from .render import format_split, rank_indices, rank_windows

__all__ = ["BUILDERS", "EXAMPLES", "main", "plan"]


def split_builder(
    rank: int,
    world: int,
    epoch: int,
    *,
    size: int,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
    **_: Any,
) -> list[int]:
    return rank_indices(size, world, rank, epoch, shuffle=shuffle, seed=seed, drop_last=drop_last)


def windows_builder(
    rank: int, world: int, epoch: int, *, size: int, window: int, seed: int = 0, **_: Any
) -> list[int]:
    return rank_windows(size, window, world, rank, epoch, seed=seed)


def weighted_builder(
    rank: int, world: int, epoch: int, *, labels: list, weight: dict, length: int, **_: Any
) -> list[int]:
    inner = WeightedBalanceClassSampler(labels, weight, length, seed=0)
    sampler = DistributedSamplerWrapper(inner, world, rank, seed=0)
    sampler.set_epoch(epoch)  # reaches the inner sampler: a new, equally weighted epoch
    return list(sampler)


def format_weighted(
    labels: list, weight: dict, length: int, replicas: int, epochs: int, **_: Any
) -> str:
    """The weighted stop of the tour: class sizes, exact draws per class, each rank's ``label#index``."""
    sizes = {c: labels.count(c) for c in sorted(set(labels))}
    counts = WeightedBalanceClassSampler(labels, weight, length).samples_per_class
    lines = [
        f"labels: {sizes} samples; weight={weight}, length={length}",
        f"WeightedBalanceClassSampler draws exactly {dict(zip(sizes, counts))} per epoch, "
        f"through DistributedSamplerWrapper(num_replicas={replicas})",
    ]
    for epoch in range(epochs):
        lines.append(f"epoch {epoch}")
        for rank in range(replicas):
            got = weighted_builder(
                rank, replicas, epoch, labels=labels, weight=weight, length=length
            )
            lines.append(f"  rank {rank}: " + " ".join(f"{labels[i]}#{i}" for i in got))
    return "\n".join(lines)


#: kind -> (builder, formatter printing the plan for the tour)
BUILDERS: dict[str, tuple[Callable[..., list], Callable[..., str]]] = {
    "split": (split_builder, format_split),
    "windows": (windows_builder, format_split),  # format_split(..., window=...)
    "weighted": (weighted_builder, format_weighted),
}
#: (title, kind, arguments): the users' small examples
EXAMPLES: list[tuple[str, str, dict[str, Any]]] = [
    (
        "Ten samples, two ranks: contiguous halves, or a random split?",
        "split",
        dict(size=10, replicas=2, epochs=2),
    ),
    (
        "Without shuffle the split is strided, not contiguous: rank r reads r, r+W, r+2W, ...",
        "split",
        dict(size=10, replicas=2, epochs=1, shuffle=False),
    ),
    (
        "10 samples on 3 ranks do not divide: the head of the order is read again",
        "split",
        dict(size=10, replicas=3, epochs=1, batch_size=2),
    ),
    (
        "... or, with drop_last, the tail is cut and nothing repeats",
        "split",
        dict(size=10, replicas=3, epochs=1, drop_last=True, batch_size=2),
    ),
    (
        "Windows of 3 consecutive samples from a new offset each epoch, 2 windows a batch",
        "windows",
        dict(size=10, window=3, replicas=2, epochs=2, batch_size=2),
    ),
    (
        "Class weights 2:1:1 over imbalanced labels, exact counts, split across ranks",
        "weighted",
        dict(
            labels=["cat"] * 9 + ["dog"] * 4 + ["owl"] * 2,
            weight={"cat": 2, "dog": 1, "owl": 1},
            length=12,
            replicas=2,
            epochs=2,
        ),
    ),
]
LIVE_WORLD = 2


def plan(kind: str, world: int, epochs: int, **kwargs: Any) -> list[list[list]]:
    """``plan[epoch][rank]``: what each rank yields, every rank simulated in this process."""
    build = BUILDERS[kind][0]
    return [[build(r, world, e, **kwargs) for r in range(world)] for e in range(epochs)]


def _live_rank(examples: list[tuple[str, dict[str, Any]]]) -> list | None:
    """On every rank: a per-rank global RNG state, then each example's sampler, gathered."""
    rank, world = dist.get_rank(), dist.get_world_size()
    random.seed(rank), np.random.seed(rank), torch.manual_seed(rank)
    out = []
    for kind, kwargs in examples:
        per_epoch = []
        for epoch in range(kwargs["epochs"]):
            gathered: list[Any] = [None] * world
            dist.all_gather_object(gathered, BUILDERS[kind][0](rank, world, epoch, **kwargs))
            per_epoch.append(gathered)
        out.append(per_epoch)
    return out if rank == 0 else None


def main() -> None:
    """Print the tour, then check it on a live process group."""
    for title, kind, kwargs in EXAMPLES:
        print(f"== {title}")
        print(BUILDERS[kind][1](**kwargs))
        print()
    print(
        f"== Live: {LIVE_WORLD} processes, torch.distributed (gloo), each with a different global RNG state"
    )
    live = [(kind, dict(kwargs, replicas=LIVE_WORLD)) for _, kind, kwargs in EXAMPLES]
    start = time.perf_counter()
    gathered = run_world("distsampling.tools.demo:_live_rank", LIVE_WORLD, live, timeout=120)[0]
    for (title, _, _), (kind, kwargs), got in zip(EXAMPLES, live, gathered):
        expected = plan(kind, LIVE_WORLD, **{k: v for k, v in kwargs.items() if k != "replicas"})
        print(f"  {'OK' if got == expected else 'DIFFERS'}  {title.split(': ')[0]}")
        if got != expected:
            raise SystemExit(
                f"the live ranks disagree with the plan for {kind} {kwargs}:\n{got}\n!=\n{expected}"
            )
    print(
        f"every rank of the live group yielded exactly the plan ({time.perf_counter() - start:.1f} s)"
    )
