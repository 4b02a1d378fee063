import json
from itertools import islice

from distsampling import MixtureSampler

sizes = [60000, 6000, 600]
# source 2 joins at position 6,400 (step 100 of a global batch of 64), and web data weighs less
schedule = [(0, [0.7, 0.3, 0]), (6400, [0.5, 0.3, 0.2])]

# 8 ranks of micro-batch 8 read 150 steps, then the job is preempted: every rank saves
old = [MixtureSampler(sizes, schedule, 8, num_replicas=8, rank=r) for r in range(8)]
reads = [list(islice(iter(s), 150 * 8)) for s in old]
state = json.loads(json.dumps(old[0].state_dict()))  # the same on every rank
print({k: state[k] for k in ("epoch", "num_replicas", "batch_size", "origin", "position")})

# it resumes on 4 ranks of micro-batch 16: the same global batch of 64, laid out otherwise
new = [MixtureSampler(sizes, schedule, 16, num_replicas=4, rank=r) for r in range(4)]
for s in new:
    s.load_state_dict(state)
more = [list(islice(iter(s), 50 * 16)) for s in new]

# laid out step by step, both runs read the one stream of the uninterrupted single rank
laid = [i for t in range(150) for r in range(8) for i in reads[r][t * 8 : (t + 1) * 8]]
laid += [i for t in range(50) for r in range(4) for i in more[r][t * 16 : (t + 1) * 16]]
one = MixtureSampler(sizes, schedule, 64, num_replicas=1, rank=0)
print(laid == [i for t in range(200) for i in one.batch_at(t)[0]])
print("source 2 read from position", min(p for p, i in enumerate(laid) if i >= 66000))
