"""Weighted mixtures under schedules that change every step, and a tiny source many passes:
how exact each layout stays and what a read costs.

- A ramp of 4 sources (``.6/.25/.1/.05`` to ``.3/.3/.2/.2``) changed every step, W = 8, b = 4:
  ``batch_at_ms`` at step 15,000 of 20,000 changes, ``per_index_us`` each of 32,768 indices of
  rank 0, ``first_s`` the sampler made; ``stream`` and ``rank``, the largest gap of the global
  stream and of any rank from the schedule's cumulative share under the ramp over 1,000 steps.
- The same at scale: 100 sources ramped over 2,000 changes, W = 1024: the per-rank layout's table
  of every rank's phases (3.3 GB whole) kept within 64 MiB (``every``: the pieces between two
  kept), against the global stream's.
- A tiny source many passes: ``[1000, 5]`` at ``batch_at(10**9)``, ``[10**6, 10]`` per index.

Both layouts of ``MixtureSampler`` (``layout="global"``, the default, and ``"per_rank"``), side by
side in one run (``python -m benchmarks mixture_schedule``).
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from ._harness import Comparison


def _timed(timer, make, step: int, reads: int) -> tuple[object, dict[str, float]]:
    """The sampler ``make()`` builds (the timer's first mark), ``batch_at(step)`` and each of
    ``reads`` indices of its iterator, timed: ``(sampler, figures)``."""
    timer.start()
    s = make()
    timer.first()
    t0 = time.perf_counter()
    s.batch_at(step)
    out = {"batch_at_ms": (time.perf_counter() - t0) * 1e3}
    it = iter(s)
    t0 = time.perf_counter()
    for _, _ in zip(range(reads), it):
        pass
    out["per_index_us"] = (time.perf_counter() - t0) / reads * 1e6
    timer.stop()
    return s, out


def ramp(changes: int) -> list:
    """4 sources from .6/.25/.1/.05 to .3/.3/.2/.2, a change every step for ``changes`` steps."""
    a, z = np.array([0.6, 0.25, 0.1, 0.05]), np.array([0.3, 0.3, 0.2, 0.2])
    return [(t, [round(float(x), 6) for x in a + (z - a) * t / changes]) for t in range(changes)]


def schedule_cost(timer, layout: str, changes: int) -> dict[str, float]:
    """A ramp changed every step: each index of rank 0 (W = 8, b = 4) and batch_at(15000) of
    ``changes`` changes; the global stream's and every rank's largest gap from the schedule's
    cumulative share under a ramp over 1,000 steps, changed every step."""
    from distsampling import MixtureSampler

    plan = ramp(changes)
    s, out = _timed(timer, lambda: MixtureSampler([10**6] * 4, plan, 4, 8, 0, layout=layout,
                                                  epoch_length=10**12),
                    min(15000, changes - 1), 1 << 15)  # fmt: skip
    steps, B = 1000, 32
    plan = ramp(steps)  # the whole ramp within the steps measured
    s = MixtureSampler([10**6] * 4, plan, 4, 8, 0, layout=layout, epoch_length=10**12)
    ks = s.sources(np.arange(steps * B, dtype=np.int64))[0]
    shares = np.array([[float(x) / sum(w) for x in w] for _, w in plan[:steps]])  # (S, K)
    target = np.cumsum(np.repeat(shares, B, axis=0), axis=0)  # (S B, K) cumulative share
    onehot = np.eye(4)[ks]
    out["stream"] = float(np.abs(np.cumsum(onehot, 0) - target).max())
    want = np.cumsum(np.repeat(shares, 4, axis=0), 0)  # (S b, K) a rank's share
    out["rank"] = 0.0
    for r in range(8):  # every rank's reads, step by step
        mine = np.concatenate([s.positions(t, r) for t in range(steps)])
        got = np.cumsum(np.eye(4)[s.sources(mine)[0]], 0)  # (S b, K)
        out["rank"] = max(out["rank"], float(np.abs(got - want).max()))
    return out


def schedule_global(timer, changes: int) -> dict[str, float]:
    return schedule_cost(timer, "global", changes)


def schedule_per_rank(timer, changes: int) -> dict[str, float]:
    return schedule_cost(timer, "per_rank", changes)


def schedule_at_scale(timer, layout: str, changes: int) -> dict[str, float]:
    """100 sources (random weights ramped to others), W = 1024, b = 4, a change every step for
    ``changes`` steps: the sampler made, batch_at 3/4 in, each of 2,048 indices of rank 0; the
    run's memory growth (the per-rank table keeps every rank's phases at every C-th piece only
    past its 64 MiB: C = ``every``)."""
    from distsampling import MixtureSampler

    K, W = 100, 1024
    rng = np.random.default_rng(0)
    a, z = rng.random(K) + 0.1, rng.random(K) + 0.1
    plan = [(t, [round(float(x), 6) for x in a + (z - a) * t / changes]) for t in range(changes)]
    s, out = _timed(timer, lambda: MixtureSampler([10**6] * K, plan, 4, W, 0, layout=layout,
                                                  epoch_length=10**12),
                    changes * 3 // 4, 1 << 11)  # fmt: skip
    ranks = getattr(s, "_ranks", None)
    out["every"] = float(ranks.every) if ranks is not None else 1.0
    return out


def scale_global(timer, changes: int) -> dict[str, float]:
    return schedule_at_scale(timer, "global", changes)


def scale_per_rank(timer, changes: int) -> dict[str, float]:
    return schedule_at_scale(timer, "per_rank", changes)


def tiny_source(timer, layout: str) -> dict[str, float]:
    """``[1000, 5]`` at 1/2 each, W = 8, b = 4: batch_at(10**9); then ``[10**6, 10]``: each of
    65,536 indices of rank 0."""
    from distsampling import MixtureSampler

    timer.start()
    s = MixtureSampler([1000, 5], [0.5, 0.5], 4, num_replicas=8, rank=0, layout=layout)
    t0 = time.perf_counter()
    s.batch_at(10**9)
    out = {"batch_at_1e9_ms": (time.perf_counter() - t0) * 1e3}
    s = MixtureSampler([10**6, 10], [0.5, 0.5], 4, 8, 0, layout=layout, epoch_length=10**12)
    it = iter(s)
    next(it)
    t0 = time.perf_counter()
    for _, _ in zip(range(1 << 16), it):
        pass
    timer.stop()
    return {**out, "per_index_us": (time.perf_counter() - t0) / (1 << 16) * 1e6}


def tiny_global(timer) -> dict[str, float]:
    return tiny_source(timer, "global")


def tiny_per_rank(timer) -> dict[str, float]:
    return tiny_source(timer, "per_rank")


def suite(large: bool) -> list[Comparison]:
    out: list[Comparison] = []
    out.append(
        Comparison(
            "A schedule changed every step: 4 sources ramped over 20,000 changes, W = 8, b = 4",
            {
                "global": "bench_mixture_schedule:schedule_global",
                "per_rank": "bench_mixture_schedule:schedule_per_rank",
            },
            "global",
            {"changes": 20000},
            "batch_at(15000); each of 32,768 indices of rank 0; stream and rank: the largest "
            "gap of the global stream and of any rank from the schedule's cumulative share under "
            "the same ramp over 1,000 steps, changed every step (every node's phase carried "
            "across the changes: global, the one stream's; per_rank, each rank's own)",
            ("first_s", "batch_at_ms", "per_index_us", "stream", "rank"),
            ("batch_at_ms", "per_index_us"),
        )
    )
    out.append(
        Comparison(
            "A schedule at scale: 100 sources ramped over 2,000 changes, W = 1024, b = 4",
            {
                "global": "bench_mixture_schedule:scale_global",
                "per_rank": "bench_mixture_schedule:scale_per_rank",
            },
            "global",
            {"changes": 2000},
            "first_s: the sampler made; batch_at 3/4 in; each of 2,048 indices of rank 0; "
            "peak_MiB: the run's memory growth; every: the pieces between two kept in the "
            "per-rank table (every rank's phases, 1.6 MB a piece here: 3.3 GB whole, kept "
            "within 64 MiB, a read makes its rank's streams again from the piece kept before)",
            ("first_s", "batch_at_ms", "per_index_us", "peak_MiB", "every"),
            ("batch_at_ms", "per_index_us", "peak_MiB"),
        )
    )
    out.append(
        Comparison(
            "A tiny source many passes: [1000, 5] at batch_at(10**9), [10**6, 10] per index",
            {
                "global": "bench_mixture_schedule:tiny_global",
                "per_rank": "bench_mixture_schedule:tiny_per_rank",
            },
            "global",
            {},
            "W = 8, b = 4, rank 0; peak_MiB: the run's memory growth",
            ("batch_at_1e9_ms", "per_index_us", "peak_MiB"),
            ("batch_at_1e9_ms", "per_index_us"),
        )
    )
    return out


if __name__ == "__main__":
    print(Path(__file__).name, [c.title for c in suite(False)])
