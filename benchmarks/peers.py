"""SnapshotDataset against the loaders a user would pick instead: LitData and MosaicML streaming.

``make bench-peers`` runs this in a venv of its own (``.venv-peers``: the peers pin their own
dependencies, and installed plainly they would pull a CUDA torch). The same 1024 samples of
1 MiB float32 as ``bench_growing`` (its ``.npy`` shards, written once), also written as LitData
``optimize()`` chunks and MosaicML ``MDSWriter`` shards (raw float32 columns, no compression),
then read by each library's own ``StreamingDataset`` through a DataLoader: batch 32,
``num_workers`` 0 and 2 (persistent), warm page cache, in order and shuffled (ours: a
``DistributedSampler`` order; the peers: their own ``shuffle=True``). The training loop copies
every batch out (it reads every byte).

The bytes are checked, not assumed: each contender's warm-up epoch must deliver every sample
exactly once (a row is known by its first 16 bytes) and the CRC-32 of every 16th sample must
equal the ``.npy`` row's; a contender that fails raises instead of reporting a speed.

Prints a table (median, min-max, load) and the ratios ``distsampling / peer``; writes
``benchmarks/results/peers.{md,json}``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import types
import zlib
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from distsampling import DistributedSampler, SnapshotDataset, collate_batch
from distsampling.growing.snapshot import Snapshot

from . import bench_growing as growing
from ._harness import ROOT, Comparison, measure

PEERS = growing.DATA / "peers"
SAMPLES, BATCH, MIB = growing.SAMPLES, growing.BATCH, growing.MIB


def _streaming():
    """Import MosaicML streaming.

    Its package ``__init__`` imports ``streaming.vision`` (torchvision datasets), which this
    benchmark does not use. Where torchvision cannot load (pip finds only CUDA builds of it for
    a CPU torch, offline), that one subpackage is left out as an empty module.
    """
    try:
        import torchvision  # noqa: F401
    except Exception:  # e.g. RuntimeError: operator torchvision::nms does not exist
        for name in [m for m in sys.modules if m.startswith("torchvision")]:
            del sys.modules[name]
        sys.modules.setdefault("streaming.vision", types.ModuleType("streaming.vision"))
    import streaming

    return streaming


def _model() -> np.ndarray:
    """All samples, (SAMPLES, 512, 512) float32, memory-mapped from the bench's shards."""
    return np.concatenate([np.load(p, mmap_mode="r") for p, _ in growing._data()])


def _litdata_dir() -> str:
    out = PEERS / "litdata"
    if not (out / "index.json").exists():
        import litdata

        litdata.optimize(
            fn=_row, inputs=list(range(SAMPLES)), output_dir=str(out), chunk_bytes="64MB",
            num_workers=1, mode="overwrite",
        )  # fmt: skip
    return str(out)


def _row(i: int) -> np.ndarray:
    """One sample, for LitData's optimize (which calls it once per input, in a worker)."""
    shard, row = divmod(i, growing.PER_SHARD)
    return np.array(np.load(growing.DATA / f"shard-{shard}.npy", mmap_mode="r")[row])


def _mds_dir() -> str:
    out = PEERS / "mds"
    if not (out / "index.json").exists():
        model = _model()
        columns = {"x": "ndarray:float32:" + ",".join(map(str, growing.SAMPLE))}
        with _streaming().MDSWriter(out=str(out), columns=columns, size_limit=1 << 26) as writer:
            for i in range(SAMPLES):
                writer.write({"x": np.array(model[i])})
    return str(out)


def _loader(name: str, num_workers: int, order: str) -> tuple[DataLoader, object]:
    """``(loader, sampler or None)`` for one contender; every loader yields (B, 512, 512)."""
    shuffle = order == "shuffled"
    if name == "distsampling":
        dataset = SnapshotDataset(Snapshot(0, tuple(growing._data())))
        sampler = DistributedSampler(dataset, 1, 0, shuffle=True) if shuffle else None
        loader = DataLoader(
            dataset, BATCH, sampler=sampler, num_workers=num_workers, collate_fn=collate_batch,
            persistent_workers=num_workers > 0,
        )  # fmt: skip
        return loader, sampler
    if name == "LitData":
        import litdata

        dataset = litdata.StreamingDataset(_litdata_dir(), shuffle=shuffle)
        loader = litdata.StreamingDataLoader(
            dataset, batch_size=BATCH, num_workers=num_workers, persistent_workers=num_workers > 0
        )
        return loader, None
    streaming = _streaming()
    from streaming.base.util import clean_stale_shared_memory

    clean_stale_shared_memory()  # a killed run leaves its shared memory behind
    dataset = streaming.StreamingDataset(local=_mds_dir(), shuffle=shuffle, batch_size=BATCH)
    loader = DataLoader(
        dataset, BATCH, num_workers=num_workers, collate_fn=lambda rows: _stack(rows, "x"),
        persistent_workers=num_workers > 0,
    )  # fmt: skip
    return loader, None


def _stack(rows: list[dict], key: str) -> torch.Tensor:
    return torch.from_numpy(np.stack([r[key] for r in rows]))


def _as_batch(batch: object) -> torch.Tensor:
    return torch.as_tensor(batch) if not isinstance(batch, torch.Tensor) else batch


def _checked_epoch(name: str, loader: DataLoader, out: torch.Tensor) -> None:
    """Read one epoch; every sample exactly once (known by its first 16 bytes), and the CRC-32
    of every 16th sample equal to the model's; else AssertionError naming the contender."""
    model = _model()
    heads = {model[i].reshape(-1)[:4].tobytes(): i for i in range(SAMPLES)}  # 16 bytes -> index
    got = []
    for batch in loader:
        batch = _as_batch(batch)
        growing.copy_out(out, batch)  # every page touched, as in the timed epoch
        for row in batch:
            i = heads.get(row.reshape(-1)[:4].numpy().tobytes(), -1)
            got.append(i)
            if i % 16 == 0 and zlib.crc32(row.numpy()) != zlib.crc32(model[i]):
                raise AssertionError(f"{name}: sample {i} arrived with other bytes")
    if sorted(got) != list(range(SAMPLES)):
        raise AssertionError(f"{name}: an epoch did not deliver every sample exactly once")


def read(timer, name: str, num_workers: int, order: str) -> dict:
    loader, sampler = _loader(name, num_workers, order)
    out = torch.empty((BATCH, *growing.SAMPLE))
    out.fill_(0)
    _checked_epoch(name, loader, out)  # the warm-up epoch, checked
    if sampler is not None:
        sampler.set_epoch(1)
    workers = growing.WorkerMemory(growing._worker_pids(loader))
    workers.start()
    cpu0 = time.process_time()
    timer.start()
    n = 0
    for batch in loader:  # the timed epoch: the loop reads every byte
        batch = _as_batch(batch)
        growing.copy_out(out, batch)
        n += len(batch)
    timer.stop()
    if n != SAMPLES:
        raise AssertionError(f"{name}: the timed epoch delivered {n} samples, not {SAMPLES}")
    return growing._figures(timer, n, cpu0, workers.stop())


def suite(repeats: int) -> list[tuple[Comparison, dict]]:
    out = []
    for num_workers in (0, 2):
        for order in ("sequential", "shuffled"):
            comparison = Comparison(
                title=f"{SAMPLES} x 1 MiB float32, batch {BATCH}, warm cache, {order}, "
                f"num_workers={num_workers}, the loop copies each batch out",
                contenders={
                    "memcpy bound": "bench_growing:memcpy",
                    "distsampling": "peers:read_ours",
                    "LitData": "peers:read_litdata",
                    "MosaicML streaming": "peers:read_mosaic",
                },
                baseline="memcpy bound",
                params={"num_workers": num_workers, "order": order},
                note="ratios: the share of the memcpy bound",
                columns=("MB/s", "main_cpu_%", "main_peak_MiB", "workers_peak_MiB"),
                ratios=("MB/s",),
            )
            out.append((comparison, measure(comparison, repeats)))
    return out


def read_ours(timer, num_workers: int, order: str) -> dict:
    return read(timer, "distsampling", num_workers, order)


def read_litdata(timer, num_workers: int, order: str) -> dict:
    return read(timer, "LitData", num_workers, order)


def read_mosaic(timer, num_workers: int, order: str) -> dict:
    return read(timer, "MosaicML streaming", num_workers, order)


def main() -> None:
    import platform

    from .__main__ import medians_by_params, report

    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    _litdata_dir(), _mds_dir()  # write the peers' formats once, before any timing
    machine = f"{platform.machine()}, torch {torch.__version__}, {os.cpu_count()} cores"
    sections = [
        f"_Measured by `make bench-peers` on {machine}; median (min – max) of {repeats} "
        "fresh-process runs; `load_1m`: the machine's load average after each run._\n"
    ]
    results = []
    for comparison, figures in suite(repeats):
        mbs = {label: f["MB/s"]["median"] for label, f in figures.items()}
        ratios = " · ".join(
            f"distsampling / {peer} = **{mbs['distsampling'] / mbs[peer]:.2f}x**"
            for peer in ("LitData", "MosaicML streaming", "memcpy bound")
        )
        text = report(comparison, figures) + "\n" + ratios + "\n"
        print(text, flush=True)
        sections.append(text)
        results.append({"title": comparison.title, "params": comparison.params, "figures": figures})
    results_dir = ROOT / "benchmarks" / "results"
    Path(results_dir / "peers.md").write_text("\n".join(sections))
    summary = {"machine": machine, "repeats": repeats, "comparisons": results}
    summary["medians"] = medians_by_params(results)  # what the docs quote (docs/hooks/figures.py)
    Path(results_dir / "peers.json").write_text(json.dumps(summary, indent=1) + "\n")


if __name__ == "__main__":
    main()
