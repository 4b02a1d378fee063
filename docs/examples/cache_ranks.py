import tempfile

import numpy as np

from distsampling import DistributedSampler, ShardCache

root = tempfile.mkdtemp()
rank0 = ShardCache(root, capacity_bytes=1 << 20)  # two processes opening one cache directory
rank1 = ShardCache(root, capacity_bytes=1 << 20)
rank0.add(np.zeros((5, 2), np.float32))

snap0 = rank0.snapshot(epoch=0)  # the first call for epoch 0 freezes it ...
rank0.add(np.ones((5, 2), np.float32))  # ... so a shard added before rank 1 asks is left out
snap1 = rank1.snapshot(epoch=0)
print("same snapshot:", snap0 == snap1, "samples:", len(snap1))
for rank, snap in enumerate([snap0, snap1]):
    sampler = DistributedSampler(range(len(snap)), num_replicas=2, rank=rank, shuffle=False)
    print(f"rank {rank} reads", list(sampler))
