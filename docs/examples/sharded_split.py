from torch.utils.data import DataLoader

from distsampling import ShardedIterableDataset

shards, sizes = ["a", "b", "c", "d", "e", "f"], [5, 2, 7, 0, 3, 4]  # 21 samples


def read(shard):  # in a real job: open the file or URL, yield its records in order
    yield from (f"{shard}{j}" for j in range(sizes[shards.index(shard)]))


for rank in range(2):
    # batch_size=: the loader's, so that each worker's range is whole batches
    ds = ShardedIterableDataset(
        shards, sizes, read, num_replicas=2, rank=rank, seed=0, batch_size=4
    )
    ds.set_epoch(0)  # every epoch, as with DistributedSampler
    for worker in range(2):  # what DataLoader worker k of 2 reads: runs of (shard, first, stop)
        runs = [(shards[i], first, stop) for i, first, stop in ds.worker_runs(worker, 2)]
        print(f"rank {rank} worker {worker}: {runs}")
    loader = DataLoader(ds, batch_size=4, num_workers=2, collate_fn=list)
    batches = list(loader)
    print(
        f"rank {rank}: {len(ds)} samples, len(loader) {len(loader)}, {len(batches)} batches: {batches}"
    )
