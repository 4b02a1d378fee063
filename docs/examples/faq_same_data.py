import torch
from torch.utils.data import DataLoader, DistributedSampler

dataset = list(range(8))
for rank in range(2):  # in training each rank is its own process
    torch.manual_seed(0)  # DDP scripts seed every rank alike
    everything = [int(i) for i in DataLoader(dataset, shuffle=True)]
    sampler = DistributedSampler(dataset, num_replicas=2, rank=rank, seed=0)
    share = [int(i) for i in DataLoader(dataset, sampler=sampler)]
    print(f"rank {rank}: shuffle=True reads {everything}; with the sampler {share}")
