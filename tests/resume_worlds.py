"""What each rank runs in the elastic-resume gloo tests of test_resume.py (imported by name).

A training loop in miniature: every rank reads ``steps`` batches of its
ResumableDistributedSampler, rank 0 writes the sampler's state as JSON (as a checkpoint would),
and every rank's indices are gathered on rank 0. The resumed world loads that file on every
rank and reads the rest of the epoch.
"""

from __future__ import annotations

import json
from typing import Any

import torch.distributed as dist

from distsampling import BatchSampler, ResumableDistributedSampler
from worlds import disturb_global_rngs


def _gather(indices: list[int]) -> list[list[int]] | None:
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, indices)
    return gathered if dist.get_rank() == 0 else None


def read_then_save(
    n: int, seed: int, epoch: int, steps: int, batch: int, path: str
) -> list[list[int]] | None:
    """Read ``steps`` batches, save rank 0's state to ``path``; rank 0 returns every rank's reads."""
    disturb_global_rngs(dist.get_rank())
    sampler = ResumableDistributedSampler(range(n), seed=seed)  # rank and world from the group
    sampler.set_epoch(epoch)
    batches = iter(BatchSampler(sampler, batch, drop_last=False))
    read = [i for _ in range(steps) for i in next(batches)]
    if dist.get_rank() == 0:
        with open(path, "w") as f:
            json.dump(sampler.state_dict(), f)
    dist.barrier()
    return _gather(read)


def resume_and_read(n: int, seed: int, path: str, batch: int) -> list[list[int]] | None:
    """Load the state on every rank of this (other-sized) world and read the rest of the epoch."""
    disturb_global_rngs(dist.get_rank())
    with open(path) as f:
        state = json.load(f)
    sampler = ResumableDistributedSampler(range(n), seed=seed)
    sampler.load_state_dict(state)
    sampler.set_epoch(state["epoch"])  # what the loop does on resume: the position survives
    read = [i for b in BatchSampler(sampler, batch, drop_last=False) for i in b]
    return _gather(read)
