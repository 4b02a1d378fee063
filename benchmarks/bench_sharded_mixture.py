"""ShardedMixtureDataset: the first batch at pretraining scale, and samples/s of the reading.

Scale: 1e9 samples in 1e5 shards over 10 sources (1e4 shards of 1e4 samples each), on 1,024
ranks, micro-batch 4: construct the dataset of rank 517 and take its first micro-batch
(``read(shard)`` is a lazy range: nothing is decoded). The goal: <= 1 s and <= 256 MiB, with no
epoch array. The baseline is ``MixtureSampler`` over the same 10 totals (map-style: its first
index, no shard to open). At epoch 1 a fresh worker (a DataLoader without persistent workers)
first counts its readers' draws of epoch 0 (244,141 steps): a closed form of the step, as at
step 0.

Any step at once: 100 sources, 1,024 ranks x 8 workers (8,192 readers), micro-batch 4, at step
1,000,000: ``counts_at`` (every reader's count of every source), ``batch_at`` (every rank's
source, shard and offset) and an elastic resume onto 512 ranks x 4 workers (every old reader's
counts, the unread rest of the passes in flight), against ``MixtureSampler.batch_at`` at the same
step. The goal: <= 100 ms each, whatever the step (nothing replayed). ``counts_at`` and
``batch_at`` are timed after one call at step 0 (the grid's constants, made once a process); the
elastic resume from a fresh dataset.

Throughput: 200,000 samples in 10 sources of long-tail shards (``bench_sharded``'s sizes),
weights the sources' sizes, read from ready Python lists (the cheapest read there is, so the
mixture's cost per sample shows in full): every worker of 4 ranks x 2 workers, one after another
in one process, against reading the same shards directly. ``Msamples/s``' ratio is the
mixture's cost per sample.

Through a loader: one rank's ``DataLoader`` with 2 workers, micro-batch 8, ``with_source``,
against a dataset that yields a counter's ``(0, i)`` pairs (no mixing, no reading): the same
pairs, the same collated tensors, so the ratio is what the mixture adds to the loader's cost.
"""

from __future__ import annotations

from itertools import count, islice

import numpy as np
from torch.utils.data import DataLoader, IterableDataset

from distsampling import MixtureSampler, ShardedMixtureDataset

from ._harness import Comparison
from .bench_sharded import ListReader, shard_sizes

SOURCES, SHARDS, PER_SHARD, WORLD, RANK, MICRO = 10, 10_000, 10_000, 1024, 517, 4
TOTAL, READ_WORLD, READ_WORKERS, LOADER_SAMPLES = 200_000, 4, 2, 8_000


def mixture_first_batch(timer) -> dict[str, float]:
    timer.start()
    sampler = MixtureSampler([SHARDS * PER_SHARD] * SOURCES, [1] * SOURCES, MICRO, WORLD, RANK)
    first = list(islice(iter(sampler), MICRO))
    timer.stop()
    return {"samples": len(first)}


def sharded_first_batch(timer) -> dict[str, float]:
    read = lambda shard: iter(range(PER_SHARD))  # noqa: E731 (a lazy shard: nothing decoded)
    timer.start()
    sources = [(range(SHARDS), [PER_SHARD] * SHARDS, read) for _ in range(SOURCES)]
    ds = ShardedMixtureDataset(sources, [1] * SOURCES, MICRO, num_replicas=WORLD, rank=RANK)
    first = list(islice(iter(ds), MICRO))
    timer.stop()
    return {"samples": len(first)}


def sharded_first_batch_epoch_1(timer) -> dict[str, float]:
    """A fresh worker's first batch of epoch 1: it counts its readers' draws of epoch 0 again."""
    read = lambda shard: iter(range(PER_SHARD))  # noqa: E731
    sources = [(range(SHARDS), [PER_SHARD] * SHARDS, read) for _ in range(SOURCES)]
    ds = ShardedMixtureDataset(sources, [1] * SOURCES, MICRO, num_replicas=WORLD, rank=RANK)
    ds.set_epoch(1)
    timer.start()
    first = list(islice(iter(ds), MICRO))
    timer.stop()
    return {"samples": len(first)}


STEP, K_MANY, W_MANY, NW_MANY = 10**6, 100, 1024, 8


def _many(world: int = W_MANY, workers: int = NW_MANY) -> ShardedMixtureDataset:
    read = lambda shard: iter(range(10_000))  # noqa: E731 (a lazy shard: nothing decoded)
    sources = [(range(1000), [10_000] * 1000, read) for _ in range(K_MANY)]
    return ShardedMixtureDataset(sources, [1 + k % 7 for k in range(K_MANY)], MICRO,
                                 num_replicas=world, rank=3, num_workers=workers,
                                 epoch_length=10**12)  # fmt: skip


def mixture_batch_at_step(timer) -> dict[str, float]:
    sampler = MixtureSampler([10**7] * K_MANY, [1 + k % 7 for k in range(K_MANY)], MICRO, W_MANY,
                             3, epoch_length=10**12)  # fmt: skip
    timer.start()
    sampler.batch_at(STEP)
    timer.stop()


def counts_at_step(timer) -> dict[str, float]:
    ds = _many()
    ds.counts_at(0)  # the grid's constants (every reader's window start), once a process
    timer.start()
    ds.counts_at(STEP)
    timer.stop()


def batch_at_step(timer) -> dict[str, float]:
    ds = _many()
    ds.batch_at(0)  # torch's generator and the grid, made once a process (another step's passes)
    timer.start()
    ds.batch_at(STEP)
    timer.stop()


def elastic_at_step(timer) -> dict[str, float]:
    state = _many().state_dict(consumed=STEP * MICRO)  # the main process's: every reader's
    new = _many(512, 4)
    timer.start()
    new.load_state_dict([state])
    timer.stop()


OVERLAP_CASES = 400


def _overlap(sources: list[int], ks: np.ndarray, samples: np.ndarray, step: int) -> int:
    """The overlap of two passes (``peers_sharded_mixture.pass_overlap``): at each step boundary
    (``step`` samples a step) and for each source, ``Σ max(0, reads - P - 1)`` over its samples,
    ``P`` the fewest reads of any; the most."""
    worst = 0
    for k, T in enumerate(sources):
        reads = np.zeros(T, np.int64)  # (T,) each sample's reads so far
        for s in range(0, len(ks), step):
            np.add.at(reads, samples[s : s + step][ks[s : s + step] == k], 1)
            worst = max(worst, int(np.maximum(0, reads - reads.min() - 1).sum()))
    return worst


def overlap_random(timer) -> dict[str, float]:
    """Random topologies (seeded): ranks 1-8, workers 1-4, micro-batch 1-4, 2-6 sources of 20-200
    samples in 1-4 shards, weights from a millionth up, one in three a schedule that changes the
    mix at a random step; 100-600 steps read by every rank's every worker. The worst overlap of
    two passes over all step boundaries, divided by ``readers × micro-batch``."""
    rng = np.random.default_rng(0)
    worst, worst_b1 = 0.0, 0.0
    timer.start()
    for _ in range(OVERLAP_CASES):
        W, nw, b, K = (int(rng.integers(1, x + 1)) for x in (8, 4, 4, 6))
        K += K == 1
        totals = rng.integers(20, 201, K).tolist()
        sources = []
        for k, T in enumerate(totals):
            cuts = np.sort(rng.integers(0, T + 1, int(rng.integers(0, 4))))
            sizes = np.diff(np.concatenate([[0], cuts, [T]])).tolist()
            sources.append((list(range(len(sizes))), sizes,
                            lambda shard, k=k, sizes=sizes: ((k, sum(sizes[:shard]) + i)
                                                             for i in range(sizes[shard]))))  # fmt: skip
        weights = (rng.choice([1e-6, 1e-3, 0.1, 1, 3], K) * rng.random(K) + 1e-6).tolist()
        steps = int(rng.integers(100, 601))
        if rng.random() < 1 / 3:
            weights = [(0, weights), (int(rng.integers(1, steps)), rng.random(K).tolist())]
        ranks = [ShardedMixtureDataset(sources, weights, b, num_replicas=W, rank=r,
                                       num_workers=nw, epoch_length=steps * W * b)
                 for r in range(W)]  # fmt: skip
        per = [[list(ds.iter_worker(w, nw)) for w in range(nw)] for ds in ranks]  # [rank][worker]
        read = [x for s in range(steps) for r in range(W)
                for x in per[r][s % nw][(s // nw) * b : (s // nw + 1) * b]]  # fmt: skip
        ks, samples = (np.array(x, np.int64) for x in zip(*read))
        ratio = _overlap(totals, ks, samples, W * b) / (W * nw * b)
        worst = max(worst, ratio)
        worst_b1 = max(worst_b1, ratio) if b == 1 else worst_b1
    timer.stop()
    return {"overlap/(R·b)": worst, "overlap/(R·b), b = 1": worst_b1, "cases": OVERLAP_CASES}


def _sources():
    out = []
    for k in range(SOURCES):
        sizes = shard_sizes(8 + k, TOTAL // SOURCES)
        out.append((list(range(len(sizes))), sizes, ListReader(sizes)))
    return out


def directly(timer) -> dict[str, float]:
    sources = _sources()
    timer.start()
    got = [x for shards, _, read in sources for shard in shards for x in read(shard)]
    timer.stop()
    return {"Msamples/s": len(got) / (timer.t_end - timer.t0) / 1e6}


def ours(timer, seekable: bool = False) -> dict[str, float]:
    sources = _sources()
    weights = [sum(sizes) for _, sizes, _ in sources]
    ranks = [ShardedMixtureDataset(sources, weights, 8, num_replicas=READ_WORLD, rank=r,
                                   seekable=seekable, num_workers=READ_WORKERS)
             for r in range(READ_WORLD)]  # fmt: skip
    timer.start()
    got = sum(
        len(list(ds.iter_worker(w, READ_WORKERS))) for ds in ranks for w in range(READ_WORKERS)
    )
    timer.stop()
    return {"Msamples/s": got / (timer.t_end - timer.t0) / 1e6}


def ours_seekable(timer) -> dict[str, float]:
    return ours(timer, seekable=True)


class Counting(IterableDataset):
    """The loader's own cost: ``(0, i)`` pairs from a counter, nothing mixed, nothing read."""

    def __iter__(self):
        return ((0, i) for i in count())


def through_loader(timer, dataset: str = "ours") -> dict[str, float]:
    """Samples/s of one rank's DataLoader with 2 workers, micro-batch 8, after its first batch."""
    sources = _sources()
    weights = [sum(sizes) for _, sizes, _ in sources]
    ds = (Counting() if dataset == "counting" else
          ShardedMixtureDataset(sources, weights, 8, num_replicas=1, rank=0, with_source=True,
                                num_workers=READ_WORKERS))  # fmt: skip
    it = iter(DataLoader(ds, batch_size=8, num_workers=READ_WORKERS))
    n = len(next(it)[0])
    timer.start()
    for ks, _ in it:
        n += len(ks)
        if n >= LOADER_SAMPLES:
            break
    timer.stop()
    return {"samples/s": (n - 8) / (timer.t_end - timer.t0)}


def through_loader_counting(timer) -> dict[str, float]:
    return through_loader(timer, "counting")


def suite(large: bool) -> list[Comparison]:
    return [
        Comparison(
            title="1e9 samples in 1e5 shards over 10 sources, 1,024 ranks: construct, first batch",
            contenders={
                "MixtureSampler (map-style)": "bench_sharded_mixture:mixture_first_batch",
                "ShardedMixtureDataset": "bench_sharded_mixture:sharded_first_batch",
                "ShardedMixtureDataset, epoch 1, a fresh worker": "bench_sharded_mixture:sharded_first_batch_epoch_1",
            },
            baseline="MixtureSampler (map-style)",
            note="goal: <= 1 s and <= 256 MiB",
            columns=("time_s", "peak_MiB"),
        ),
        Comparison(
            title="100 sources, 1,024 ranks x 8 workers, micro-batch 4: any step at once (step 1,000,000)",
            contenders={
                "MixtureSampler.batch_at": "bench_sharded_mixture:mixture_batch_at_step",
                "ShardedMixtureDataset.counts_at": "bench_sharded_mixture:counts_at_step",
                "ShardedMixtureDataset.batch_at": "bench_sharded_mixture:batch_at_step",
                "ShardedMixtureDataset elastic resume (to 512 x 4)": "bench_sharded_mixture:elastic_at_step",
            },
            baseline="MixtureSampler.batch_at",
            note="goal: <= 100 ms each, at any step (closed forms, nothing replayed)",
            columns=("time_s", "peak_MiB"),
        ),
        Comparison(
            title=f"The overlap of two passes: {OVERLAP_CASES} random topologies, read through",
            contenders={
                "ShardedMixtureDataset, random topologies": "bench_sharded_mixture:overlap_random"
            },
            baseline="ShardedMixtureDataset, random topologies",
            note="the worst over every step boundary of every case, divided by readers x "
            "micro-batch (the bound asked: at most 1; 0 is no overlap)",
            columns=("overlap/(R·b)", "overlap/(R·b), b = 1", "cases", "time_s"),
            ratios=(),
            runs=1,
        ),
        Comparison(
            title=f"{TOTAL:,} samples in 10 sources of long-tail shards, read from ready lists",
            contenders={
                "shards directly": "bench_sharded_mixture:directly",
                f"ShardedMixtureDataset, {READ_WORLD} ranks x {READ_WORKERS} workers": "bench_sharded_mixture:ours",
                f"ShardedMixtureDataset, {READ_WORLD} ranks x {READ_WORKERS} workers, seekable": "bench_sharded_mixture:ours_seekable",
            },
            baseline="shards directly",
            note="samples yielded per second",
            columns=("Msamples/s", "time_s"),
            ratios=("Msamples/s",),
        ),
        Comparison(
            title=f"One rank's DataLoader, {READ_WORKERS} workers, micro-batch 8: {LOADER_SAMPLES:,} samples",
            contenders={
                "a counter's (0, i) pairs (the loader's own cost)": "bench_sharded_mixture:through_loader_counting",
                "ShardedMixtureDataset, with_source": "bench_sharded_mixture:through_loader",
            },
            baseline="a counter's (0, i) pairs (the loader's own cost)",
            note="samples per second after the first batch: the workers' batches reach the main "
            "process as collated tensors, passed one file descriptor each",
            columns=("samples/s", "time_s"),
            ratios=("samples/s",),
        ),
    ]
