"""SnapshotDataset: MB/s of 1 MiB float32 samples, and the stall at an epoch boundary.

Throughput: 256 samples of 1 MiB (8 shards of 32), batch 32, warm page cache, ``num_workers``
0/1/2 (persistent; the first epoch warms the workers up, the second is timed). Contenders:

- memcpy bound: copying the same bytes batch by batch between two tensors, in this process;
- one pickle per sample: ``pickle.load`` of one file per sample + ``default_collate``;
- naive npy: ``np.load(shard, mmap_mode="r")[row]`` per sample + ``default_collate``;
- distsampling: :class:`~distsampling.SnapshotDataset` (``__getitems__``: one copy per run of
  rows, ``os.pwrite`` into a shared-memory batch in a worker) + :func:`~distsampling.collate_batch`.

The training loop only receives each batch (``MB/s`` is what the loader delivers); ``main_cpu_%``
is the CPU time the main (training) process spent, as a share of the wall time.

Epoch-boundary stall: 3 epochs over a growing snapshot (6, 7, 8 shards of 32 MiB), 2 workers, a
training step of 100 ms (a sleep, like a step waiting on the GPU: 32 MiB per 100 ms is the
user's 300-600 MB/s). ``batch_s`` is the median interval between two
batches of one epoch, ``boundary_s`` the mean interval from the last batch of an epoch to the
first of the next, and ``stall_s = boundary_s - batch_s`` what a boundary costs beyond a steady
batch; the loader is rebuilt after each epoch (the plain loop) or by
:func:`~distsampling.prefetch_epochs` (``lead=2``).

Every run also appends its figures to a log; at the end the suite writes their medians to
``benchmarks/results/growing.json``, which ``docs/pictures/growing.py`` draws.
"""

from __future__ import annotations

import itertools
import json
import os
import pickle
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, default_collate

from distsampling import SnapshotDataset, collate_batch, prefetch_epochs
from distsampling.growing.snapshot import Snapshot

from ._harness import ROOT, Comparison

DATA = Path("/tmp/distsampling-bench-growing")
RUNS = DATA / "runs.jsonl"
SAMPLE = (512, 512)  # float32: 1 MiB
SHARDS, PER_SHARD, BATCH = 8, 32, 32
MIB = 1 << 20


def _data() -> list[tuple[str, int]]:
    """Write the shards and the per-sample pickles once; read them all (a warm page cache)."""
    done = DATA / "complete"
    if not done.exists():
        (DATA / "pickles").mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(0)
        for k in range(SHARDS):
            shard = rng.random((PER_SHARD, *SAMPLE), dtype=np.float32)
            np.save(DATA / f"shard-{k}.npy", shard)
            for row in range(PER_SHARD):
                with open(DATA / "pickles" / f"{k * PER_SHARD + row}.pkl", "wb") as f:
                    pickle.dump(shard[row], f, protocol=pickle.HIGHEST_PROTOCOL)
        done.touch()
    for path in [*DATA.glob("*.npy"), *(DATA / "pickles").glob("*.pkl")]:
        with open(path, "rb") as f:
            while f.read(16 * MIB):
                pass
    return [(str(DATA / f"shard-{k}.npy"), PER_SHARD) for k in range(SHARDS)]


def _record(name: str, params: dict, figures: dict) -> dict:
    with open(RUNS, "a") as f:
        f.write(json.dumps({"name": name, **params, **figures}) + "\n")
    return figures


class PickleDataset(Dataset):
    """One pickle file per sample, unpickled on every read."""

    def __len__(self) -> int:
        return SHARDS * PER_SHARD

    def __getitem__(self, i: int) -> torch.Tensor:
        with open(DATA / "pickles" / f"{i}.pkl", "rb") as f:
            return torch.from_numpy(pickle.load(f))


class NaiveNpyDataset(Dataset):
    """``np.load(mmap_mode="r")`` of the sample's shard on every read."""

    def __init__(self, shards: list[tuple[str, int]]) -> None:
        self.shards = shards

    def __len__(self) -> int:
        return SHARDS * PER_SHARD

    def __getitem__(self, i: int) -> torch.Tensor:
        shard = np.load(self.shards[i // PER_SHARD][0], mmap_mode="r")
        return torch.from_numpy(np.array(shard[i % PER_SHARD]))


def memcpy(timer, num_workers: int) -> dict:
    shards = _data()
    src = torch.from_numpy(np.concatenate([np.load(p) for p, _ in shards]))  # (256, 512, 512)
    dst = torch.empty((BATCH, *SAMPLE))
    dst.fill_(0)  # touch every page before timing
    cpu0 = time.process_time()
    timer.start()
    for b in range(0, len(src), BATCH):
        dst.copy_(src[b : b + BATCH])
    timer.stop()
    return _figures("memcpy bound", num_workers, timer, len(src), cpu0)


def throughput(timer, fmt: str, num_workers: int) -> dict:
    shards = _data()
    if fmt == "pickle":
        dataset, collate = PickleDataset(), default_collate
    elif fmt == "npy":
        dataset, collate = NaiveNpyDataset(shards), default_collate
    else:
        dataset, collate = SnapshotDataset(Snapshot(0, tuple(shards))), collate_batch
    loader = DataLoader(
        dataset,
        batch_size=BATCH,
        num_workers=num_workers,
        collate_fn=collate,
        persistent_workers=num_workers > 0,
    )
    for _ in loader:  # warm-up epoch: workers started, memory maps opened
        pass
    cpu0 = time.process_time()
    timer.start()
    n = sum(len(batch) for batch in loader)
    timer.stop()
    name = {"pickle": "one pickle per sample", "npy": "naive npy", "ours": "distsampling"}[fmt]
    return _figures(name, num_workers, timer, n, cpu0)


def _figures(name: str, num_workers: int, timer, samples: int, cpu0: float) -> dict:
    wall = timer.t_end - timer.t0
    figures = {
        "MB/s": samples * MIB / 1e6 / wall,
        "main_cpu_%": 100 * (time.process_time() - cpu0) / wall,
    }
    return _record(name, {"num_workers": num_workers}, figures)


def stall(timer, prefetch: bool, step_s: float) -> dict:
    shards = _data()

    def make_loader(epoch: int) -> DataLoader:
        snapshot = Snapshot(epoch, tuple(shards[: 6 + epoch]))  # the cache grows by one shard
        return DataLoader(
            SnapshotDataset(snapshot), batch_size=BATCH, num_workers=2, collate_fn=collate_batch
        )

    if prefetch:
        epochs = prefetch_epochs(make_loader, range(3))  # lead=2 batches
    else:  # the plain loop: a new loader once the epoch has ended
        epochs = ((epoch, make_loader(epoch)) for epoch in range(3))
    arrivals: list[tuple[int, int, float]] = []  # (epoch, batch, when it reached the loop)
    timer.start()
    for epoch, batches in epochs:
        for b, _batch in enumerate(batches):
            arrivals.append((epoch, b, time.perf_counter()))
            time.sleep(step_s)  # the training step
    timer.stop()
    # the interval from each batch to the next; the boundary ones end at a first batch
    intervals = [(e, b, t1 - t0) for (_, _, t0), (e, b, t1) in itertools.pairwise(arrivals)]
    boundary = statistics.mean(dt for e, b, dt in intervals if b == 0)
    batch_s = statistics.median(dt for e, b, dt in intervals if b > 0)
    stall_s = boundary - batch_s  # what the boundary costs beyond a steady batch
    figures = {"batch_s": batch_s, "boundary_s": boundary, "stall_s": stall_s}
    figures["stall_%"] = 100 * stall_s / batch_s
    name = "prefetch_epochs" if prefetch else "rebuild after the epoch"
    return _record(name, {"step_s": step_s}, figures)


def _medians() -> dict:
    """The medians of the logged runs, by contender and num_workers (or by contender)."""
    runs: dict = {}
    for line in RUNS.read_text().splitlines():
        run = json.loads(line)
        key = str(run.get("num_workers", "stall"))
        runs.setdefault(run["name"], {}).setdefault(key, []).append(run)
    return {
        name: {
            key: {f: statistics.median(r[f] for r in rs) for f in rs[0] if f not in ("name",)}
            for key, rs in by_key.items()
        }
        for name, by_key in runs.items()
    }


def suite(large: bool):
    DATA.mkdir(parents=True, exist_ok=True)
    RUNS.unlink(missing_ok=True)
    for num_workers in (0, 1, 2):
        yield Comparison(
            title=f"1 MiB float32 samples, batch 32, warm cache, num_workers={num_workers}",
            contenders={
                "memcpy bound": "bench_growing:memcpy",
                "one pickle per sample": "bench_growing:throughput_pickle",
                "naive npy + default_collate": "bench_growing:throughput_npy",
                "distsampling": "bench_growing:throughput_ours",
            },
            baseline="memcpy bound",
            params={"num_workers": num_workers},
            note="MB/s ratios are the share of the memcpy bound",
        )
    yield Comparison(
        title="Epoch-boundary stall, 2 workers, a 100 ms step, 3 epochs over a growing snapshot",
        contenders={
            "rebuild after the epoch": "bench_growing:stall_rebuild",
            "prefetch_epochs": "bench_growing:stall_prefetch",
        },
        baseline="rebuild after the epoch",
        params={"step_s": 0.1},
    )
    # every comparison has run (the caller asks for the next one only after reporting the last)
    out = ROOT / "benchmarks" / "results" / "growing.json"
    out.write_text(json.dumps({"cpus": os.cpu_count(), "medians": _medians()}, indent=1) + "\n")


def throughput_pickle(timer, num_workers: int) -> dict:
    return throughput(timer, "pickle", num_workers)


def throughput_npy(timer, num_workers: int) -> dict:
    return throughput(timer, "npy", num_workers)


def throughput_ours(timer, num_workers: int) -> dict:
    return throughput(timer, "ours", num_workers)


def stall_rebuild(timer, step_s: float) -> dict:
    return stall(timer, False, step_s)


def stall_prefetch(timer, step_s: float) -> dict:
    return stall(timer, True, step_s)
