import json
from itertools import islice

from distsampling import MixtureSampler

sizes = [60000, 6000, 600]
# source 2 joins at training step 100, and at step 180 the code data weighs more
schedule = [(0, [0.7, 0.3, 0]), (100, [0.5, 0.3, 0.2]), (180, [0.4, 0.4, 0.2])]

# 8 ranks of micro-batch 8 (a global batch of 64) read 150 steps, then the job is preempted
old = [MixtureSampler(sizes, schedule, 8, num_replicas=8, rank=r) for r in range(8)]
reads = [list(islice(iter(s), 150 * 8)) for s in old]
state = json.loads(json.dumps(old[0].state_dict()))  # the same on every rank
print({k: state[k] for k in ("num_replicas", "batch_size", "origin", "step", "position")})

# it resumes on 4 ranks of micro-batch 8: a global batch of 32 from step 150 on
new = [MixtureSampler(sizes, schedule, 8, num_replicas=4, rank=r) for r in range(4)]
for s in new:
    s.load_state_dict(state)
more = [list(islice(iter(s), 60 * 8)) for s in new]  # steps 150 to 209

# laid out step by step: one stream, its changes where the steps fell (150*64 + 30*32 for 180)
laid = [i for t in range(150) for r in range(8) for i in reads[r][t * 8 : (t + 1) * 8]]
laid += [i for t in range(60) for r in range(4) for i in more[r][t * 8 : (t + 1) * 8]]
at = [(0, [0.7, 0.3, 0]), (100 * 64, [0.5, 0.3, 0.2]), (150 * 64 + 30 * 32, [0.4, 0.4, 0.2])]
one = MixtureSampler(sizes, at, 1, num_replicas=1, rank=0)  # a step of one position
print(laid == [one.batch_at(p)[0][0] for p in range(len(laid))])
print("source 2 read from position", min(p for p, i in enumerate(laid) if i >= 66000))


def per_source(steps: range) -> list[int]:  # each source's reads in these steps, all ranks
    flat = [i for t in steps for batch in new[0].batch_at(t) for i in batch]
    return [sum(lo <= i < lo + n for i in flat) for lo, n in zip([0, 60000, 66000], sizes)]


print("steps 150-179:", per_source(range(150, 180)), "steps 180-209:", per_source(range(180, 210)))
