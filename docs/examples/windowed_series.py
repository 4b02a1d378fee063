import torch
from torch.utils.data import DataLoader

from distsampling import BatchSampler, DistributedSampler, SequentialWindowedDataset, window_indices

series = torch.randn(1000, 4)  # (time, features): the data itself never enters the dataset
t, n = 16, 8  # samples per window, windows per batch
dataset = SequentialWindowedDataset(len(series), window=t, seed=0)
sampler = DistributedSampler(dataset, num_replicas=2, rank=0, seed=0)  # rank 0 of 2
loader = DataLoader(dataset, batch_sampler=BatchSampler(sampler, n, drop_last=False))
for epoch in range(2):
    dataset.set_epoch(epoch)  # the offset: on every rank, before iterating
    sampler.set_epoch(epoch)  # the shuffle: likewise
    for starts in loader:  # (n,) window starts, collated into a tensor
        x = series[window_indices(starts, t, len(series))]  # (n, t, features)
    print(f"epoch {epoch}: {len(loader)} batches, starts {starts.tolist()}, x {tuple(x.shape)}")
