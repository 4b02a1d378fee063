r"""ShardedMixtureDataset: K sharded streams mixed by weight, read front to back by every worker.

*Readers* are ranks × workers, ``R = W·n``: the DataLoader's worker ``w`` of ``n`` yields the
steps ``s ≡ w (mod n)``, and the loader takes a batch from each worker in turn, so its batches
are a rank's micro-batches of steps 0, 1, 2, ... (the loader's ``batch_size`` must be the
dataset's: another is refused at the first batch).

Which source: every reader reads a window of ``MixtureSampler``'s weight tree
(``mixture_readers.py``): reader ``ρ`` of rank ``r``, at its ``m``-th own step, reads the tree's
window ``m + ρ·W + r``. Each reader stays within the tree's bound of its share on every prefix,
each global batch too (a step's windows are consecutive), and with one reader a rank and fixed
weights the sources are ``MixtureSampler(..., layout="per_rank")``'s (a schedule starts a new
tree at each change). A reader's count of each source before any step
is a closed form, so ``counts_at``, ``batch_at`` and an elastic resume cost the same at any step.

Which sample: each pass of a source lists its shards in an order drawn from ``(seed, k, P)``;
the source's draws have one global order (step by step, ranks in order), pass ``P`` is its
draws ``P·T .. (P + 1)·T - 1``, and a reader's segment of it is its own draws among them, laid
end to end with the others' (``mixture_readers.py``): one open shard a source, a shard's head
dropped only where a segment starts inside it (none with ``seekable``: at most ``1 + R·(largest
shard - 1)/T`` drawn per sample yielded, a pass; a source with fewer shards than readers warns).
At every step boundary the reads are passes read whole and a part of one: no two passes overlap.

Readers per rank are the loader's ``num_workers``: pass it to the dataset, and the main process
(``num_workers=0``) reads every reader's steps in step order, exactly what the loader's workers
would; left out, the first loader's workers fix it (a look in the main process before fixes
nothing). Resume and elastic resume: ``mixture_resume.py``; sources and their fingerprints:
``mixture_sources.py``.

References:
    distsampling/mixing/tree.py (the weight tree and its bound)
    torch/utils/data/dataloader.py (_IterableDatasetFetcher: workers' batches taken in turn)
    distsampling/streaming/sharded.py (sources as (shards, sizes, read); front-to-back runs; resume)
"""

from __future__ import annotations

import inspect
import os
import sys
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from itertools import chain, islice
from typing import Any

import numpy as np
import torch
from torch.utils.data import IterableDataset, get_worker_info

from .._checks import check_bool, check_int
from ..guards import refuse_split_again
from ..mixing.sampler import MixtureSampler, _fitting_step, _last_epoch
from ..resume.state import TrainerEpoch, begin_pass, note_trainer, pass_marks
from .mixture_readers import ReaderGrid, _Runs, schedule_trees
from .mixture_resume import _Resume
from .mixture_sources import Source, _entries, _fingerprint, _source

__all__ = ["ShardedMixtureDataset"]

_END = object()


class ShardedMixtureDataset(_Resume, _Runs, IterableDataset):
    r"""Mix ``K`` sharded sources by weight; each worker reads its samples as shard runs.

    Args:
        sources: ``K`` triples ``(shards, sizes, read)``, as :class:`ShardedIterableDataset`
            takes them: ``read(shard)`` yields the shard's ``sizes[i]`` samples in order (with
            ``seekable``, ``read(shard, start)`` yields them from ``start``).
        weights: ``K`` numbers, or a schedule ``[(0, weights), (s1, weights), ...]`` by training
            step, as for :class:`MixtureSampler`.
        batch_size: a rank's micro-batch, and the DataLoader's ``batch_size``.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        seed: base seed of the sources' mix and of every pass's shard order (same on every rank).
        shuffle: each pass of a source lists its shards in a new order (else as given).
        epoch_length: global positions per epoch (default: all sources' samples).
        seekable: call ``read(shard, start)``: no sample is drawn that is not yielded.
        until_exhausted: ``None`` (cycle: a source that runs out starts its next pass), or a
            source ``k``: epoch ``e`` then ends, for every rank at the same step, before the
            step that would read the first sample of source ``k``'s pass ``e + 1``. Its epochs
            differ in length: under a Lightning ``Trainer``, which counts ``len(loader)`` once,
            it needs ``reload_dataloaders_every_n_epochs=1`` (else ``len()`` refuses).
        with_source: yield ``(source, sample)`` pairs: the loader's batches then record which
            source each sample came from.
        num_workers: the DataLoader's ``num_workers`` (readers per rank: worker ``w`` reads the
            steps ``s ≡ w``). Given, a loader with 0 workers reads exactly what one with
            ``num_workers`` does (the main process reads for every reader) and another count is
            refused; ``None``: the first DataLoader's workers fix it (a read in the main
            process before them is a look: one reader a rank, fixing nothing), and it must stay.
        key: ``key(shard)``, a text that names a shard the same way in every run (or a list,
            one ``key`` or ``None`` per source). A state
            names each source's shards (a digest of their names in order, ``O(1)`` a source),
            and a resume checks them; by default a shard's name is its path as text (a
            ``Path`` and its ``str`` alike), else its ``repr``, refused where that holds an
            address. A shard is its place in the list: equal names are allowed.

    Examples:
        >>> a = ([0, 1], [2, 2], lambda shard: iter(range(10 * shard, 10 * shard + 2)))
        >>> b = (["x"], [3], lambda shard: iter(["x0", "x1", "x2"]))
        >>> ds = ShardedMixtureDataset([a, b], [2, 1], batch_size=3, num_replicas=1, rank=0,
        ...                            shuffle=False)
        >>> list(ds)  # an epoch: the 3 steps that start in its 7 positions (2 of 0 for 1 of 1)
        [0, 'x0', 1, 10, 'x1', 11, 0, 'x2', 1]
        >>> ds.batch_at(1)  # rank 0's (source, shard, offset) at step 1, read from nothing
        [[(0, 1, 0), (1, 0, 1), (0, 1, 1)]]

        Shards that are objects (a ``repr`` with an address) are named by ``key=``:

        >>> class Shard:
        ...     def __init__(self, url):
        ...         self.url = url
        >>> c = ([Shard("s3://b/0.tar"), Shard("s3://b/1.tar")], [2, 2], lambda s: iter("pq"))
        >>> ShardedMixtureDataset([c], [1], 2, num_replicas=1, rank=0)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: sources[0] shards[0] should have a repr that is the same in every process ...
        >>> ds = ShardedMixtureDataset([c], [1], 2, num_replicas=1, rank=0, key=lambda s: s.url)
        >>> ds.state_dict()["sources"][0]["first"]  # a state names the shards by their keys
        "'s3://b/0.tar'"
    """

    def __init__(
        self,
        sources: Sequence[Source],
        weights: Any,
        batch_size: int,
        *,
        num_replicas: int | None = None,
        rank: int | None = None,
        seed: int = 0,
        shuffle: bool = True,
        epoch_length: int | None = None,
        seekable: bool = False,
        until_exhausted: int | None = None,
        with_source: bool = False,
        num_workers: int | None = None,
        key: Callable[[Any], str] | Sequence[Callable[[Any], str] | None] | None = None,
    ) -> None:
        if isinstance(sources, (str, bytes)) or not isinstance(sources, Sequence) or not sources:
            raise TypeError(
                f"sources should be a non-empty list of (shards, sizes, read), but got "
                f"sources={sources!r}"
            )
        self.sources = [_source(k, s) for k, s in enumerate(sources)]
        keys = key if isinstance(key, (list, tuple)) else [key] * len(self.sources)
        if len(keys) != len(self.sources) or not all(f is None or callable(f) for f in keys):
            raise TypeError(
                f"key should be a callable, key(shard) -> str, or one (or None) per source, but "
                f"got key={key!r} for {len(self.sources)} sources"
            )
        fingerprints = [_fingerprint(k, shards, sizes, f)
                        for k, ((shards, sizes, _), f) in enumerate(zip(self.sources, keys))]  # fmt: skip
        self.totals = [sum(sizes) for _, sizes, _ in self.sources]  # T_k: samples of a pass
        for g, (_, ws) in enumerate(_entries(weights)):
            ws = ws.tolist() if hasattr(ws, "tolist") else ws
            for k, w in enumerate(ws if isinstance(ws, (list, tuple)) else []):
                if k < len(self.totals) and self.totals[k] == 0 and isinstance(w, (int, float)) and w > 0:  # fmt: skip
                    where = "weights" if len(_entries(weights)) == 1 else f"weights[{g}][1]"
                    raise ValueError(
                        f"{where}[{k}]={w!r} should be 0: sources[{k}] has no sample (its sizes "
                        f"sum to 0)"
                    )
        self.mixture = MixtureSampler(self.totals, weights, batch_size, num_replicas, rank, seed,
                                      shuffle, epoch_length)  # fmt: skip
        self.batch_size, self.seed, self.shuffle = self.mixture.batch_size, seed, shuffle
        self._weights = weights
        self._trees = schedule_trees(self.mixture.schedule)  # [(step, weight tree)]
        self.num_replicas, self.rank = self.mixture.num_replicas, self.mixture.rank
        self.seekable = check_bool("seekable", seekable)
        self.with_source = check_bool("with_source", with_source)
        if until_exhausted is not None:
            until_exhausted = check_int("until_exhausted", until_exhausted, low=0,
                                        high=len(self.sources) - 1)  # fmt: skip
            if epoch_length is not None:
                raise ValueError(
                    f"epoch_length should be None with until_exhausted (the source's passes are "
                    f"the epochs), but got epoch_length={epoch_length}"
                )
            last = _entries(weights)[-1][1]
            last = last.tolist() if hasattr(last, "tolist") else list(last)
            if not last[until_exhausted] > 0:
                raise ValueError(
                    f"until_exhausted={until_exhausted} names a source whose last weight is "
                    f"{last[until_exhausted]!r}: it would never run out"
                )
        self.until_exhausted = until_exhausted
        self._identity = {"sources": fingerprints, "seed": seed, "shuffle": shuffle}
        # the epoch in shared memory (persistent workers see every set_epoch), and as set here
        self._epoch = torch.zeros(1, dtype=torch.int64).share_memory_()
        self._set, self._local, self._pid = 0, None, os.getpid()
        self._layouts: dict[tuple[int, int], tuple[list[int], list[int]]] = {}
        self._declared = (
            None if num_workers is None else max(1, check_int("num_workers", num_workers, low=0))
        )
        # shared with the loader's workers: [the epoch + 1 they read last, their num_workers, the
        # epoch + 1 the main process read before the readers were known (a look at the data)]
        self._in_workers = torch.zeros(3, dtype=torch.int64).share_memory_()
        self._passes = pass_marks()  # the latest pass's epoch, a set_epoch since (shared)
        self._trainer = TrainerEpoch()  # the current_epoch of a Lightning Trainer (0: none)
        self._begin = (0, 0, 0)  # (epoch, step, slot) where the latest iter() in this process began
        self._set_generation({"start": 0, "origin": 0, "before": 0, "num_workers": self._declared,
                              "read": [0] * len(self.sources), "lead": [[] for _ in self.sources],
                              "first": [0] * len(self.sources)})  # fmt: skip
        self._loaded: dict[str, Any] | None = None  # a worker's state, read by the next iter()
        self._carry: tuple[Any, int, dict[int, list[int]]] = (None, -1, {})  # (gen, stop, counts)
        self._progress: dict[str, Any] | None = None  # where the latest iter() is
        self._warned = False  # the unseekable warning, once

    # --- the grid: which steps, which positions ---------------------------------------------

    def _set_generation(self, gen: dict[str, Any]) -> None:
        self._gen = gen
        W, b = gen.get("num_replicas", self.num_replicas), gen.get("batch_size", self.batch_size)
        gen["num_replicas"], gen["batch_size"] = W, b
        self._origin, self._grids = gen["origin"], {}
        # the leftovers as (N, 3) arrays [pass, from, to]
        gen["lead"] = [np.asarray(lead, np.int64).reshape(-1, 3) for lead in gen["lead"]]
        self._ends: dict[int, int] = {}  # until_exhausted: epoch -> its last step boundary
        # kept on this grid, by readers a rank n: each source's plan at a stretch (n, k, p),
        # its readers' counts before it (n, k, "before", p), a segment's parts (n, k, p, j), the
        # readers' counts at a draw of its global order (n, k, p, G)
        self._plans: dict[tuple[Any, ...], Any] = {}
        self._segs: dict[tuple[int, ...], tuple[np.ndarray, ...]] = {}
        self._reaches: dict[tuple[int, ...], np.ndarray] = {}

    @property
    def _grid(self) -> ReaderGrid:
        """This grid's readers (``num_replicas`` × the readers a rank), made once a count."""
        g, n = self._gen, self._readers()
        if n not in self._grids:
            self._grids[n] = ReaderGrid(self._trees, g["start"], g["num_replicas"],
                                        g["batch_size"], n, len(self.sources))  # fmt: skip
        return self._grids[n]

    def _step_position(self, step: int) -> int:
        """The first global position of ``step`` (a global batch is consecutive positions)."""
        g = self._gen
        return self._origin + (step - g["start"]) * g["batch_size"] * g["num_replicas"]

    def _checked_step(self, step: object) -> int:
        """``step``, on this grid and with its global positions in int64 (< 2**63)."""
        g = self._gen
        step = check_int("step", step, low=g["start"])
        return _fitting_step(step, g["start"], self._origin, g["batch_size"] * g["num_replicas"])

    def _steps(self, epoch: int) -> range:
        """The steps of ``epoch`` on this grid (those before its start were read on another)."""
        g, start = self._gen, self._gen["start"]
        if self.until_exhausted is None:
            B, L = g["batch_size"] * g["num_replicas"], self.mixture.epoch_length
            first = start + max(0, -(-(epoch * L - self._origin) // B))
            return range(first, max(first, start + -(-((epoch + 1) * L - self._origin) // B)))
        first = start if epoch == 0 else max(start, self._end(epoch - 1))
        return range(first, max(first, self._end(epoch)))

    def _end(self, epoch: int) -> int:
        """until_exhausted: the last step boundary before which source ``k`` reads only its
        passes ``<= epoch``: the same on every rank (a search on the global stream)."""
        if epoch not in self._ends:
            k = self.until_exhausted
            target = (epoch + 1) * self.totals[k] - self._gen["read"][k]  # draws on this grid
            fits = lambda s: self._grid.total(k, s) <= target  # noqa: E731 (C_k(s), closed form)
            lo = self._gen["start"]  # each epoch's end searched alone: O(log steps) probes
            if not fits(lo):
                self._ends[epoch] = lo
                return lo
            hi = lo + 1
            while fits(hi):  # gallop: lo fits, hi does not
                lo, hi = hi, hi + 2 * (hi - lo)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fits(mid) else (lo, mid)
            self._ends[epoch] = lo
        return self._ends[epoch]

    def _readers(self) -> int:
        """Readers per rank: ``num_workers`` as given, or as the first loader's workers fixed
        it (seen here through shared memory); 1 until then."""
        g = self._gen
        if g["num_workers"] is None and int(self._in_workers[1]):
            g["num_workers"] = int(self._in_workers[1])
        return g["num_workers"] or 1

    def counts_at(self, step: int) -> np.ndarray:
        r"""``(num_replicas, readers a rank, K)`` int64, ``[rank][worker][k]``: how many samples
        of source ``k`` each reader drew before training ``step`` (steps of this grid only), in
        closed form: the step's windows routed once, ``O(readers × (b + K))`` at any step,
        nothing replayed."""
        step = self._checked_step(step)
        W, nw = self._gen["num_replicas"], self._readers()
        return self._grid.counts(step, np.arange(W * nw)).reshape(W, nw, len(self.sources))

    def _counts(self, step: int, ranks: Sequence[int]) -> list[list[list[int]]]:
        """:meth:`counts_at` of ``ranks`` only: each reader's window of every stretch's tree
        (``mixture_readers.py``), ``c((m + o)·b) - c(o·b)``."""
        step = self._checked_step(step)
        nw = self._readers()
        readers = (np.asarray(list(ranks), np.int64)[:, None] * nw + np.arange(nw)).reshape(-1)
        out = self._grid.counts(step, readers)  # (ranks × nw, K)
        return out.reshape(len(ranks), nw, len(self.sources)).tolist()

    def batch_at(self, step: int) -> list[list[tuple[int, int, int]]]:
        r"""``[rank][slot]``: the ``(source, shard index, offset in the shard)`` every rank reads
        at training ``step``; no data is read, nothing replayed (its readers' counts in closed
        form)."""
        step = self._checked_step(step)
        nw, W, K = self._readers(), self._gen["num_replicas"], len(self.sources)
        readers = np.arange(W, dtype=np.int64) * nw + step % nw  # (W,) the step's readers
        counts = self._grid.counts(step, readers)  # (W, K) before the step
        ks = self._grid.step_sources(step)  # (W, b)
        # each slot's count: its rank's before the step, and its earlier slots of that source
        key = (np.arange(W)[:, None] * K + ks).reshape(-1)  # (W·b,) rank and source
        order = np.argsort(key, kind="stable")
        heads = np.flatnonzero(np.append(True, key[order][1:] != key[order][:-1]))
        earlier = np.empty_like(order)
        earlier[order] = np.arange(len(order)) - np.repeat(heads, np.diff(heads, append=len(order)))
        c = np.take_along_axis(counts, ks, 1).reshape(-1) + earlier  # (W·b,)
        shard, offset = self._reads(ks.reshape(-1), np.repeat(readers, ks.shape[1]), c)
        rows = zip(ks.tolist(), shard.reshape(ks.shape).tolist(), offset.reshape(ks.shape).tolist())
        return [list(zip(*row)) for row in rows]

    # --- reading ----------------------------------------------------------------------------

    def _sample(self, opened: list[Any], k: int, pass_: int, o: int) -> Any:
        """Sample ``o`` of pass ``pass_`` of source ``k``: the open shard read on, else opened.

        ``opened[k]``: ``[pass, next offset, end offset, samples, shard index, first offset]``
        (offsets in the pass): the next draw of a run is its ``next()``, with no search."""
        st = opened[k]
        if st is None or st[0] != pass_ or not st[1] <= o < st[2] or (self.seekable and st[1] < o):
            shards, sizes, read = self.sources[k]
            shard, offset = self._where(k, pass_, o)
            args = (shards[shard], offset) if self.seekable else (shards[shard],)
            samples = read(*args)
            try:
                it = iter(samples)
            except TypeError:
                raise TypeError(
                    f"sources[{k}] read should return an iterable of the shard's samples, but got "
                    f"read({', '.join(map(repr, args))})={samples!r} for shard {shards[shard]!r} "
                    f"(shards[{shard}])"
                ) from None
            first = o - offset  # where the shard begins in the pass
            st = opened[k] = [pass_, o if self.seekable else first, first + sizes[shard], it,
                              shard, first]  # fmt: skip
        it = st[3]
        if o > st[1]:  # front to back: the head before it, drawn and dropped
            deque(islice(it, o - st[1]), maxlen=0)
        x = next(it, _END)
        if x is _END:
            self._wrong(k, st[4], f"ended before its sample {o - st[5]}")
        st[1] = o + 1
        if st[1] == st[2]:  # its end: check that it ends there
            if next(it, _END) is not _END:
                self._wrong(k, st[4], f"yielded more than {st[2] - st[5]} samples")
            opened[k] = None
        return x

    def _wrong(self, k: int, i: int, what: str) -> None:
        call = ("read(shard, start) should yield samples start .. sizes[i] - 1" if self.seekable
                else "read(shard) should yield exactly sizes[i] samples")  # fmt: skip
        raise ValueError(
            f"sources[{k}]: shard {self.sources[k][0][i]!r} (shards[{i}]) {what}, but "
            f"sizes[{i}]={self.sources[k][1][i]}: {call}"
        )

    def iter_worker(self, worker: int = 0, num_workers: int = 0) -> Iterator[Any]:
        r"""What worker ``worker`` of ``num_workers`` yields (what ``iter()`` runs in it); with
        ``num_workers=0`` the main process reads every reader's steps, in step order."""
        num_workers = check_int("num_workers", num_workers, low=0)
        worker = check_int("worker", worker, low=0, high=max(0, num_workers - 1))
        g, looked = self._gen, int(self._in_workers[2])
        if g["num_workers"] is None and num_workers and not int(self._in_workers[1]):
            # the first loader's workers fix the readers; a look in the main process before
            # them, in this epoch, is only a look (the loader reads the epoch from its start)
            if looked and looked - 1 < self.epoch:
                raise ValueError(
                    f"num_workers should be given to {type(self).__name__}(num_workers="
                    f"{num_workers}): the main process read epoch {looked - 1} as one reader a "
                    f"rank, and this DataLoader's {num_workers} workers would read the run as "
                    f"{num_workers} readers; pass num_workers={num_workers} to the dataset (the "
                    "main process then reads what the workers would), or build a new dataset"
                )
            g["num_workers"] = num_workers
        nw = self._readers()
        if num_workers not in (0, nw):
            raise ValueError(
                f"num_workers should be {nw} (this run's readers per rank), or 0, but the "
                f"DataLoader has num_workers={num_workers}: pass num_workers={num_workers} to a new "
                f"{type(self).__name__}, or, to change it mid-run, resume every worker's state of "
                "one rank at once (load_state_dict(loader_dataset_states(loader_state)))"
            )
        if not num_workers and g["num_workers"] is None:  # a look, before the readers are known
            self._in_workers[2] = max(looked, self.epoch + 1)
        steps, loaded, self._loaded = self._steps(self.epoch), self._loaded, None
        if loaded is not None and loaded["epoch"] != self.epoch:
            loaded = None
        if loaded is not None and loaded["num_workers"] == num_workers:
            if num_workers and loaded["worker"] != worker:
                raise ValueError(
                    f"state was saved by worker {loaded['worker']} of {num_workers}, but is read "
                    f"by worker {worker}: resume through the same loader's worker"
                )
            readers, step, slot = list(loaded["readers"]), loaded["step"], loaded["slot"]
            counts = [list(c) for c in loaded["counts"]]
        elif loaded is not None and not loaded["num_workers"]:  # the main process's, in a worker
            if loaded["slot"]:
                raise ValueError(
                    f"state is inside step {loaded['step']} (slot {loaded['slot']}): DataLoader "
                    "workers resume at a step boundary; read the rest of the step with num_workers=0"
                )
            step = loaded["step"] + worker
            readers, slot = [step % nw], 0
            if len(loaded["readers"]) == nw:  # saved with this run's readers: each one's counts
                counts = [list(loaded["counts"][step % nw])]
            else:  # saved before this run's readers were known (as one reader): counted again
                counts = [
                    self._counts(min(step, max(steps.stop, g["start"])), [self.rank])[0][step % nw]
                ]
        else:
            step, slot = steps.start + (worker if num_workers else 0), 0
            readers = [step % nw] if num_workers else list(range(nw))
            gen, stop, carried = self._carry
            if gen is g and stop == steps.start and all(q in carried for q in readers):
                counts = [list(carried[q]) for q in readers]  # where the last epoch here ended
            else:  # counted again from the mixture: O(steps so far x micro-batch)
                at = self._counts(min(step, max(steps.stop, g["start"])), [self.rank])[0]
                counts = [at[q] for q in readers]
        if num_workers:
            self._in_workers[0], self._in_workers[1] = self.epoch + 1, nw
        else:  # the main process's place is its own again
            self._in_workers[0], self._begin = 0, (self.epoch, step, slot)
        self._progress = {"worker": worker, "num_workers": num_workers, "readers": readers,
                          "step": step, "slot": slot, "counts": counts}  # fmt: skip
        return self._read(nw, steps.stop, self._progress)

    def _step_sources(self, first: int, stop: int, inc: int) -> Iterator[tuple[range, list[int]]]:
        """``(block, sources)`` of steps ``first, first + inc, ...``: a block of steps and this
        rank's micro-batch sources at each, laid end to end (``len(block) × b``); one
        routing per block, blocks doubling from 1 to 1024 steps."""
        s, size = first, 1
        while s < stop:
            block = range(s, min(stop, s + size * inc), inc)
            yield block, self._grid.sources(self.rank, block).reshape(-1).tolist()
            s, size = block[-1] + inc, min(2 * size, 1024)

    def _read(self, nw: int, stop: int, progress: dict[str, Any]) -> Iterator[Any]:
        readers = progress["readers"]
        self._open = {q: [None] * len(self.sources) for q in readers}
        slot, inc = progress["slot"], 1 if len(readers) == nw else nw
        # per reader and source, the draws ahead in one run of a pass: [pass, next offset, left]
        runs = {q: [[0, 0, 0] for _ in self.sources] for q in readers}
        with_source, b = self.with_source, self._gen["batch_size"]
        for block, ks in self._step_sources(progress["step"], stop, inc):
            for j, s in enumerate(block):  # step s: its sources are ks[j * b : (j + 1) * b]
                rho = s % nw
                counts, q, opened, run_of = (
                    progress["counts"][readers.index(rho)],
                    self.rank * nw + rho,
                    self._open[rho],
                    runs[rho],
                )
                for i in range(slot, b):
                    k = ks[j * b + i]
                    run = run_of[k]
                    if run[2]:  # the next offset of the run: no search
                        p, o = run[0], run[1]
                        run[1], run[2] = o + 1, run[2] - 1
                    else:
                        p, o, n = self._draw(k, q, counts[k])
                        run_of[k] = [p, o + 1, n - 1]
                    st = opened[k]
                    if st is not None and st[0] == p and st[1] == o and o + 1 < st[2]:
                        x = next(st[3], _END)  # the open shard's next sample, not its last: read on
                        if x is _END:
                            self._wrong(k, st[4], f"ended before its sample {o - st[5]}")
                        st[1] = o + 1
                    else:  # another shard, or its last sample (checked to end there)
                        x = self._sample(opened, k, p, o)
                    counts[k] += 1
                    progress["slot"] = i + 1
                    yield (k, x) if with_source else x
                slot = 0
                progress["step"], progress["slot"] = s + inc, 0
        # the epoch read through: the next one, in this process, goes on from these counts
        self._carry = (self._gen, stop, dict(zip(readers, progress["counts"], strict=True)))

    def __iter__(self) -> Iterator[Any]:
        # accelerate's prepare(loader) would split this share again (its dispatcher: set_epoch)
        refuse_split_again(self, ("BatchSamplerShard", "IterableDatasetShard"))
        info = get_worker_info()  # None in the main process (num_workers=0)
        fresh = info is None or self._pid != os.getpid()  # it sees a Trainer as it is now
        if info is not None:
            # a worker's first iter() reads the epoch set when the loader started it (a late
            # set_epoch races its start); a persistent worker's next ones read the shared epoch
            self._pid, self._local = os.getpid(), self._set if fresh else None
        # nothing, or the error of an epoch read again
        head = begin_pass(self, self._passes, self._trainer.training(), fresh)
        where = (0, 0) if info is None else (info.id, info.num_workers)
        self._warn_unseekable()
        return chain(head, self._watched(self.iter_worker(*where), where[1]))

    def _watched(self, samples: Iterator[Any], workers: int) -> Iterator[Any]:
        """``samples``, once the loader asking for the first is seen to take a step a batch:
        its fetcher (torch's ``_IterableDatasetFetcher.fetch``, the caller of this ``next()``, or
        of generators delegating to it) asks for ``len(possibly_batched_index)`` samples a batch,
        or one at a time (``batch_size=None``, no batching)."""
        caller = sys._getframe(1)  # the frame that asked for the first sample, past generators
        while caller.f_back and caller.f_code.co_flags & inspect.CO_GENERATOR:  # (yield from)
            caller = caller.f_back  # that delegate to this one: a wrapper dataset's, a tracer's
        fetcher = caller.f_locals.get("self") if caller.f_code.co_name == "fetch" else None
        if hasattr(fetcher, "auto_collation"):
            b, index = self._gen["batch_size"], caller.f_locals.get("possibly_batched_index")
            if fetcher.auto_collation and len(index) != b:
                what = "parts of two or more steps" if len(index) > b else "a part of a step"
                raise ValueError(
                    f"the DataLoader's batch_size should be {b}, this dataset's batch_size (a "
                    f"batch is a step's micro-batch), but got batch_size={len(index)}: each batch "
                    f"would hold {what}, and no batch would be a step's mix; pass "
                    f"DataLoader(dataset, batch_size={b})"
                )
            if not fetcher.auto_collation and workers > 1:
                warnings.warn(
                    f"DataLoader(batch_size=None) hands out samples one at a time, taking one from "
                    f"each of its {workers} workers in turn: the samples of {workers} steps "
                    f"interleave; pass batch_size={self._gen['batch_size']} (a batch a step) to "
                    "keep each step's micro-batch whole",
                    stacklevel=2,
                )
        yield from samples

    def _warn_unseekable(self) -> None:
        """Warn, naming ``seekable=True``, where a source has fewer shards than readers: most
        readers' runs start inside a shard, whose head they draw and drop."""
        if self.seekable or self._warned:
            return
        R = self._gen["num_replicas"] * self._readers()
        for k, (_, sizes, _) in enumerate(self.sources):
            shards, T = sum(n > 0 for n in sizes), self.totals[k]
            if 0 < shards < R and max(sizes) > 1:
                self._warned = True
                most = 1 + R * (max(sizes) - 1) / T
                warnings.warn(
                    f"sources[{k}] has {shards} shard{'s' * (shards > 1)} for {R} readers (ranks "
                    "x workers) and "
                    f"seekable=False: a reader whose run of a pass starts inside a shard draws "
                    f"that shard's head and drops it, up to {most:.3g}x the samples it yields "
                    "(1 + readers x (largest shard - 1) / samples a pass); pass seekable=True, "
                    "with read(shard, start), to draw only what is yielded",
                    stacklevel=3,
                )
                return

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch, the same on every rank: its steps, as :class:`MixtureSampler`'s.
        Under Lightning's ``Trainer`` the epoch is never behind its ``current_epoch``."""
        epoch = check_int("epoch", epoch, low=0, high=2**62)
        B, L = self._gen["batch_size"] * self._gen["num_replicas"], self.mixture.epoch_length
        last = _last_epoch(self._origin, B, L)
        if self.until_exhausted is None and epoch > last:  # its last positions past int64
            raise ValueError(f"epoch should be <= {last}, the last epoch whose global positions fit "
                             f"in int64 (< 2**63; epoch_length={L}), but got epoch={epoch}")  # fmt: skip
        self._set = self._epoch[0] = epoch
        self._passes[0] = 1  # the next pass is this epoch's; accelerate's dispatcher calls this
        refuse_split_again(self, ("DataLoaderDispatcher",))

    @property
    def epoch(self) -> int:
        # under Lightning's Trainer, never behind its current_epoch (it sets samplers' only)
        return max(int(self._epoch[0]) if self._local is None else self._local, self._trainer())

    def __len__(self) -> int:
        # a Lightning fit that counts the batches: its epoch is ours from now on (never behind)
        fit = note_trainer(self._passes, self._trainer)
        self._trainer = fit or self._trainer
        g = self._gen
        before = g["before"] if g.get("epoch") == self.epoch else 0
        n = before + len(self._steps(self.epoch)) * g["batch_size"]
        if fit is None or fit.recounts:
            return n
        if self.until_exhausted is not None:  # every epoch would be cut at this one's length
            raise RuntimeError(
                f"{type(self).__name__}(until_exhausted={self.until_exhausted}) ends each epoch "
                f"when that source runs out, so its epochs differ in length (this one has {n} "
                "samples), but Lightning's Trainer counts len(loader) once and ends every epoch "
                "there: pass Trainer(reload_dataloaders_every_n_epochs=1), which counts each epoch's"
            )
        # counted once, every epoch cut there: the most an epoch has (a step more than some)
        B = g["batch_size"] * g["num_replicas"]
        return max(n, -(-self.mixture.epoch_length // B) * g["batch_size"])

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}({len(self.sources)} sources, totals={self.totals}, "
            f"batch_size={self.batch_size}, num_replicas={self.num_replicas}, rank={self.rank}, "
            f"seed={self.seed}, shuffle={self.shuffle}, seekable={self.seekable}, "
            f"until_exhausted={self.until_exhausted})"
        )
