from torch.utils.data import DataLoader

from distsampling import BatchBalanceClassSampler

# 14 photos of 4 people; "dan" has only 2, fewer than K = 3
labels = ["ann"] * 5 + ["bob"] * 4 + ["cat"] * 3 + ["dan"] * 2
for rank in (0, 1):
    sampler = BatchBalanceClassSampler(
        labels, num_classes=2, num_samples=3, num_batches=2, num_replicas=2, rank=rank, seed=0
    )
    loader = DataLoader(range(len(labels)), batch_sampler=sampler)  # batch_size: 2 x 3
    for batch in loader:
        print(f"rank {rank}: {batch.tolist()} -> {[labels[i] for i in batch]}")
