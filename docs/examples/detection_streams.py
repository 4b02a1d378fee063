from itertools import islice

from distsampling import DistributedSampler, InfiniteSampler

# 5 images on 2 ranks, in order (no shuffle) so that the split is easy to read
print("epoch-based (DistributedSampler): padded to 6, restarted every epoch")
for epoch in range(2):
    per_rank = [list(DistributedSampler(range(5), 2, rank, shuffle=False)) for rank in (0, 1)]
    print(f"  epoch {epoch}: rank 0 {per_rank[0]}  rank 1 {per_rank[1]}")

print("endless (InfiniteSampler): pass after pass, strided, nothing padded")
for rank in (0, 1):
    print(f"  rank {rank}: {list(islice(InfiniteSampler(range(5), 2, rank, shuffle=False), 6))}")

print("shuffled: every pass a new permutation from one generator")
for rank in (0, 1):
    print(f"  rank {rank}: {list(islice(InfiniteSampler(range(5), 2, rank, seed=0), 6))}")
