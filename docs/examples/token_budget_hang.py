"""Each rank batches its own share by a token budget: the batch counts differ, and DDP hangs."""

import torch.utils.data as tud

LENGTHS = [5, 12, 7, 40, 9, 3, 22, 6, 15, 60, 8, 4, 11, 30, 5,
           9, 18, 7, 3, 48, 10, 6, 14, 25, 4, 8, 35, 12, 6, 20]  # fmt: skip
MAX_TOKENS = 64  # a padded batch: its longest sample x its size


def own_batches(indices: list[int]) -> list[list[int]]:
    """What many training scripts do: sort the share by length, fill batches up to the budget."""
    batches, batch = [], []
    for i in sorted(indices, key=LENGTHS.__getitem__):
        if batch and LENGTHS[i] * (len(batch) + 1) > MAX_TOKENS:
            batches.append(batch)
            batch = []
        batch.append(i)
    return batches + [batch]


for rank in range(3):
    share = list(tud.DistributedSampler(range(len(LENGTHS)), num_replicas=3, rank=rank, seed=0))
    batches = own_batches(share)
    costs = [max(LENGTHS[i] for i in b) * len(b) for b in batches]
    print(f"rank {rank}: {len(batches)} batches costing {costs}")
