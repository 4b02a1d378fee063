"""Every sampler and dataset the package exports, declared once: what it promises and how to
build it small. The loop matrix (``tests/test_loops.py``) runs each of them inside the loops
users run; ``docs/loops.md`` is rendered from its results.

An :class:`Entry` says what the object is (``kind``):

- ``share``: one rank's share of an epoch, passed as ``DataLoader(sampler=...)``;
- ``global``: the same epoch on every rank (not split): alone it is a single process's sampler;
- ``batch``: one rank's batches, passed as ``DataLoader(batch_sampler=...)``;
- ``iterable``: an ``IterableDataset`` that splits itself over ranks and workers;
- ``endless``: an endless stream of one rank (detectron2's and mmengine's training samplers);

and what else it promises: ``resumable`` (``state_dict`` / ``load_state_dict``, exact) and
``elastic`` (a state loads on another number of ranks). ``build(world, rank)`` makes a
:class:`Subject`: the object, the dataset the loader reads and how a user hands it over.
Every sample of the small datasets is its own index, so what a loop yields is what it read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

import torch
from torch.utils.data import Dataset

import distsampling as ds

N = 13  # samples: uneven on 2 and 3 ranks, so padding is always in play
BATCH = 2  # a rank's batch: a share of 7 makes 4 batches, the last one short
LABELS = [0, 1, 2] * 4 + [0]  # 13 labels in 3 classes, for the class-balanced samplers
ENDLESS_STEPS = 8  # what a loop reads of an endless stream: 4 batches


class Identity(Dataset):
    """``N`` samples, each its own index: a loader's output is the indices it read."""

    def __init__(self, n: int = N) -> None:
        self.n = n

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> int:
        return int(i)


def read_shard(shard: int, start: int = 0) -> range:
    """A shard of :data:`SHARDS`: shard ``k`` holds samples ``100 * k + 0 .. size - 1``."""
    return range(100 * shard + start, 100 * shard + SHARDS[shard])


SHARDS = [4, 0, 6, 1, 2]  # 13 samples in 5 shards, one of them empty


@dataclass
class Subject:
    """What a loop runs: ``obj`` (the entry's object), the dataset the loader reads, how the
    loader takes it (``DataLoader(dataset, **how)``), and what takes ``set_epoch``."""

    obj: Any
    dataset: Any
    how: dict[str, Any]
    epoch_takers: list[Any] | None = None  # None: the object, else its inner sampler

    def set_epoch(self, epoch: int) -> None:
        takers = self.epoch_takers
        if takers is None:  # a batch sampler without set_epoch: the loop sets its sampler's
            takers = [self.obj if hasattr(self.obj, "set_epoch") else self.obj.sampler]
        for taker in takers:
            taker.set_epoch(epoch)


@dataclass(frozen=True)
class Entry:
    """One exported sampler or dataset, built small (see the module docstring)."""

    name: str
    kind: str
    build: Callable[..., Subject]
    resumable: bool = False
    elastic: bool = False
    even: bool = True  #: every rank reads as many (False: the unpadded split, one fewer at most)
    #: the settings a loop needs with this entry, named for the reader: loop -> the setting
    settings: dict[str, str] = field(default_factory=dict)
    #: the loops this entry refuses, with what it raises: loop -> (exception, message regex)
    refusals: dict[str, tuple[type[Exception], str]] = field(default_factory=dict)
    #: the first ``P`` indices of the one global stream, for an entry whose epoch is a count of
    #: positions on its grid (a mixture): elastic resumes read the stream's positions exactly once
    stream: Callable[[int], list[int]] | None = None
    #: the loops it cannot hold as the loop is written, and what the user must do instead (the
    #: matrix proves the loop as written reads something else, and other loops the way out)
    limits: dict[str, str] = field(default_factory=dict)

    def plan(self, world: int, rank: int, epoch: int, **hints: Any) -> list[Any]:
        """What this rank reads in ``epoch``, from the object alone, with no loader: indices
        (``share``, ``global``, ``iterable``), batches (``batch``) or a stream's head."""
        subject = self.build(world, rank, **hints)
        subject.set_epoch(epoch)
        if self.kind == "endless":
            return list(islice(subject.obj, ENDLESS_STEPS))
        if self.kind == "batch":
            return [list(b) for b in subject.obj]
        return list(subject.obj)


def _share(make: Callable[[int, int], Any], n: int = N) -> Callable[..., Subject]:
    def build(world: int, rank: int, **_: Any) -> Subject:
        return Subject(make(world, rank), Identity(n), {"sampler": None})

    return build


SHUFFLED = 100  # an index shuffle computes its share in blocks, 32 first: a share past one


def _batch(make: Callable[[int, int], Any]) -> Callable[..., Subject]:
    def build(world: int, rank: int, **_: Any) -> Subject:
        return Subject(make(world, rank), Identity(), {"batch_sampler": None})

    return build


def _iterations(world: int, rank: int, **_: Any) -> Subject:
    """maskrcnn's training: 6 iterations over passes of a rank's batches (its epochs inside)."""
    inner = ds.BatchSampler(ds.DistributedSampler(range(N), world, rank, seed=5), BATCH, False)
    return Subject(ds.IterationBasedBatchSampler(inner, 6), Identity(), {"batch_sampler": None}, [])


def _mixture(world: int, rank: int, batch: int, **kwargs: Any) -> Any:
    """Three sources of 5, 5 and 3 samples (a ConcatDataset of 13), mixed 0.5 : 0.3 : 0.2."""
    return ds.MixtureSampler([5, 5, 3], [0.5, 0.3, 0.2], batch, world, rank, seed=5, **kwargs)


def _weighted(cls: type) -> Any:
    return cls(LABELS, {0: 2, 1: 1, 2: 1}, N, seed=3)


def _windows(world: int, rank: int, **_: Any) -> Subject:
    """Windows of 3 consecutive samples, split as torch splits a dataset: the loader reads each
    window's first sample through the sampler; a loop must ``set_epoch`` both (the offset
    moves with the epoch). 52 windows: more batches than 2 workers prefetch at once."""
    windows = ds.SequentialWindowedDataset(12 * N, 3, seed=4)  # 52: more than workers prefetch
    sampler = ds.DistributedSampler(windows, world, rank, seed=5)

    class Starts:  # the plan: the first sample of each window this rank reads
        def __iter__(self):
            return (windows[i] for i in sampler)

    return Subject(Starts(), windows, {"sampler": sampler}, [windows, sampler])


def _sharded(world: int, rank: int, batch_size: int | None = None, **_: Any) -> Subject:
    dataset = ds.ShardedIterableDataset(
        list(range(len(SHARDS))), SHARDS, read_shard, num_replicas=world, rank=rank, seed=6,
        seekable=True, batch_size=batch_size,
    )  # fmt: skip
    return Subject(dataset, dataset, {})


def _sharded_mixture(world: int, rank: int, **_: Any) -> Subject:
    # SHARDS (13 samples) mixed 13:5 with 2 more shards (samples 1000 + ...), read by 2 workers
    read = lambda shard, start=0: range(1000 + 100 * shard + start, 1003 + 99 * shard)  # noqa: E731
    more = ([0, 1], [3, 2], read)
    dataset = ds.ShardedMixtureDataset([(list(range(len(SHARDS))), SHARDS, read_shard), more],
                                       [13, 5], BATCH, num_replicas=world, rank=rank, seed=6,
                                       seekable=True, num_workers=2)  # fmt: skip
    return Subject(dataset, dataset, {})


# the framework loops, and the settings the matrix names for them
LIGHTNING = "Lightning Trainer, 2 processes"
LIGHTNING_RESUME = "Lightning resume from its checkpoint"
ACCELERATE = "accelerate, 2 processes"
TORCHRUN = "torchrun DDP, 2 ranks"
RANK_CHECK = "rank check: set_epoch differs on one rank"
NO_SPLIT = "Trainer(use_distributed_sampler=False)"
EPOCH_HOOK = "set_epoch(self.current_epoch) in on_train_epoch_start"
UNPREPARED = "prepare the model and optimizer, not the loader"
WRAP_RESUMABLE = (
    "ResumableDistributedSamplerWrapper(sampler) (Lightning's own wrapper has no state)"
)

_SHARDED_SETTING = "ShardedIterableDataset(batch_size=...) with the loader's batch size"
_SHARDED_MAIN = (RuntimeError, r"state_dict\(\) was called in the main process, but DataLoader")

#: every sampler and dataset of ``distsampling.__all__`` that decides which rank reads what
ENTRIES: list[Entry] = [
    Entry("DistributedSampler", "share", _share(lambda w, r: ds.DistributedSampler(range(N), w, r, seed=5))),
    Entry("ResumableDistributedSampler", "share", _share(lambda w, r: ds.ResumableDistributedSampler(range(N), w, r, seed=5)), resumable=True, elastic=True),
    Entry("IndexShuffleSampler", "share", _share(lambda w, r: ds.IndexShuffleSampler(range(SHUFFLED), w, r, seed=5), SHUFFLED)),
    Entry("ResumableIndexShuffleSampler", "share", _share(lambda w, r: ds.ResumableIndexShuffleSampler(range(SHUFFLED), w, r, seed=5), SHUFFLED), resumable=True, elastic=True),
    Entry("UnpaddedDistributedSampler", "share", _share(lambda w, r: ds.UnpaddedDistributedSampler(range(N), w, r, seed=5)), even=False),
    Entry("ResumableUnpaddedDistributedSampler", "share", _share(lambda w, r: ds.ResumableUnpaddedDistributedSampler(range(N), w, r, seed=5)), resumable=True, elastic=True, even=False),
    Entry("InferenceSampler", "share", _share(lambda w, r: ds.InferenceSampler(range(N), w, r)), resumable=True, even=False),
    Entry("DistributedSamplerWrapper", "share", _share(lambda w, r: ds.DistributedSamplerWrapper(_weighted(ds.WeightedBalanceClassSampler), w, r, seed=5))),
    Entry("ResumableDistributedSamplerWrapper", "share", _share(lambda w, r: ds.ResumableDistributedSamplerWrapper(_weighted(ds.ResumableWeightedBalanceClassSampler), w, r, seed=5)), resumable=True, elastic=True),
    Entry("OrderAhead", "share", _share(lambda w, r: ds.OrderAhead(ds.DistributedSampler(range(N), w, r, seed=5)))),
    Entry("SequentialWindowedDataset", "share", _windows, limits=dict.fromkeys(
        ["set_epoch after the first batch", "set_epoch after the first batch, 2 workers"],
        "dataset.set_epoch before iter(): a window's samples are the epoch's offset, read "
        "when the window is fetched")),
    Entry("WeightedBalanceClassSampler", "global", _share(lambda w, r: _weighted(ds.WeightedBalanceClassSampler))),
    Entry("ResumableWeightedBalanceClassSampler", "global", _share(lambda w, r: _weighted(ds.ResumableWeightedBalanceClassSampler)), resumable=True),
    Entry("BatchSampler", "batch", _batch(lambda w, r: ds.BatchSampler(ds.DistributedSampler(range(N), w, r, seed=5), BATCH, False))),
    Entry("ResumableBatchSampler", "batch", _batch(lambda w, r: ds.ResumableBatchSampler(ds.ResumableDistributedSampler(range(N), w, r, seed=5), BATCH, False)), resumable=True, elastic=True),
    Entry("GroupedBatchSampler", "batch", _batch(lambda w, r: ds.GroupedBatchSampler(ds.DistributedSampler(range(N), w, r, seed=5), [i % 2 for i in range(N)], BATCH))),
    Entry("BatchBalanceClassSampler", "batch", _batch(lambda w, r: ds.BatchBalanceClassSampler(LABELS, 2, 1, num_batches=4, num_replicas=w, rank=r, seed=5))),
    Entry("IterationBasedBatchSampler", "batch", _iterations),
    Entry("TokenBudgetBatchSampler", "batch", _batch(lambda w, r: ds.TokenBudgetBatchSampler([1 + i % 5 for i in range(N)], 8, num_buckets=3, num_replicas=w, rank=r, seed=5)), resumable=True, elastic=True),
    Entry("ShardedIterableDataset", "iterable", _sharded, resumable=True, elastic=True,
          settings={"DataLoader, 2 workers, batch_size": _SHARDED_SETTING},
          refusals={"plain DataLoader resume, 2 workers": _SHARDED_MAIN}),
    Entry("ShardedMixtureDataset", "iterable", _sharded_mixture, resumable=True, elastic=True,
          limits=dict.fromkeys(["elastic resume, 2 -> 3 ranks", "elastic resume, 3 -> 2 ranks"],
          "an epoch is positions of the mixture: a pass in flight goes on into the next epoch, "
          "each pass read once (tests/test_sharded_mixture.py), not every sample in the epoch")),
    Entry("MixtureSampler", "share", _share(lambda w, r: _mixture(w, r, BATCH)), resumable=True, elastic=True,
          stream=lambda p: list(islice(_mixture(1, 0, 1, epoch_length=p), p))),
    Entry("InfiniteSampler", "endless", _share(lambda w, r: ds.InfiniteSampler(range(N), w, r, seed=5)), resumable=True),
    Entry("RepeatFactorSampler", "endless", _share(lambda w, r: ds.RepeatFactorSampler([1.0, 2.5, 0.5] * 4 + [1.0], w, r, seed=5)), resumable=True),
]  # fmt: skip
# Lightning: it leaves a torch DistributedSampler alone and wraps any other sampler (splitting
# a rank's share again); it injects its own into a batch sampler (or refuses); it calls
# set_epoch on the loader's sampler and batch_sampler.sampler only, never on a dataset
for _e in ENTRIES:
    if _e.kind == "batch" or _e.name in ("OrderAhead", "MixtureSampler"):
        _e.settings[LIGHTNING] = NO_SPLIT
    elif _e.kind == "iterable" or _e.name == "SequentialWindowedDataset":
        _e.settings[LIGHTNING] = EPOCH_HOOK
    # accelerate: prepare(loader) splits the loader's batches over the processes, whatever the
    # sampler: right for one that yields the same epoch everywhere, twice split for the others
    if _e.kind != "global":
        _e.settings[ACCELERATE] = UNPREPARED
    else:  # Lightning's own wrapper splits it, but has no state: a resume needs ours
        _e.settings[LIGHTNING_RESUME] = WRAP_RESUMABLE
BY_NAME = {e.name: e for e in ENTRIES}

#: exported classes that are datasets or parts, not a split of their own, and where each is proven
NOT_ENTRIES = {
    "DatasetFromSampler": "the wrapper's view of its inner sampler (DistributedSamplerWrapper's row)",
    "SnapshotDataset": "a growing dataset's epoch, read through DistributedSampler: tests/growing",
    "Resumable": "the resume layer itself: every Resumable* class has its row",
}


def is_sampler_or_dataset(obj: object) -> bool:
    """A class of ``distsampling.__all__`` that the matrix must hold (or NOT_ENTRIES explain)."""
    bases = (torch.utils.data.Sampler, torch.utils.data.Dataset)
    return isinstance(obj, type) and (issubclass(obj, bases) or obj is ds.Resumable)
