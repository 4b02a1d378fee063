import os
import tempfile

import numpy as np

from distsampling import ShardCache

root = tempfile.mkdtemp()
# each shard: 4 float32 samples of 8 values = 128 bytes of data + a 128-byte .npy header
cache = ShardCache(root, capacity_bytes=3 * 256)  # room for three shards


def seqs(paths):
    return [int(os.path.basename(p)[6:-4]) for p in paths]  # "shard-0000000003.npy" -> 3


for epoch in range(4):
    for _ in range(2):  # the producer adds two shards per epoch
        cache.add(np.random.default_rng(epoch).random((4, 8), dtype=np.float32))
    snapshot = cache.snapshot(epoch)  # frozen now: what this epoch trains on
    cache.add(np.zeros((4, 8), np.float32))  # added during the epoch: not in this snapshot
    live = seqs(p for p, _ in cache.shards())
    disk = seqs(n for n in sorted(os.listdir(root)) if n.startswith("shard-"))
    print(
        f"epoch {epoch}: trains on {seqs(p for p, _ in snapshot.shards)}, live {live}, disk {disk}"
    )
    cache.end_epoch(epoch)  # unpins: evicted shards of this snapshot are deleted now
