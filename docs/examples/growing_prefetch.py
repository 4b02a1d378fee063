import tempfile

import numpy as np
from torch.utils.data import DataLoader

from distsampling import ShardCache, SnapshotDataset, collate_batch, prefetch_epochs

cache = ShardCache(tempfile.mkdtemp(), capacity_bytes=1 << 20)
cache.add(np.zeros((12, 4), np.float32))


def make_loader(epoch: int) -> DataLoader:
    snapshot = cache.snapshot(epoch)
    print(f"  epoch {epoch}: loader built over {len(snapshot)} samples, workers starting")
    dataset = SnapshotDataset(snapshot)
    return DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=collate_batch)


for epoch, batches in prefetch_epochs(make_loader, range(3), lead=1):
    for b, _batch in enumerate(batches):
        print(f"train epoch {epoch} batch {b}")
        if b == 0:
            cache.add(np.ones((4, 4), np.float32))  # the producer keeps writing
    cache.end_epoch(epoch)
