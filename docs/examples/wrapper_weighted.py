from distsampling import DistributedSamplerWrapper, WeightedBalanceClassSampler

labels = ["a"] * 8 + ["b"] * 3 + ["c"]  # 12 samples, imbalanced
for epoch in range(2):
    for rank in range(2):  # in real training each rank is its own process
        inner = WeightedBalanceClassSampler(labels, [1, 1, 1], length=12, seed=0)
        sampler = DistributedSamplerWrapper(inner, num_replicas=2, rank=rank, seed=0)
        sampler.set_epoch(epoch)  # reaches the inner sampler too
        indices = list(sampler)
        print(f"epoch {epoch} rank {rank}: {indices}", "".join(labels[i] for i in indices))
