from torch.utils.data import BatchSampler, DistributedSampler

for rank in range(3):
    sampler = DistributedSampler(range(10), num_replicas=3, rank=rank, shuffle=False)
    batches = BatchSampler(sampler, batch_size=3, drop_last=False)
    print(f"rank {rank}: {len(batches)} batches", list(batches))
