import tempfile
from pathlib import Path

import numpy as np

from distsampling import ShardedIterableDataset

drawn = 0  # rows read from the files


def read(path, start=0):  # a memory-mapped .npy: rows before `start` are never read
    global drawn
    for j in np.load(path, mmap_mode="r")[start:]:
        drawn += 1
        yield f"{Path(path).stem}{j}"


with tempfile.TemporaryDirectory() as tmp:
    shards = [f"{tmp}/{name}.npy" for name in "abcdef"]
    for path, size in zip(shards, [5, 2, 7, 0, 3, 4]):
        np.save(path, np.arange(size))
    sizes = [len(np.load(path, mmap_mode="r")) for path in shards]  # from the headers alone
    for rank in range(2):
        for worker in range(2):  # what DataLoader worker k of 2 runs
            samples, draws = [], []
            for seekable in (False, True):
                ds = ShardedIterableDataset(shards, sizes, read, num_replicas=2, rank=rank,
                                            seed=0, seekable=seekable)  # fmt: skip
                drawn = 0
                samples.append(list(ds.iter_worker(worker, 2)))
                draws.append(drawn)
            print(f"rank {rank} worker {worker}: yields {len(samples[1])}, reads {draws[0]} rows "
                  f"front to back, {draws[1]} seeking; same samples: {samples[0] == samples[1]}")  # fmt: skip
