"""The peers of MixtureSampler, run by their real code in ``.venv-peers``.

``.venv-peers/bin/python -m benchmarks.peers_mixture NAME TASK`` prints one JSON line: the
figures of ``benchmarks/bench_mixture.py`` (``prefix``, ``batch``, ``rank``, ``repeats``) of the
peer's reads laid out as 8 ranks' micro-batches of 8 of every step. ``make bench`` runs the same
functions through ``bench_mixture`` in ``.venv-peers``, beside ours.

- ``megatron``: megatron-core's ``helpers_cpp.build_blending_indices`` (the greedy, compiled
  C++), weights normalized as ``BlendedDataset`` does; sample ``j`` of a source is its pass
  ``j // size`` (Megatron's datasets shuffle each epoch), rank ``r`` reads
  ``[s*B + r*b, s*B + (r+1)*b)`` of step ``s`` (Megatron's batch sampler).
- ``torchdata``: ``torchdata.nodes.MultiNodeWeightedSampler`` on every rank (``rank=r``,
  ``world_size=8``, seed 0, its default stop criterion), each source node the rank's
  DistributedSampler-style share ``range(r, size, 8)``.
- ``hugging_face``: ``datasets.interleave_datasets`` (``probabilities`` = the weights, seed 0)
  of the sources as ``Dataset``s, then ``split_dataset_by_node`` (a contiguous shard per rank).
  It builds its whole index up front, so ``stopping_strategy="all_exhausted"`` only where that
  index is small: on the long tail it would hold about 33 million rows (the largest source at
  its small share), past the 600 s a run may take, so there ``"first_exhausted"`` (about 380,000
  rows, each rank's reads inside its shard). Both draw the same sources, in the same order,
  until the first source runs out.
- ``grain``: ``grain.MapDataset.mix`` of the sources (each ``range(size).shuffle(seed=k)``
  repeated as often as the task needs), sharded ``[rank::8]`` as Grain's ``ShardOptions`` does.
"""

from __future__ import annotations

import json
import sys
import time

import numpy as np

WORLD, MICRO, STEPS, RANDOM_STEPS = 8, 8, 937, 62
B = WORLD * MICRO
_LONG = [int(10**6 / (k + 1) ** 1.3) + 1 for k in range(100)]
TASKS = {
    "task": ([60000, 6000, 600], [0.5, 0.3, 0.2]),
    "long-tail": (_LONG, [round(n**0.3, 3) for n in _LONG]),
}


def quality(source: np.ndarray, sample: np.ndarray, sizes: list[int], weights: list[float]):
    """The figures of the module docstring from the (source, sample) of every position."""
    share = np.array(weights, dtype=np.float64) / sum(weights)
    n = len(source)
    prefix = batch = rank = 0.0
    repeats = 0
    for k, size in enumerate(sizes):
        mine = source == k  # (n,)
        dev = np.cumsum(mine) - share[k] * np.arange(1, n + 1)
        prefix = max(prefix, float(np.abs(dev).max()))
        by_step = mine.reshape(-1, WORLD, MICRO)  # (steps, W, b)
        batch = max(batch, float(np.abs(by_step.sum((1, 2)) - share[k] * B).max()))
        per_rank = by_step.sum((0, 2))  # (W,)
        rank = max(rank, float(np.abs(per_rank - share[k] * len(by_step) * MICRO).max()))
        seen: set[int] = set()
        for i in sample[mine].tolist():
            if i in seen and len(seen) < size:
                repeats += 1
            seen.add(i)
    return {"prefix": prefix, "batch": batch, "rank": rank, "repeats": float(repeats)}


def megatron(sizes: list[int], weights: list[float]) -> tuple[np.ndarray, np.ndarray]:
    from megatron.core.datasets import helpers_cpp

    n = STEPS * B
    w = np.array(weights, dtype=np.float64) / sum(weights)
    source = np.zeros(n, dtype=np.int16)
    item = np.zeros(n, dtype=np.int64)
    helpers_cpp.build_blending_indices(source, item, w, len(sizes), n, False)
    return source.astype(np.int64), item % np.array(sizes)[source]


def torchdata(sizes: list[int], weights: list[float]) -> tuple[np.ndarray, np.ndarray]:
    from torchdata.nodes import IterableWrapper, MultiNodeWeightedSampler

    per_rank = []
    for r in range(WORLD):
        nodes = {str(k): IterableWrapper([(k, i) for i in range(r, n, WORLD)])
                 for k, n in enumerate(sizes) if weights[k] > 0}  # fmt: skip
        node = MultiNodeWeightedSampler(
            nodes, {str(k): w for k, w in enumerate(weights) if w > 0}, rank=r, world_size=WORLD
        )
        node.reset()
        per_rank.append([next(node) for _ in range(STEPS * MICRO)])
    return _laid_out(per_rank)


def hugging_face(sizes: list[int], weights: list[float]) -> tuple[np.ndarray, np.ndarray]:
    from datasets import Dataset, interleave_datasets
    from datasets.distributed import split_dataset_by_node

    parts = [Dataset.from_dict({"k": [k] * n, "i": list(range(n))})
             for k, n in enumerate(sizes) if weights[k] > 0]  # fmt: skip
    total = sum(w for w in weights if w > 0)
    # rows until the first source runs out, about: enough for every rank's reads, or all of them
    first = min(n * total / w for n, w in zip(sizes, weights) if w > 0)
    mixed = interleave_datasets(
        parts, [w / total for w in weights if w > 0], seed=0,
        stopping_strategy="first_exhausted" if first >= 2 * STEPS * B else "all_exhausted",
    )  # fmt: skip
    per_rank = []
    for r in range(WORLD):
        shard = split_dataset_by_node(mixed, rank=r, world_size=WORLD)[: STEPS * MICRO]
        per_rank.append(list(zip(shard["k"], shard["i"])))
    return _laid_out(per_rank)


def grain(sizes: list[int], weights: list[float]) -> tuple[np.ndarray, np.ndarray]:
    import grain

    total, need = sum(weights), STEPS * B
    parts = []
    for k, (n, w) in enumerate(zip(sizes, weights)):
        if w > 0:
            epochs = int(2 * need * w / total / n) + 2  # more than the mix reads of it
            ds = grain.MapDataset.range(n).shuffle(seed=k).repeat(epochs)
            parts.append(ds.map(lambda i, k=k: (k, i)))
    mixed = grain.MapDataset.mix(parts, [w for w in weights if w > 0])
    shards = [mixed[r::WORLD] for r in range(WORLD)]  # as Grain's ShardOptions: every W-th
    per_rank = [[shard[p] for p in range(STEPS * MICRO)] for shard in shards]
    return _laid_out(per_rank)


def _laid_out(per_rank: list[list[tuple[int, int]]]) -> tuple[np.ndarray, np.ndarray]:
    """(source, sample) of every global position: rank r's t-th micro-batch at step t."""
    reads = np.array(per_rank, dtype=np.int64).reshape(WORLD, STEPS, MICRO, 2)
    flat = reads.transpose(1, 0, 2, 3).reshape(-1, 2)
    return flat[:, 0], flat[:, 1]


PEERS = {"megatron": megatron, "torchdata": torchdata, "hugging_face": hugging_face,
         "grain": grain}  # fmt: skip


if __name__ == "__main__":
    name, task = sys.argv[1], sys.argv[2]
    sizes, weights = TASKS[task]
    t0 = time.perf_counter()
    source, sample = PEERS[name](sizes, weights)
    seconds = time.perf_counter() - t0
    print(json.dumps({**quality(source, sample, sizes, weights), "reads_s": seconds}))
