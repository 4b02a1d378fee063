"""Save after 2 steps on 3 ranks, resume on 2 ranks: every sample of the epoch read once."""

import json

from distsampling import TokenBudgetBatchSampler

LENGTHS = [5, 12, 7, 40, 9, 3, 22, 6, 15, 60, 8, 4, 11, 30, 5,
           9, 18, 7, 3, 48, 10, 6, 14, 25, 4, 8, 35, 12, 6, 20]  # fmt: skip


def sampler(world: int, rank: int) -> TokenBudgetBatchSampler:
    return TokenBudgetBatchSampler(LENGTHS, 64, num_buckets=4, num_replicas=world, rank=rank)


read = []
three = [sampler(3, r) for r in range(3)]
for s in three:
    it = iter(s)
    read += [next(it), next(it)]  # 2 steps, then the job is stopped
state = json.loads(json.dumps(three[0].state_dict()))  # every rank saved the same position
print({k: state[k] for k in ("epoch", "num_replicas", "resumed", "position")})

two = [sampler(2, r) for r in range(2)]
for s in two:
    s.load_state_dict(state)  # the rest of the epoch, planned again in steps of 2
    read += list(s)
print("batches left per rank:", [len(s.batches()) for s in two])  # len(s): the whole epoch's
distinct = {tuple(batch) for batch in read}  # a padding batch repeats one already read
print("every sample in one batch:", sorted(i for b in distinct for i in b) == list(range(30)))
print("padding batches:", len(read) - len(distinct))
