r"""Text rendering of who reads what: the plans that ``split`` and ``demo`` print.

A plan is ``plan[epoch][rank]``, the items each rank reads, simulated here for every rank. Padding
(repeats of the epoch's head, so that every rank reads the same number) is marked ``*``; windows
of ``T`` consecutive samples print as ``first-...-last``. :mod:`distsampling.cli` and
:mod:`distsampling.demo` both print through this module.
"""

from __future__ import annotations

from ._validate import check_int
from .batch import BatchSampler
from .distributed import DistributedSampler
from .windowed import SequentialWindowedDataset, window_indices

__all__ = ["format_split", "format_windows", "plan_split", "plan_windows", "rank_windows"]


def plan_split(
    size: int,
    replicas: int,
    epochs: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
) -> list[list[list[int]]]:
    r"""Return ``plan[epoch][rank]``: the indices each rank reads, simulating every rank here.

    Examples:
        >>> plan_split(5, 2, 1, shuffle=False)
        [[[0, 2, 4], [1, 3, 0]]]
    """
    size, replicas = check_int("size", size, low=0), check_int("replicas", replicas, low=1)
    plan = []
    for epoch in range(check_int("epochs", epochs, low=1)):
        ranks = []
        for rank in range(replicas):
            sampler = DistributedSampler(range(size), replicas, rank, shuffle, seed, drop_last)
            sampler.set_epoch(epoch)
            ranks.append(sampler.indices().tolist())  # what iter() yields, without iterating
        plan.append(ranks)
    return plan


def _mark_padding(indices: list, rank: int, replicas: int, size: int) -> list[str]:
    # this rank's k-th index sits at position rank + k * replicas of the padded epoch;
    # positions >= size are the padding that repeats the head of the order
    return [f"{i}*" if rank + k * replicas >= size else str(i) for k, i in enumerate(indices)]


def format_split(
    size: int,
    replicas: int,
    epochs: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
    batch_size: int | None = None,
) -> str:
    r"""Render :func:`plan_split` as the table that ``python -m distsampling split`` prints.

    Examples:
        >>> print(format_split(5, 2, 1, shuffle=False, batch_size=2))
        DistributedSampler(size=5, num_replicas=2, shuffle=False, seed=0, drop_last=False)
        each rank reads num_samples=3; the padded epoch has total_size=6 (1 padded, marked *)
        BatchSampler(batch_size=2, drop_last=False): 2 batches per rank
        epoch 0
          rank 0: [0, 2] [4]
          rank 1: [1, 3] [0*]
    """
    plan = plan_split(size, replicas, epochs, shuffle=shuffle, seed=seed, drop_last=drop_last)
    first = DistributedSampler(range(size), replicas, 0, shuffle, seed, drop_last)
    pad = first.total_size - size
    what = f"{pad} padded, marked *" if pad > 0 else f"{-pad} dropped" if pad < 0 else "no padding"
    lines = [
        f"DistributedSampler(size={size}, num_replicas={replicas}, shuffle={shuffle}, "
        f"seed={seed}, drop_last={drop_last})",
        f"each rank reads num_samples={first.num_samples}; "
        f"the padded epoch has total_size={first.total_size} ({what})",
    ]
    if batch_size is not None:
        lines.append(_batch_line(first, batch_size, drop_last))
    for epoch, ranks in enumerate(plan):
        lines.append(f"epoch {epoch}")
        for rank, indices in enumerate(ranks):
            shown = _mark_padding(indices, rank, replicas, size)
            lines.append(f"  rank {rank}: {_row(shown, batch_size, drop_last)}")
    return "\n".join(lines)


def plan_windows(
    size: int,
    window: int,
    replicas: int,
    epochs: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
) -> list[list[list[int]]]:
    r"""Return ``plan[epoch][rank]``: the window starts each rank reads, every rank simulated here.

    The windows of :class:`~distsampling.SequentialWindowedDataset` (``seed`` draws the epoch's
    offset) are shuffled (unless ``shuffle=False``) and split by
    :class:`~distsampling.DistributedSampler` (``seed`` too).

    Examples:
        >>> plan_windows(10, 3, 2, 1)  # epoch 0: windows start at 1, 4, 7 and 0 (offset 1)
        [[[1, 0], [4, 7]]]
    """
    replicas = check_int("replicas", replicas, low=1)
    kwargs = {"shuffle": shuffle, "seed": seed, "drop_last": drop_last}
    return [
        [rank_windows(size, window, replicas, r, e, **kwargs) for r in range(replicas)]
        for e in range(check_int("epochs", epochs, low=1))
    ]


def rank_windows(
    size: int,
    window: int,
    replicas: int,
    rank: int,
    epoch: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
) -> list[int]:
    r"""The window starts that ``rank`` reads in ``epoch`` (what a training loop would do).

    Examples:
        >>> rank_windows(10, 3, replicas=2, rank=1, epoch=0)  # windows 4-5-6 and 7-8-9
        [4, 7]
    """
    dataset = SequentialWindowedDataset(size, window, seed)
    dataset.set_epoch(epoch)  # every rank draws the same offset from (seed, epoch)
    sampler = DistributedSampler(dataset, replicas, rank, shuffle, seed, drop_last)
    sampler.set_epoch(epoch)  # ... and the same shuffle of the windows
    return [dataset[i] for i in sampler.indices().tolist()]


def format_windows(
    size: int,
    window: int,
    replicas: int,
    epochs: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
    batch_size: int | None = None,
) -> str:
    r"""Render :func:`plan_windows` as ``split --window`` prints it: each window ``first-...-last``.

    Examples:
        >>> print(format_windows(10, 3, 2, 1, batch_size=2))
        SequentialWindowedDataset(size=10, window=3, seed=0): 4 windows, the last wraps around
        DistributedSampler(num_replicas=2, shuffle=True, seed=0, drop_last=False): 2 windows per rank
        BatchSampler(batch_size=2, drop_last=False): 1 batch per rank
        epoch 0 (offset 1)
          rank 0: [1-2-3, 0-1-2]
          rank 1: [4-5-6, 7-8-9]
    """
    kwargs = {"shuffle": shuffle, "seed": seed, "drop_last": drop_last}
    plan = plan_windows(size, window, replicas, epochs, **kwargs)  # checks every argument
    dataset = SequentialWindowedDataset(size, window, seed)
    first = DistributedSampler(dataset, replicas, 0, **kwargs)
    wraps = ", the last wraps around" if size % window else ""
    lines = [
        f"SequentialWindowedDataset(size={size}, window={window}, seed={seed}): "
        f"{len(dataset)} windows{wraps}",
        f"DistributedSampler(num_replicas={replicas}, shuffle={shuffle}, seed={seed}, "
        f"drop_last={drop_last}): {first.num_samples} windows per rank",
    ]
    if batch_size is not None:
        lines.append(_batch_line(first, batch_size, drop_last))
    for epoch, ranks in enumerate(plan):
        dataset.set_epoch(epoch)
        lines.append(f"epoch {epoch} (offset {dataset.offset})")
        for rank, starts in enumerate(ranks):
            # (k, window) sample indices of this rank's k windows, written first-...-last
            shown = ["-".join(map(str, w)) for w in window_indices(starts, window, size).tolist()]
            shown = _mark_padding(shown, rank, replicas, len(dataset))
            lines.append(f"  rank {rank}: {_row(shown, batch_size, drop_last)}")
    return "\n".join(lines)


def _batch_line(first: DistributedSampler, batch_size: int, drop_last: bool) -> str:
    n_batches = len(BatchSampler(first, batch_size, drop_last))  # checks batch_size
    batches = "batch" if n_batches == 1 else "batches"
    return f"BatchSampler(batch_size={batch_size}, drop_last={drop_last}): {n_batches} {batches} per rank"


def _row(shown: list[str], batch_size: int | None, drop_last: bool) -> str:
    # one rank's items as one list, or as its batches when batch_size is given
    if batch_size is None:
        return "[" + ", ".join(shown) + "]"
    return " ".join("[" + ", ".join(b) + "]" for b in BatchSampler(shown, batch_size, drop_last))
