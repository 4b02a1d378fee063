import pickle
import tempfile

import numpy as np
from torch.utils.data import DataLoader

from distsampling import ShardCache, SnapshotDataset, collate_batch

cache = ShardCache(tempfile.mkdtemp(), capacity_bytes=64 << 20)
for k in range(4):  # 4 shards of 16 samples of 256 KiB (float32, 256 x 256)
    cache.add(np.random.default_rng(k).random((16, 256, 256), dtype=np.float32))
dataset = SnapshotDataset(cache.snapshot(epoch=0))
print(dataset)
print(f"sample data: {sum(n for _, n in dataset.snapshot.shards) * 256 * 1024 >> 20} MiB")
print(f"the dataset pickled for a worker is under 1 KiB: {len(pickle.dumps(dataset)) < 1024}")

loader = DataLoader(dataset, batch_size=4, num_workers=2, collate_fn=collate_batch)
buffers = set()  # where each batch lies in the training process
for b, batch in enumerate(loader):
    if b == 0:
        print(f"batch {tuple(batch.shape)} {batch.dtype}")
    buffers.add(batch.data_ptr())
print(f"{b + 1} batches, in at most 2 workers x 4 reused buffers: {len(buffers) <= 2 * 4}")
