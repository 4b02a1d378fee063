import torch
from torch.utils.data import DataLoader, TensorDataset

from distsampling import BatchSampler, DistributedSampler

dataset = TensorDataset(torch.arange(100, 110))  # ten samples: 100..109
sampler = DistributedSampler(dataset, num_replicas=2, rank=1, seed=0)
loader = DataLoader(dataset, batch_sampler=BatchSampler(sampler, batch_size=2, drop_last=False))
for epoch in range(2):
    sampler.set_epoch(epoch)  # the sampler inside the batch sampler still needs it
    print(f"epoch {epoch}:", [batch.tolist() for (batch,) in loader])
