"""What each rank runs in the multi-process tests (imported by the rank processes by name).

``SCENARIOS`` maps a name to ``factory(rank, world) -> sampler``. :func:`gather_scenarios` runs
on every rank of a real process group: it disturbs the global RNGs differently per rank (so a
sampler that leans on them is caught), iterates each sampler for some epochs, and
``all_gather_object``s every rank's indices to rank 0, which returns them.
"""

from __future__ import annotations

import os
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from distsampling import (
    BatchSampler,
    DistributedSampler,
    DistributedSamplerWrapper,
    IndexShuffleSampler,
    MixtureBatchSampler,
    MixtureSampler,
    RankMismatchError,
    ResumableBatchSampler,
    ResumableDistributedSampler,
    ResumableDistributedSamplerWrapper,
    ResumableIndexShuffleSampler,
    ResumableUnpaddedDistributedSampler,
    ResumableWeightedBalanceClassSampler,
    SequentialWindowedDataset,
    TokenBudgetBatchSampler,
    UnpaddedDistributedSampler,
    WeightedBalanceClassSampler,
    assert_rank_consistent,
    make_batch_data_sampler,
    make_data_sampler,
)

Factory = Callable[[int, int], Any]

#: samplers whose ranks must partition the (padded) epoch: name -> factory(rank, world)
PARTITIONS: dict[str, Factory] = {
    "DistributedSampler(shuffle)": lambda r, w: DistributedSampler(range(23), w, r, seed=5),
    "DistributedSampler(no shuffle)": lambda r, w: DistributedSampler(
        range(23), w, r, shuffle=False
    ),
    "DistributedSampler(drop_last)": lambda r, w: DistributedSampler(
        range(23), w, r, seed=5, drop_last=True
    ),
    "DistributedSampler(n < world)": lambda r, w: DistributedSampler(range(1), w, r, seed=2),
    "BatchSampler(DistributedSampler)": lambda r, w: BatchSampler(
        DistributedSampler(range(23), w, r, seed=5), 4, False
    ),
    # the resumable forms split alike: the resume layer changes nothing a fresh epoch reads
    "ResumableDistributedSampler": lambda r, w: ResumableDistributedSampler(
        range(23), w, r, seed=5
    ),
    "ResumableBatchSampler(ResumableDistributedSampler)": lambda r, w: ResumableBatchSampler(
        ResumableDistributedSampler(range(23), w, r, seed=5, drop_last=True), 4, False
    ),
    # the order computed per position: the same split and padding, another order
    "IndexShuffleSampler": lambda r, w: IndexShuffleSampler(range(23), w, r, seed=5),
    "IndexShuffleSampler(drop_last)": lambda r, w: IndexShuffleSampler(
        range(23), w, r, seed=5, drop_last=True
    ),
    "ResumableIndexShuffleSampler": lambda r, w: ResumableIndexShuffleSampler(
        range(23), w, r, seed=5
    ),
}
#: samplers whose ranks cover the epoch exactly once, without padding
EXACT_COVERS: dict[str, Factory] = {
    "UnpaddedDistributedSampler": lambda r, w: UnpaddedDistributedSampler(range(23), w, r, seed=5),
    "ResumableUnpaddedDistributedSampler": lambda r, w: ResumableUnpaddedDistributedSampler(
        range(23), w, r, seed=5
    ),
}


class WindowStarts:
    """One rank's reading of a windowed dataset: the window starts its DistributedSampler picks.

    ``set_epoch`` goes to both, as a training loop must: the sampler shuffles the windows, the
    dataset draws the epoch's offset. Each process computes the offset by itself.
    """

    def __init__(self, dataset: SequentialWindowedDataset, sampler: DistributedSampler) -> None:
        self.dataset, self.sampler = dataset, sampler

    def set_epoch(self, epoch: int) -> None:
        self.dataset.set_epoch(epoch)
        self.sampler.set_epoch(epoch)

    def __iter__(self):
        return (self.dataset[i] for i in self.sampler)


def _windows(size: int, window: int) -> Factory:
    def factory(r: int, w: int) -> WindowStarts:
        ds = SequentialWindowedDataset(size, window, seed=7)
        return WindowStarts(ds, DistributedSampler(ds, w, r, seed=3))

    return factory


#: windows of consecutive samples split across ranks: name -> (factory, size, window)
WINDOWS: dict[str, tuple[Factory, int, int]] = {
    "SequentialWindowedDataset(24, 4)": (_windows(24, 4), 24, 4),
    "SequentialWindowedDataset(23, 4) wrapping": (_windows(23, 4), 23, 4),
}

#: 30 samples in classes 5, 7 and 9 (not 0..C-1), weighted 3 : 1 : 0 over an epoch of 26
LABELS = [5] * 4 + [7] * 20 + [9] * 6
#: samplers whose ranks together read the inner sampler's epoch once, plus the head as padding
WRAPPED: dict[str, Factory] = {
    "DistributedSamplerWrapper(WeightedBalanceClassSampler)": lambda r, w: (
        DistributedSamplerWrapper(
            WeightedBalanceClassSampler(LABELS, {5: 3, 7: 1, 9: 0}, 26, seed=2), w, r, seed=5
        )
    ),
    "ResumableDistributedSamplerWrapper(ResumableWeightedBalanceClassSampler)": lambda r, w: (
        ResumableDistributedSamplerWrapper(
            ResumableWeightedBalanceClassSampler(LABELS, {5: 3, 7: 1, 9: 0}, 26, seed=2), w, r
        )
    ),
    "DistributedSamplerWrapper(RandomSampler with a seeded generator)": lambda r, w: (
        DistributedSamplerWrapper(
            torch.utils.data.RandomSampler(range(25), generator=torch.Generator().manual_seed(9)),
            w,
            r,
            shuffle=False,
        )
    ),
}

#: aspect ratios of 29 images, every fourth one landscape: with batches of 4, the ranks' shares
#: fill different numbers of batches in epochs 0 and 1 on 2 and on 3 ranks (the DDP hang)
RATIOS = [0.75 if i % 4 == 0 else 1.33 for i in range(29)]
BATCH = 4
#: batch samplers with grouping: name -> factory(rank, world)
GROUPED: dict[str, Factory] = {
    "GroupedBatchSampler(DistributedSampler)": lambda r, w: make_batch_data_sampler(
        RATIOS, make_data_sampler(RATIOS, True, True, 4, num_replicas=w, rank=r), [1.0], BATCH
    ),
}
#: the detection pipeline with fixed iterations: every rank must yield exactly NUM_ITERS batches
NUM_ITERS = 11
FIXED_ITERATIONS: dict[str, Factory] = {
    "IterationBasedBatchSampler(GroupedBatchSampler(DistributedSampler))": lambda r, w: (
        make_batch_data_sampler(
            RATIOS,
            make_data_sampler(RATIOS, True, True, 4, num_replicas=w, rank=r),
            [1.0],
            BATCH,
            num_iters=NUM_ITERS,
        )
    ),
}
SCENARIOS: dict[str, Factory] = {
    **PARTITIONS,
    **EXACT_COVERS,
    **{name: factory for name, (factory, _, _) in WINDOWS.items()},
    **WRAPPED,
    **GROUPED,
    **FIXED_ITERATIONS,
}


def flat(items: list) -> list[int]:
    """A batch sampler's batches flattened, or a sampler's indices as they are."""
    return [i for b in items for i in b] if items and isinstance(items[0], list) else list(items)


def epoch_indices(sampler: Any, epoch: int) -> list:
    """What the sampler yields in ``epoch``: indices, or batches (lists) for a batch sampler."""
    if hasattr(sampler, "set_epoch"):
        sampler.set_epoch(epoch)
    elif hasattr(getattr(sampler, "sampler", None), "set_epoch"):
        sampler.sampler.set_epoch(epoch)  # a BatchSampler: the epoch goes to the sampler inside
    # an IterationBasedBatchSampler sets its own epochs (one per pass): its run is the same each time
    return list(sampler)


def disturb_global_rngs(rank: int) -> None:
    """Give each rank a different global RNG state, as real ranks often have."""
    random.seed(1000 + rank)
    np.random.seed(2000 + rank)
    torch.manual_seed(3000 + rank)


def gather_scenarios(names: list[str], epochs: int) -> dict[str, list[list[list[int]]]] | None:
    """On every rank: run each named sampler; rank 0 returns ``out[name][epoch][rank]``."""
    rank, world = dist.get_rank(), dist.get_world_size()
    disturb_global_rngs(rank)
    out: dict[str, list[list[list[int]]]] = {}
    for name in names:
        sampler = SCENARIOS[name](rank, world)
        for epoch in range(epochs):
            gathered: list[Any] = [None] * world
            dist.all_gather_object(gathered, epoch_indices(sampler, epoch))
            out.setdefault(name, []).append(gathered)
    return out if rank == 0 else None


class GlobalRNGSampler(torch.utils.data.Sampler[int]):
    """A sampler like many found in the wild: its order comes from the global ``np.random``."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return iter(np.random.permutation(self.n).tolist())

    def __len__(self) -> int:
        return self.n


#: each cause of disagreement, provoked on purpose: name -> factory(rank, world)
PROVOKED: dict[str, Factory] = {
    "consistent": lambda r, w: _with_epoch(DistributedSampler(range(20), w, r, seed=1), 3),
    "consistent unpadded": lambda r, w: UnpaddedDistributedSampler(range(11), w, r),
    "forgotten set_epoch": lambda r, w: _with_epoch(
        DistributedSampler(range(20), w, r), 1 if r == 0 else None
    ),
    "different dataset length": lambda r, w: DistributedSampler(range(20 + r), w, r),
    "different seed": lambda r, w: DistributedSampler(range(20), w, r, seed=r),
    "unseeded inner sampler": lambda r, w: DistributedSamplerWrapper(GlobalRNGSampler(20), w, r),
    "resumed from another checkpoint": lambda r, w: _resumed(
        ResumableDistributedSampler(range(20), w, r, seed=1), 2 if r == 0 else 3
    ),
}


def _resumed(sampler: Any, k: int) -> Any:
    """The sampler after loading a state saved when it had read ``k`` samples of epoch 1."""
    sampler.set_epoch(1)
    it = iter(sampler)
    for _ in range(k):
        next(it)
    sampler.load_state_dict(sampler.state_dict())
    return sampler


def _with_epoch(sampler: Any, epoch: int | None) -> Any:
    if epoch is not None:
        sampler.set_epoch(epoch)
    return sampler


def provoke_mismatches(names: list[str]) -> dict[str, str]:
    """On every rank: run assert_rank_consistent on each provoked sampler; return the outcome."""
    rank, world = dist.get_rank(), dist.get_world_size()
    disturb_global_rngs(rank)
    outcome = {}
    for name in names:
        try:
            assert_rank_consistent(PROVOKED[name](rank, world))
            outcome[name] = "consistent"
        except RankMismatchError as err:
            outcome[name] = str(err)
    return outcome


def _mark_waiting(name: str) -> None:
    """Note when this process reached the call it will wait in (a file ``name`` holding the
    time, in ``$HANG_READY_DIR``): :func:`timed_out_waiting` waits out a slow start with it."""
    if "HANG_READY_DIR" in os.environ:
        with open(os.path.join(os.environ["HANG_READY_DIR"], name), "w") as f:
            f.write(repr(time.time()))


def hang_on_rank_1() -> None:
    """Rank 1 never joins the collective that rank 0 waits in: a hang the harness must end."""
    _mark_waiting(f"rank{dist.get_rank()}")
    if dist.get_rank() == 0:
        dist.barrier()
    else:
        time.sleep(600)


def timed_out_waiting(
    run: Callable[[int], Any], ready_dir: Any, waiters: int
) -> tuple[TimeoutError, int]:
    """The ``TimeoutError`` of ``run(timeout)``, and that timeout, for the first of 4, 8, ..., 64
    s by which all ``waiters`` processes had reached their waiting point (each marks it in
    ``ready_dir``, exported as ``$HANG_READY_DIR``, by :func:`_mark_waiting`): on busy cores a
    run may take longer to start, and a timeout that strikes during the start shows no wait."""
    for timeout in (4, 8, 16, 32, 64):
        for mark in Path(ready_dir).iterdir():
            mark.unlink()
        start = time.time()
        try:
            run(timeout)
        except TimeoutError as error:
            marks = [float(m.read_text()) for m in Path(ready_dir).iterdir()]
            # 0.5 s before the earliest the timeout can strike: the wait had begun
            if len(marks) == waiters and max(marks) < start + timeout - 0.5:
                return error, timeout
        else:
            raise AssertionError(f"run(timeout={timeout}) returned: the hang did not hang")
    raise AssertionError(f"{waiters} processes did not all reach their wait within 64 s")


def waited_in(log: str, *calls: str, innermost: bool = False) -> bool:
    """Whether ``log`` holds a thread's stack (faulthandler's dump, innermost call first) with
    these calls in it, in this order from the innermost (``innermost``: the first one is the
    innermost Python frame, as in ``time.sleep``): where a hung process waited."""
    frames = "".join(rf"(?:  File .*\n)*?  File .* in {c}\n" for c in calls)
    if innermost:
        frames = frames.removeprefix(r"(?:  File .*\n)*?")
    return re.search(r"Current thread .*\n" + frames, log) is not None


class _Stuck(torch.utils.data.Dataset):
    """A dataset whose every item sleeps: a DataLoader worker that never delivers."""

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> int:
        _mark_waiting("worker")
        time.sleep(600)
        return i


def hang_in_a_loader_worker() -> None:
    """Rank 1 waits for a batch its DataLoader worker never delivers; rank 0 in a collective."""
    _mark_waiting(f"rank{dist.get_rank()}")
    if dist.get_rank() == 0:
        dist.barrier()
    else:
        next(iter(torch.utils.data.DataLoader(_Stuck(), num_workers=1)))


def evaluate_everywhere(n: int) -> dict[str, Any]:
    """On every rank: 'evaluate' (correct iff i % 3 == 0) with a padded and an unpadded sampler."""
    from distsampling import gather_by_index

    rank, world = dist.get_rank(), dist.get_world_size()
    out: dict[str, Any] = {}
    for name, sampler in (
        ("padded", DistributedSampler(range(n), world, rank, seed=4)),
        ("unpadded", UnpaddedDistributedSampler(range(n), world, rank, seed=4)),
    ):
        indices = list(sampler)
        correct = [i % 3 == 0 for i in indices]
        out[name] = gather_by_index(indices, correct, n)
        if name == "padded":  # what a naive all-reduce of per-rank sums would report
            sums = [None] * world
            dist.all_gather_object(sums, (sum(correct), len(correct)))
            out["naive_padded_accuracy"] = sum(s for s, _ in sums) / sum(c for _, c in sums)
    return out


# samplers of detection and metric-learning codebases: endless streams, repeat factors,
# contiguous inference shards, class-balanced batches
from itertools import islice  # noqa: E402

from distsampling import (  # noqa: E402
    BatchBalanceClassSampler,
    InferenceSampler,
    InfiniteSampler,
    RepeatFactorSampler,
)

#: indices each rank reads from an endless stream per harness "epoch"
STREAM_READS = 9


class Take:
    """The next ``reads`` indices of an endless sampler per ``iter``: the harness reads a stream
    in pieces, as a training loop reads its iterations (one live iterator, continued)."""

    def __init__(self, sampler: Any, reads: int) -> None:
        self.sampler, self.reads = sampler, reads
        self._it = iter(sampler)

    def __iter__(self):
        return islice(self._it, self.reads)


#: endless streams: name -> (factory(rank, world), the same stream on one rank)
STREAMS: dict[str, tuple[Factory, Callable[[], Any]]] = {
    "InfiniteSampler": (
        lambda r, w: Take(InfiniteSampler(range(7), w, r, seed=3), STREAM_READS),
        lambda: InfiniteSampler(range(7), 1, 0, seed=3),
    ),
    "InfiniteSampler(no shuffle)": (
        lambda r, w: Take(InfiniteSampler(range(4), w, r, shuffle=False), STREAM_READS),
        lambda: InfiniteSampler(range(4), 1, 0, shuffle=False),
    ),
    "RepeatFactorSampler": (
        lambda r, w: Take(RepeatFactorSampler(REPEAT_FACTORS, w, r, seed=6), STREAM_READS),
        lambda: RepeatFactorSampler(REPEAT_FACTORS, 1, 0, seed=6),
    ),
}
#: per-image repeat factors: a rare image about 3 times, a common one sometimes left out
REPEAT_FACTORS = [1.0, 2.5, 0.5, 1.0, 3.2, 1.0]
#: contiguous inference blocks: every index once, lengths within one (EXACT_COVERS checks that)
CONTIGUOUS: dict[str, Factory] = {
    "InferenceSampler": lambda r, w: InferenceSampler(range(23), w, r),
}
EXACT_COVERS.update(CONTIGUOUS)
#: 26 samples of 4 classes, one smaller than K = 3; 2 classes x 3 samples, 4 batches per rank
BALANCED_LABELS = [0] * 9 + [1] * 2 + [2] * 8 + [3] * 7
BALANCED: dict[str, Factory] = {
    "BatchBalanceClassSampler": lambda r, w: BatchBalanceClassSampler(
        BALANCED_LABELS, 2, 3, num_batches=4, num_replicas=w, rank=r, seed=8
    ),
}
SCENARIOS.update({name: factory for name, (factory, _) in STREAMS.items()})
SCENARIOS.update(CONTIGUOUS)
SCENARIOS.update(BALANCED)


def shared_seed_streams(reads: int) -> dict[str, tuple[int, list[int]]]:
    """On every rank, each with its own global RNG states: build the endless samplers with
    ``seed=None`` (a collective) and return ``name -> (seed, first indices)``."""
    rank, world = dist.get_rank(), dist.get_world_size()
    disturb_global_rngs(rank)
    out = {}
    for name, sampler in (
        ("InfiniteSampler", InfiniteSampler(range(11), world, rank, seed=None)),
        ("RepeatFactorSampler", RepeatFactorSampler(REPEAT_FACTORS, seed=None)),
    ):
        out[name] = (sampler.seed, list(islice(sampler, reads)))
    return out


def gather_in_a_subgroup(n: int) -> Any:
    """Ranks 1..W-1 form a subgroup, split range(n) among themselves without padding and gather
    ``(rank, i)`` per sample over it; rank 0 stays out. Returns the gathered list (None on 0)."""
    from distsampling import gather_by_index

    rank, world = dist.get_rank(), dist.get_world_size()
    sub = dist.new_group(list(range(1, world)))  # every rank takes part in creating it
    out = None
    if rank > 0:
        indices = list(UnpaddedDistributedSampler(range(n), world - 1, rank - 1, seed=4))
        out = gather_by_index(indices, [(rank, i) for i in indices], n, group=sub)
    dist.barrier()
    return out


def check_in_a_subgroup(n: int) -> Any:
    """Ranks 1..W-1 form a subgroup and run assert_rank_consistent over it on a sampler split
    among themselves; rank 0 stays out. Returns the digest (None on rank 0)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    sub = dist.new_group(list(range(1, world)))
    out = None
    if rank > 0:
        sampler = DistributedSampler(range(n), world - 1, rank - 1, seed=4)
        sampler.set_epoch(2)
        out = assert_rank_consistent(sampler, group=sub)
    dist.barrier()
    return out


# batches by token budget: every rank the same number of batches, each within the budget
#: 41 samples of 1..29 tokens (a long tail): batches of at most 40 tokens
TOKEN_LENGTHS = [1 + (i * i * 7) % 29 for i in range(41)]
TOKEN_BUDGET: dict[str, Factory] = {
    "TokenBudgetBatchSampler(padded)": lambda r, w: TokenBudgetBatchSampler(
        TOKEN_LENGTHS, 40, num_buckets=4, num_replicas=w, rank=r, seed=5
    ),
    "TokenBudgetBatchSampler(sum, drop_last)": lambda r, w: TokenBudgetBatchSampler(
        TOKEN_LENGTHS, 40, cost="sum", num_replicas=w, rank=r, seed=5, drop_last=True
    ),
}
SCENARIOS.update(TOKEN_BUDGET)


# weighted mixtures of datasets: one global stream, rank r reads its micro-batch of every step
MIXTURE: dict[str, Factory] = {
    "MixtureSampler": lambda r, w: MixtureSampler(
        [17, 6, 3], [0.5, 0.3, 0.2], 2, w, r, seed=5, epoch_length=24
    ),
    "MixtureSampler(schedule)": lambda r, w: MixtureSampler(
        [17, 6, 3], [(0, [1, 0, 1]), (2, [1, 1, 1])], 3, w, r, seed=5, epoch_length=20
    ),
    "MixtureBatchSampler": lambda r, w: MixtureBatchSampler(
        MixtureSampler([17, 6, 3], [0.5, 0.3, 0.2], 2, w, r, seed=5, epoch_length=24)
    ),
}
SCENARIOS.update(MIXTURE)
