from torch.utils.data import ConcatDataset, DataLoader

from distsampling import MixtureBatchSampler, MixtureSampler

names = {"web": 600, "code": 60, "books": 6}  # three datasets of labelled samples
data = ConcatDataset([[f"{name} {i}" for i in range(n)] for name, n in names.items()])
sampler = MixtureSampler(list(names.values()), [0.5, 0.3, 0.2], 4, num_replicas=2, rank=0)
loader = DataLoader(data, batch_sampler=MixtureBatchSampler(sampler))  # no batch_size to get wrong
for step, batch in zip(range(3), loader):  # each batch: rank 0's micro-batch of one step
    print(step, batch, [data[i] for i in sampler.batch_at(step)[0]] == batch)
