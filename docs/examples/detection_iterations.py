import torch
from torch.utils.data import DataLoader

from distsampling import InfiniteSampler

dataset = torch.arange(100, 105)  # 5 images
max_iter, batch_size = 4, 2
sampler = InfiniteSampler(dataset, num_replicas=2, rank=0, seed=0)
loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler)

# the loop counts iterations; the loader never runs out
for iteration, batch in zip(range(max_iter), loader):
    print(f"iteration {iteration}: {batch.tolist()}")
