"""SnapshotDataset: MB/s of 1 MiB float32 samples, and the stall at an epoch boundary.

Throughput: 1024 samples of 1 MiB (32 shards of 32, 1 GiB), batch 32, warm page cache,
``num_workers`` 0 and 2 (persistent; the first epoch warms the workers up, the second is
timed), read in order (sequential) or in a shuffled ``DistributedSampler`` order (each batch
then spans many shards). The training loop copies every batch into a buffer of its own, so it
reads every byte, with one memcpy on one thread (:func:`copy_out`), as a copy to a GPU is one
stream of the training process. Contenders:

- memcpy bound: copying the same bytes batch by batch between two tensors, in this process, with
  torch's ``copy_`` on every core (what the machine can copy at most);
- distsampling: :class:`~distsampling.SnapshotDataset` (``__getitems__``: one copy per run of
  rows, ``os.preadv`` into a reused shared-memory buffer in a worker) +
  :func:`~distsampling.collate_batch`; the same with ``buffers=0`` (a fresh block per batch); and,
  with workers, the same with a loop that copies with torch's ``copy_`` on every core, which then
  competes with the workers for the cores;
- naive npy: ``np.load(shard, mmap_mode="r")[row]`` per sample + ``default_collate``;
- one pickle per sample: ``pickle.load`` of one file per sample + ``default_collate``.

``main_cpu_%`` is the CPU time the training process spent, as a share of the wall time;
``main_peak_MiB`` and ``workers_peak_MiB`` the peak resident-set growth over the timed epoch of
the training process and of its workers (summed).

Epoch-boundary stall: 3 epochs over a growing snapshot (6, 7, 8 shards of 32 MiB), 2 workers, a
training step of 100 ms (a sleep, like a step waiting on the GPU: 32 MiB per 100 ms is the
user's 300-600 MB/s). ``batch_s`` is the median interval between two
batches of one epoch, ``boundary_s`` the mean interval from the last batch of an epoch to the
first of the next, and ``stall_s = boundary_s - batch_s`` what a boundary costs beyond a steady
batch; the loader is rebuilt after each epoch (the plain loop) or by
:func:`~distsampling.prefetch_epochs` (``lead=2``).

``python -m benchmarks growing`` writes ``benchmarks/results/growing.{md,json}``;
``docs/pictures/growing.py`` draws the JSON. The peers (LitData, MosaicML streaming) are
measured by ``make bench-peers`` (``benchmarks/peers.py``), in a venv of their own.
"""

from __future__ import annotations

import itertools
import pickle
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset, default_collate

from distsampling import DistributedSampler, SnapshotDataset, collate_batch, prefetch_epochs
from distsampling.growing.snapshot import Snapshot

from ._harness import Comparison

DATA = Path("/tmp/distsampling-bench-growing")
SAMPLE = (512, 512)  # float32: 1 MiB
SHARDS, PER_SHARD, BATCH = 32, 32, 32
SAMPLES = SHARDS * PER_SHARD  # 1 GiB
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


def _worker_pids(loader: DataLoader) -> list[int]:
    """The pids of a persistent loader's workers (``_iterator._workers``: private torch API)."""
    iterator = getattr(loader, "_iterator", None)
    return [w.pid for w in getattr(iterator, "_workers", [])]


class WorkerMemory:
    """Peak resident-set growth of other processes (the loader's workers), summed, in MiB.

    As :class:`~benchmarks._harness.Timer` does for this process: ``start`` resets each
    worker's peak (``/proc/<pid>/clear_refs``) and notes its resident size, ``stop`` reads
    the peaks (``VmHWM``) back. Shared pages a worker touches count as its own.
    """

    def __init__(self, pids: list[int]) -> None:
        self.pids, self.rss0 = pids, {}

    def start(self) -> None:
        for pid in self.pids:
            Path(f"/proc/{pid}/clear_refs").write_text("5")
            self.rss0[pid] = _status_kib(pid, "VmRSS")

    def stop(self) -> float:
        return sum(max(_status_kib(p, "VmHWM") - self.rss0[p], 0) for p in self.pids) / 1024


def _status_kib(pid: int, key: str) -> int:
    text = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in text.splitlines() if line.startswith(key)))


def memcpy(timer, num_workers: int, order: str) -> dict:
    """The bound: the same bytes, batch by batch, copied into a buffer this process reuses."""
    shards = _data()
    src = torch.from_numpy(np.concatenate([np.load(p) for p, _ in shards]))  # (N, 512, 512)
    dst = torch.empty((BATCH, *SAMPLE))
    dst.fill_(0)  # touch every page before timing
    cpu0 = time.process_time()
    timer.start()
    for b in range(0, len(src), BATCH):
        dst.copy_(src[b : b + BATCH])
    timer.stop()
    return _figures(timer, len(src), cpu0, 0.0)


def copy_out(out: torch.Tensor, batch: torch.Tensor) -> None:
    """The training loop's read of a batch: one memcpy into its own buffer, on one thread."""
    np.copyto(out[: len(batch)].numpy(), batch.numpy())


def throughput(
    timer, fmt: str, num_workers: int, order: str, buffers: int = 4, threads: bool = False
) -> dict:
    """One epoch through a DataLoader, after a warm-up epoch, copying every batch out."""
    shards = _data()
    if fmt == "pickle":
        dataset, collate = PickleDataset(), default_collate
    elif fmt == "npy":
        dataset, collate = NaiveNpyDataset(shards), default_collate
    else:
        dataset = SnapshotDataset(Snapshot(0, tuple(shards)), buffers=buffers)
        collate = collate_batch
    sampler = None
    if order == "shuffled":  # a DistributedSampler order: each batch spans many shards
        sampler = DistributedSampler(dataset, num_replicas=1, rank=0, shuffle=True)
    loader = DataLoader(
        dataset,
        batch_size=BATCH,
        sampler=sampler,
        num_workers=num_workers,
        collate_fn=collate,
        persistent_workers=num_workers > 0,
    )
    out = torch.empty((BATCH, *SAMPLE))
    out.fill_(0)  # the training loop's own buffer (e.g. a pinned staging buffer), touched once
    read = (lambda out, batch: out[: len(batch)].copy_(batch)) if threads else copy_out
    for batch in loader:  # warm-up epoch: workers started, files opened, buffers made
        read(out, batch)  # and their pages touched here, as in a steady epoch
    if sampler is not None:
        sampler.set_epoch(1)
    workers = WorkerMemory(_worker_pids(loader))
    workers.start()
    cpu0 = time.process_time()
    timer.start()
    n = 0
    for batch in loader:  # the training loop reads every byte of every batch
        read(out, batch)
        n += len(batch)
    timer.stop()
    return _figures(timer, n, cpu0, workers.stop())


def _figures(timer, samples: int, cpu0: float, workers_mib: float) -> dict:
    wall = timer.t_end - timer.t0
    return {
        "MB/s": samples * MIB / 1e6 / wall,
        "main_cpu_%": 100 * (time.process_time() - cpu0) / wall,
        "main_peak_MiB": timer.figures()["peak_MiB"],
        "workers_peak_MiB": workers_mib,
    }


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
    return figures


def suite(large: bool):
    DATA.mkdir(parents=True, exist_ok=True)
    for num_workers in (0, 2):
        for order in ("sequential", "shuffled"):
            contenders = {
                "memcpy bound": "bench_growing:memcpy",
                "distsampling": "bench_growing:throughput_ours",
                "distsampling, a fresh block per batch": "bench_growing:throughput_ours_unpooled",
            }
            if num_workers:  # the loop's copy_ on every core, against the workers
                contenders["distsampling, the loop copies on every core"] = (
                    "bench_growing:throughput_ours_threaded_loop"
                )
            if order == "sequential":  # the naive readers gain nothing from order: once
                contenders["naive npy + default_collate"] = "bench_growing:throughput_npy"
                contenders["one pickle per sample"] = "bench_growing:throughput_pickle"
            yield Comparison(
                title=f"{SAMPLES} x 1 MiB float32, batch {BATCH}, warm cache, {order}, "
                f"num_workers={num_workers}, the loop copies each batch out",
                contenders=contenders,
                baseline="memcpy bound",
                params={"num_workers": num_workers, "order": order},
                note="ratios: the share of the memcpy bound",
                columns=("MB/s", "main_cpu_%", "main_peak_MiB", "workers_peak_MiB"),
                ratios=("MB/s",),
            )
    yield Comparison(
        title="Epoch-boundary stall, 2 workers, a 100 ms step, 3 epochs over a growing snapshot",
        contenders={
            "rebuild after the epoch": "bench_growing:stall_rebuild",
            "prefetch_epochs": "bench_growing:stall_prefetch",
        },
        baseline="rebuild after the epoch",
        params={"step_s": 0.1},
        columns=("batch_s", "boundary_s", "stall_s"),
        ratios=(),
    )


def throughput_pickle(timer, num_workers: int, order: str) -> dict:
    return throughput(timer, "pickle", num_workers, order)


def throughput_npy(timer, num_workers: int, order: str) -> dict:
    return throughput(timer, "npy", num_workers, order)


def throughput_ours(timer, num_workers: int, order: str) -> dict:
    return throughput(timer, "ours", num_workers, order)


def throughput_ours_unpooled(timer, num_workers: int, order: str) -> dict:
    return throughput(timer, "ours", num_workers, order, buffers=0)


def throughput_ours_threaded_loop(timer, num_workers: int, order: str) -> dict:
    return throughput(timer, "ours", num_workers, order, threads=True)


def stall_rebuild(timer, step_s: float) -> dict:
    return stall(timer, False, step_s)


def stall_prefetch(timer, step_s: float) -> dict:
    return stall(timer, True, step_s)
