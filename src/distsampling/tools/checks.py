r"""assert_rank_consistent: one collective call that proves every rank sees the same epoch.

Ranks never exchange indices: they agree on the split only because each computes the same
global epoch order from the same length, seed and epoch. When one of these differs, ranks
silently overlap and skip samples. This check gathers a small digest of each rank's view —
the sampler's length, dataset length, seed, epoch, flags, and a hash of the *global* epoch
order — compares them, and raises naming the ranks that differ and the likely cause:

- ``epoch`` differs: ``set_epoch`` was forgotten (or called with other values) on some rank;
- ``dataset_len`` differs: the dataset differs per rank (a file list read in another order,
  a filter that depends on the rank);
- ``seed`` differs: a seed derived from the rank or the clock;
- ``position`` differs: ranks resumed from different checkpoints (or one did not resume);
- only ``order`` differs: an inner sampler draws from a global RNG whose state differs per rank
  (an unseeded sampler under a distributed wrapper).

The check never changes what it checks: it reads each epoch through ``indices()`` or the
sampler's public fields, and a wrapper's inner epoch through the draw the wrapper keeps (the one
it will yield), never by iterating a sampler (that would advance its generator). A sampler with
none of these has its order left unchecked (``"order": None``). What must agree is compared; a
per-rank length that differs by design (:class:`~distsampling.UnpaddedDistributedSampler`,
``ceil((N - rank) / W)``; :class:`~distsampling.InferenceSampler`'s blocks) is not.

References:
    torch/utils/data/distributed.py (what every rank must agree on)
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch
import torch.distributed as dist

from .._split import epoch_permutation
from ..wrapper import DatasetFromSampler, yields_indices

__all__ = ["RankMismatchError", "assert_rank_consistent", "epoch_digest"]

_FIELDS = ("num_replicas", "seed", "epoch", "shuffle", "drop_last")
_POSITION_KEYS = ("start", "position", "iteration")  # in state_dict(), nested "sampler" too
_CAUSES = {  # field -> likely cause, in the order they are diagnosed
    "dataset_len": "the dataset has a different length on some ranks (build it the same way everywhere)",
    "epoch": "set_epoch(epoch) was not called on every rank (call it at the start of every epoch, before iterating)",
    "seed": "the seed differs per rank (pass the same seed=... on every rank, not one derived from the rank or clock)",
    "num_replicas": "ranks were built with different num_replicas",
    "position": "ranks resumed from different checkpoints (or some did not resume): load the same "
    "state_dict() on every rank, after set_epoch",
    "order": "the epoch order differs although length, seed and epoch agree: an inner sampler draws from a global RNG "
    "(np.random, random, torch's default generator) whose state differs per rank; give it its own seeded generator",
}


class RankMismatchError(RuntimeError):
    """Raised by :func:`assert_rank_consistent` when ranks disagree about the epoch."""


def _chain(sampler: Any) -> list[Any]:
    """The sampler and those it wraps, outermost first (``.sampler``, ``.batch_sampler``)."""
    out = []
    while sampler is not None and len(out) < 16:
        out.append(sampler)
        sampler = getattr(sampler, "sampler", getattr(sampler, "batch_sampler", None))
    return out


def _global_order(sampler: Any) -> torch.Tensor | None:
    # the order every rank must compute identically before taking its share; never iterated
    for s in _chain(sampler):
        if callable(getattr(s, "epoch_plan", None)):  # a plan of batches (TokenBudgetBatchSampler)
            return s.epoch_plan()
        if isinstance(getattr(s, "dataset", None), DatasetFromSampler):
            return s.dataset.indices  # a wrapper's inner epoch: the draw it keeps and yields
        if all(hasattr(s, a) for a in ("dataset", "seed", "epoch", "shuffle")):
            # a DistributedSampler (ours or torch's): the unpadded order all ranks take shares of
            n = len(s.dataset)
            return epoch_permutation(n, s.shuffle, s.seed, s.epoch)
        if yields_indices(s) and not hasattr(s, "sampler"):  # e.g. a weighted sampler: the
            return s.indices()  # epoch it yields (a wrapper's yields a share: its inner's next)
        if isinstance(s, (list, tuple, range)):  # a fixed sequence is its own epoch: no draw
            return torch.as_tensor(list(s))  # hashed as int64 whatever dtype it infers
    return None


def _position(sampler: Any) -> dict[str, int] | None:
    # the resume position fields of the outermost state_dict(), its nested sampler state too
    try:  # no state_dict (None is not callable) raises TypeError too
        state = getattr(sampler, "state_dict", None)()
    except TypeError:  # a sampler that cannot save its position (see its state_dict)
        return None
    out: dict[str, int] = {}
    while isinstance(state, dict):
        out.update({k: state[k] for k in _POSITION_KEYS if k in state and k not in out})
        state = state.get("sampler")
    return out or None


def epoch_digest(sampler: Any) -> dict[str, Any]:
    r"""This rank's view of the epoch: the fields every rank must share, and the order's hash.

    ``len`` and ``position`` are left out over a sampler whose ranks read different counts by
    design (``uneven_ranks = True``: :class:`~distsampling.UnpaddedDistributedSampler`,
    :class:`~distsampling.InferenceSampler`). Nothing is iterated or drawn anew.

    Examples:
        >>> from distsampling import ResumableDistributedSampler
        >>> d = epoch_digest(ResumableDistributedSampler(range(10), num_replicas=2, rank=1))
        >>> {k: d[k] for k in ("type", "dataset_len", "seed", "epoch", "position")}
        {'type': 'ResumableDistributedSampler', 'dataset_len': 10, 'seed': 0, 'epoch': 0, 'position': {'start': 0, 'position': 0}}
    """
    chain = _chain(sampler)
    unpadded = any(getattr(s, "uneven_ranks", False) for s in chain)  # unequal by design
    digest: dict[str, Any] = {"type": type(sampler).__name__}
    if not unpadded:  # equal counts on every rank: a rank with more batches hangs DDP
        digest["len"] = len(sampler)
    if hasattr(sampler, "dataset"):
        digest["dataset_len"] = len(sampler.dataset)
    for inner in chain:  # fields of the sampler, or of the one it wraps (BatchSampler)
        digest.update(
            {f: getattr(inner, f) for f in _FIELDS if hasattr(inner, f) and f not in digest}
        )
    if not unpadded:
        digest["position"] = _position(sampler)
    order = _global_order(sampler)
    digest["order"] = (
        None
        if order is None
        else hashlib.sha1(order.to(torch.int64).numpy().tobytes()).hexdigest()[:16]
    )
    return digest


def assert_rank_consistent(sampler: Any, group: dist.ProcessGroup | None = None) -> dict[str, Any]:
    r"""Check, collectively, that every rank of ``group`` sees the same epoch; return the digest.

    Call it on every rank after ``set_epoch`` and before iterating (it is one
    ``all_gather_object`` of a small dict, plus hashing the epoch's order once).

    Args:
        sampler: this rank's sampler (a DistributedSampler, a wrapper, a BatchSampler over one).
        group: the process group; the default group when ``None``.

    Raises:
        RankMismatchError: naming the fields that differ, each rank's value, and the likely cause.

    Examples:
        >>> import torch.distributed as dist
        >>> from distsampling import DistributedSampler
        >>> dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        >>> sampler = DistributedSampler(range(5), seed=1)  # rank and world from the group
        >>> sampler.set_epoch(2)
        >>> digest = assert_rank_consistent(sampler)  # on every rank: agree, or raise
        >>> digest["len"], digest["seed"], digest["epoch"]
        (5, 1, 2)
        >>> dist.destroy_process_group()
    """
    mine = epoch_digest(sampler)
    digests: list[dict[str, Any]] = [{} for _ in range(dist.get_world_size(group))]
    dist.all_gather_object(digests, mine, group=group)
    _raise_if_ranks_differ(digests, mine)
    return mine


def _raise_if_ranks_differ(digests: list[dict[str, Any]], mine: dict[str, Any]) -> None:
    # every rank's digest (gathered, in rank order) against this rank's: name what differs
    differing = [k for k in mine if any(d.get(k) != mine[k] for d in digests)]
    if not differing:
        return
    # "len" follows from dataset_len; report the root field first, then what it caused
    lines = []
    for field in differing:
        values: list[tuple[Any, list[int]]] = []  # (value, ranks); a value may be a dict
        for rank, d in enumerate(digests):
            same = next((ranks for v, ranks in values if v == d.get(field)), None)
            if same is None:
                values.append((d.get(field), [rank]))
            else:
                same.append(rank)
        lines.append(f"  {field}: " + "; ".join(f"ranks {r} have {v!r}" for v, r in values))
    cause = next(
        (c for f, c in _CAUSES.items() if f in differing), "ranks built different samplers"
    )
    raise RankMismatchError(
        "ranks disagree about the epoch:\n" + "\n".join(lines) + f"\nlikely cause: {cause}"
    )
