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
print({k: state[k] for k in ("num_replicas", "batch_size", "read", "past", "position")})

# it resumes on 4 ranks of micro-batch 8 (a global batch of 32 from step 150 on), and the
# schedule gains a change still ahead: from step 200 the books weigh more
later = [*schedule, (200, [0.3, 0.3, 0.4])]
new = [MixtureSampler(sizes, later, 8, num_replicas=4, rank=r) for r in range(4)]
for s in new:
    s.load_state_dict(state)
more = [list(islice(iter(s), 60 * 8)) for s in new]  # steps 150 to 209

# the stream, step by step (micro-batch m of step t is rank (m - t) mod W's): each source's
# samples once a pass, a new order each pass, across the change of grid
laid = [i for t in range(150) for m in range(8) for i in reads[(m - t) % 8][t * 8 : (t + 1) * 8]]
laid += [i for t in range(150, 210) for m in range(4)
         for i in more[(m - t) % 4][(t - 150) * 8 : (t - 149) * 8]]  # fmt: skip
firsts, whole = [0, 60000, 66000], True
for lo, n in zip(firsts, sizes):
    mine = [i for i in laid if lo <= i < lo + n]
    whole &= all(len(set(mine[p : p + n])) == len(mine[p : p + n]) for p in range(0, len(mine), n))
print("every pass of every source read once:", whole)
print("source 2 read from position", min(p for p, i in enumerate(laid) if i >= 66000))


def per_source(steps: range) -> list[int]:  # each source's reads in these steps, all ranks
    flat = [i for t in steps for batch in new[0].batch_at(t) for i in batch]
    return [sum(lo <= i < lo + n for i in flat) for lo, n in zip(firsts, sizes)]


for steps in (range(150, 180), range(180, 200), range(200, 210)):
    print(f"steps {steps.start}-{steps.stop - 1}:", per_source(steps))

try:  # a schedule that rewrites what was read is refused
    rewrite = [(0, [0.7, 0.3, 0]), (120, [0.5, 0.3, 0.2])]
    MixtureSampler(sizes, rewrite, 8, num_replicas=4, rank=0).load_state_dict(state)
except ValueError as err:
    print(err)
