"""How num_buckets trades padding for mixing: 20,000 lognormal lengths, 8 ranks."""

import numpy as np

from distsampling import TokenBudgetBatchSampler

lengths = np.clip(np.rint(np.random.default_rng(0).lognormal(5.5, 1.0, 20_000)), 1, 8192)
lengths, max_tokens, world = lengths.astype(np.int64), 8192, 8
bound = lengths.sum() / max_tokens / world  # steps if every batch were full of real tokens
for buckets in (1, 8, 32, 128, 512):
    ranks = [
        TokenBudgetBatchSampler(
            lengths, max_tokens, num_buckets=buckets, num_replicas=world, rank=r
        )
        for r in range(world)
    ]
    sampler, plan = ranks[0], [s.batches() for s in ranks]
    padded = sum(int(lengths[b].max()) * len(b) for batches in plan for b in batches)
    real = sum(int(lengths[b].sum()) for batches in plan for b in batches)
    print(f"num_buckets={buckets:>3}: {len(sampler)} steps ({len(sampler) / bound:.2f}x the "
          f"bound), padding efficiency {real / padded:.1%}")  # fmt: skip
