"""A state taken in the main process after a look at the data: it resumes exactly, or it refuses.

People read a few samples in the main process before training (to look at a batch), then train
through a ``DataLoader``, with or without workers, and save ``state_dict(consumed=...)``. The
look is an ``iter()`` of its own, so the state must describe the loop's ``iter()``, not the
look's. A sampler is always read in the main process (workers only fetch), so its state resumes
exactly whatever the workers. An iterable dataset read by workers is read from their copies:
the main process does not know their places, and a state taken there refuses, naming the
workers and the ways out (torchdata's ``StatefulDataLoader``, or ``num_workers=0``), whatever
the look read before.

The property, for every class whose state the main process can take (``ShardedMixtureDataset``
has its own in tests/test_sharded_mixture.py): peek ``k`` items (any ``k``, 0 included), start
a DataLoader (0 or 2 workers, persistent or not), train on some batches, take the state with
any ``consumed`` the loop used; then either it refuses as above, or what the loop used followed
by what a fresh object resumed from the state yields is the uninterrupted epoch.

References:
    torch/utils/data/dataloader.py (the main process iterates the sampler; workers, the dataset);
    torchdata/stateful_dataloader/stateful_dataloader.py (asks every worker for its state).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from itertools import islice
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.data import DataLoader, Dataset

from distsampling import (
    MixtureBatchSampler,
    MixtureSampler,
    ResumableBatchSampler,
    ResumableDistributedSampler,
    ResumableDistributedSamplerWrapper,
    ResumableIndexShuffleSampler,
    ResumableUnpaddedDistributedSampler,
    ResumableWeightedBalanceClassSampler,
    ShardedIterableDataset,
    TokenBudgetBatchSampler,
)
from sharded_ranks import Reader
from strategies import (
    epochs,
    flags,
    loop_batch_counts,
    mixture_batch_sizes,
    mixture_sources,
    peek_lengths,
    ranks_for,
    seeds,
    shard_size_lists,
    token_budget_args,
)

LABELS = [0] * 7 + [1] * 3 + [2] * 2  # 12 samples in 3 classes, for the weighted sampler


class Case(NamedTuple):
    """One object to read: ``make()`` builds it alike every time; ``role`` is where the loader
    takes it (``sampler``, ``batch_sampler`` or ``dataset``); ``batch_size`` the loader's (None:
    a batch sampler's own); ``consumed`` counts ``batches`` (a batch sampler's, or the samples
    of whole batches where ``in_samples``) or else samples."""

    make: Callable[[], Any]
    role: str
    batch_size: int | None
    epoch: int
    in_samples: bool = False  # a batch sampler whose consumed counts the samples of its batches


class Indices(Dataset[int]):
    """Sample ``i`` is ``i``: the loop sees the sampler's indices themselves."""

    def __getitem__(self, i: int) -> int:
        return i


def as_list(batch: list[int]) -> list[int]:
    """The loader's collate: the batch's ints as they are (a module function: workers pickle it)."""
    return list(batch)


def flat(batches: list[list[int]]) -> list[int]:
    return [i for b in batches for i in b]


def set_epoch(obj: Any, epoch: int) -> None:
    """The epoch goes where a loop sends it (a batch sampler without one: its sampler)."""
    target = obj if hasattr(obj, "set_epoch") else obj.sampler
    target.set_epoch(epoch)


# --- the classes, each built from drawn arguments --------------------------------------------


@st.composite
def sharded_cases(draw: st.DrawFn) -> Case:
    sizes, world = draw(shard_size_lists), draw(st.integers(1, 3))
    rank, seed, drop_last, b = (
        draw(ranks_for(world)),
        draw(seeds),
        draw(flags),
        draw(st.integers(1, 4)),
    )

    def make() -> ShardedIterableDataset:
        return ShardedIterableDataset(list(range(len(sizes))), sizes, Reader(sizes), num_replicas=world,
                                      rank=rank, seed=seed, drop_last=drop_last, batch_size=b)  # fmt: skip

    return Case(make, "dataset", b, draw(epochs))


@st.composite
def token_budget_cases(draw: st.DrawFn) -> Case:
    args = draw(token_budget_args())
    rank = draw(ranks_for(args["num_replicas"]))
    return Case(
        lambda: TokenBudgetBatchSampler(**args, rank=rank), "batch_sampler", None, draw(epochs)
    )


@st.composite
def mixture_cases(draw: st.DrawFn, batched: bool) -> Case:
    (sizes, weights), b = draw(mixture_sources(most=4)), draw(mixture_batch_sizes)
    world, seed = draw(st.integers(1, 3)), draw(seeds)
    rank = draw(ranks_for(world))

    def make() -> MixtureSampler | MixtureBatchSampler:
        s = MixtureSampler(sizes, weights, b, num_replicas=world, rank=rank, seed=seed)
        return MixtureBatchSampler(s) if batched else s

    role = "batch_sampler" if batched else "sampler"
    b_loader = None if batched else draw(st.integers(1, 4))
    return Case(make, role, b_loader, draw(st.integers(0, 20)), in_samples=batched)


RESUMABLE = {
    "ResumableDistributedSampler": lambda n, w, r, s, d: ResumableDistributedSampler(range(n), w, r, True, s, d),
    "ResumableUnpaddedDistributedSampler": lambda n, w, r, s, d: ResumableUnpaddedDistributedSampler(range(n), w, r, True, s),
    "ResumableIndexShuffleSampler": lambda n, w, r, s, d: ResumableIndexShuffleSampler(range(n), w, r, True, s, d),
    "ResumableWeightedBalanceClassSampler": lambda n, w, r, s, d: ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], length=n, seed=s),
    "ResumableDistributedSamplerWrapper": lambda n, w, r, s, d: ResumableDistributedSamplerWrapper(
        ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], length=n, seed=s), w, r, True, s, d),
}  # fmt: skip


@st.composite
def resumable_cases(draw: st.DrawFn, kind: str) -> Case:
    n, world, seed, drop_last = (
        draw(st.integers(0, 40)),
        draw(st.integers(1, 4)),
        draw(seeds),
        draw(flags),
    )
    rank, b = draw(ranks_for(world)), draw(st.integers(1, 4))
    if kind == "ResumableBatchSampler":

        def make() -> ResumableBatchSampler:
            inner = ResumableDistributedSampler(range(n), world, rank, True, seed, drop_last)
            return ResumableBatchSampler(inner, b, drop_last)

        return Case(make, "batch_sampler", None, draw(epochs))
    build = RESUMABLE[kind]
    return Case(lambda: build(n, world, rank, seed, drop_last), "sampler", b, draw(epochs))


CASES = {
    "ShardedIterableDataset": sharded_cases(),
    "TokenBudgetBatchSampler": token_budget_cases(),
    "MixtureSampler": mixture_cases(batched=False),
    "MixtureBatchSampler": mixture_cases(batched=True),
    "ResumableBatchSampler": resumable_cases("ResumableBatchSampler"),
    **{kind: resumable_cases(kind) for kind in RESUMABLE},
}

LOADERS = [(0, False), (2, False), (2, True)]  # (num_workers, persistent_workers)


def loader_for(obj: Any, case: Case, workers: int, persistent: bool) -> DataLoader:
    """The DataLoader a loop builds around ``obj``, with the case's batch size."""
    common = {"num_workers": workers, "persistent_workers": persistent, "collate_fn": as_list}
    if case.role == "dataset":
        return DataLoader(obj, batch_size=case.batch_size, **common)
    if case.role == "sampler":
        return DataLoader(Indices(), sampler=obj, batch_size=case.batch_size, **common)
    return DataLoader(Indices(), batch_sampler=obj, **common)


@pytest.mark.parametrize(("workers", "persistent"), LOADERS, ids=["0", "2", "2-persistent"])
@pytest.mark.parametrize("kind", list(CASES))
@settings(settings.get_profile("costly"))  # DataLoader workers: processes
@given(data=st.data(), peek=peek_lengths, batches=loop_batch_counts)
def test_a_state_after_a_look_in_the_main_process_resumes_exactly_or_names_the_workers(
    kind, workers, persistent, data, peek, batches
):
    """Invariant: peek ``peek`` items in the main process, train on ``batches`` batches of a
    DataLoader (0 or 2 workers, persistent or not), save ``state_dict(consumed=c)`` for any
    ``c`` the loop used: the samples the loop used, then those a fresh object resumed from the
    state yields, are the uninterrupted epoch; or, only where DataLoader workers read the
    dataset itself, ``state_dict`` refuses (always, once a worker's batch came), naming the
    workers, StatefulDataLoader and ``num_workers=0``, never the look."""
    case = data.draw(CASES[kind], label="case")
    whole = case.make()
    set_epoch(whole, case.epoch)
    by_batch = case.role == "batch_sampler"  # it yields batches, and consumed counts them
    epoch = flat(list(whole)) if by_batch else list(whole)  # the uninterrupted epoch
    obj = case.make()
    set_epoch(obj, case.epoch)  # the look: a fresh iter() of its own
    list(islice(iter(obj), peek))
    set_epoch(obj, case.epoch)  # the epoch's start, as the loop sets it
    loader = loader_for(obj, case, workers, persistent)
    it = iter(loader)
    got = list(islice(it, batches))  # what the loop trained on, batch by batch
    c = data.draw(st.integers(0, len(got) if by_batch else len(flat(got))), label="consumed")
    used = flat(got[:c]) if by_batch else flat(got)[:c]
    consumed = len(used) if case.in_samples else c  # whole batches, counted in samples
    try:
        state = json.loads(json.dumps(obj.state_dict(consumed=consumed)))
    except RuntimeError as error:
        assert case.role == "dataset" and workers, error  # workers' places: theirs alone
        for words in ("DataLoader workers", "StatefulDataLoader", "num_workers=0"):
            assert words in str(error)
        assert "handed out" not in str(error)  # the workers are named, not the look
        return
    finally:
        del it, loader  # the workers (persistent ones too) end here
    assert not (case.role == "dataset" and workers and got), "workers read, the state was taken"
    resumed = case.make()
    set_epoch(resumed, case.epoch)
    resumed.load_state_dict(state)
    rest = flat(list(resumed)) if by_batch else list(resumed)
    assert used + rest == epoch
