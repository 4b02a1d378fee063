from torch.utils.data import BatchSampler, DistributedSampler

sampler = DistributedSampler(range(10), num_replicas=2, rank=0, seed=0)
batches = BatchSampler(sampler, batch_size=2, drop_last=False)
print(len(batches), list(batches))
