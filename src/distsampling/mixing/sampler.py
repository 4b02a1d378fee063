r"""MixtureSampler: datasets mixed by weight across ranks, every batch and every rank at its
share, with no index.

``sizes`` are the lengths of ``K`` datasets in the order of a ``ConcatDataset``; ``weights`` their
shares (exact: ``weights.py``). Each read's source comes from a weight tree (``tree.py``), its
place in the ranks' steps from the layout (``layout.py``), its sample from a cipher of its
source's pass (``samples.py``): computed from its position alone, no index, no replay.
``bound()`` is the tree's ``max β_k / 2``.

Schedules and resume. ``[(0, w), (s1, w1), ...]`` changes the weights at training steps: from
step ``s1`` a new tree starts at its position 0, each source going on from its count, so nothing
is lost or read twice within its pass (each stretch keeps its bounds; a rank's error adds up
over the stretches). A ``state_dict`` holds what was read: the grid (``W``, ``b``) and its first
step, each source's count there, and the schedule up to the saved step, as shares. It loads into
any schedule that agrees with that past: a change at the saved step or later continues exactly
as that schedule's uninterrupted run; on another grid (an elastic resume, at a step boundary)
the new grid starts its trees at that step.

References:
    megatron/core/datasets/helpers.cpp (build_blending_indices: the greedy, sequential)
    megatron/core/datasets/blended_dataset.py (the global stream of ranks' micro-batches)
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from fractions import Fraction
from itertools import accumulate
from typing import Any, NamedTuple

import numpy as np
import torch
from torch.utils.data import DistributedSampler, Sampler

from .._checks import check_bool, check_int, check_seed, resolve_world
from ..guards import refuse_split_again
from ..scale.cipher import index_unshuffle
from .layout import _PerRankLayout
from .samples import _Samples
from .state import _consumed, _Counting, _state
from .tree import _count, _integer_mix, _position
from .weights import Mix, _text, _weights

__all__ = ["MixtureBatchSampler", "MixtureSampler", "Read"]

UNITS = 2**31  # integer weights past this sum are rounded to it: every product fits int64
_WALK = 8  # cycle walks left to _cipher's arrays past this many; as few, one Python int each


class Read(NamedTuple):
    """Where a sample is read: its global ``position``, the ``step``, the ``rank`` and its ``slot``."""

    position: int
    step: int
    rank: int
    slot: int


class MixtureSampler(_PerRankLayout, _Samples, DistributedSampler):
    r"""Yield this rank's indices into ``ConcatDataset(datasets)``: ``K`` sources mixed by weight.

    One rank's share, so a torch ``DistributedSampler`` (torch's ``__init__`` is not run: the
    split is this class's): Lightning's default leaves it alone and calls its ``set_epoch``.

    Rank ``r`` reads ``batch_size`` indices a step, every rank a window of one weight tree (the
    module docstring): each global batch and each rank's reads keep every source within
    ``2 * bound()`` of its share. An epoch is the steps that start in global positions
    ``[e*L, (e+1)*L)``, ``L = epoch_length``; with ``L`` below the global batch some epochs hold
    no step (``len()`` 0). With a ``DataLoader``, give ``batch_size=batch_size`` (one step a
    batch) or use :class:`MixtureBatchSampler`.

    Args:
        sizes: the sources' lengths, in ``ConcatDataset`` order (sample ``i`` of source ``k`` is
            index ``sum(sizes[:k]) + i``).
        weights: ``K`` non-negative numbers (a positive sum; shares are ``w_k / sum(w)``), or a
            schedule ``[(0, weights), (s1, weights), ...]`` changing them at training steps.
        batch_size: a rank's micro-batch ``b``.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        seed: base seed of every source's passes; the same on every rank.
        shuffle: each pass of a source in a shuffled order (else ``0, 1, ..., size - 1``).
        epoch_length: global positions per epoch (default ``sum(sizes)``).

    Examples:
        >>> s = MixtureSampler([6, 4], [0.5, 0.5], batch_size=2, num_replicas=2, rank=0)
        >>> s.batch_at(0)  # step 0: rank 0's micro-batch, rank 1's (source 1 is 6..9)
        [[3, 6], [5, 9]]
        >>> s.when_read(1, 3)  # sample 3 of source 1 (index 9) in its pass 0
        Read(position=3, step=0, rank=1, slot=1)
        >>> len(s), list(s), s.bound()  # 10 positions an epoch: 3 steps of 4
        (6, [3, 6, 1, 7, 0, 9], Fraction(1, 2))
    """

    def __init__(
        self,
        sizes: Sequence[int],
        weights: Sequence[float] | Sequence[tuple[int, Sequence[float]]],
        batch_size: int,
        num_replicas: int | None = None,
        rank: int | None = None,
        seed: int = 0,
        shuffle: bool = True,
        epoch_length: int | None = None,
    ) -> None:
        if isinstance(sizes, (np.ndarray, torch.Tensor)):
            sizes = sizes.tolist()
        if isinstance(sizes, (str, bytes)) or not isinstance(sizes, Sequence) or not sizes:
            raise TypeError(
                f"sizes should be a non-empty sequence of lengths, but got sizes={sizes!r}"
            )
        if set(map(type, sizes)) == {int} and min(sizes) >= 0:  # most: checked at once
            self.sizes = list(sizes)
        else:  # each checked in turn, the first bad one named
            self.sizes = [check_int(f"sizes[{k}]", n, low=0) for k, n in enumerate(sizes)]
        self.offsets = [0, *accumulate(self.sizes[:-1])]
        self._plan = self._schedule(weights)  # [(step, weights)], steps increasing from 0
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.seed, self.shuffle = check_seed(seed), check_bool("shuffle", shuffle)
        length = sum(self.sizes) if epoch_length is None else epoch_length
        self.epoch_length = check_int("epoch_length", length, low=1)
        mixes = [_integer_mix(w) for _, w in self._plan]  # once per distinct weights
        self.units = [list(units) for units, _ in mixes]  # the integer weights in use
        self._trees = [tree for _, tree in mixes]
        self.epoch, self._skip, self._before = 0, 0, 0
        self._origin, self._step0 = 0, 0  # this grid's first position and training step
        self._read0 = [0] * len(self.sizes)  # each source's count at the grid's first step
        self._counter: _Counting | None = None
        self._keys: dict[tuple[int, int], tuple[int, ...]] = {}  # (source, pass): round keys
        self._place()

    def __repr__(self) -> str:
        plan = [(s, [float(x) for x in w]) for s, w in self.schedule]
        w = plan[0][1] if len(plan) == 1 else plan
        return (f"MixtureSampler(sizes={self.sizes}, weights={w}, batch_size={self.batch_size}, "
                f"num_replicas={self.num_replicas}, rank={self.rank}, seed={self.seed}, "
                f"shuffle={self.shuffle}, epoch_length={self.epoch_length})")  # fmt: skip

    @property
    def schedule(self) -> list[tuple[int, list[Fraction]]]:
        """``[(step, weights)]``, each weight exact (a float: the decimal it prints as)."""
        return self._exact_schedule()

    def _exact_schedule(self) -> list[tuple[int, list[Fraction]]]:
        return [(s, [Fraction(n, d) for n, d in zip(*w)]) for s, w in self._plan]

    def _schedule(self, weights: object) -> list[tuple[int, Mix]]:
        items = list(weights) if isinstance(weights, Sequence) else weights
        if not (isinstance(items, list) and items and isinstance(items[0], (tuple, list))):
            return [(0, _weights("weights", weights, self.sizes))]
        out, last = [], -1
        for g, entry in enumerate(items):
            if not isinstance(entry, (tuple, list)) or len(entry) != 2:
                raise TypeError(
                    f"weights[{g}] should be a (step, weights) pair, but got weights[{g}]={entry!r}"
                )
            start = check_int(f"weights[{g}][0]", entry[0], low=0)
            if (g == 0 and start != 0) or start <= last:
                why = "0 (a schedule starts at 0)" if g == 0 else f"> {last} (in increasing order)"
                raise ValueError(
                    f"weights[{g}][0] should be {why}, but got weights[{g}][0]={start}"
                )
            out.append((start, _weights(f"weights[{g}][1]", entry[1], self.sizes)))
            last = start
        return out

    def positions(self, step: int, rank: int | None = None) -> np.ndarray:
        r"""The global positions ``rank`` (default: this sampler's) reads at training ``step`` of
        this grid, ``(batch_size,)`` int64: the layout in one place, for readers of the stream
        (a streaming mixture asks it which positions each rank's micro-batch holds).

        Examples:
            >>> MixtureSampler([6, 4], [1, 1], batch_size=2, num_replicas=2, rank=1).positions(1)
            array([6, 7])
        """
        step = check_int("step", step, low=self._step0)
        r = (
            self.rank
            if rank is None
            else check_int("rank", rank, low=0, high=self.num_replicas - 1)
        )
        b = self.batch_size
        first = self._origin + (step - self._step0) * b * self.num_replicas + r * b
        return np.arange(first, first + b, dtype=np.int64)

    def sources(self, positions: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        r"""``(source, item number overall)`` at global ``positions`` of this grid, each ``(P,)``
        int64: item ``j`` of source ``k`` is in its pass ``j // sizes[k]``, at ``j % sizes[k]``
        of that pass.

        Examples:
            >>> s = MixtureSampler([6, 4], [1, 1], batch_size=2, num_replicas=2, rank=0)
            >>> [a.tolist() for a in s.sources(range(4))]
            [[0, 1, 0, 1], [0, 0, 1, 1]]
        """
        positions = np.asarray(positions, dtype=np.int64).reshape(-1)
        if len(positions) and int(positions.min()) < self._origin:
            raise ValueError(
                f"positions should be >= {self._origin}, the first of this grid, but got "
                f"{int(positions.min())}"
            )
        return self._sources(positions)

    def batch_at(self, step: int) -> list[list[int]]:
        r"""The ``num_replicas`` micro-batches of training step ``step``, rank by rank."""
        step, b = check_int("step", step, low=0), self.batch_size
        if step < self._step0:
            raise ValueError(
                f"step should be >= {self._step0}, the first step of this grid (num_replicas="
                f"{self.num_replicas}, batch_size={b}); the earlier ones were read on another "
                f"grid, but got step={step}"
            )
        p = self._origin + (step - self._step0) * b * self.num_replicas
        flat = self._indices(*self._sources(np.arange(p, p + b * self.num_replicas))).tolist()
        return [flat[r * b : (r + 1) * b] for r in range(self.num_replicas)]

    def when_read(self, source: int, sample: int, pass_: int = 0) -> Read | None:
        r"""Where sample ``sample`` of source ``source`` is read in its pass ``pass_``: the global
        position, training step, rank and slot; ``None`` if its weight stays 0."""
        k = check_int("source", source, low=0, high=len(self.sizes) - 1)
        size = self.sizes[k]
        i = check_int("sample", sample, low=0, high=size - 1)
        pass_ = check_int("pass_", pass_, low=0)
        local = index_unshuffle([i], size, self._key(k, pass_)).item() if self.shuffle else i
        j = pass_ * size + local
        if j < self._read0[k]:
            raise ValueError(
                f"sample {i} of source {k} in its pass {pass_} was read before step {self._step0} "
                f"(position {self._origin}), the first of this grid: ask a sampler of the grid it "
                "was read on"
            )
        p = max(p for p in range(len(self._pieces)) if self._bases[p][k] <= j)
        g = self._pieces[p][1]
        if self.units[g][k] == 0:
            return None
        j -= int(self._bases[p][k])
        b, tree = self.batch_size, self._trees[g]
        x = np.arange(self.num_replicas, dtype=np.int64) * b  # (W,) the ranks' first positions
        zero = int(_count(tree, k, x).sum())

        def before(taus: list[int]) -> list[int]:  # C(τ) of each τ, down source k's path only
            at = np.array(taus, np.int64)[:, None] * b + x  # (T, W)
            return (_count(tree, k, at).sum(1) - zero).tolist()

        # the step: the last τ with C(τ) <= j (C never falls; C(0) = 0), searched by steps of
        # x16, then by sixteenths of the interval [lo, hi), 15 points of it in one call
        lo, hi = 0, 1
        while before([hi])[0] <= j:
            lo, hi = hi, 16 * hi
        while hi - lo > 1:
            taus = sorted({lo + (hi - lo) * i // 16 for i in range(1, 16)} - {lo})
            counts = before(taus)
            lo = max([t for t, c in zip(taus, counts) if c <= j], default=lo)
            hi = min([t for t, c in zip(taus, counts) if c > j], default=hi)
        u = _position(tree, k, int(_count(tree, k, lo * b)) + j - before([lo])[0])
        step = self._firsts[p] + lo
        n = self._origin + (step - self._step0) * b * self.num_replicas + u - lo * b
        return Read(n, step, *divmod(u - lo * b, b))

    def bound(self) -> Fraction:
        r"""The tree's prefix bound ``max_k β_k / 2`` over the schedule's segments: every global
        batch and every rank's reads keep each source within twice it of its share."""
        out = Fraction(0)
        for tree in self._trees:
            for path in tree.paths.values():
                if path:
                    w = path[-1][0] if path[-1][2] else path[-1][1]
                    out = max(out, sum((Fraction(w, a if left else b) for a, b, left in path),
                                       Fraction(0)) / 2)  # fmt: skip
        return out

    # --- epochs: DistributedSampler's contract --------------------------------------------

    def _steps(self, epoch: int) -> range:
        """The grid steps of ``epoch``: those that start in ``[epoch*L, (epoch+1)*L)``."""
        B, L = self.batch_size * self.num_replicas, self.epoch_length
        first = max(0, -(-(epoch * L - self._origin) // B))
        return range(first, max(first, -(-((epoch + 1) * L - self._origin) // B)))

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch (the same on every rank); a position loaded for another one is dropped."""
        epoch = check_int("epoch", epoch, low=0)
        if epoch != self.epoch:
            self.epoch, self._skip, self._counter, self._before = epoch, 0, None, 0

    def __len__(self) -> int:
        # the whole epoch's count, before and after a resume: read on an earlier grid, then here
        return self._before + len(self._steps(self.epoch)) * self.batch_size

    def __iter__(self) -> Iterator[int]:
        refuse_split_again(self)  # accelerate's prepare(loader) would split this share again
        steps, skip = self._steps(self.epoch), self._skip  # read now: a later set_epoch waits
        self._counter = _Counting(self._blocks(steps, skip))
        return self._counter.ints

    # --- resume ---------------------------------------------------------------------------

    def _identity(self) -> dict[str, Any]:
        return {"sizes": list(self.sizes), "seed": self.seed, "shuffle": self.shuffle,
                "epoch_length": self.epoch_length}  # fmt: skip

    def _past(self, step: int, begun: bool) -> list[list[Any]]:
        """The schedule's entries read before ``step`` (and at it, ``begun``): ``[step, shares]``,
        the shares of the integer weights in use, as exact fractions in text."""
        return [[s, [str(Fraction(u, sum(units))) for u in units]]
                for (s, _), units in zip(self._plan, self.units)
                if s < step or (begun and s == step)]  # fmt: skip

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""What this rank has read: the grid (``num_replicas``, ``batch_size``) and its first
        position and step (``origin``, ``step``), each source's count there (``read``), the
        indices of the epoch read since (``position``; ``before``: on earlier grids), and the
        schedule up to the step reached (``past``: ``[step, shares]``); ``consumed``: what the
        loop used of the latest ``iter()`` (a plain DataLoader with workers reads ahead;
        StatefulDataLoader needs none)."""
        handed_out = 0 if self._counter is None else self._counter.yielded
        if consumed is not None:
            handed_out = _consumed(consumed, handed_out, "samples")
        position, b = self._skip + handed_out, self.batch_size
        reached = self._step0 + self._steps(self.epoch).start + position // b
        return {"kind": type(self).__name__, "version": 3, **self._identity(), "epoch": self.epoch,
                "num_replicas": self.num_replicas, "batch_size": b, "origin": self._origin,
                "step": self._step0, "read": [int(n) for n in self._read0],
                "past": self._past(reached, position % b > 0), "position": position,
                "before": self._before}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume at ``state``, with this sampler's schedule from the step reached on (it must
        agree with the one read before it). With another ``num_replicas`` or ``batch_size`` the
        state must be at a step boundary: the rest is read on this grid from that step."""
        fields = ("epoch", "num_replicas", "batch_size", "origin", "step", "read", "past",
                  "position", "before")  # fmt: skip
        state = _state(state, 3, self._identity(), fields)
        epoch, origin, step0 = (
            check_int("epoch", state["epoch"], low=0),
            check_int("origin", state["origin"], low=0),
            check_int("step", state["step"], low=0),
        )
        W, b = (
            check_int("num_replicas", state["num_replicas"], low=1),
            check_int("batch_size", state["batch_size"], low=1),
        )
        read = state["read"]
        if not isinstance(read, (list, tuple)) or len(read) != len(self.sizes):
            raise ValueError(
                f"read should be a list of {len(self.sizes)} counts, one per source, but got "
                f"read={read!r}"
            )
        read = [check_int(f"read[{k}]", n, low=0) for k, n in enumerate(read)]
        saved = MixtureSampler.__new__(MixtureSampler)
        saved.__dict__.update(self.__dict__, num_replicas=W, batch_size=b, _origin=origin,
                              _step0=step0, _read0=read, _skip=0)  # fmt: skip
        steps = saved._steps(epoch)
        position = check_int("position", state["position"], low=0, high=len(steps) * b)
        before = check_int("before", state["before"], low=0)
        reached = step0 + steps.start + position // b
        self._check_past(state["past"], reached, position % b > 0)
        if (W, b) == (self.num_replicas, self.batch_size):
            skip = position
        elif position % b:
            raise ValueError(
                f"position should be at a step boundary (a multiple of batch_size={b}) to resume on another grid, but got position={position}"
            )
        else:  # the new grid starts at the step reached, each source at its count there
            saved._place()
            p = bisect.bisect_right(saved._firsts, reached) - 1
            tau = reached - saved._firsts[p]
            at = saved._bases[p] + (saved._before_step(saved._pieces[p][1], [tau])[0] if tau else 0)
            skip, before, read = 0, before + position, [int(n) for n in at]
            origin, step0 = origin + (reached - step0) * W * b, reached
        self.epoch, self._counter, self._skip, self._before = epoch, None, skip, before
        self._origin, self._step0, self._read0 = origin, step0, read
        self._place()

    def _check_past(self, past: object, step: int, begun: bool) -> None:
        """Refuse a schedule that rewrites what was read before ``step``, in words."""
        ours = [(s, [Fraction(x) for x in w]) for s, w in self._past(step, begun)]
        try:
            theirs = [(check_int("step", s, low=0), [Fraction(x) for x in w]) for s, w in past]
        except (TypeError, ValueError, ZeroDivisionError):
            raise ValueError(
                f"past should be the [step, shares] of a MixtureSampler state, but got past={past!r}"
            ) from None
        if theirs == ours:
            return
        differ = (
            [a for a, b in zip(theirs, ours) if a != b] + theirs[len(ours) :] + ours[len(theirs) :]
        )
        x = min(s for s, _ in differ)
        before = next((w for s, w in reversed(theirs) if s <= x), None)
        now = next((w for s, w in reversed(ours) if s <= x), None)
        raise ValueError(
            f"weights should agree with the mix read before step {step + begun}, where this state was "
            f"saved, but from step {x} it read shares {_text(before) if before else 'none'} "
            f"and these weights give {_text(now) if now else 'none'}"
            + (" (a change of the mix there)" if before == now else "")
            + f"; change the mix at step {step + begun} or later"
        )


class MixtureBatchSampler(Sampler[list[int]]):
    r"""Each step's micro-batch of a :class:`MixtureSampler`, for ``DataLoader(batch_sampler=)``:
    a batch is one training step, whatever the loader's settings (Megatron's form). It resumes
    as the sampler does; ``state_dict(consumed=...)`` counts batches.

    Args:
        sampler: the rank's :class:`MixtureSampler`.

    Examples:
        >>> s = MixtureSampler([6, 4], [0.5, 0.5], batch_size=2, num_replicas=2, rank=0)
        >>> list(MixtureBatchSampler(s))
        [[3, 6], [1, 7], [0, 9]]
    """

    def __init__(self, sampler: MixtureSampler) -> None:
        if not isinstance(sampler, MixtureSampler):
            raise TypeError(f"sampler should be a MixtureSampler, but got sampler={sampler!r}")
        self.sampler, self._sizes = sampler, []  # the latest iter()'s batches: their lengths

    def __iter__(self) -> Iterator[list[int]]:
        s = self.sampler
        it, b, sizes = iter(s), s.batch_size, []
        self._sizes = sizes
        first = b - s._skip % b  # a resume mid-step: the rest of that micro-batch first
        while batch := [i for _, i in zip(range(first), it)]:
            sizes.append(len(batch))
            yield batch
            first = b

    def __len__(self) -> int:
        return -(-len(self.sampler) // self.sampler.batch_size)

    def set_epoch(self, epoch: int) -> None:
        r"""The sampler's epoch."""
        self.sampler.set_epoch(epoch)

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""The sampler's state; ``consumed``: the batches the loop used of the latest
        ``iter()`` (a plain DataLoader with workers reads ahead)."""
        if consumed is None:
            return self.sampler.state_dict()
        n = len(self._sizes)
        consumed = _consumed(consumed, n, "batches")
        return self.sampler.state_dict(sum(self._sizes[:consumed]))

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume the sampler at ``state``."""
        self.sampler.load_state_dict(state)
