"""Weighted mixtures of datasets: how exact each mix is, and what the first index costs.

Quality (``prefix``, ``batch``, ``rank``, ``repeats``), on 8 ranks of micro-batch 8 (a global
batch of 64), 937 steps (59,968 positions), each contender's reads laid out as the ranks'
micro-batches of every step (rank ``r`` at ``[s*64 + 8r, s*64 + 8r + 8)``):

- ``prefix``: the largest ``|count_k(n) - w_k n|`` over every prefix of the global stream;
- ``batch``: the same inside each global batch; ``rank``: over each rank's whole share;
- ``repeats``: reads of a sample of a source already read while some of that source was not read
  yet (a source read with replacement, or a pass cut short).

Three sets of tasks: three sources (60,000 / 6,000 / 600 samples at 0.5 / 0.3 / 0.2) and a long tail of 100
sources (``10**6 / (k+1)**1.3`` samples, weights ``size**0.3``, as temperature sampling sets
them), and 30 random tasks of 2 to 12 sources with weights of 0 and 1e-4 among them (the worst
figure over the 30; ``bound``, the largest ``MixtureSampler.bound()`` of them: every global
batch and every rank's share within twice it, every prefix within it on one rank; on 8 ranks
``MixtureSampler`` spreads each source over the ranks inside a global batch, so the prefixes of
the ranks' layout are promised nothing finer than a batch). Contenders: ``MixtureSampler``; Megatron's ``build_blending_indices`` (the compiled
helper of megatron-core), torchdata's ``MultiNodeWeightedSampler``, Hugging Face's
``interleave_datasets`` + ``split_dataset_by_node`` and Grain's ``MapDataset.mix`` sharded
``[rank::8]``, each run by its real code in ``.venv-peers`` (``benchmarks/peers_mixture.py`` says
how each is set up); without that venv their rows are left out.

Cost: three sources of ``0.9 N``, ``0.09 N``, ``0.01 N`` samples at 0.5 / 0.3 / 0.2, rank 0 of
8 (micro-batch 8): ``first_s`` from building the sampler to its first index, ``per_index_us``
for each of the next 65,535 indices yielded as Python ints, ``batch_at_ms`` for the 8
micro-batches of the last step of an epoch of N, and ``peak_MiB``. Megatron builds its index of
all N positions first (2 bytes + 8 bytes a position), then reads rank 0's positions from it.
At Megatron's scale (N = 1e10, W = 1024, micro-batch 4), ours alone with 3 and 100 sources,
decimal weights and weights computed as ``n_tokens / total`` (floats of 16 digits, past
``2**31`` units: rounded); ``steady_us``: each of the next 262,144 indices, whole blocks of
4,096 steps (the 65,535 of ``per_index_us`` include the blocks growing from one step).

Where a sample is read (``MixtureSampler.when_read``, what ``python -m distsampling mixture
--where`` prints), against what a user would do without it: read the global batches
``batch_at(0)``, ``batch_at(1)``, ... until the sample shows up. Three samples, first read at
steps 100, 1,000 and 3,000 of three sources on 4 ranks; both contenders' steps are checked
against the batches they came from.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from ._harness import ROOT, Comparison
from .peers_mixture import MICRO, PEERS, RANDOM_STEPS, STEPS, TASKS, WORLD, B, quality

PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"


def ours_quality(timer, task: str) -> dict[str, float]:
    from distsampling import MixtureSampler

    sizes, weights = TASKS[task]
    timer.start()
    sampler = MixtureSampler(sizes, weights, MICRO, WORLD, 0, layout="per_rank")
    indices = np.array([sampler.batch_at(s) for s in range(STEPS)]).ravel()  # (n,) every rank's
    timer.stop()
    offsets = np.cumsum([0, *sizes[:-1]])
    source = np.searchsorted(offsets, indices, side="right") - 1
    return quality(source, indices - offsets[source], sizes, weights)


def peer_quality(timer, task: str, name: str) -> dict[str, float]:
    sizes, weights = TASKS[task]
    timer.start()
    source, sample = PEERS[name](sizes, weights)
    timer.stop()
    return quality(source, sample, sizes, weights)


def megatron_quality(timer, task: str) -> dict[str, float]:
    return peer_quality(timer, task, "megatron")


def torchdata_quality(timer, task: str) -> dict[str, float]:
    return peer_quality(timer, task, "torchdata")


def hugging_face_quality(timer, task: str) -> dict[str, float]:
    return peer_quality(timer, task, "hugging_face")


def grain_quality(timer, task: str) -> dict[str, float]:
    return peer_quality(timer, task, "grain")


def random_tasks() -> list[list[float]]:
    """30 tasks of 2 to 12 sources, weights 0, tiny (1e-4), uniform and uniform**4 (seed 0)."""
    rng, out = random.Random(0), []
    for _ in range(30):
        k = rng.randint(2, 12)
        ws = [rng.choice([0, 1e-4, round(rng.random(), 4), round(rng.random() ** 4, 6)])
              for _ in range(k)]  # fmt: skip
        out.append(ws if any(ws) else [1, *ws[1:]])
    return out


def _worst(sources_of: Callable[[list[float]], np.ndarray]) -> dict[str, float]:
    worst = {"prefix": 0.0, "batch": 0.0, "rank": 0.0}
    for ws in random_tasks():
        source = sources_of(ws)
        figures = quality(source, np.zeros_like(source), [1] * len(ws), ws)
        worst = {key: max(value, figures[key]) for key, value in worst.items()}
    return worst


def ours_random(timer) -> dict[str, float]:
    from distsampling import MixtureSampler

    def sources(ws: list[float]) -> np.ndarray:
        s = MixtureSampler([10**6] * len(ws), ws, MICRO, WORLD, 0, shuffle=False, layout="per_rank")
        return np.array([s.batch_at(t) for t in range(RANDOM_STEPS)]).ravel() // 10**6

    timer.start()
    worst = _worst(sources)
    timer.stop()
    bound = max(float(MixtureSampler([1] * len(ws), ws, 1, 1, 0).bound()) for ws in random_tasks())
    return {**worst, "bound": bound}


def megatron_random(timer) -> dict[str, float]:
    from megatron.core.datasets import helpers_cpp

    def sources(ws: list[float]) -> np.ndarray:
        n = RANDOM_STEPS * B
        source, item = np.zeros(n, dtype=np.int16), np.zeros(n, dtype=np.int64)
        w = np.array(ws, dtype=np.float64) / sum(ws)
        helpers_cpp.build_blending_indices(source, item, w, len(ws), n, False)
        return source.astype(np.int64)

    timer.start()
    worst = _worst(sources)
    timer.stop()
    return {**worst, "bound": float("nan")}


def _sizes(n: int) -> list[int]:
    return [n * 90 // 100, n * 9 // 100, n - n * 90 // 100 - n * 9 // 100]


def _mix(n: int, k: int, kind: str) -> tuple[list[int], list[float]]:
    """``k`` sources (3, or the long tail of 100 scaled to ``n``) and their weights: decimals
    (0.5 / 0.3 / 0.2; ``size**0.3`` to 3 places) or computed as users do, ``n_tokens / total``."""
    if k == 3:
        sizes, decimal = _sizes(n), [0.5, 0.3, 0.2]
    else:
        tail = TASKS["long-tail"][0]
        sizes = [max(1, n * s // sum(tail)) for s in tail]
        decimal = [round(s**0.3, 3) for s in sizes]
    return sizes, decimal if kind == "decimal" else [s / sum(sizes) for s in sizes]


def ours_cost(timer, n: int, k: int = 3, kind: str = "decimal", world: int = WORLD,
              micro: int = MICRO, steady: bool = False,
              layout: str = "per_rank") -> dict[str, float]:  # fmt: skip
    from distsampling import MixtureSampler

    reads = 1 << 16
    sizes, weights = _mix(n, k, kind)
    timer.start()
    sampler = MixtureSampler(sizes, weights, micro, world, 0, epoch_length=n, layout=layout)
    it = iter(sampler)
    next(it)
    timer.first()
    for _, _ in zip(range(reads - 1), it):
        pass
    timer.stop()
    out = {"per_index_us": (timer.t_end - timer.t_first) / (reads - 1) * 1e6}
    if steady:  # the next 2**18, in whole blocks: what an index costs once the blocks are grown
        t0 = time.perf_counter()
        for _, _ in zip(range(STEADY), it):
            pass
        out["steady_us"] = (time.perf_counter() - t0) / STEADY * 1e6
    t0 = time.perf_counter()
    sampler.batch_at(n // (micro * world) - 1)  # the last step of the epoch
    return {**out, "batch_at_ms": (time.perf_counter() - t0) * 1e3}


def ours_3_decimal(timer, n: int) -> dict[str, float]:
    return ours_cost(timer, n, 3, "decimal", 1024, 4, steady=True)


def ours_3_computed(timer, n: int) -> dict[str, float]:
    return ours_cost(timer, n, 3, "computed", 1024, 4, steady=True)


def ours_100_decimal(timer, n: int) -> dict[str, float]:
    return ours_cost(timer, n, 100, "decimal", 1024, 4, steady=True)


def ours_100_computed(timer, n: int) -> dict[str, float]:
    return ours_cost(timer, n, 100, "computed", 1024, 4, steady=True)


def ours_3_decimal_global(timer, n: int) -> dict[str, float]:
    return ours_cost(timer, n, 3, "decimal", 1024, 4, steady=True, layout="global")


def ours_100_computed_global(timer, n: int) -> dict[str, float]:
    return ours_cost(timer, n, 100, "computed", 1024, 4, steady=True, layout="global")


# --- the two layouts side by side ----------------------------------------------------------

LAYOUT_TASKS = {  # name: (sizes, weights)
    "3": ([60000, 6000, 600], [0.5, 0.3, 0.2]),
    "5": ([10**6] * 5, [0.5, 0.25, 0.125, 0.0625, 0.0625]),
    "100": (
        [int(10**6 / (k + 1) ** 1.1) + 1 for k in range(100)],
        [
            (int(10**6 / (k + 1) ** 1.1) + 1)
            / sum(int(10**6 / (j + 1) ** 1.1) + 1 for j in range(100))
            for k in range(100)
        ],
    ),
}
LAYOUT_STEPS, LAYOUT_MICRO = 1500, 4


def layout_figures(timer, layout: str, task: str, world: int) -> dict[str, float]:
    """``prefix`` (every prefix of the stream in position order), ``batch`` (every global batch)
    and ``rank`` (each rank's whole share), in samples, over 1,500 steps of micro-batch 4."""
    from distsampling import MixtureSampler

    sizes, weights = LAYOUT_TASKS[task]
    b, K = LAYOUT_MICRO, len(sizes)
    timer.start()
    s = MixtureSampler(sizes, weights, b, world, 0, shuffle=False, layout=layout)
    n = LAYOUT_STEPS * world * b
    ks = s.sources(np.arange(n, dtype=np.int64))[0]  # (n,) position order
    timer.stop()
    units = np.array(s.units[0], np.float64)
    share = units / units.sum()  # (K,) the shares in use
    prefix = batch = 0.0
    for k in range(K):
        mine = ks == k
        prefix = max(prefix, float(np.abs(np.cumsum(mine) - share[k] * np.arange(1, n + 1)).max()))
        by_step = mine.reshape(LAYOUT_STEPS, world * b).sum(1)
        batch = max(batch, float(np.abs(by_step - share[k] * world * b).max()))
    # each micro-batch's rank: m at step t (per rank: m; global: (m - t) mod W)
    m = np.arange(world)[None, :] + np.zeros((LAYOUT_STEPS, 1), np.int64)  # (S, W)
    if layout == "global":
        m = (m - np.arange(LAYOUT_STEPS)[:, None]) % world
    per = np.zeros((world, K))
    np.add.at(per, (np.repeat(m.ravel(), b), ks), 1)
    rank = float(np.abs(per - share * LAYOUT_STEPS * b).max())
    return {"prefix": prefix, "batch": batch, "rank": rank}


def global_3(timer, world: int) -> dict[str, float]:
    return layout_figures(timer, "global", "3", world)


def per_rank_3(timer, world: int) -> dict[str, float]:
    return layout_figures(timer, "per_rank", "3", world)


def global_5(timer, world: int) -> dict[str, float]:
    return layout_figures(timer, "global", "5", world)


def per_rank_5(timer, world: int) -> dict[str, float]:
    return layout_figures(timer, "per_rank", "5", world)


def global_100(timer, world: int) -> dict[str, float]:
    return layout_figures(timer, "global", "100", world)


def per_rank_100(timer, world: int) -> dict[str, float]:
    return layout_figures(timer, "per_rank", "100", world)


def ours_100_computed_w8(timer, n: int) -> dict[str, float]:
    return ours_cost(timer, n, 100, "computed")


def megatron_100_computed(timer, n: int) -> dict[str, float]:
    return megatron_cost(timer, n, 100, "computed")


def megatron_cost(timer, n: int, k: int = 3, kind: str = "decimal") -> dict[str, float]:
    from megatron.core.datasets import helpers_cpp

    sizes, weights = _mix(n, k, kind)
    sizes, reads = np.array(sizes), 1 << 16
    offsets = np.cumsum([0, *sizes[:-1]])
    timer.start()
    source, item = np.zeros(n, dtype=np.int16), np.zeros(n, dtype=np.int64)
    w = np.array(weights, dtype=np.float64) / sum(weights)
    helpers_cpp.build_blending_indices(source, item, w, k, n, False)
    mine = (np.arange(reads // MICRO)[:, None] * B + np.arange(MICRO)).ravel()  # rank 0's
    first = int(offsets[source[0]] + item[0] % sizes[source[0]])  # noqa: F841
    timer.first()
    for p in mine[1:].tolist():  # what its dataset does per index: look up, as Python ints
        k = int(source[p])
        _ = int(offsets[k]) + int(item[p]) % int(sizes[k])
    timer.stop()
    per_index_us = (timer.t_end - timer.t_first) / (reads - 1) * 1e6
    t0 = time.perf_counter()
    last = (n // B - 1) * B
    _ = [(int(source[p]), int(item[p])) for p in range(last, last + B)]
    return {"per_index_us": per_index_us, "batch_at_ms": (time.perf_counter() - t0) * 1e3}


WHERE = ([10**6, 10**5, 1000], [0.5, 0.3, 0.2], 8, 4)  # sizes, weights, micro-batch, world
WHERE_STEPS = (100, 1000, 3000)  # the asked samples: the first of each of these global batches


def _where_asked(sampler) -> list[tuple[int, int, int]]:
    """``(source, sample, step)`` of the first read of the global batch at each of WHERE_STEPS
    (of sources 0 and 1, in their first pass there: their first read is that step)."""
    offsets = np.cumsum([0, *sampler.sizes])
    out = []
    for step in WHERE_STEPS:
        g = sampler.batch_at(step)[0][0]
        k = int(np.searchsorted(offsets, g, side="right")) - 1
        out.append((k, g - int(offsets[k]), step))
    return out


def ours_when_read(timer) -> dict[str, float]:
    from distsampling import MixtureSampler

    sampler = MixtureSampler(*WHERE, 0)  # rank 0 (when_read and batch_at speak for all)
    asked = _where_asked(sampler)
    timer.start()
    steps = [sampler.when_read(k, i).step for k, i, _ in asked]
    timer.stop()
    assert steps == [s for *_, s in asked], (steps, asked)
    return {"per_sample_ms": (timer.t_end - timer.t0) / len(asked) * 1e3}


def scan_batch_at(timer) -> dict[str, float]:
    """What a user without ``when_read`` does: read the global batches from step 0 until the
    sample shows up."""
    from distsampling import MixtureSampler

    sampler = MixtureSampler(*WHERE, 0)  # rank 0 (when_read and batch_at speak for all)
    asked = _where_asked(sampler)
    offsets = np.cumsum([0, *sampler.sizes])
    timer.start()
    steps = []
    for k, i, _ in asked:
        g, step = int(offsets[k]) + i, 0
        while not any(g in micro for micro in sampler.batch_at(step)):
            step += 1
        steps.append(step)
    timer.stop()
    assert steps == [s for *_, s in asked], (steps, asked)
    return {"per_sample_ms": (timer.t_end - timer.t0) / len(asked) * 1e3}


QUALITY = ("prefix", "batch", "rank", "repeats")
COST = ("first_s", "per_index_us", "batch_at_ms", "peak_MiB")
STEADY = 1 << 18  # indices read after the first 65,536 for ``steady_us``


def suite(large: bool) -> list[Comparison]:
    peers = (PEERS_PYTHON.parent.parent / ".installed").exists()  # `make bench-peers` built it
    python = str(PEERS_PYTHON) if peers else None
    contenders = {"MixtureSampler": "bench_mixture:ours_quality"}
    if peers:
        contenders |= {
            "Megatron build_blending_indices": "bench_mixture:megatron_quality",
            "torchdata MultiNodeWeightedSampler": "bench_mixture:torchdata_quality",
            "HF interleave_datasets + split_dataset_by_node": "bench_mixture:hugging_face_quality",
            "Grain MapDataset.mix [rank::8]": "bench_mixture:grain_quality",
        }
    note = (
        "in samples (0 is exact); W=8, micro-batch 8, 59,968 positions; prefix: of the "
        'stream as the ranks lay it out; MixtureSampler\'s row: layout="per_rank" (each '
        "source spread over the ranks inside a global batch: its promise is per batch and per "
        "rank; the default global layout against it: the layouts tables below); counts of a "
        "fixed stream: one run each"
    )
    out = [
        Comparison(title, contenders, "MixtureSampler", {"task": task}, note, QUALITY, ())
        for title, task in [
            ("Three sources: 60,000 / 6,000 / 600 samples at 0.5 / 0.3 / 0.2", "task"),
            ("A long tail: 100 sources, weights size^0.3", "long-tail"),
        ]
    ]
    random_rows = {"MixtureSampler": "bench_mixture:ours_random"}
    if peers:
        random_rows["Megatron build_blending_indices"] = "bench_mixture:megatron_random"
    out.append(Comparison("30 random tasks of 2 to 12 sources, 0 and 1e-4 weights among them",
                          random_rows, "MixtureSampler", {}, "the worst of each figure; 3,968 "
                          "positions a task (one run: counts); bound: the largest MixtureSampler.bound(): a "
                          "global batch and a rank within twice it (a prefix within it on one "
                          "rank)",
                          ("prefix", "batch", "rank", "bound"), ()))  # fmt: skip
    for q in out:  # counts of a fixed stream: the same in every run, so one run each
        q.python, q.runs = python, 1
    out.append(Comparison(
        "Where a sample is read: 3 sources of 10^6 / 10^5 / 1,000 at 0.5 / 0.3 / 0.2, W = 4, "
        "micro-batch 8",
        {"MixtureSampler.when_read": "bench_mixture:ours_when_read",
         "scan batch_at(0), batch_at(1), ...": "bench_mixture:scan_batch_at"},
        "MixtureSampler.when_read", {},
        "three samples, first read at steps 100, 1,000 and 3,000 (both answers checked equal)",
        ("time_s", "per_sample_ms"), ("time_s", "per_sample_ms"),
    ))  # fmt: skip
    sizes = [10**6, 10**7] + ([10**8] if large else [])
    for n in sizes:
        both = {"MixtureSampler": "bench_mixture:ours_cost"}
        if peers:
            both["Megatron build_blending_indices"] = "bench_mixture:megatron_cost"
        out.append(Comparison(f"N = {n:.0e} positions, rank 0 of 8", both, "MixtureSampler",
                              {"n": n}, "the first index, then 65,535 more as Python ints",
                              COST, COST, python))  # fmt: skip
    out.append(
        Comparison(
            "N = 1e10 positions, rank 0 of 8 (Megatron's index would take 93 GiB)",
            {"MixtureSampler": "bench_mixture:ours_cost"},
            "MixtureSampler",
            {"n": 10**10},
            "ours alone",
            COST,
            (),
            python,
        )
    )
    K100 = {"MixtureSampler": "bench_mixture:ours_100_computed_w8"}
    if peers:
        K100["Megatron build_blending_indices"] = "bench_mixture:megatron_100_computed"
    out.append(Comparison("100 sources, weights n_tokens / total, N = 1e7, rank 0 of 8", K100,
                          "MixtureSampler", {"n": 10**7}, "the first index, then 65,535 more",
                          COST, COST, python))  # fmt: skip
    out.append(
        Comparison(
            "N = 1e10, W = 1024, b = 4: 3 and 100 sources, decimal and computed weights",
            {
                "3 sources, 0.5 / 0.3 / 0.2": "bench_mixture:ours_3_decimal",
                "3 sources, n_tokens / total": "bench_mixture:ours_3_computed",
                "100 sources, size^0.3 to 3 places": "bench_mixture:ours_100_decimal",
                "100 sources, n_tokens / total": "bench_mixture:ours_100_computed",
            },
            "3 sources, 0.5 / 0.3 / 0.2",
            {"n": 10**10},
            "MixtureSampler, rank 0 of 1024, micro-batch 4: the first index, then 65,535 more, "
            "then 262,144 more (steady_us)",
            ("first_s", "per_index_us", "steady_us", "batch_at_ms", "peak_MiB"),
            ("first_s", "per_index_us", "steady_us", "batch_at_ms", "peak_MiB"),
            python,
        )
    )
    out.append(
        Comparison(
            "N = 1e10, W = 1024, b = 4: the global layout against the per-rank one",
            {
                "global, 3 sources, 0.5 / 0.3 / 0.2": "bench_mixture:ours_3_decimal_global",
                "per_rank, 3 sources, 0.5 / 0.3 / 0.2": "bench_mixture:ours_3_decimal",
                "global, 100 sources, n_tokens / total": "bench_mixture:ours_100_computed_global",
                "per_rank, 100 sources, n_tokens / total": "bench_mixture:ours_100_computed",
            },
            "global, 3 sources, 0.5 / 0.3 / 0.2",
            {"n": 10**10},
            "MixtureSampler, rank 0 of 1024, micro-batch 4: the first index, then 65,535 more, "
            "then 262,144 more (steady_us)",
            ("first_s", "per_index_us", "steady_us", "batch_at_ms", "peak_MiB"),
            ("per_index_us", "steady_us", "batch_at_ms"),
        )
    )
    for world in (8, 64, 1024):
        rows = {f"{layout}, {task} sources": f"bench_mixture:{layout}_{task}"
                for task in LAYOUT_TASKS for layout in ("global", "per_rank")}  # fmt: skip
        comparison = Comparison(
            f"Layouts side by side: W = {world}, micro-batch 4, 1,500 steps",
            rows,
            "global, 3 sources",
            {"world": world},
            "in samples (0 is exact); prefix: every prefix of the stream (positions in order); "
            "batch: every global batch; rank: each rank's whole share; 3 sources .5/.3/.2, 5 "
            "halving, 100 of sizes (k+1)^-1.1 at n_tokens / total; counts: one run each",
            ("prefix", "batch", "rank"),
            (),
        )
        comparison.runs = 1
        out.append(comparison)
    return out


if __name__ == "__main__":
    print(Path(__file__).name, [c.title for c in suite(False)])
