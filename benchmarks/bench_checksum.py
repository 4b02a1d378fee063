"""What the shards' crc32 costs: reading an epoch's shards with and without the check.

A training process opens each shard of a snapshot once and reads every byte of it (one epoch).
Both contenders do exactly that over the same cache: ``Snapshot.load(k)`` for every shard, then
one copy of its samples into a reused buffer (the bytes a training step consumes). ``verify``
adds the crc32 of every shard at open (``zlib.crc32`` over the memory map, the check
:class:`~distsampling.SnapshotDataset` runs once per shard and process): every round forgets
which shards it checked, as the new worker processes of a new epoch do. The page cache is warm,
so the figure is the check's CPU cost against the copy that any reader pays, not disk time.

Each run reads the epoch ``ROUNDS`` times; ``epoch_s`` is the median round, ``epoch_min_s`` and
``epoch_max_s`` the fastest and slowest: their ratios are the spread of the cost.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time

import numpy as np

from distsampling import ShardCache
from distsampling.growing import snapshot as snapshot_module

from ._harness import Comparison

ROUNDS = 7
ROOT = "/dev/shm" if os.path.isdir("/dev/shm") else None  # shards in RAM: no disk time


def read_epoch(timer, shard_mib: int, shards: int, verify: bool) -> dict:
    """Write ``shards`` shards of ``shard_mib`` MiB, then time reading every byte of them."""
    with tempfile.TemporaryDirectory(dir=ROOT) as root:
        rows = shard_mib * 256  # rows of 4 KiB: 1024 float32 each
        cache = ShardCache(root, capacity_bytes=(shards + 1) * (shard_mib + 1) << 20)
        rng = np.random.default_rng(0)
        for _ in range(shards):
            cache.add(rng.standard_normal((rows, 1024), dtype=np.float32))
        snap = cache.snapshot(0, verify=verify)
        out = np.empty((rows, 1024), np.float32)  # (rows, 1024) the reused batch buffer
        for k in range(shards):  # warm the page cache, untimed
            out[:] = snap.load(k)
        rounds = []
        timer.start()
        for _ in range(ROUNDS):
            snapshot_module._VERIFIED.clear()  # as a new worker process of a new epoch does
            t0 = time.perf_counter()
            for k in range(shards):
                out[:] = snap.load(k)  # open (and check), then read every byte once
            rounds.append(time.perf_counter() - t0)
        timer.stop()
    epoch = statistics.median(rounds)
    return {
        "epoch_s": epoch,
        "epoch_min_s": min(rounds),
        "epoch_max_s": max(rounds),
        "GB/s": shards * shard_mib * 2**20 / epoch / 1e9,
    }


def plain(timer, shard_mib: int, shards: int) -> dict:
    return read_epoch(timer, shard_mib, shards, verify=False)


def verified(timer, shard_mib: int, shards: int) -> dict:
    return read_epoch(timer, shard_mib, shards, verify=True)


def suite(large: bool) -> list[Comparison]:
    sizes = [(8, 8), (32, 4)] + ([(128, 4)] if large else [])  # (MiB per shard, shards)
    return [
        Comparison(
            title=f"Reading {shards} shards of {mib} MiB once (warm page cache), crc32 checked "
            "at open or not",
            contenders={
                "no verify": "bench_checksum:plain",
                "verify (crc32)": "bench_checksum:verified",
            },
            baseline="no verify",
            params={"shard_mib": mib, "shards": shards},
            note=f"median, fastest and slowest of {ROUNDS} epochs per run",
        )
        for mib, shards in sizes
    ]
