"""How num_buckets trades padding for mixing: 20,000 lognormal lengths cut at 1024, 8 ranks."""

import numpy as np

from distsampling import TokenBudgetBatchSampler

drawn = np.random.default_rng(0).lognormal(5.5, 1.0, 20_000)  # median 245 tokens
lengths = np.clip(np.rint(drawn), 1, 1024).astype(np.int64)  # truncated to 1024, as pipelines do
max_tokens, world = 8192, 8
bound = lengths.sum() / max_tokens / world  # steps if every batch were full of real tokens
fits = (1 / (max_tokens // lengths)).sum() / world  # a batch of longest h holds max_tokens // h
print(f"bound {bound:.1f} steps; padded batches cannot take fewer than {fits:.1f}")
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
    fill = padded / (world * len(sampler)) / max_tokens  # the budget a batch uses, on average
    print(f"num_buckets={buckets:>3}: {len(sampler)} steps ({len(sampler) / bound:.3f}x the "
          f"bound), padding efficiency {real / padded:.1%}, fill {fill:.1%}")  # fmt: skip
