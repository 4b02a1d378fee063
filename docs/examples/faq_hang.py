from torch.utils.data import DataLoader, DistributedSampler

from distsampling import UnpaddedDistributedSampler

n, world = 9, 2  # 9 samples, 2 ranks, batches of 2
for Sampler in (DistributedSampler, UnpaddedDistributedSampler):
    steps = [
        len(DataLoader(range(n), 2, sampler=Sampler(range(n), world, r))) for r in range(world)
    ]
    print(f"{Sampler.__name__}: optimizer steps per rank {steps}")
