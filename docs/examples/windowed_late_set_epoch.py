from torch.utils.data import DataLoader

from distsampling import DistributedSampler, SequentialWindowedDataset

dataset = SequentialWindowedDataset(48, window=4, seed=0)  # 12 windows of 4 samples
sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=False)
loader = DataLoader(dataset, batch_size=4, sampler=sampler)
batches = iter(loader)
first = next(batches).tolist()  # epoch 0's pass has begun: its indices carry epoch 0
dataset.set_epoch(1)  # late: after the first batch
sampler.set_epoch(1)
rest = [start for batch in batches for start in batch.tolist()]
print("epoch 0 read: ", first + rest)  # every window of epoch 0 (offset 41)
print("epoch 1 reads:", [start for batch in loader for start in batch.tolist()])
