from torch.utils.data import DataLoader

# the copied files, as a reader's project holds them: windowed.py and distributed.py
from distsampling.distributed import DistributedSampler
from distsampling.windowed import SequentialWindowedDataset

dataset = SequentialWindowedDataset(100, window=10, seed=0)
sampler = DistributedSampler(dataset, num_replicas=2, rank=0, seed=0)
loader = DataLoader(dataset, batch_size=5, sampler=sampler, num_workers=2, persistent_workers=True)
for epoch in range(3):
    dataset.set_epoch(epoch)  # the main process's copy only: the running workers keep epoch 0's
    sampler.set_epoch(epoch)
    starts = [s for batch in loader for s in batch.tolist()]
    print(f"epoch {epoch}, offset {dataset.offset:2}: starts {sorted(starts)}")
del loader  # stops the persistent workers
