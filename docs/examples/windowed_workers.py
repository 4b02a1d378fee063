from torch.utils.data import DataLoader

from distsampling import BatchSampler, DistributedSampler, SequentialWindowedDataset

dataset = SequentialWindowedDataset(100, window=10, seed=0)
sampler = DistributedSampler(dataset, num_replicas=2, rank=0, seed=0)
loader = DataLoader(
    dataset,
    batch_sampler=BatchSampler(sampler, batch_size=5, drop_last=False),
    num_workers=2,
    persistent_workers=True,  # the workers start once and live across epochs
)
for epoch in range(3):
    dataset.set_epoch(epoch)  # each index the sampler yields carries it to the workers
    sampler.set_epoch(epoch)
    starts = [s for batch in loader for s in batch.tolist()]
    print(f"epoch {epoch}, offset {dataset.offset:2}: starts {sorted(starts)}")
