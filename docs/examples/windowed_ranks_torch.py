from torch.utils.data import BatchSampler, DistributedSampler

from distsampling import SequentialWindowedDataset, window_indices

dataset = SequentialWindowedDataset(10, window=3, seed=0)  # samples 0..9
for epoch in range(2):
    dataset.set_epoch(epoch)  # the offset of the windows
    for rank in range(2):
        sampler = DistributedSampler(dataset, num_replicas=2, rank=rank, seed=0)
        sampler.set_epoch(epoch)  # the shuffle of the windows
        for batch in BatchSampler(sampler, batch_size=2, drop_last=False):
            rows = window_indices([dataset[i] for i in batch], 3, 10).tolist()  # (2, 3)
            print(f"epoch {epoch} (offset {dataset.offset}) rank {rank}: {rows}")
