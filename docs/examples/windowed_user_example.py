import torch
from torch.utils.data import SequentialSampler

from distsampling import BatchSampler, DistributedSampler, SequentialWindowedDataset, window_indices

data = torch.arange(1, 11)  # the user's samples 1..10
n, t = 2, 3  # 2 windows per batch, 3 consecutive samples per window
dataset = SequentialWindowedDataset(len(data), window=t, seed=0)


def show(batch: list[int]) -> str:
    """A batch of window numbers, written as the user wrote it: [1-2-3, 4-5-6]."""
    starts = [dataset[i] for i in batch]  # (n,) window starts
    windows = data[window_indices(starts, t, len(data))]  # (n, t) samples
    return "[" + ", ".join("-".join(map(str, w)) for w in windows.tolist()) + "]"


dataset.set_epoch(8)  # epoch 8 of seed 0 draws offset 0: window 0 starts at sample 1
batches = BatchSampler(SequentialSampler(dataset), n, drop_last=False)
print(f"offset {dataset.offset}, one process:", " ".join(map(show, batches)))

dataset.set_epoch(0)  # epoch 0 draws offset 1
for rank in range(2):
    sampler = DistributedSampler(dataset, num_replicas=2, rank=rank, shuffle=False)
    for batch in BatchSampler(sampler, n, drop_last=False):
        print(f"offset {dataset.offset}, rank {rank}:", show(batch))
