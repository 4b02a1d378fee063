"""TokenBudgetBatchSampler on 3 ranks: one plan, the same number of batches on every rank."""

from distsampling import TokenBudgetBatchSampler

LENGTHS = [5, 12, 7, 40, 9, 3, 22, 6, 15, 60, 8, 4, 11, 30, 5,
           9, 18, 7, 3, 48, 10, 6, 14, 25, 4, 8, 35, 12, 6, 20]  # fmt: skip
MAX_TOKENS = 64

ranks = [
    TokenBudgetBatchSampler(LENGTHS, MAX_TOKENS, num_buckets=4, num_replicas=3, rank=r, seed=0)
    for r in range(3)
]
for sampler in ranks:
    sampler.set_epoch(0)  # every epoch, on every rank, as with DistributedSampler
per_rank = [list(sampler) for sampler in ranks]
for rank, batches in enumerate(per_rank):
    print(f"rank {rank}: {len(batches)} batches {batches}")
for step, batches in enumerate(zip(*per_rank)):
    costs = [max(LENGTHS[i] for i in b) * len(b) for b in batches]
    print(f"step {step}: costs {costs}")
