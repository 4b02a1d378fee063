"""The windowed tutorial's real-series dataset reads its windows in DataLoader workers."""

from __future__ import annotations

import os
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from distsampling import (
    BatchSampler,
    DistributedSampler,
    DistributedSamplerWrapper,
    SequentialWindowedDataset,
)

EXAMPLE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "windowed_series.py"


@pytest.mark.timeout(120)
def test_the_tutorials_series_windows_are_read_in_workers_never_in_the_main_process(
    tmp_path, capsys
):
    """Invariant: every window of the tutorial's dataset is read by a DataLoader worker
    process (never the training process, which never opens the file), persistent ones across
    epochs included, and is the window of ``t`` consecutive rows of the series that its start
    names, wrapping at the end: the starts of each epoch, split as DistributedSampler splits."""
    namespace = runpy.run_path(str(EXAMPLE))
    assert capsys.readouterr().out.splitlines()[-1] == "the main process opened the file: False"

    class WhoReads(namespace["SeriesWindows"]):
        def __getitem__(self, start: int):
            return super().__getitem__(start), start, os.getpid()

    series = np.arange(50 * 3, dtype=np.float32).reshape(50, 3)  # (time, features)
    np.save(tmp_path / "series.npy", series)
    t = 7  # 50 % 7 != 0: the last window wraps
    dataset = WhoReads(str(tmp_path / "series.npy"), window=t)
    windows = SequentialWindowedDataset(50, t, seed=3)
    sampler = DistributedSamplerWrapper(windows, num_replicas=2, rank=1, seed=3)
    loader = DataLoader(
        dataset, batch_sampler=BatchSampler(sampler, 3, drop_last=False), num_workers=2,
        persistent_workers=True,
    )  # fmt: skip
    readers = set()
    for epoch in range(3):
        sampler.set_epoch(epoch)
        starts_read = []
        for x, starts, pids in loader:
            readers |= set(pids.tolist())
            for window, start in zip(x, starts.tolist()):
                rows = np.take(series, range(start, start + t), axis=0, mode="wrap")
                assert torch.equal(window, torch.from_numpy(rows))
            starts_read += starts.tolist()
        plan = DistributedSampler(windows, num_replicas=2, rank=1, seed=3)
        plan.set_epoch(epoch)  # and the windows' epoch: the starts of this epoch, split
        assert starts_read == [windows[i] for i in plan]
    assert os.getpid() not in readers and readers, readers
    assert dataset.series is None  # the training process never opened the file
