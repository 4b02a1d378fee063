"""The windowed tutorial's real-series dataset reads its windows in DataLoader workers."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from distsampling import BatchSampler, DistributedSampler

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "windowed_series.py"


def test_the_tutorials_series_windows_are_read_in_workers_never_in_the_main_process(
    tmp_path, capsys
):
    """Invariant: every window of the tutorial's dataset is read by a DataLoader worker
    process (never the training process, which never opens the file), and is the window of
    ``t`` consecutive rows of the series that its start names, wrapping at the end."""
    namespace = runpy.run_path(str(EXAMPLE))
    assert capsys.readouterr().out.splitlines()[-1] == "the main process opened the file: False"

    class WhoReads(namespace["SeriesWindows"]):
        def __getitem__(self, i: int):
            return super().__getitem__(i), self.windows[i], os.getpid()

    series = np.arange(50 * 3, dtype=np.float32).reshape(50, 3)  # (time, features)
    np.save(tmp_path / "series.npy", series)
    t = 7  # 50 % 7 != 0: the last window wraps
    dataset = WhoReads(str(tmp_path / "series.npy"), window=t, seed=3)
    sampler = DistributedSampler(dataset, num_replicas=2, rank=1, seed=3)
    loader = DataLoader(
        dataset, batch_sampler=BatchSampler(sampler, 3, drop_last=False), num_workers=2
    )
    readers, starts_read = set(), []
    for epoch in range(2):
        dataset.set_epoch(epoch)
        sampler.set_epoch(epoch)
        for x, starts, pids in loader:
            readers |= set(pids.tolist())
            for window, start in zip(x, starts.tolist()):
                rows = np.take(series, range(start, start + t), axis=0, mode="wrap")
                assert torch.equal(window, torch.from_numpy(rows))
            starts_read += starts.tolist()
    assert os.getpid() not in readers and readers, readers
    assert dataset.series is None  # the training process never opened the file
    assert len(starts_read) == 2 * len(sampler)
