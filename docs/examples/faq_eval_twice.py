from collections import Counter

from torch.utils.data import DistributedSampler

from distsampling import UnpaddedDistributedSampler

n, world = 10, 3  # 10 validation samples on 3 ranks
for Sampler in (DistributedSampler, UnpaddedDistributedSampler):
    shares = [list(Sampler(range(n), world, rank, shuffle=False)) for rank in range(world)]
    reads = Counter(i for share in shares for i in share)
    twice = sorted(i for i, k in reads.items() if k > 1)
    print(f"{Sampler.__name__}: {sum(reads.values())} reads of {n} samples, twice: {twice}")
