import shutil
import tempfile

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from distsampling import BatchSampler, DistributedSampler, SequentialWindowedDataset, window_indices


class SeriesWindows(Dataset):
    """Item i: the i-th window of `window` consecutive rows of a series on disk."""

    def __init__(self, path: str, window: int, seed: int = 0) -> None:
        self.path, self.series = path, None  # opened by each worker, on its first read
        size = len(np.load(path, mmap_mode="r"))  # reads the header only
        self.windows = SequentialWindowedDataset(size, window, seed=seed)

    def set_epoch(self, epoch: int) -> None:
        self.windows.set_epoch(epoch)  # shared memory: reaches workers already running

    def __len__(self) -> int:
        return len(self.windows)

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.series is None:
            self.series = np.load(self.path, mmap_mode="r")  # this worker's own file
        rows = window_indices([self.windows[i]], self.windows.window, self.windows.size)[0]
        return torch.from_numpy(self.series[rows.numpy()])  # (window, features): read from disk


folder = tempfile.mkdtemp()
series = np.random.default_rng(0).standard_normal((1000, 4), dtype=np.float32)  # (time, features)
np.save(f"{folder}/series.npy", series)  # the data lives on disk, not in the dataset
t, n = 16, 8  # samples per window, windows per batch
dataset = SeriesWindows(f"{folder}/series.npy", window=t, seed=0)
sampler = DistributedSampler(dataset, num_replicas=2, rank=0, seed=0)  # rank 0 of 2
batches = BatchSampler(sampler, n, drop_last=False)
loader = DataLoader(dataset, batch_sampler=batches, num_workers=2, persistent_workers=True)
for epoch in range(2):
    dataset.set_epoch(epoch)  # the offset: on every rank, before iterating
    sampler.set_epoch(epoch)  # the shuffle: likewise
    for step, x in enumerate(loader):  # x: (n, t, features), read and collated in the workers
        if step == 0:  # the first window is t consecutive rows of the series (wrapping)
            start = dataset.windows[next(iter(sampler))]
            rows = np.take(series, range(start, start + t), axis=0, mode="wrap")
            print(
                f"epoch {epoch}: x {tuple(x.shape)}, rows {start}..: {np.array_equal(x[0], rows)}"
            )
print("the main process opened the file:", dataset.series is not None)
del loader  # stops the persistent workers
shutil.rmtree(folder)
