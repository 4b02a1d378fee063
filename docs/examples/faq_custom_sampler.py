import torch
from torch.utils.data import WeightedRandomSampler

from distsampling import DistributedSamplerWrapper

weights = [0.1] * 6 + [1.0] * 2  # samples 6 and 7 ten times as likely
for epoch in range(2):
    for rank in range(2):  # in training each rank is its own process
        # a seeded generator: every rank must draw the same inner epoch
        inner = WeightedRandomSampler(weights, 8, generator=torch.Generator().manual_seed(epoch))
        sampler = DistributedSamplerWrapper(inner, num_replicas=2, rank=rank, seed=0)
        sampler.set_epoch(epoch)
        print(f"epoch {epoch} rank {rank}: {list(sampler)}")
