"""DistributedSamplerWrapper vs a catalyst-style wrapper, world 8, rank 0: N = 1e6, 1e7.

The catalyst-style wrapper is the one shown in docs/tutorials/wrapper.md (our own code with
catalyst's behaviour): the inner epoch becomes a Python list, and torch's DistributedSampler
builds another list of all N positions. Both wrap the same inner sampler: torch's RandomSampler
with a seeded generator, then a WeightedBalanceClassSampler. Time is one rank's epoch (``iter``
plus exhausting it), memory its peak growth.
"""

from __future__ import annotations

import importlib.util

import torch
import torch.utils.data as tud

from distsampling import DistributedSamplerWrapper, WeightedBalanceClassSampler

from ._harness import ROOT, Comparison, time_epoch

WORLD = 8


def _catalyst_style():
    path = ROOT / "docs" / "examples" / "wrapper_catalyst_style.py"
    spec = importlib.util.spec_from_file_location("wrapper_catalyst_style", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.CatalystStyleWrapper


def _inner(kind: str, n: int):
    if kind == "random":
        return tud.RandomSampler(range(n), generator=torch.Generator().manual_seed(0))
    labels = torch.arange(n) % 10  # (n,) 10 equal classes
    return WeightedBalanceClassSampler(labels, list(range(1, 11)), length=n)


def ours(timer, n: int, inner: str) -> None:
    wrapper = DistributedSamplerWrapper(_inner(inner, n), num_replicas=WORLD, rank=0)
    wrapper.set_epoch(1)
    time_epoch(timer, lambda: wrapper)


def catalyst(timer, n: int, inner: str) -> None:
    wrapper = _catalyst_style()(_inner(inner, n), num_replicas=WORLD, rank=0)
    wrapper.set_epoch(1)
    time_epoch(timer, lambda: wrapper)


def suite(large: bool) -> list[Comparison]:
    names = {"random": "RandomSampler", "weighted": "WeightedBalanceClassSampler"}
    return [
        Comparison(
            title=f"Wrapper over a {names[inner]}, N={n:.0e}, world 8, one rank's epoch",
            contenders={
                "catalyst-style": "bench_wrapper:catalyst",
                "distsampling": "bench_wrapper:ours",
            },
            baseline="catalyst-style",
            params={"n": n, "inner": inner},
        )
        for inner in ("random", "weighted")
        for n in [10**6, 10**7]
    ]
