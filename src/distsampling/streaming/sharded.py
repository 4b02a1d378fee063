r"""ShardedIterableDataset: which rank, and which DataLoader worker, reads which sample of shards.

Each epoch reads the shards (files, URLs, ids) as one *stream*: in an order drawn from
``(seed, epoch)`` (torch's ``randperm``, DistributedSampler's order), samples concatenated, ``T``.

1. Ranks. The stream is padded with its own head to ``W * ceil(T / W)`` positions (``p >= T``
   reads ``stream[p % T]``, DistributedSampler's padding) or cut to ``W * (T // W)`` with
   ``drop_last``; rank ``r`` takes the *contiguous* range ``[r * L, (r + 1) * L)``, so every rank
   yields ``L`` samples and DDP's collectives pair up (a strided split, DistributedSampler's,
   would make every rank open every shard).
2. Workers. Worker ``k`` of ``n`` takes ``[L * k // n, L * (k + 1) // n)`` of its rank's range.
   It opens only the shards that range touches, once each, in stream order (never one of size
   0), and draws nothing past its last sample but one ``next`` where a shard ends, to check
   that it does end there.
3. The first sample. ``read(shard)`` goes front to back: a worker whose range starts inside a
   shard draws that shard's head and drops it (``read`` should decode lazily). With
   ``seekable=True``, ``read(shard, start)`` starts there: a worker draws only what it yields.

``num_workers`` changes the order of a rank's samples, never which or how many: the DataLoader
takes a batch from each worker in turn, so a rank's batches interleave the ``n`` ranges.

Resume. :meth:`~ShardedIterableDataset.state_dict` is one worker's position in its range (what
torchdata's ``StatefulDataLoader`` saves per worker). On another number of ranks, load every
worker's state of one rank (:func:`loader_dataset_states`): all ranks read in step, as under
DDP, so those states say which positions every rank consumed; the rest is split again.

References:
    torch/utils/data/distributed.py (DistributedSampler: the order and the padding);
    torch/utils/data/dataset.py (IterableDataset, get_worker_info);
    torchdata/stateful_dataloader/worker.py (how each worker's state is saved and restored).
"""

from __future__ import annotations

import hashlib
import os
import warnings
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, chain, compress, islice, repeat
from operator import length_hint
from typing import Any, TypeVar

import torch
from torch.utils.data import IterableDataset, get_worker_info

from .._checks import check_bool, check_int, check_int64, check_seed, resolve_world
from .._split import epoch_permutation, split_sizes
from ..guards import refuse_split_again
from ..resume.state import TrainerEpoch, begin_pass, check_consumed, note_trainer, pass_marks

__all__ = ["ShardedIterableDataset", "loader_dataset_states"]

T = TypeVar("T")
_END = object()
Runs = list[tuple[int, int, int]]  # (shard index, first sample, stop): what one worker yields


def _digest(value: object) -> str:
    # a short fingerprint, stable across processes for shards with a stable repr (paths, ids)
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def _part(length: int, k: int, n: int, batch: int = 1) -> tuple[int, int]:
    # worker k of n's range within a rank's `length` positions: whole batches (the last one may
    # be short), so that the loader's batches number ceil(length / batch), as len() counts them
    batches = -(-length // batch)
    return min(length, batch * (batches * k // n)), min(length, batch * (batches * (k + 1) // n))


def _cut(starts: list[int], a: int, b: int) -> Iterator[tuple[int, int, int]]:
    # [a, b) of a concatenation whose parts begin at `starts` (cumulative, from 0), cut where the
    # parts meet: (part, offset in it, count); empty parts never come out
    while a < b:
        j = bisect_right(starts, a) - 1
        n = min(b, starts[j + 1]) - a
        yield j, a - starts[j], n
        a += n


def loader_dataset_states(loader_state: dict[str, Any]) -> list[dict[str, Any]]:
    r"""Every worker's dataset state in a ``StatefulDataLoader.state_dict()``, worker 0 first.

    Pass the list to :meth:`ShardedIterableDataset.load_state_dict` to resume on another
    number of ranks. The loader must snapshot every step (``snapshot_every_n_steps=1``, the
    default): a state that lags the loader would not say what was consumed.

    Examples:
        >>> from torchdata.stateful_dataloader import StatefulDataLoader
        >>> read = lambda shard: iter(range({"a": 3, "b": 2}[shard]))
        >>> ds = ShardedIterableDataset(["a", "b"], [3, 2], read, num_replicas=1, rank=0)
        >>> loader = StatefulDataLoader(ds, batch_size=2)  # no workers: one state
        >>> it = iter(loader); batch = next(it)
        >>> [s["position"] for s in loader_dataset_states(loader.state_dict())]
        [2]
    """
    if "_snapshot" not in loader_state:  # num_workers=0: the dataset's state is the loader's
        return [loader_state["dataset_state"]]
    if loader_state.get("_steps_since_snapshot", 0) != 0:
        raise ValueError(
            "loader_state should be taken with snapshot_every_n_steps=1, but got a state "
            f"{loader_state['_steps_since_snapshot']} steps after its last worker snapshot"
        )
    workers = loader_state["_snapshot"]["_worker_snapshots"]
    return [workers[f"worker_{k}"]["dataset_state"] for k in range(len(workers))]


_HINTS = {
    "epoch": ": call set_epoch({}) first",
    "shards": (": if these are the same shards, their repr is not the same in every process (an "
               "object printed with its address): name them with key=, e.g. key=lambda shard: "
               "shard.path, or pass stable names (paths, URLs, ids)"),
}  # fmt: skip


def _names(shards: list[Any], key: Callable[[Any], str] | None) -> list[Any]:
    """What names each shard in a state: ``key(shard)``, or the shard (its ``repr``) if stable."""
    if key is not None:
        if not callable(key):
            raise TypeError(f"key should be a callable, key(shard) -> str, but got key={key!r}")
        names = [key(shard) for shard in shards]
        for i, name in enumerate(names):
            if not isinstance(name, str):
                raise TypeError(
                    f"key(shard) should return a str, but got key(shards[{i}])={name!r} "
                    f"of type {type(name).__name__}"
                )
        return names
    for i, shard in enumerate(shards):
        if " at 0x" in repr(shard):  # object.__repr__: an address, new in every process
            raise ValueError(
                f"shards[{i}] should have a repr that is the same in every process (a saved state "
                f"names the shards by it), but got {shard!r}: pass key=, a function that names "
                "a shard (key=lambda shard: shard.path), or stable names (paths, URLs, ids)"
            )
    return shards


class ShardedIterableDataset(IterableDataset[T]):
    r"""Stream ``shards`` so that every rank yields the same number of samples, each read once.

    One contiguous range of the epoch's stream per rank, then per DataLoader worker (the module
    docstring has the arithmetic). Call :meth:`set_epoch` every epoch, as with
    DistributedSampler.

    Args:
        shards: shard descriptors (paths, URLs, ids), anything ``read`` takes and pickle can send
            to workers; their ``repr`` identifies the list in a saved state.
        sizes: ``sizes[i]`` is the number of samples in ``shards[i]`` (``>= 0``).
        read: ``read(shard)`` yields that shard's samples, in order, exactly ``sizes[i]`` of them;
            with ``seekable``, ``read(shard, start)`` yields samples ``start .. sizes[i] - 1``.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        shuffle: shuffle the shards each epoch (the samples of a shard keep their order).
        seed: base seed; must be the same on every rank.
        drop_last: cut the stream's tail instead of padding it with its head.
        seekable: call ``read(shard, start)``, for formats that can start at any sample (indexed
            tar, parquet row groups, a memory-mapped array): no worker draws a sample it does
            not yield. The samples, and their order, are the same either way.
        batch_size: the ``DataLoader``'s ``batch_size``, with workers: each worker's range is
            then whole batches, so the loader yields ``ceil(len(self) / batch_size)`` batches,
            as ``len(loader)`` says (split sample by sample, two workers can each end on a short
            batch: one batch more than ``len(loader)``, which a trainer never reads).
        key: ``key(shard)``, a text that names the shard the same way in every process, for
            shards whose ``repr`` does not (an object printed with its address): a saved state
            names the list by it.

    Examples:
        >>> sizes = [3, 1, 4]
        >>> read = lambda shard: iter(range(10 * shard, 10 * shard + sizes[shard]))
        >>> ranks = [ShardedIterableDataset([0, 1, 2], sizes, read, num_replicas=3, rank=r,
        ...                                 shuffle=False) for r in range(3)]
        >>> [list(ds) for ds in ranks]  # 8 samples, 3 per rank: the head pads the last rank
        [[0, 1, 2], [10, 20, 21], [22, 23, 0]]
        >>> ranks[1].worker_runs(worker=0, num_workers=2)  # (shard, first, stop) per worker
        [(1, 0, 1)]
        >>> seek = lambda shard, start: iter(range(10 * shard + start, 10 * shard + sizes[shard]))
        >>> list(ShardedIterableDataset([0, 1, 2], sizes, seek, num_replicas=3, rank=2,
        ...                             shuffle=False, seekable=True))  # seek(2, 2), seek(0, 0)
        [22, 23, 0]
    """

    def __init__(
        self,
        shards: Sequence[Any],
        sizes: Sequence[int],
        read: Callable[..., Iterable[T]],
        *,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
        seekable: bool = False,
        batch_size: int | None = None,
        key: Callable[[Any], str] | None = None,
    ) -> None:
        for name, value in (("shards", shards), ("sizes", sizes)):
            if not hasattr(value, "__len__") or isinstance(value, (str, bytes)):
                raise TypeError(
                    f"{name} should be a sequence (a list, a tuple, an array), but got "
                    f"{name}={value!r} of type {type(value).__name__}"
                )
        if len(shards) == 0:
            raise ValueError(f"shards should hold at least one shard, but got shards={shards!r}")
        if len(sizes) != len(shards):
            raise ValueError(
                f"sizes should hold one size per shard (len(shards)={len(shards)}), but got "
                f"len(sizes)={len(sizes)}"
            )
        if not callable(read):
            raise TypeError(
                f"read should be a callable, read(shard) -> samples, but got read={read!r}"
            )
        self.shards, self.read = list(shards), read
        self.sizes = [check_int64(f"sizes[{i}]", s, low=0) for i, s in enumerate(sizes)]
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.shuffle, self.seed = check_bool("shuffle", shuffle), check_seed(seed)
        self.drop_last = check_bool("drop_last", drop_last)
        self.seekable = check_bool("seekable", seekable)
        self.batch_size = 1 if batch_size is None else check_int("batch_size", batch_size, low=1)
        self._batch_given = batch_size is not None
        self.total = sum(self.sizes)  # T: samples in one epoch's stream
        self._identity = {"shards": _digest(_names(self.shards, key)), "sizes": _digest(self.sizes),
                          "seed": self.seed, "shuffle": self.shuffle, "drop_last": self.drop_last,
                          "batch_size": self.batch_size}  # fmt: skip
        # an epoch read by DataLoader workers (epoch + 1; shared): their places are theirs
        self._in_workers = torch.zeros(1, dtype=torch.int64).share_memory_()
        self._before = 0  # samples this rank read of the epoch before a resume on another world
        # the epoch in shared memory: persistent DataLoader workers see every set_epoch
        self._epoch = torch.zeros(1, dtype=torch.int64).share_memory_()
        # ... and in this object: a worker started by iter(loader) holds it as it was then, so a
        # set_epoch after the loop began (a late call) never reaches a worker slow to start
        self._set, self._pinned, self._pid = 0, None, None
        self._warned = torch.zeros(1, dtype=torch.int64).share_memory_()  # the batch_size warning
        self._passes = pass_marks()  # the latest pass's epoch, a set_epoch since (shared)
        self._trainer = TrainerEpoch()  # the current_epoch of a Lightning Trainer (0: none)
        self._reset(0)

    # --- the split ---------------------------------------------------------------------------

    def _reset(self, epoch: int) -> None:
        # what is left of `epoch`: stream intervals to read, and a loaded worker state
        self._of_epoch, self._todo = epoch, [(0, self.total)] if self.total else []
        self._loaded: tuple[int, int, int] | None = None  # (worker, num_workers, position)
        self._where: tuple[int, int] | None = None  # (worker, num_workers) of the last iter()
        self._progress: list[Any] = [0, 0, iter(())]  # done, current run's length, its counter
        self._before = 0

    def _current(self) -> list[tuple[int, int]]:
        if self._of_epoch != self.epoch:  # set_epoch moved on (seen in a persistent worker)
            self._reset(self.epoch)
        return self._todo

    def _rank_length(self, todo: list[tuple[int, int]]) -> int:
        left = sum(b - a for a, b in todo)  # R: stream positions left to read
        return split_sizes(left, self.num_replicas, self.drop_last)[0]  # L = ceil (floor) R / W

    def __len__(self) -> int:
        # a Lightning fit that counts the batches: its epoch is ours from now on (never behind)
        fit = note_trainer(self._passes, self._trainer)
        self._trainer = fit or self._trainer
        # this rank's samples of the whole epoch: read before a resume on another world, then left
        n = self._before + self._rank_length(self._current())
        if fit is not None and not fit.recounts:  # counted once, every epoch cut there: the most
            n = max(n, split_sizes(self.total, self.num_replicas, self.drop_last)[0])
        return n

    def worker_runs(self, worker: int = 0, num_workers: int = 1) -> Runs:
        r"""What worker ``worker`` of ``num_workers`` yields this epoch, from a fresh ``iter()``.

        Returns ``[(shard index, first, stop), ...]``: samples ``first .. stop - 1`` of
        ``shards[index]``, in the order they are yielded.
        """
        return self._runs(worker, num_workers, skip=0)

    def _runs(self, worker: int, num_workers: int, skip: int) -> Runs:
        num_workers = check_int("num_workers", num_workers, low=1)
        worker = check_int("worker", worker, low=0, high=num_workers - 1)
        todo = self._current()
        left, length = sum(b - a for a, b in todo), self._rank_length(todo)
        a, b = (self.rank * length + x for x in _part(length, worker, num_workers, self.batch_size))
        a += skip  # a resumed worker: what it yielded before is behind it
        order = epoch_permutation(len(self.sizes), self.shuffle, self.seed, self.epoch).tolist()
        starts = list(accumulate((self.sizes[i] for i in order), initial=0))  # shards in stream
        rest = list(accumulate((e - s for s, e in todo), initial=0))  # todo intervals in the rest
        runs: Runs = []
        while a < b:  # positions of the rest; past its end, its head again (padding)
            q = a % left
            n = min(b - a, left - q)
            for j, offset, m in _cut(rest, q, q + n):
                p = todo[j][0] + offset  # stream position
                for k, first, c in _cut(starts, p, p + m):
                    if runs and runs[-1][0] == order[k] and runs[-1][2] == first:
                        runs[-1] = (order[k], runs[-1][1], first + c)  # the same shard, read on
                    else:
                        runs.append((order[k], first, first + c))
            a += n
        return runs

    # --- reading -------------------------------------------------------------------------------

    def _read_runs(self, runs: Runs, progress: list[Any]) -> Iterator[Iterator[T]]:
        it, shard, at = iter(()), -1, 0  # the open shard's samples, its index, the next one's
        for i, first, stop in runs:
            if i != shard or at > first or (self.seekable and at < first):
                # another shard, its head again (padding), or a gap that a seek jumps: open it
                shard, at = i, first if self.seekable else 0
                args = (self.shards[i], at) if self.seekable else (self.shards[i],)
                samples = self.read(*args)
                try:
                    it = iter(samples)
                except TypeError:  # a read that forgot to return: None
                    call = f"read({', '.join(map(repr, args))})"
                    raise TypeError(
                        f"read should return an iterable of the shard's samples, but got "
                        f"{call}={samples!r} for shard {self.shards[i]!r} (shards[{i}])"
                    ) from None
            deque(islice(it, first - at), maxlen=0)  # front to back: draw up to `first`, drop
            counter = repeat(True, stop - first)  # length_hint(counter): what is left to yield
            progress[1:] = stop - first, counter
            # compress draws a sample (islice: never past `stop`), then a True, at C speed and
            # with nothing allocated: the Trues drawn are exactly the samples yielded, and a
            # short shard leaves Trues over
            yield compress(islice(it, stop - first), counter)
            got = stop - first - length_hint(counter)
            progress[:2] = progress[0] + got, 0
            if got < stop - first:
                self._wrong_size(i, f"ended before its sample {first + got}")
            if stop == self.sizes[i] and next(it, _END) is not _END:
                self._wrong_size(i, f"yielded more than {stop} samples")
            at = stop

    def _wrong_size(self, i: int, what: str) -> None:
        call = ("read(shard, start) should yield samples start .. sizes[i] - 1" if self.seekable
                else "read(shard) should yield exactly sizes[i] samples")  # fmt: skip
        raise ValueError(
            f"shard {self.shards[i]!r} (shards[{i}]) {what}, but sizes[{i}]={self.sizes[i]}: {call}"
        )

    def iter_worker(self, worker: int = 0, num_workers: int = 1) -> Iterator[T]:
        r"""The samples worker ``worker`` of ``num_workers`` yields (what ``iter()`` runs)."""
        self._current()  # a position loaded for another epoch is dropped first
        saved_worker, saved_workers, skip = self._loaded or (worker, num_workers, 0)
        if (saved_worker, saved_workers) != (worker, num_workers):
            raise ValueError(
                f"state was saved by worker {saved_worker} of {saved_workers}, but is read by "
                f"worker {worker} of {num_workers}: resume with the same num_workers, or load "
                "every worker's state at once (load_state_dict(loader_dataset_states(state)))"
            )
        runs = self._runs(worker, num_workers, skip)
        self._where, self._progress = (worker, num_workers), [skip, 0, iter(())]
        return chain.from_iterable(self._read_runs(runs, self._progress))

    def __iter__(self) -> Iterator[T]:
        # accelerate's prepare(loader) would split this share again (its dispatcher: set_epoch)
        refuse_split_again(self, ("BatchSamplerShard", "IterableDatasetShard"))
        info = get_worker_info()  # None in the main process (num_workers=0)
        fresh = info is None or self._pid != os.getpid()  # it sees a Trainer as it is now
        if info is not None:
            # the first iter() of a worker process reads the epoch of its start (iter(loader));
            # a persistent worker's later ones, the epoch set_epoch shared since
            self._pinned = self._set if fresh else None
            self._pid = os.getpid()
        # nothing, or the error of an epoch read again
        head = begin_pass(self, self._passes, self._trainer.training(), fresh)
        if info is not None:
            self._in_workers[0] = self.epoch + 1
            if info.id == 0 and info.num_workers > 1 and not self._batch_given:
                self._warn_batches(info.num_workers)
        where = (0, 1) if info is None else (info.id, info.num_workers)
        return chain(head, self.iter_worker(*where))

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch: the shards' order is drawn from ``(seed, epoch)``; every rank alike.
        Under Lightning's ``Trainer`` the epoch is never behind its ``current_epoch``."""
        epoch = check_int("epoch", epoch, low=0, high=2**63 - 1)
        check_seed(self.seed, epoch if self.shuffle else 0)
        self._epoch[0], self._set, self._passes[0] = epoch, epoch, 1
        refuse_split_again(self, ("DataLoaderDispatcher",))  # called by it before each pass

    @property
    def epoch(self) -> int:
        # under Lightning's Trainer, never behind its current_epoch (it sets samplers' only)
        return max(int(self._epoch[0]) if self._pinned is None else self._pinned, self._trainer())

    def _warn_batches(self, num_workers: int) -> None:
        # once per dataset (a flag the workers share): split sample by sample, the workers can
        # end on several short batches, one batch more each than len(loader) counts
        length = self._rank_length(self._current())
        ranges = [b - a for a, b in (_part(length, k, num_workers) for k in range(num_workers))]
        miss = {b: sum(-(-r // b) for r in ranges) - -(-length // b) for b in range(1, length + 1)}
        if self._warned[0] or max(miss.values(), default=0) == 0:
            return
        self._warned[0] = 1
        some = ", ".join(f"{miss[b]} with batch_size={b}" for b in (2, 4, 8, 16, 32, 64)
                         if b <= length)  # fmt: skip
        warnings.warn(
            f"ShardedIterableDataset is read by {num_workers} DataLoader workers without "
            f"batch_size=: split sample by sample ({' + '.join(map(str, ranges))} of this rank's "
            f"{length}), the workers' short batches make the loader yield more batches than "
            f"len(loader) counts, and a Trainer, which ends the epoch at len(loader), never "
            f"trains on them: len(loader) misses up to {max(miss.values())} of them ({some}). "
            "Pass ShardedIterableDataset(..., batch_size=B), B the DataLoader's batch_size",
            stacklevel=3,
        )

    # --- resume --------------------------------------------------------------------------------

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""This worker's place in the epoch (the main process's, with ``num_workers=0``): JSON-ready.

        Args:
            consumed: samples of the latest ``iter()`` the loop used (``None``: all it handed
                out); with DataLoader workers only torchdata's ``StatefulDataLoader`` can ask.
        """
        todo, info = self._current(), get_worker_info()
        if info is None and int(self._in_workers[0]) == self.epoch + 1:
            # workers read this epoch: a place this process holds (a look at the data first, a
            # loaded state) is not where the loop is, whatever iter() ran here before or after
            seen = " (this process's own reads are not the loop's)" if self._where else ""
            raise RuntimeError(
                "state_dict() was called in the main process, but DataLoader workers read this "
                f"epoch ({self.epoch}) from their own copies: only they know their places"
                f"{seen}. Resume through torchdata's StatefulDataLoader (it asks every worker), "
                "or read the epoch with num_workers=0 (after load_state_dict or another "
                "set_epoch, a state can be taken here again)"
            )
        here = (0, 1) if info is None else (info.id, info.num_workers)
        worker, num_workers = self._where or here
        done, length, counter = self._progress
        position = done + length - length_hint(counter)
        if consumed is not None:
            skip = self._loaded[2] if self._loaded else 0
            why = f"the latest iter() handed out {position - skip}"
            position = skip + check_consumed(consumed, position - skip, why)
        return {"kind": type(self).__name__, "version": 1, **self._identity,
                "epoch": self.epoch, "num_replicas": self.num_replicas,
                "todo": [list(t) for t in todo], "worker": worker, "num_workers": num_workers,
                "position": position, "before": self._before}  # fmt: skip

    def _checked(self, state: object) -> dict[str, Any]:
        if not isinstance(state, dict):
            raise TypeError(f"state should be a dict from state_dict(), but got state={state!r}")
        keys = ("kind", "version", *self._identity, "epoch", "num_replicas", "todo", "worker",
                "num_workers", "position", "before")  # fmt: skip
        missing = any(k not in state for k in keys)
        if missing or state["kind"] != type(self).__name__ or state["version"] != 1:
            raise ValueError(f"state is not a {type(self).__name__} state_dict(): got {state!r}")
        for key, now in {**self._identity, "epoch": self.epoch}.items():
            if state[key] != now:
                hint = _HINTS.get(key, "").format(state[key])
                raise ValueError(
                    f"state does not match this dataset: {key} was {state[key]!r} when saved, "
                    f"but is {now!r} now{hint}"
                )
        end = 0
        for a, b in state["todo"]:  # sorted, disjoint, non-empty intervals of [0, total)
            if not end <= a < b <= self.total:
                raise ValueError(f"state has a bad todo={state['todo']!r} for {self.total} samples")
            end = b
        left = sum(b - a for a, b in state["todo"])
        length = split_sizes(left, state["num_replicas"], self.drop_last)[0]
        lo, hi = _part(length, state["worker"], state["num_workers"], self.batch_size)
        check_int("position", state["position"], low=0, high=hi - lo)  # within its worker's range
        return state

    def load_state_dict(self, state: dict[str, Any] | list[dict[str, Any]]) -> None:
        r"""Resume: one worker's state (same ranks and workers), or every worker's of one rank.

        A ``dict`` (what ``StatefulDataLoader`` gives each worker) resumes that worker where it
        stopped. A ``list`` of every worker's state of one rank (:func:`loader_dataset_states`)
        resumes on any number of ranks: the stream positions every rank consumed are dropped,
        the rest is split over this world (any ``num_workers``; load it before ``iter()``).
        """
        if isinstance(state, dict):
            state = self._checked(state)
            if state["num_replicas"] != self.num_replicas:
                raise ValueError(
                    f"state was saved on num_replicas={state['num_replicas']}, but is loaded on "
                    f"num_replicas={self.num_replicas}: load every worker's state at once "
                    "(load_state_dict(loader_dataset_states(loader_state)))"
                )
            self._todo, self._of_epoch = [tuple(t) for t in state["todo"]], self.epoch
            self._loaded = (state["worker"], state["num_workers"], state["position"])
            self._before = check_int("before", state["before"], low=0)
            self._where, self._progress = self._loaded[:2], [state["position"], 0, iter(())]
            self._placed_here()
            return
        states = [self._checked(s) for s in state]
        n = states[0]["num_workers"] if states else 0
        same = all(s[k] == states[0][k] for s in states for k in ("num_replicas", "todo"))
        if not states or not same or sorted(s["worker"] for s in states) != list(range(n)):
            raise ValueError(
                "state should list every worker's state of one rank (workers 0..n-1, one "
                f"run), but got workers {[s['worker'] for s in states]}"
            )
        todo, world = [tuple(t) for t in states[0]["todo"]], states[0]["num_replicas"]
        left = sum(b - a for a, b in todo)
        length = split_sizes(left, world, self.drop_last)[0]
        consumed = []  # every rank read alike: worker k's first `position` of each rank's range
        for s in states:
            lo = _part(length, s["worker"], n, self.batch_size)[0]
            consumed += [(r * length + lo, r * length + lo + s["position"]) for r in range(world)]
        keep, q = [], 0  # intervals of the rest that no rank consumed (padding: past `left`)
        for a, b in [*sorted(consumed), (left, left)]:
            if a > q:
                keep.append((q, min(a, left)))
            q = max(q, min(b, left))
        rest_starts, rest = list(accumulate((e - s for s, e in todo), initial=0)), []
        for a, b in keep:  # back to positions of the epoch's stream
            for j, offset, m in _cut(rest_starts, a, b):
                p = todo[j][0] + offset
                if rest and rest[-1][1] == p:
                    rest[-1] = (rest[-1][0], p + m)
                else:
                    rest.append((p, p + m))
        before = check_int("before", states[0]["before"], low=0)
        self._todo, self._of_epoch, self._loaded = rest, self.epoch, None
        self._before = before + sum(s["position"] for s in states)  # each rank read this many
        self._placed_here()

    def _placed_here(self) -> None:
        # a place loaded in the main process: what DataLoader workers read before it is past (a
        # worker's own load, StatefulDataLoader's, is followed by that worker's iter())
        if get_worker_info() is None:
            self._in_workers[0] = 0

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({len(self.shards)} shards, {self.total} samples, "
            f"num_replicas={self.num_replicas}, rank={self.rank}, shuffle={self.shuffle}, "
            f"seed={self.seed}, drop_last={self.drop_last}, seekable={self.seekable})"
        )
