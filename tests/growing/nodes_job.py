"""What every rank of the 2-node torchrun test runs (imported by the ranks by name).

:func:`train_on_nodes` first runs the sampler harness (tests/worlds.py) on the whole world, then
trains a few epochs of a growing dataset with :class:`~distsampling.NodeFeed`: each node has its
own cache directory and producer, node 1's producer is throttled so that the nodes' snapshots
differ in length. Every rank records what it read; rank 0 returns everything, gathered.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np
import torch.distributed as dist

import worlds
from distsampling import NodeFeed, SnapshotDataset
from distsampling.growing.nodes import node_topology

BATCH = 3
#: node 1 reads at most this many bytes per second (a sample is 12 bytes): a slower node
SLOW_BANDWIDTH = 600.0


def train_on_nodes(
    remote: str, cache_root: str, epochs: int, scenarios: list[str], scenario_epochs: int
) -> dict[str, Any] | None:
    """On every rank: the harness scenarios, then ``epochs`` epochs of a NodeFeed; rank 0 returns all.

    The feed is opened first, so that the producers (new processes) start while the scenarios run.
    """
    out: dict[str, Any] = {}
    node, nodes, local_rank, local_world = node_topology()
    cache_dir = os.path.join(cache_root, f"node{node}")
    producer_options = {"bandwidth": SLOW_BANDWIDTH} if node == 1 else {}
    records = []
    with NodeFeed(
        remote,
        cache_dir,
        capacity_bytes=40 * (128 + 4 * 12),  # 40 shards of 4 samples of 3 int32
        samples_per_shard=4,
        batch_size=BATCH,
        seed=11,
        producer_options=producer_options,
    ) as feed:
        out["scenarios"] = worlds.gather_scenarios(scenarios, scenario_epochs)
        for epoch in range(epochs):
            loader = feed.loader(epoch)
            indices = list(loader.sampler)
            batches = [batch.numpy() for batch in loader]
            snapshot = feed.cache.snapshot(epoch)
            samples = np.concatenate(batches) if batches else np.empty((0, 3), np.int32)
            expected = SnapshotDataset(snapshot).__getitems__(indices).numpy()
            records.append(
                {
                    "rank": dist.get_rank(),
                    "node": node,
                    "nodes": nodes,
                    "local_rank": local_rank,
                    "local_world": local_world,
                    "cache": cache_dir,
                    "epoch": epoch,
                    "shards": [os.path.basename(p) for p, _ in snapshot.shards],
                    "length": len(snapshot),
                    "m": feed.samples_per_rank,
                    "indices": indices,
                    "steps": len(batches),
                    "samples": samples.tolist(),
                    "as_in_snapshot": bool(np.array_equal(samples, expected)),
                }
            )
            feed.end_epoch(epoch)
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, records)
    out["records"] = gathered
    return out if dist.get_rank() == 0 else None


def start_over(remote: str, cache_root: str) -> str:
    """On every rank: construct a NodeFeed over ``remote``; return the error this rank got."""
    try:
        NodeFeed(remote, cache_root, capacity_bytes=1 << 20, samples_per_shard=4, batch_size=2)
    except Exception as err:
        return f"{type(err).__name__}: {err}"
    return "no error"
