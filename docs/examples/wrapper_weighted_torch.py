from torch.utils.data import DistributedSampler

from distsampling import WeightedBalanceClassSampler

labels = ["a"] * 8 + ["b"] * 3 + ["c"]  # 12 samples, imbalanced
for epoch in range(2):
    inner = WeightedBalanceClassSampler(labels, [1, 1, 1], length=12, seed=0)
    inner.set_epoch(epoch)
    inner_epoch = list(inner)  # the epoch every rank draws alike
    for rank in range(2):
        positions = DistributedSampler(range(len(inner_epoch)), num_replicas=2, rank=rank, seed=0)
        positions.set_epoch(epoch)
        indices = [inner_epoch[p] for p in positions]
        print(f"epoch {epoch} rank {rank}: {indices}", "".join(labels[i] for i in indices))
