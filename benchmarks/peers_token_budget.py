"""The peers of TokenBudgetBatchSampler, run by their real code in ``.venv-peers``.

``.venv-peers/bin/python -m benchmarks.peers_token_budget {hugging_face,lhotse} DATASET``
prints one JSON line: ``plan_s`` (rank 0 of 8 building its sampler and reading its epoch's
batches) and the figures of ``benchmarks/bench_token_budget.py`` over all 8 ranks' batches, on
the same lengths (truncated to the maximum length, as a pipeline does) and budget. ``bench_token_budget`` runs it as a subprocess, so the peers' rows
sit beside ours in one table.

- Hugging Face transformers' ``DistributedLengthGroupedSampler`` (what ``Trainer`` used with
  ``group_by_length=True`` on several ranks; today's ``Trainer`` builds ``LengthGroupedSampler``
  and lets accelerate shard its batches, and accelerate is not in ``.venv-peers``) with the largest batch size that never exceeds the budget,
  ``max_tokens // max(lengths)``; its indices batched in runs of that size, as the Trainer's
  DataLoader does.
- Lhotse's ``DynamicBucketingSampler``: one cut per sample whose duration is its length,
  ``max_duration = max_tokens``, ``world_size = 8``, its other arguments at their defaults.
"""

from __future__ import annotations

import json
import sys
import time

from .bench_token_budget import WORLD, figures, lengths_of


def hugging_face(dataset: str) -> dict[str, float]:
    from transformers.trainer_pt_utils import DistributedLengthGroupedSampler

    lengths, budget = lengths_of(dataset)
    as_list = lengths.tolist()
    batch_size = budget // int(lengths.max())

    def batches(rank: int) -> list[list[int]]:
        sampler = DistributedLengthGroupedSampler(
            batch_size, num_replicas=WORLD, rank=rank, seed=0, lengths=as_list
        )
        sampler.set_epoch(0)
        indices = list(sampler)
        return [indices[i : i + batch_size] for i in range(0, len(indices), batch_size)]

    t0 = time.perf_counter()
    mine = batches(0)
    plan_s = time.perf_counter() - t0
    per_rank = [mine] + [batches(r) for r in range(1, WORLD)]
    return {"plan_s": plan_s, **figures(per_rank, lengths, budget)}


def lhotse(dataset: str) -> dict[str, float]:
    from lhotse import CutSet
    from lhotse.cut import MonoCut
    from lhotse.dataset.sampling import DynamicBucketingSampler

    lengths, budget = lengths_of(dataset)
    cuts = CutSet.from_cuts(
        MonoCut(id=str(i), start=0.0, duration=float(length), channel=0)
        for i, length in enumerate(lengths.tolist())
    )

    def batches(rank: int) -> list[list[int]]:
        sampler = DynamicBucketingSampler(
            cuts, max_duration=float(budget), shuffle=True, world_size=WORLD, rank=rank, seed=0
        )
        sampler.set_epoch(0)
        return [[int(c.id) for c in batch] for batch in sampler]

    t0 = time.perf_counter()
    mine = batches(0)
    plan_s = time.perf_counter() - t0
    per_rank = [mine] + [batches(r) for r in range(1, WORLD)]
    return {"plan_s": plan_s, **figures(per_rank, lengths, budget)}


if __name__ == "__main__":
    name, dataset = sys.argv[1], sys.argv[2]
    print(json.dumps({"hugging_face": hugging_face, "lhotse": lhotse}[name](dataset)))
