import torch

from distsampling import ShardedIterableDataset

sizes = [5, 2, 7, 0, 3, 4]  # shard 3 is empty: in the order, never opened
ds = ShardedIterableDataset(range(6), sizes, lambda shard: iter([shard] * sizes[shard]),
                            num_replicas=1, rank=0, seed=0)  # fmt: skip
torch_order = torch.utils.data.DistributedSampler(range(6), num_replicas=1, rank=0, seed=0)
for epoch in range(3):
    ds.set_epoch(epoch)
    torch_order.set_epoch(epoch)
    print(f"epoch {epoch}: shards read {[i for i, *_ in ds.worker_runs()]}, "
          f"DistributedSampler over the shards {list(torch_order)}")  # fmt: skip
