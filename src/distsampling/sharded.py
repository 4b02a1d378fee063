r"""ShardedIterableDataset: which rank, and which DataLoader worker, reads which sample of shards.

A streaming dataset is a list of shards (files, URLs, ids), each read front to back. Here the
epoch is one *stream*: the shards in an order drawn from ``(seed, epoch)`` (torch's
``randperm``, as DistributedSampler draws its order), their samples concatenated, ``T`` in all.

1. Ranks. The stream is padded with its own head to ``W * ceil(T / W)`` positions (position
   ``p >= T`` reads ``stream[p % T]``, DistributedSampler's padding) or cut to ``W * (T // W)``
   with ``drop_last``, and rank ``r`` takes the *contiguous* range ``[r * L, (r + 1) * L)``,
   ``L`` per rank. Every rank yields exactly ``L`` samples, so DDP's collectives pair up.
   DistributedSampler's split is strided (rank ``r`` reads ``r, r + W, ...``); on a stream that
   would make every rank open every shard and skip ``W - 1`` samples in ``W``.
2. Workers. Each rank's range is cut again into ``num_workers`` contiguous ranges (worker
   ``k`` of ``n`` takes ``[L * k // n, L * (k + 1) // n)``). A worker opens only the shards
   its range touches: ``read(shard)`` once per shard, in stream order. In the first one it
   skips (draws from the iterator and drops, never yields) the samples before its range; it
   stops drawing at the last sample it needs, except that the worker whose range holds a
   shard's last sample draws once more, to check that the shard ends there. Shards of size 0
   are never opened. So no worker yields, or draws past the start of its range, a sample that
   another worker yields, but a worker does draw the head of its first shard: ``read`` should
   decode lazily (per sample, on ``next``) if that head is costly.

What ``num_workers`` changes: the set of samples a rank yields, and how many, never; their
order does. The DataLoader takes one batch from each worker in turn, so with ``n`` workers a
rank's batches interleave the ``n`` ranges, and each range ends with its own partial batch
(``sum(ceil(len_k / batch_size))`` batches, the same on every rank since every rank's ranges
have the same lengths).

Resume. :meth:`ShardedIterableDataset.state_dict` is the position of one worker in its range
(torchdata's ``StatefulDataLoader`` asks every worker for it, and gives it back to the same
worker on resume). On another number of ranks, load every worker's state of one rank at once
(:func:`loader_dataset_states`): every rank read alike (same DataLoader settings, in step, as
under DDP), so those states say which positions of the stream all ranks consumed; the rest is
split again over the new world.

References:
    torch/utils/data/distributed.py (DistributedSampler: the order and the padding);
    torch/utils/data/dataset.py (IterableDataset, get_worker_info);
    torchdata/stateful_dataloader/worker.py (how each worker's state is saved and restored).
"""

from __future__ import annotations

import hashlib
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import accumulate, chain, compress, islice
from operator import length_hint
from typing import Any, TypeVar

import torch
from torch.utils.data import IterableDataset, get_worker_info

from ._validate import (
    check_bool,
    check_int,
    check_seed,
    epoch_permutation,
    resolve_world,
    split_sizes,
)

__all__ = ["ShardedIterableDataset", "loader_dataset_states"]

T = TypeVar("T")
_END = object()
Runs = list[tuple[int, int, int]]  # (shard index, first sample, stop): what one worker yields


def _digest(value: object) -> str:
    # a short fingerprint, stable across processes for shards with a stable repr (paths, ids)
    return hashlib.sha256(repr(value).encode()).hexdigest()[:16]


def loader_dataset_states(loader_state: dict[str, Any]) -> list[dict[str, Any]]:
    r"""Every worker's dataset state in a ``StatefulDataLoader.state_dict()``, worker 0 first.

    Pass the list to :meth:`ShardedIterableDataset.load_state_dict` to resume on another
    number of ranks. The loader must snapshot every step (``snapshot_every_n_steps=1``, the
    default): a state that lags the loader would not say what was consumed.
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


class ShardedIterableDataset(IterableDataset[T]):
    r"""Stream ``shards`` so that every rank yields the same number of samples, each read once.

    Each epoch the shards are shuffled with ``(seed, epoch)``, the same on every rank; the
    stream of their samples is padded (or cut) and split into one contiguous range per rank,
    then per DataLoader worker (the module docstring has the arithmetic). Call
    :meth:`set_epoch` every epoch, as with DistributedSampler.

    Args:
        shards: shard descriptors (paths, URLs, ids), anything ``read`` takes and pickle can send
            to workers; their ``repr`` identifies the list in a saved state.
        sizes: ``sizes[i]`` is the number of samples in ``shards[i]`` (``>= 0``).
        read: ``read(shard)`` yields that shard's samples, in order, exactly ``sizes[i]`` of them.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        shuffle: shuffle the shards each epoch (the samples of a shard keep their order).
        seed: base seed; must be the same on every rank.
        drop_last: cut the stream's tail instead of padding it with its head.

    Examples:
        >>> read = lambda shard: iter(range(10 * shard, 10 * shard + [3, 1, 4][shard]))
        >>> ranks = [ShardedIterableDataset([0, 1, 2], [3, 1, 4], read, num_replicas=3,
        ...                                 rank=r, shuffle=False) for r in range(3)]
        >>> [list(ds) for ds in ranks]  # 8 samples, 3 per rank: the head pads the last rank
        [[0, 1, 2], [10, 20, 21], [22, 23, 0]]
        >>> ranks[1].worker_runs(worker=0, num_workers=2)  # (shard, first, stop) per worker
        [(1, 0, 1)]
    """

    def __init__(
        self,
        shards: Sequence[Any],
        sizes: Sequence[int],
        read: Callable[[Any], Iterable[T]],
        *,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
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
        self.sizes = [check_int(f"sizes[{i}]", s, low=0) for i, s in enumerate(sizes)]
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.shuffle = check_bool("shuffle", shuffle)
        self.seed = check_seed(seed)
        self.drop_last = check_bool("drop_last", drop_last)
        self.total = sum(self.sizes)  # T: samples in one epoch's stream
        self._identity = {"shards": _digest(self.shards), "sizes": _digest(self.sizes),
                          "seed": self.seed, "shuffle": self.shuffle, "drop_last": self.drop_last}  # fmt: skip
        # the epoch in shared memory: persistent DataLoader workers see every set_epoch
        self._epoch = torch.zeros(1, dtype=torch.int64).share_memory_()
        self._reset(0)

    # --- the split ---------------------------------------------------------------------------

    def _reset(self, epoch: int) -> None:
        # what is left of `epoch`: stream intervals to read, and this worker's loaded position
        self._of_epoch, self._todo = epoch, [(0, self.total)] if self.total else []
        self._loaded: tuple[int, int, int] | None = None  # (worker, num_workers, position)
        self._progress: list[Any] = [0, 0, iter(())]  # done, current run's length, its counter

    def _current(self) -> list[tuple[int, int]]:
        if self._of_epoch != self.epoch:  # set_epoch moved on (seen in a persistent worker)
            self._reset(self.epoch)
        return self._todo

    def _rank_length(self, todo: list[tuple[int, int]]) -> int:
        left = sum(b - a for a, b in todo)  # R: stream positions left to read
        return split_sizes(left, self.num_replicas, self.drop_last)[0]  # L = ceil (floor) R / W

    def __len__(self) -> int:
        return self._rank_length(self._current())

    def worker_runs(self, worker: int = 0, num_workers: int = 1) -> Runs:
        r"""What worker ``worker`` of ``num_workers`` yields this epoch, from a fresh ``iter()``.

        Returns ``[(shard index, first, stop), ...]``: samples ``first .. stop - 1`` of
        ``shards[index]``, in the order they are yielded.
        """
        num_workers = check_int("num_workers", num_workers, low=1)
        worker = check_int("worker", worker, low=0, high=num_workers - 1)
        todo = self._current()
        left, length = sum(b - a for a, b in todo), self._rank_length(todo)
        # this worker's range of the (padded) rest of the stream: rank part, then worker part
        a = self.rank * length + length * worker // num_workers
        b = self.rank * length + length * (worker + 1) // num_workers
        order = epoch_permutation(len(self.sizes), self.shuffle, self.seed, self.epoch).tolist()
        starts = list(accumulate((self.sizes[i] for i in order), initial=0))  # (S + 1,)
        todo_starts = list(accumulate((e - s for s, e in todo), initial=0))
        runs: Runs = []
        while a < b:
            q = a % left  # past the end: the head of the rest again (padding)
            j = bisect_right(todo_starts, q) - 1  # the interval of the rest that holds q
            p = todo[j][0] + q - todo_starts[j]  # stream position
            k = bisect_right(starts, p) - 1  # the shard (in this epoch's order) that holds p
            first = p - starts[k]
            n = min(b - a, todo[j][1] - p, self.sizes[order[k]] - first)
            if runs and runs[-1][0] == order[k] and runs[-1][2] == first:
                runs[-1] = (order[k], runs[-1][1], first + n)  # the same shard, read on
            else:
                runs.append((order[k], first, first + n))
            a += n
        return runs

    # --- reading -------------------------------------------------------------------------------

    def _read_runs(self, runs: Runs, progress: list[Any]) -> Iterator[Iterator[T]]:
        it, shard, at = None, -1, 0  # the open shard's samples, its index, the next one's index
        for i, first, stop in runs:
            if i != shard or at > first:  # another shard (or the head again): open it
                it, shard, at = iter(self.read(self.shards[i])), i, 0
            deque(islice(it, first - at), maxlen=0)  # skip to `first`: drawn, never yielded
            counter = iter(range(1, stop - first + 1))  # all true; length_hint: what is left
            progress[1:] = stop - first, counter
            # compress draws a sample (islice: never past `stop`), then a count, at C speed:
            # the counts drawn are exactly the samples yielded; a short shard leaves counts over
            yield compress(islice(it, stop - first), counter)
            got = stop - first - length_hint(counter)
            progress[:2] = progress[0] + got, 0
            if got < stop - first:
                self._wrong_size(i, f"ended before its sample {first + got}")
            if stop == self.sizes[i] and next(it, _END) is not _END:
                self._wrong_size(i, f"yielded more than {stop} samples")
            at = stop

    def _wrong_size(self, i: int, what: str) -> None:
        raise ValueError(
            f"shard {self.shards[i]!r} (shards[{i}]) {what}, but sizes[{i}]={self.sizes[i]}: "
            "read(shard) should yield exactly sizes[i] samples"
        )

    def iter_worker(self, worker: int = 0, num_workers: int = 1) -> Iterator[T]:
        r"""The samples worker ``worker`` of ``num_workers`` yields (what ``iter()`` runs)."""
        runs = self.worker_runs(worker, num_workers)
        skip = 0
        if self._loaded is not None:  # a resumed worker: drop what it read before
            if self._loaded[:2] != (worker, num_workers):
                raise ValueError(
                    f"this state was saved by worker {self._loaded[0]} of "
                    f"{self._loaded[1]}, but is read by worker {worker} of {num_workers}: "
                    "resume with the same num_workers"
                )
            skip = self._loaded[2]
        self._where, self._progress = (worker, num_workers), [skip, 0, iter(())]
        while runs and skip:  # drop the first `skip` samples of the runs
            i, first, stop = runs[0]
            n = min(skip, stop - first)
            runs[0], skip = (i, first + n, stop), skip - n
            runs = runs[1:] if first + n == stop else runs
        return chain.from_iterable(self._read_runs(runs, self._progress))

    def __iter__(self) -> Iterator[T]:
        info = get_worker_info()  # None in the main process (num_workers=0)
        return self.iter_worker(*((0, 1) if info is None else (info.id, info.num_workers)))

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch: the shards' order is drawn from ``(seed, epoch)``; every rank alike."""
        epoch = check_int("epoch", epoch, low=0, high=2**63 - 1)
        check_seed(self.seed, epoch if self.shuffle else 0)
        self._epoch[0] = epoch

    @property
    def epoch(self) -> int:
        return int(self._epoch[0])

    # --- resume --------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        r"""This worker's place in the epoch (the main process's, with ``num_workers=0``): JSON-ready."""
        todo = self._current()
        info = get_worker_info()
        worker, num_workers = getattr(self, "_where", None) or (
            (0, 1) if info is None else (info.id, info.num_workers)
        )
        done, length, counter = self._progress
        return {"kind": type(self).__name__, "version": 1, **self._identity,
                "epoch": self.epoch, "num_replicas": self.num_replicas,
                "todo": [list(t) for t in todo], "worker": worker, "num_workers": num_workers,
                "position": done + length - length_hint(counter)}  # fmt: skip

    def _checked(self, state: object) -> dict[str, Any]:
        if not isinstance(state, dict):
            raise TypeError(f"state should be a dict from state_dict(), but got state={state!r}")
        keys = ("kind", "version", *self._identity, "epoch", "num_replicas", "todo", "worker",
                "num_workers", "position")  # fmt: skip
        missing = [k for k in keys if k not in state]
        if missing or state["kind"] != type(self).__name__ or state["version"] != 1:
            raise ValueError(f"state is not a {type(self).__name__} state_dict(): got {state!r}")
        for key, now in {**self._identity, "epoch": self.epoch}.items():
            if state[key] != now:
                hint = f": call set_epoch({state[key]}) first" if key == "epoch" else ""
                raise ValueError(
                    f"state does not match this dataset: {key} was {state[key]!r} when saved, "
                    f"but is {now!r} now{hint}"
                )
        todo, end = [tuple(t) for t in state["todo"]], 0
        for a, b in todo:  # sorted, disjoint, non-empty intervals of [0, total)
            if not end <= a < b <= self.total:
                raise ValueError(f"state has a bad todo={state['todo']!r} for {self.total} samples")
            end = b
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
            info = get_worker_info()
            here = (0, 1) if info is None else (info.id, info.num_workers)
            saved = (state["worker"], state["num_workers"])
            if state["num_replicas"] != self.num_replicas or saved != here:
                raise ValueError(
                    f"state was saved by worker {saved[0]} of {saved[1]} on "
                    f"num_replicas={state['num_replicas']}, but is loaded by worker {here[0]} of "
                    f"{here[1]} on num_replicas={self.num_replicas}: resume with the same "
                    "num_workers, or load every worker's state at once "
                    "(load_state_dict(loader_dataset_states(loader_state)))"
                )
            todo = [tuple(t) for t in state["todo"]]
            self._todo, self._of_epoch = todo, self.epoch
            length = self._rank_length(todo)
            span = length * (saved[0] + 1) // saved[1] - length * saved[0] // saved[1]
            position = check_int("position", state["position"], low=0, high=span)
            self._loaded, self._where = (*here, position), here
            self._progress = [position, 0, iter(())]
            return
        states = [self._checked(s) for s in state]
        first = states[0] if states else {}
        n = first.get("num_workers", 0)
        same = all(s[k] == first[k] for s in states for k in ("num_replicas", "todo"))
        if not same or sorted(s["worker"] for s in states) != list(range(n)):
            raise ValueError(
                "state should list every worker's state of one rank (workers 0..n-1, one "
                f"run), but got workers {[s['worker'] for s in states]}"
            )
        todo, world = [tuple(t) for t in first["todo"]], first["num_replicas"]
        left = sum(b - a for a, b in todo)
        length = split_sizes(left, world, self.drop_last)[0]
        consumed = []  # every rank read alike: worker k's first `position` of each rank's range
        for s in states:
            k = s["worker"]
            lo, hi = length * k // n, length * (k + 1) // n  # worker k's range in a rank's
            m = check_int("position", s["position"], low=0, high=hi - lo)
            consumed += [(r * length + lo, r * length + lo + m) for r in range(world)]
        consumed.sort()
        keep, q = [], 0  # stream intervals of the rest not consumed (padding: past `left`)
        for a, b in [*consumed, (left, left)]:
            if a > q:
                keep.append((q, min(a, left)))
            q = max(q, min(b, left))
        todo_starts = list(accumulate((e - s for s, e in todo), initial=0))
        rest: list[tuple[int, int]] = []
        for a, b in keep:  # back to positions of the epoch's stream
            while a < b:
                j = bisect_right(todo_starts, a) - 1
                p = todo[j][0] + a - todo_starts[j]
                n_ = min(b - a, todo[j][1] - p)
                if rest and rest[-1][1] == p:
                    rest[-1] = (rest[-1][0], p + n_)
                else:
                    rest.append((p, p + n_))
                a += n_
        self._todo, self._of_epoch, self._loaded = rest, self.epoch, None

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({len(self.shards)} shards, {self.total} samples, "
            f"num_replicas={self.num_replicas}, rank={self.rank}, shuffle={self.shuffle}, "
            f"seed={self.seed}, drop_last={self.drop_last})"
        )
