from distsampling import DistributedSampler, GroupedBatchSampler

sampler = DistributedSampler(range(10), num_replicas=2, rank=0, seed=0)
batches = GroupedBatchSampler(sampler, group_ids=[0] * 10, batch_size=2)
print(len(batches), list(batches))
