import shutil
import tempfile

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from distsampling import (
    BatchSampler,
    DistributedSamplerWrapper,
    SequentialWindowedDataset,
    window_indices,
)


class SeriesWindows(Dataset):
    """Item `start`: the window of `window` consecutive rows of a series on disk from `start`."""

    def __init__(self, path: str, window: int) -> None:
        self.path, self.series, self.window = path, None, window  # opened by each worker
        self.size = len(np.load(path, mmap_mode="r"))  # reads the header only

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, start: int) -> torch.Tensor:
        if self.series is None:
            self.series = np.load(self.path, mmap_mode="r")  # this worker's own file
        rows = window_indices([start], self.window, self.size)[0]  # wraps past the end
        return torch.from_numpy(self.series[rows.numpy()])  # (window, features): read from disk


folder = tempfile.mkdtemp()
series = np.random.default_rng(0).standard_normal((1000, 4), dtype=np.float32)  # (time, features)
np.save(f"{folder}/series.npy", series)  # the data lives on disk, not in the dataset
t, n = 16, 8  # samples per window, windows per batch
dataset = SeriesWindows(f"{folder}/series.npy", window=t)
windows = SequentialWindowedDataset(dataset.size, window=t, seed=0)  # the epoch's starts
sampler = DistributedSamplerWrapper(windows, num_replicas=2, rank=0, seed=0)  # rank 0's starts
batches = BatchSampler(sampler, n, drop_last=False)
loader = DataLoader(dataset, batch_sampler=batches, num_workers=2, persistent_workers=True)
for epoch in range(2):
    sampler.set_epoch(epoch)  # the shuffle, and the windows' offset: on every rank, before iter
    for step, x in enumerate(loader):  # x: (n, t, features), read and collated in the workers
        if step == 0:  # the first window is t consecutive rows of the series (wrapping)
            start = next(iter(sampler))  # an index is a start: a worker needs no epoch
            rows = np.take(series, range(start, start + t), axis=0, mode="wrap")
            print(
                f"epoch {epoch}: x {tuple(x.shape)}, rows {start}..: {np.array_equal(x[0], rows)}"
            )
print("the main process opened the file:", dataset.series is not None)
del loader  # stops the persistent workers
shutil.rmtree(folder)
