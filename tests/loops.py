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

A new row needs nothing else: the single-process loops (``tests/test_loops.py``) and the
framework launches (``tests/test_loops_frameworks.py``) run every entry, first as the user
writes it, with the framework's defaults, and ``judge()`` compares each rank's whole read
with its whole plan (an endless stream's: its first ``ENDLESS_STEPS`` samples, as long as the
loop reads). The matrix's results are one run's, whole (``results()``).

Beside the exported classes, ``REFERENCES`` holds the classes of the reference files
(``distsampling/distributed.py`` and the rest, torch-like, without the package's guards),
built as their exported rows are. Every cell's status is committed in ``loops_expected.json``
(``tests/loops_status.py``): a cell whose status moves fails until that file moves with it. A framework default's error
passes its cell only if it is one of ``FRAMEWORK_REFUSALS``; ``PROBES`` holds a sampler that
crashes under the defaults, which the launches run to show that its cell fails.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import islice
from typing import Any

import numpy as np
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
    #: the loops this entry refuses, with what it raises: loop -> (exception, message regex)
    refusals: dict[str, tuple[type[Exception], str]] = field(default_factory=dict)
    #: the loops where it reads its plan and warns (``FrameworkWarning``), on purpose: a pass
    #: begun again with no set_epoch may be a forgotten one: loop -> message regex
    warns: dict[str, str] = field(default_factory=dict)
    #: what the reads must be, given how many of each source they hold, for an entry whose epoch
    #: is a count of positions on its grid (a mixture): each source's items once, in pass order
    stream: Callable[[list[int]], list[int]] | None = None
    #: ``at_step(dataset, step, rank)``: what the dataset says ``rank`` reads at training ``step``,
    #: with no data read, for an entry whose elastic resume plans by steps, not a whole epoch (a
    #: mixture of streams: a pass in flight goes on into the next epoch, each pass read once)
    at_step: Callable[[Any, int, int], list[int]] | None = None
    #: it reads a snapshot of a cache that grows while it trains (``build(..., snapshot=...)``)
    grows: bool = False
    #: what ``state_dict(consumed=...)`` counts: the items the loop used (indices for a sampler,
    #: batches for a batch sampler), or ``"samples"`` (a batch sampler that counts the samples of
    #: the batches used, as its index form does: MixtureBatchSampler)
    consumed_unit: str = "items"
    #: what it is built over, in words (the page's set-up of the row)
    setup: str = "13 samples"
    #: the exported name of the class this row's reference copy stands beside (a reference
    #: file's class, torch-like, without the package's guards); None: an exported class
    reference: str | None = None
    #: its epochs differ in length (a mixture's passes end inside epochs): what a framework
    #: counts of them is checked epoch by epoch
    varies: bool = False

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


def _mixture_items(read: list[int]) -> list[int]:
    """What a mixture must have read, given how many of each source these reads hold: each
    source's items 0, 1, 2, ... in the order of its passes, each once."""
    s, sources = _mixture(1, 0, 1), [0 if i < 5 else 1 if i < 10 else 2 for i in read]
    counts = [sources.count(k) for k in range(3)]
    return [
        i for k, n in enumerate(counts) for i in s._indices(np.full(n, k), np.arange(n)).tolist()
    ]


def _weighted(cls: type) -> Any:
    return cls(LABELS, {0: 2, 1: 1, 2: 1}, N, seed=3)


def _windows(
    world: int, rank: int, windowed: type | None = None, split: type | None = None, **_: Any
) -> Subject:
    """Windows of 3 consecutive samples, split as torch splits a dataset: the loader reads each
    window's first sample through the sampler; a loop must ``set_epoch`` both (the offset
    moves with the epoch). 52 windows: more batches than 2 workers prefetch at once. The
    classes are the exported ones, or ``windowed`` and ``split`` (a reference row's)."""
    windowed, split = windowed or ds.SequentialWindowedDataset, split or ds.DistributedSampler
    windows = windowed(12 * N, 3, seed=4)  # 52: more than workers prefetch
    sampler = split(windows, world, rank, seed=5)

    class Starts:  # the plan: the first sample of each window this rank reads
        def __iter__(self):
            return (windows[i] for i in sampler)

    return Subject(Starts(), windows, {"sampler": sampler}, [windows, sampler])


class _Reading:
    """A plan read through a sampler: ``dataset[i]`` for each index ``i`` the sampler yields
    (what the loader reads, as a list)."""

    def __init__(self, dataset: Any, sampler: Any) -> None:
        self.dataset, self.sampler = dataset, sampler

    def __iter__(self):
        return (_as_int(self.dataset[i]) for i in self.sampler)


def _as_int(x: Any) -> int:
    return int(x.reshape(-1)[0]) if isinstance(x, torch.Tensor) else int(x)


def _from_sampler(
    world: int, rank: int, classes: tuple[type, type, type] | None = None, **_: Any
) -> Subject:
    """A weighted sampler's epoch as a dataset (item ``i``: its ``i``-th draw), split by
    DistributedSampler: catalyst's pattern. A loop must ``set_epoch`` both (the draw is the
    dataset's epoch, the split the sampler's). ``classes``: (DatasetFromSampler,
    WeightedBalanceClassSampler, DistributedSampler), the exported ones by default."""
    dataset, weighted, split = classes or (
        ds.DatasetFromSampler,
        ds.WeightedBalanceClassSampler,
        ds.DistributedSampler,
    )
    epoch = dataset(_weighted(weighted))
    sampler = split(epoch, world, rank, seed=5)
    return Subject(_Reading(epoch, sampler), epoch, {"sampler": sampler}, [epoch, sampler])


_SNAPSHOT: list[Any] = []  # one snapshot a process, written once


def _snapshot(world: int, rank: int, snapshot: Any = None, **_: Any) -> Subject:
    """One epoch's snapshot of a growing cache (shards of 4, 6 and 3 rows, row ``i`` holding
    ``i``; or ``snapshot``), read memory-mapped through ResumableDistributedSampler, as
    tests/growing trains."""
    if snapshot is not None:
        dataset = ds.SnapshotDataset(snapshot)
        sampler = ds.ResumableDistributedSampler(dataset, world, rank, seed=5)
        return Subject(sampler, dataset, {"sampler": None, "collate_fn": ds.collate_batch})
    if not _SNAPSHOT:
        import atexit
        import shutil
        import tempfile

        import numpy as np

        root = tempfile.mkdtemp(prefix="loops-snapshot-")
        atexit.register(shutil.rmtree, root, True)
        shards, start = [], 0
        for k, n in enumerate([4, 6, 3]):
            path = f"{root}/shard-{k}.npy"
            np.save(path, np.arange(start, start + n, dtype=np.float32).reshape(n, 1))
            shards.append((path, n))
            start += n
        _SNAPSHOT.append(ds.Snapshot(0, tuple(shards)))
    dataset = ds.SnapshotDataset(_SNAPSHOT[0])
    sampler = ds.ResumableDistributedSampler(dataset, world, rank, seed=5)
    return Subject(sampler, dataset, {"sampler": None, "collate_fn": ds.collate_batch})


def _sharded(world: int, rank: int, batch_size: int | None = None, **_: Any) -> Subject:
    dataset = ds.ShardedIterableDataset(
        list(range(len(SHARDS))), SHARDS, read_shard, num_replicas=world, rank=rank, seed=6,
        seekable=True, batch_size=batch_size,
    )  # fmt: skip
    return Subject(dataset, dataset, {})


def _batch_at(dataset: Any, step: int, rank: int) -> list[int]:
    """The samples ``rank`` of a ``ShardedMixtureDataset`` reads at ``step``, from its
    ``batch_at`` (source, shard, offset): no data read by the dataset."""
    out = []
    for k, shard, offset in dataset.batch_at(step)[rank]:
        shards, _, read = dataset.sources[k]
        out.append(list(read(shards[shard]))[offset])
    return out


def _sharded_mixture(world: int, rank: int, **_: Any) -> Subject:
    # SHARDS (13 samples) mixed 13:5 with 2 more shards (samples 1000 + ...), read by 2 workers
    read = lambda shard, start=0: range(1000 + 100 * shard + start, 1003 + 99 * shard)  # noqa: E731
    more = ([0, 1], [3, 2], read)
    dataset = ds.ShardedMixtureDataset([(list(range(len(SHARDS))), SHARDS, read_shard), more],
                                       [13, 5], BATCH, num_replicas=world, rank=rank, seed=6,
                                       seekable=True, num_workers=2)  # fmt: skip
    return Subject(dataset, dataset, {})


# the framework loops (tests/test_loops_frameworks.py), and the settings they may try
LIGHTNING = "Lightning Trainer, 2 processes"
LIGHTNING_RESUME = "Lightning resume from its checkpoint"
ACCELERATE = "accelerate, 2 processes"
TORCHRUN = "torchrun DDP, 2 ranks"
RANK_CHECK = "rank check: set_epoch differs on one rank"
NO_SPLIT = "Trainer(use_distributed_sampler=False)"
EPOCH_HOOK = "set_epoch(self.current_epoch) in on_train_epoch_start"
UNPREPARED = "prepare the model and optimizer, not the loader"
#: Lightning counts len(loader) again at each epoch's start (else once, before epoch 0)
RECOUNT = "Trainer(reload_dataloaders_every_n_epochs=1)"
#: accelerate's join_uneven_inputs wraps torch's Join on GPUs only: on CPUs it warns and does nothing
JOIN_ACCELERATE = "under torch's Join([model]) (accelerator.join_uneven_inputs([model]) on GPUs)"
JOIN_DDP = "with model.join()"

#: a peek, or a second iter() of an epoch, with no set_epoch since: read again, and said so
_AGAIN = r"began a pass with no set_epoch since the previous one began: it reads epoch 0 again"
_READ_AGAIN = {"a peek, then the loop": _AGAIN, "iter() twice": _AGAIN}
_SHARDED_MAIN = (RuntimeError, r"state_dict\(\) was called in the main process, but DataLoader")

#: the refusals a framework's default may meet, by loop: (the error's type, its words), as the
#: ranks record it (``TypeName: first line``). Any other error of a default fails its cell.
#: Lightning's own refusal of a batch sampler it cannot rebuild; the package's refusal where
#: Lightning would rebuild one around a DistributedSampler of its own; the package's refusal
#: where accelerate's prepare(loader) would split a rank's share again (refuse_split_again)
_LIGHTNING_REFUSALS = [
    ("TypeError", r"Lightning can't inject a \(distributed\) sampler into your batch sampler"),
    ("RuntimeError", r"\w+: Lightning's Trainer rebuilds this batch sampler around a "
                     r"DistributedSampler of its own"),
]  # fmt: skip
FRAMEWORK_REFUSALS: dict[str, list[tuple[str, str]]] = {
    LIGHTNING: _LIGHTNING_REFUSALS,
    LIGHTNING_RESUME: _LIGHTNING_REFUSALS,
    ACCELERATE: [("RuntimeError", r"\w+ already holds one rank's share \(of num_replicas=2\), and "
                  r"accelerate's (BatchSamplerShard|IterableDatasetShard|DataLoaderDispatcher) ")],
}  # fmt: skip


#: the guards of the exported classes that a reference row lacks, by the refusal each raises
GUARDS = [
    (r"\w+: \w+ already holds one rank's share", "refuse_split_again, which refuses "
     "accelerate's prepare(loader) before a batch"),
    (r"\w+: \w+: Lightning's Trainer rebuilds", "refuse_lightnings_rebuild, which refuses "
     "Lightning's rebuild of a batch sampler"),
]  # fmt: skip
#: where the exported class read its plan: it sets its dataset's epoch with its own ...
SET_EPOCH_GUARD = "ShareGuards.set_epoch, which sets its dataset's epoch with the sampler's"
#: ... and hands the dataset indices that carry their pass's epoch, warning where they differ
EPOCH_GUARD = "begin_dataset_pass, whose indices carry their pass's epoch (or a FrameworkWarning)"


def guard_for(loop: str, twin_errors: Sequence[str] = ()) -> str:
    """The guard that makes a reference row's silent cell in ``loop`` loud, or right, in its
    exported row, from what the exported row's default raised there (``twin_errors``)."""
    for pattern, guard in GUARDS:
        if any(re.match(pattern, error) for error in twin_errors):
            return guard
    return SET_EPOCH_GUARD if loop in (LIGHTNING, LIGHTNING_RESUME) else EPOCH_GUARD


def intended_refusal(loop: str, error: str) -> bool:
    """Whether ``error`` (``TypeName: first line``, as a rank records it) is one the framework
    loop's default may meet (``FRAMEWORK_REFUSALS``): its type, and its words from the start."""
    kind, _, words = error.partition(": ")
    return any(kind == k and re.match(w, words) for k, w in FRAMEWORK_REFUSALS.get(loop, []))


# the set-up of the rows that are not 13 samples (the page's words)
_SHUFFLED = "100 samples (an index shuffle computes its share in blocks, 32 first)"
_DRAWS = "13 draws of a class-balanced sampler over 13 labels in 3 classes"
_GLOBAL = _DRAWS + ", the same on every rank"
_WINDOWS = "156 samples in 52 windows of 3"
_MIXED = "3 sources of 5, 5 and 3 samples, mixed 0.5 : 0.3 : 0.2"
_ENDLESS = f"a loop reads {ENDLESS_STEPS} samples of its stream"

#: every sampler and dataset of ``distsampling.__all__`` that decides which rank reads what
ENTRIES: list[Entry] = [
    Entry("DistributedSampler", "share", _share(lambda w, r: ds.DistributedSampler(range(N), w, r, seed=5))),
    Entry("ResumableDistributedSampler", "share", _share(lambda w, r: ds.ResumableDistributedSampler(range(N), w, r, seed=5)), resumable=True, elastic=True),
    Entry("IndexShuffleSampler", "share", _share(lambda w, r: ds.IndexShuffleSampler(range(SHUFFLED), w, r, seed=5), SHUFFLED), setup=_SHUFFLED),
    Entry("ResumableIndexShuffleSampler", "share", _share(lambda w, r: ds.ResumableIndexShuffleSampler(range(SHUFFLED), w, r, seed=5), SHUFFLED), resumable=True, elastic=True, setup=_SHUFFLED),
    Entry("UnpaddedDistributedSampler", "share", _share(lambda w, r: ds.UnpaddedDistributedSampler(range(N), w, r, seed=5)), even=False),
    Entry("ResumableUnpaddedDistributedSampler", "share", _share(lambda w, r: ds.ResumableUnpaddedDistributedSampler(range(N), w, r, seed=5)), resumable=True, elastic=True, even=False),
    Entry("InferenceSampler", "share", _share(lambda w, r: ds.InferenceSampler(range(N), w, r)), resumable=True, even=False),
    Entry("DistributedSamplerWrapper", "share", _share(lambda w, r: ds.DistributedSamplerWrapper(_weighted(ds.WeightedBalanceClassSampler), w, r, seed=5)), setup=_DRAWS),
    Entry("ResumableDistributedSamplerWrapper", "share", _share(lambda w, r: ds.ResumableDistributedSamplerWrapper(_weighted(ds.ResumableWeightedBalanceClassSampler), w, r, seed=5)), resumable=True, elastic=True, setup=_DRAWS),
    Entry("OrderAhead", "share", _share(lambda w, r: ds.OrderAhead(ds.DistributedSampler(range(N), w, r, seed=5)))),
    Entry("SequentialWindowedDataset", "share", _windows, setup=_WINDOWS),
    Entry("WeightedBalanceClassSampler", "global", _share(lambda w, r: _weighted(ds.WeightedBalanceClassSampler)), setup=_GLOBAL),
    Entry("ResumableWeightedBalanceClassSampler", "global", _share(lambda w, r: _weighted(ds.ResumableWeightedBalanceClassSampler)), resumable=True, setup=_GLOBAL),
    Entry("BatchSampler", "batch", _batch(lambda w, r: ds.BatchSampler(ds.DistributedSampler(range(N), w, r, seed=5), BATCH, False))),
    Entry("ResumableBatchSampler", "batch", _batch(lambda w, r: ds.ResumableBatchSampler(ds.ResumableDistributedSampler(range(N), w, r, seed=5), BATCH, False)), resumable=True, elastic=True),
    Entry("GroupedBatchSampler", "batch", _batch(lambda w, r: ds.GroupedBatchSampler(ds.DistributedSampler(range(N), w, r, seed=5), [i % 2 for i in range(N)], BATCH)), setup="13 samples in 2 groups"),
    Entry("BatchBalanceClassSampler", "batch", _batch(lambda w, r: ds.BatchBalanceClassSampler(LABELS, 2, 1, num_batches=4, num_replicas=w, rank=r, seed=5)), setup="13 labels in 3 classes; 4 batches of 2 classes, 1 sample each"),
    Entry("IterationBasedBatchSampler", "batch", _iterations, setup="13 samples; 6 iterations over the share's batches"),
    Entry("TokenBudgetBatchSampler", "batch", _batch(lambda w, r: ds.TokenBudgetBatchSampler([1 + i % 5 for i in range(N)], 8, num_buckets=3, num_replicas=w, rank=r, seed=5)), resumable=True, elastic=True, setup="13 samples of 1 to 5 tokens; 8 tokens a batch, 3 buckets"),
    Entry("ShardedIterableDataset", "iterable", _sharded, resumable=True, elastic=True, warns=_READ_AGAIN,
          refusals={"plain DataLoader resume, 2 workers": _SHARDED_MAIN}, setup="13 samples in 5 shards, one empty"),
    Entry("ShardedMixtureDataset", "iterable", _sharded_mixture, resumable=True, elastic=True, warns=_READ_AGAIN,
          at_step=lambda dataset, step, rank: _batch_at(dataset, step, rank), varies=True,
          setup="13 samples in 5 shards mixed 13 : 5 with 5 in 2 more shards; 2 readers"),
    Entry("MixtureSampler", "share", _share(lambda w, r: _mixture(w, r, BATCH)), resumable=True, elastic=True,
          stream=lambda read: _mixture_items(read), varies=True, setup=_MIXED),
    Entry("MixtureBatchSampler", "batch", _batch(lambda w, r: ds.MixtureBatchSampler(_mixture(w, r, BATCH))), resumable=True, elastic=True, consumed_unit="samples",
          stream=lambda read: _mixture_items(read), varies=True, setup=_MIXED),
    Entry("DatasetFromSampler", "share", _from_sampler, setup=_DRAWS),
    Entry("SnapshotDataset", "share", _snapshot, resumable=True, elastic=True, grows=True, setup="13 rows in 3 shards of a cache's snapshot"),
    Entry("InfiniteSampler", "endless", _share(lambda w, r: ds.InfiniteSampler(range(N), w, r, seed=5)), resumable=True, setup="13 samples; " + _ENDLESS),
    Entry("RepeatFactorSampler", "endless", _share(lambda w, r: ds.RepeatFactorSampler([1.0, 2.5, 0.5] * 4 + [1.0], w, r, seed=5)), resumable=True, setup="13 samples repeated by factors 0.5 to 2.5; " + _ENDLESS),
]  # fmt: skip


def _reference_rows() -> list[Entry]:
    """The reference files' classes beside the exported ones, built as their exported rows are
    (imported from the files: ``distsampling.distributed`` and the rest), each named by its
    file. Torch-like and unguarded where the exported name is a guarded subclass: their
    cells show what each guard turns loud (the expected statuses say which)."""
    from distsampling import batch, distributed, weighted, windowed, wrapper

    split, draws = distributed.DistributedSampler, weighted.WeightedBalanceClassSampler
    rows = {
        "DistributedSampler": (distributed, _share(lambda w, r: split(range(N), w, r, seed=5))),
        "BatchSampler": (batch, _batch(lambda w, r: batch.BatchSampler(split(range(N), w, r, seed=5), BATCH, False))),
        "SequentialWindowedDataset": (windowed, partial(_windows, windowed=windowed.SequentialWindowedDataset, split=split)),
        "WeightedBalanceClassSampler": (weighted, _share(lambda w, r: _weighted(draws))),
        "DistributedSamplerWrapper": (wrapper, _share(lambda w, r: wrapper.DistributedSamplerWrapper(_weighted(draws), w, r, seed=5))),
        "DatasetFromSampler": (wrapper, partial(_from_sampler, classes=(wrapper.DatasetFromSampler, draws, split))),
    }  # fmt: skip
    by_name = {e.name: e for e in ENTRIES}
    return [
        replace(by_name[name], name=f"{module.__name__.rsplit('.', 1)[1]}.{name}", build=build,
                reference=name)
        for name, (module, build) in rows.items()
    ]  # fmt: skip


#: the reference classes, rows of the matrix too (after the exported ones)
REFERENCES: list[Entry] = _reference_rows()
ENTRIES += REFERENCES
BY_NAME = {e.name: e for e in ENTRIES}

# --- a crash injected under a framework's default: its cell must fail ----------------------------

#: ``[True]`` while a framework loop runs its default (``tests/loops_frameworks.py`` sets it)
UNDER_DEFAULT = [False]
CRASH = "a crash under the default (injected)"


class _Crashing(ds.DistributedSampler):
    """DistributedSampler that raises ``AttributeError`` while a framework's default iterates
    it, as a regression would (no refusal of the package's): its cell must fail."""

    def __iter__(self):
        if UNDER_DEFAULT[0]:
            raise AttributeError("'_Crashing' object has no attribute 'order' (injected)")
        return super().__iter__()


#: rows the framework launches run beside the matrix's, that are no row of the page
PROBES = {CRASH: Entry(CRASH, "share", _share(lambda w, r: _Crashing(range(N), w, r, seed=5)))}


def entry_of(name: str) -> Entry:
    """A row of the matrix, or a probe, by name."""
    return BY_NAME[name] if name in BY_NAME else PROBES[name]


#: exported classes that are datasets or parts, not a split of their own, and where each is proven
NOT_ENTRIES = {
    "Resumable": "the resume layer itself: every Resumable* class has its row",
}


def is_sampler_or_dataset(obj: object) -> bool:
    """A class of ``distsampling.__all__`` that the matrix must hold (or NOT_ENTRIES explain)."""
    bases = (torch.utils.data.Sampler, torch.utils.data.Dataset)
    return isinstance(obj, type) and (issubclass(obj, bases) or obj is ds.Resumable)


# --- what a run read, against the plan: whole and once ------------------------------------------


def as_read(entry: Entry, batches: list[list[int]]) -> list:
    """A run's batches as the plan reads: batches for a batch sampler, indices otherwise."""
    return batches if entry.kind == "batch" else [i for b in batches for i in b]


def _flat(items: list) -> list[int]:
    return [i for b in items for i in b] if items and isinstance(items[0], list) else items


def judge(entry: Entry, runs: list[dict], epochs: int, pad: int | None = None) -> str | None:
    """``None`` where every rank of the run read exactly its plan in every epoch, whole and
    once, nothing beyond; else what the run did instead, in words: the first line of its
    error, or how much of its plan it trained on.

    ``runs`` holds each rank's record (``{"epochs": [batches of epoch 0, ...]}`` or
    ``{"error": ...}``). An entry whose epoch is the same on every rank (``global``) is split
    by the framework: the ranks' reads together are the epoch, each index once but the
    ``pad`` repeats that even the ranks out (default: the padding of a split by sample).
    """
    errors = [r["error"] for r in runs if "error" in r]
    if errors:
        return f"raises {errors[0]}"
    world, exact, got, planned, extra = len(runs), True, 0, 0, 0
    for e in range(epochs):
        if entry.kind == "global":
            whole = Counter(entry.plan(1, 0, e))
            read = Counter(i for r in runs for i in as_read(entry, r["epochs"][e]))
            lengths = {len(as_read(entry, r["epochs"][e])) for r in runs}
            allowed = -whole.total() % world if pad is None else pad
            exact &= not whole - read and (read - whole).total() <= allowed and len(lengths) == 1
            got, planned = got + (whole & read).total(), planned + whole.total()
            extra += max(0, (read - whole).total() - allowed)
            continue
        for rank, r in enumerate(runs):
            plan, read = entry.plan(world, rank, e), as_read(entry, r["epochs"][e])
            exact &= read == plan
            plan_c, read_c = Counter(_flat(plan)), Counter(_flat(read))
            got, planned = got + (plan_c & read_c).total(), planned + plan_c.total()
            extra += (read_c - plan_c).total()
    if exact:
        return None
    if got < planned:
        return f"trains on {got} of the {planned} samples of its plan" + (
            f" and {extra} others" if extra else ""
        )
    if extra:
        return f"trains on all {planned} samples of its plan and {extra} more"
    return f"trains on all {planned} samples of its plan, in another order"


# --- the matrix's results: one run's, whole (docs/generated/loops.json) ---------------------------

NOT_RUN = "not run"


def expected_cells() -> set[tuple[str, str]]:
    """Every (sampler, loop) cell the matrix's tests run, from the tests themselves."""
    import test_detection_loaders as detection
    import test_loops
    import test_loops_frameworks as fw

    cells = set(test_loops.CELLS)
    cells |= {(n, LIGHTNING) for n in fw.TRAINED} | {(n, LIGHTNING_RESUME) for n in fw.RESUMABLE}
    cells |= {(n, ACCELERATE) for n in fw.EPOCHAL} | {(n, TORCHRUN) for n in fw.DDP}
    cells |= {(n, RANK_CHECK) for n in fw.CHECKED}
    for kind, *_ in detection.LOADER_CASES:
        cells.add((kind, "detectron2's training loader"))
    for kind, *_ in detection.RESUME_CASES:
        cells.add((kind, "detectron2's loader, resumed"))
    return cells | {("InfiniteSampler", "mmengine Runner")}


def digest(cells: list[dict]) -> str:
    """The cells' fingerprint: the page refuses results whose cells no longer match it."""
    return hashlib.sha256(json.dumps(cells, sort_keys=True).encode()).hexdigest()


def results(recorded: dict[tuple[str, str], dict], expected: set[tuple[str, str]]) -> dict:
    """One run's results, whole: the cells it recorded, and every other cell of the matrix
    marked ``not run`` (deselected, skipped, or its fixture failed), with their digest."""
    cells = dict(recorded)
    for sampler, loop in expected - set(recorded):
        cells[(sampler, loop)] = {"sampler": sampler, "loop": loop, "status": NOT_RUN,
                                  "note": "", "test": ""}  # fmt: skip
    ordered = sorted(cells.values(), key=lambda c: (c["sampler"], c["loop"]))
    return {"cells": ordered, "digest": digest(ordered)}


def verified(payload: dict) -> list[dict]:
    """The cells of ``results()``'s payload, if no cell changed since the run wrote them."""
    cells = payload.get("cells", [])
    if payload.get("digest") != digest(cells):
        raise RuntimeError(
            "docs/generated/loops.json was changed after the run that wrote it (its digest does "
            "not match its cells): the page shows only what the tests saw; run `make loops`"
        )
    return cells
