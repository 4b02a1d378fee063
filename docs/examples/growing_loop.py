import tempfile
import time

import numpy as np
from torch.utils.data import DataLoader

from distsampling import (
    DistributedSampler,
    Producer,
    ShardCache,
    SnapshotDataset,
    collate_batch,
    prefetch_epochs,
)

RANK, WORLD = 0, 2  # in a real job: torch.distributed.get_rank(), get_world_size()


def main() -> None:
    # the "remote" store: 4 files of 100 samples of shape (16,); the local cache: 10 shards
    remote, local = tempfile.mkdtemp(), tempfile.mkdtemp()
    for k in range(4):
        np.save(f"{remote}/part-{k}.npy", np.random.default_rng(k).random((100, 16), np.float32))
    cache = ShardCache(local, capacity_bytes=10 * (128 + 8 * 16 * 4))  # 10 shards of 8 samples

    def make_loader(epoch: int) -> DataLoader:
        dataset = SnapshotDataset(cache.snapshot(epoch))  # the same shards on every rank
        sampler = DistributedSampler(dataset, num_replicas=WORLD, rank=RANK, seed=0)
        sampler.set_epoch(epoch)
        return DataLoader(
            dataset, batch_size=4, sampler=sampler, num_workers=2, collate_fn=collate_batch
        )

    # the producer samples the remote store in its own process, capped at 8 KB/s
    with Producer(remote, cache, samples_per_shard=8, bandwidth=8_000) as producer:
        while producer.written < 2:  # the first epoch needs some data
            time.sleep(0.01)
        for epoch, batches in prefetch_epochs(make_loader, range(3)):
            seen = 0
            for batch in batches:
                time.sleep(0.02)  # the training step
                seen += len(batch)
            # this rank read its half of the epoch's snapshot (padded to an even split)
            half = -(-len(cache.snapshot(epoch)) // WORLD)
            print(f"epoch {epoch}: rank {RANK} read its half of the snapshot: {seen == half}")
            cache.end_epoch(epoch)  # in a real job after a barrier: every rank is done
    print(f"the cache kept within its capacity: {cache.live_bytes() <= cache.capacity_bytes}")


if __name__ == "__main__":  # the producer is a spawned process: it re-imports this file
    main()
