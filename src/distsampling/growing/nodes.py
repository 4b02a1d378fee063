r"""NodeFeed: a growing dataset on many nodes: one producer and one cache per node, equal steps.

The design, and why:

- **One producer per node**, started by local rank 0, writes into a **cache on the node's local
  disk**, which the node's ranks share (``ShardCache`` needs a working ``flock``: one machine).
  The node's ranks then agree on the epoch's snapshot through the cache's manifest, with no
  network traffic for data.
- **Disjoint parts of the remote**: node ``k`` of ``N`` samples only files ``k, k + N, ...``
  (``part=(k, N)``, seed ``seed + k``). So two nodes never train on the same sample, whatever
  their producers draw, and a node's data is the same whichever rank asks for it.
- **Per-epoch agreement**: the nodes' caches grow at their own pace (network, disk, start time),
  so their snapshots differ in length. If each node split its own snapshot, ranks would run
  different numbers of steps and DDP's gradient all-reduce would hang at the first missing one.
  At the start of an epoch, local rank 0 waits until its cache holds ``min_samples``, freezes
  the node's snapshot, and every rank joins one ``all_gather_object`` of (node, snapshot
  length, error). Every rank then reads ``m = min over nodes of len(snapshot) // ranks per
  node`` samples: the same number of batches everywhere. The node's ranks split its shuffled
  snapshot with :class:`~distsampling.DistributedSampler` (``num_replicas`` = ranks per node,
  ``rank`` = local rank, ``drop_last=True``) and each keeps its first ``m``: disjoint within
  the node. A faster node's other samples wait in its cache for a later epoch.
- **What an epoch means across nodes**: epoch ``e`` is one pass in which every rank reads ``m_e``
  samples of its node's snapshot ``e``: ``world_size * m_e`` distinct samples, drawn uniformly
  from what every node had cached when the epoch began. It is not a pass over the remote store.
- **Errors reach every rank**: a producer that failed (storage down past its ``deadline``, a full
  disk) or was killed (SIGKILL, the out-of-memory killer: at any instant, it leaves no lock held)
  or a cache that stays too small past ``wait_timeout`` is reported in the same gather, so
  every rank raises ``RuntimeError`` with the reason (the URL, the signal) instead of hanging.
- **end_epoch after a barrier**: once every rank has read its batches, a barrier, then local
  rank 0 unpins the epoch's snapshot (its evicted shards may be deleted).

References:
    torch/distributed/run.py (torchrun's ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``, ``GROUP_RANK``);
    torch/nn/parallel/distributed.py (DDP: every rank must run the same number of steps).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Sampler

from .._checks import check_int
from ..distributed import DistributedSampler
from .cache import ShardCache
from .dataset import SnapshotDataset, collate_batch
from .producer import Producer

__all__ = ["FirstOf", "NodeFeed", "node_topology"]


def node_topology() -> tuple[int, int, int, int]:
    r"""Return ``(node, nodes, local_rank, local_world)`` of this process, as torchrun set them.

    Reads ``GROUP_RANK`` (the node), ``LOCAL_RANK`` and ``LOCAL_WORLD_SIZE`` from the environment
    and checks them against the default process group: ``rank == node * local_world +
    local_rank`` (torchrun's numbering with the same ``--nproc-per-node`` on every node). Without
    an initialised group: ``(0, 1, 0, 1)``.

    Examples:
        >>> node_topology()  # one process, no process group
        (0, 1, 0, 1)
    """
    if not (dist.is_available() and dist.is_initialized()):
        return 0, 1, 0, 1
    rank, world = dist.get_rank(), dist.get_world_size()
    try:
        local_rank, local_world = int(os.environ["LOCAL_RANK"]), int(os.environ["LOCAL_WORLD_SIZE"])
    except (KeyError, ValueError) as err:
        raise RuntimeError(
            "LOCAL_RANK and LOCAL_WORLD_SIZE should be set (torchrun sets them on every rank), "
            f"but got LOCAL_RANK={os.environ.get('LOCAL_RANK')!r}, "
            f"LOCAL_WORLD_SIZE={os.environ.get('LOCAL_WORLD_SIZE')!r}"
        ) from err
    node = int(os.environ.get("GROUP_RANK", rank // max(local_world, 1)))
    if world % local_world or rank != node * local_world + local_rank:
        raise RuntimeError(
            "ranks should be numbered node * LOCAL_WORLD_SIZE + LOCAL_RANK with the same "
            f"LOCAL_WORLD_SIZE on every node, but got RANK={rank}, WORLD_SIZE={world}, "
            f"GROUP_RANK={node}, LOCAL_RANK={local_rank}, LOCAL_WORLD_SIZE={local_world}"
        )
    return node, world // local_world, local_rank, local_world


class FirstOf(Sampler[int]):
    r"""The first ``n`` indices of a sampler's epoch; ``set_epoch`` goes to the sampler.

    Args:
        sampler: a sampler yielding at least ``n`` indices.
        n: how many to keep (``>= 0``).

    Examples:
        >>> list(FirstOf(DistributedSampler(range(10), 2, 1, shuffle=False), 3))
        [1, 3, 5]
    """

    def __init__(self, sampler: Sampler[int], n: int) -> None:
        self.sampler, self.n = sampler, check_int("n", n, low=0, high=len(sampler))

    def __iter__(self) -> Iterator[int]:
        return itertools.islice(self.sampler, self.n)

    def __len__(self) -> int:
        return self.n

    def set_epoch(self, epoch: int) -> None:
        self.sampler.set_epoch(epoch)


class NodeFeed:
    r"""Per-epoch plumbing of a growing dataset on every rank of every node (see the module).

    Every rank constructs it with the same arguments (``cache_dir`` is a path on the node's local
    disk) and calls :meth:`epoch` (or :meth:`loader` then :meth:`end_epoch`) for every epoch, in
    order, consuming every batch. Local rank 0 runs the node's :class:`Producer`.

    Args:
        source: the remote store: a directory of ``.npy`` files or an fsspec URL (``s3://...``).
        cache_dir: the node-local cache directory (created if missing).
        capacity_bytes: the cache's capacity.
        samples_per_shard: samples per shard the producer writes.
        batch_size: the DataLoader's batch size.
        seed: base seed: producers use ``seed + node``, the samplers ``seed``.
        min_samples: samples each node's cache must hold before an epoch starts (default: one
            batch per local rank).
        wait_timeout: seconds to wait for ``min_samples`` before every rank raises.
        loader_options: more DataLoader arguments (``num_workers``, ``pin_memory``, ...).
        producer_options: more :class:`Producer` arguments (``bandwidth``, ``storage_options``,
            ``deadline``, ``context``, ...).

    Examples:
        >>> import tempfile
        >>> import numpy as np
        >>> remote, local = tempfile.mkdtemp(), tempfile.mkdtemp()
        >>> np.save(f"{remote}/a.npy", np.arange(40, dtype=np.float32).reshape(20, 2))
        >>> with NodeFeed(remote, local, capacity_bytes=1 << 20, samples_per_shard=4,
        ...               batch_size=4, min_samples=8) as feed:
        ...     steps = [len(list(feed.epoch(e))) for e in range(2)]
        >>> steps[0] >= 2 and steps[1] >= steps[0]  # one process: it reads its whole snapshot
        True
    """

    def __init__(
        self,
        source: str | os.PathLike,
        cache_dir: str | os.PathLike,
        *,
        capacity_bytes: int,
        samples_per_shard: int,
        batch_size: int,
        seed: int = 0,
        min_samples: int | None = None,
        wait_timeout: float = 600.0,
        loader_options: dict[str, Any] | None = None,
        producer_options: dict[str, Any] | None = None,
    ) -> None:
        self.node, self.nodes, self.local_rank, self.local_world = node_topology()
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.seed = check_int("seed", seed, low=0)
        low = self.local_world  # every local rank reads at least one sample
        self.min_samples = check_int(
            "min_samples",
            self.local_world * batch_size if min_samples is None else min_samples,
            low=low,
        )
        if not isinstance(wait_timeout, int | float) or not 0 < wait_timeout < float("inf"):
            raise ValueError(
                f"wait_timeout should be a positive finite number of seconds, but got "
                f"wait_timeout={wait_timeout!r}"
            )
        self.wait_timeout = float(wait_timeout)
        self.loader_options = {"collate_fn": collate_batch, **(loader_options or {})}
        os.makedirs(cache_dir, exist_ok=True)
        self.cache = ShardCache(cache_dir, capacity_bytes)
        self.producer: Producer | None = None
        failure: Exception | None = None
        if self.local_rank == 0:  # one producer per node, on the node's part of the remote
            try:
                self.producer = Producer(
                    source,
                    self.cache,
                    samples_per_shard=samples_per_shard,
                    seed=self.seed + self.node,
                    part=(self.node, self.nodes),
                    **(producer_options or {}),
                )
            except Exception as err:
                failure = err
        # every rank learns whether every node's producer started (no rank waits for a dead one)
        failed = [
            f"node {node}: {err}"
            for node, err in _gather((self.node, None if failure is None else repr(failure)))
            if err is not None
        ]
        if failure is not None:
            raise failure
        if failed:
            self.close()
            raise RuntimeError("a node's producer could not start:\n" + "\n".join(failed))
        self.samples_per_rank: int | None = None  # m of the last epoch started

    # --- one epoch ------------------------------------------------------------------------------

    def loader(self, epoch: int) -> DataLoader:
        """Agree with every rank on epoch ``epoch``'s size; return this rank's DataLoader."""
        epoch = check_int("epoch", epoch, low=0)
        error, count = None, None
        if self.local_rank == 0:  # the node's snapshot is frozen before anyone else asks
            error = self._wait_for_data()
            if error is None:
                count = len(self.cache.snapshot(epoch))
        reports = _gather((self.node, count, error))  # [(node, length, error)] over all ranks
        failed = [f"node {node}: {err}" for node, _, err in reports if err is not None]
        if failed:
            raise RuntimeError(f"epoch {epoch} cannot start on every rank:\n" + "\n".join(failed))
        lengths = {node: n for node, n, _ in reports if n is not None}  # node -> snapshot length
        self.samples_per_rank = m = min(lengths.values()) // self.local_world
        dataset = SnapshotDataset(self.cache.snapshot(epoch))  # the frozen one: same on the node
        split = DistributedSampler(
            dataset, self.local_world, self.local_rank, seed=self.seed, drop_last=True
        )
        sampler = FirstOf(split, m)  # the same m on every rank: the same number of batches
        sampler.set_epoch(epoch)
        return DataLoader(
            dataset, batch_size=self.batch_size, sampler=sampler, **self.loader_options
        )

    def end_epoch(self, epoch: int) -> None:
        """Wait for every rank (a barrier), then unpin epoch ``epoch``'s snapshot on the node."""
        if dist.is_available() and dist.is_initialized():
            dist.barrier()
        if self.local_rank == 0:
            self.cache.end_epoch(epoch)

    def epoch(self, epoch: int) -> Iterator[torch.Tensor]:
        """This rank's batches of epoch ``epoch``; ends the epoch once they are consumed."""
        yield from self.loader(epoch)
        self.end_epoch(epoch)

    def _wait_for_data(self) -> str | None:
        """Local rank 0: wait until the cache holds ``min_samples``; the reason if it cannot."""
        deadline = time.monotonic() + self.wait_timeout
        while True:
            try:
                self.producer.check()  # a failed producer: its traceback, with the URL
            except RuntimeError as err:
                return str(err)
            held = sum(n for _, n in self.cache.shards())
            if held >= self.min_samples:
                return None
            if time.monotonic() > deadline:
                return (
                    f"the cache {self.cache.root} holds {held} samples after {self.wait_timeout} "
                    f"s, fewer than min_samples={self.min_samples} (the producer wrote "
                    f"{self.producer.written} shards): is the storage slow or down?"
                )
            time.sleep(0.02)

    # --- life cycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the node's producer (local rank 0); raise its error if it failed or was killed."""
        if self.producer is not None:
            producer, self.producer = self.producer, None
            producer.stop()

    def __enter__(self) -> NodeFeed:
        return self

    def __exit__(self, exc_type: object, *exc: object) -> None:
        if exc_type is None:
            self.close()
        else:  # already failing: stop the producer, keep the first error
            with contextlib.suppress(RuntimeError):
                self.close()


def _gather(item: Any) -> list[Any]:
    """``item`` from every rank, in rank order (``[item]`` without a process group)."""
    if not (dist.is_available() and dist.is_initialized()):
        return [item]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, item)
    return out
