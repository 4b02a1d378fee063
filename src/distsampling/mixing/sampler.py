r"""MixtureSampler: datasets mixed by weight across ranks, every batch and every rank at its
share, with no index.

``sizes`` are the lengths of ``K`` datasets in the order of a ``ConcatDataset``; ``weights`` their
shares (exact: ``weights.py``). Each read's source comes from a weight tree (``tree.py``), its
place in the ranks' steps from the layout (``layout.py``), its sample from a cipher of its
source's pass (``samples.py``): computed from its position alone, no index, no replay.
``bound()`` is the tree's ``max β_k / 2``.

Schedules and resume. ``[(0, w), (s1, w1), ...]`` changes the weights at training steps; each
source goes on from its count, so nothing is lost or read twice within its pass. The global
layout keeps one tree shape and carries every node's phase across a change (``phases.py``):
``bound()`` holds for the whole schedule; per rank, each rank's stream carries its own nodes'
phases (``rank_phases.py``): each rank's reads within ``2·bound()``, changes included.
A ``state_dict`` holds what was read: the grid (``W``,
``b``) and its first step, each source's count there and each node's phase there (``phase``),
and the schedule up to the saved step, as shares. It loads into any schedule that agrees with that past: a change at the
saved step or later continues exactly as that schedule's uninterrupted run; on another grid (an
elastic resume, at a step boundary) the global layout reads the same stream on, the per-rank one
starts its trees at that step.

References:
    megatron/core/datasets/helpers.cpp (build_blending_indices: the greedy, sequential)
    megatron/core/datasets/blended_dataset.py (the global stream of ranks' micro-batches)
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence
from fractions import Fraction
from itertools import accumulate
from typing import Any

import numpy as np
import torch
from torch.utils.data import DistributedSampler, Sampler

from .._checks import check_bool, check_int, check_int64, check_seed, resolve_world
from ..guards import refuse_split_again
from ..resume.state import note_trainer
from ..scale.cipher import index_unshuffle
from .layout import _PerRankLayout
from .samples import _Samples
from .state import Read, _consumed, _Counting, _state
from .stream import _GlobalLayout
from .tree import _integer_mix
from .weights import Mix, _text, _weights

__all__ = ["Bound", "MixtureBatchSampler", "MixtureSampler", "Read"]

LAYOUTS = ("global", "per_rank")  # the default first

UNITS = 2**31  # integer weights past this sum are rounded to it: every product fits int64
_WALK = 8  # cycle walks left to _cipher's arrays past this many; as few, one Python int each
#: the marks note_trainer writes (a fit's max_epochs, ...): a sampler's epoch is set by
#: Lightning itself, so nothing here reads them
_UNREAD = torch.tensor([1, 0, -1, 0, -1])


def _fitting_step(step: int, first: int, origin: int, B: int) -> int:
    """``step`` of a grid from step ``first`` at position ``origin``, ``B`` positions a step;
    refused where its global positions would pass ``2**63 - 1`` (int64)."""
    last = first + (2**63 - origin) // B - 1
    if step > last:
        raise ValueError(
            f"step should be <= {last}, the last step whose global positions fit in int64 "
            f"(< 2**63), but got step={step}"
        )
    return step


def _last_epoch(origin: int, B: int, L: int) -> int:
    """The last epoch (of ``L`` positions) whose every global position fits in int64 on a grid
    at ``origin``, ``B`` a step (-1: none): its steps end at the last step boundary
    ``origin + S·B <= 2**63`` or before, ``(e + 1)·L <= it``."""
    return ((2**63 - origin) // B * B + origin) // L - 1


class Bound(Fraction):
    """``bound()``: an exact fraction (of up to ~90 digits), printed as a decimal."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{float(self):.6g}"

    __str__ = __repr__


class MixtureSampler(_GlobalLayout, _Samples, DistributedSampler):
    r"""Yield this rank's indices into ``ConcatDataset(datasets)``: ``K`` sources mixed by weight.

    One rank's share, so a torch ``DistributedSampler`` (torch's ``__init__`` is not run: the
    split is this class's): Lightning's default leaves it alone and calls its ``set_epoch``.

    Rank ``r`` reads ``batch_size`` indices a step. With ``layout="global"`` (the default, as
    Megatron's) step ``s`` reads positions ``[s·B, (s+1)·B)`` of one stream of the weight tree,
    whatever ``num_replicas`` and ``batch_size`` (``B`` their product), rank ``r`` its micro-batch
    ``(r + s) mod W``: every prefix of the stream within ``bound()`` of each share, every global
    batch within ``2 * bound()``; an elastic resume reads the same stream on. With
    ``layout="per_rank"`` every rank reads a window of the tree: each global batch and each
    rank's reads within ``2 * bound()``, the run's total within ``W`` times that. An epoch is the steps that start in global positions
    ``[e*L, (e+1)*L)``, ``L = epoch_length``; with ``L`` below the global batch some epochs hold
    no step (``len()`` 0). Epochs differ by a step; where Lightning's ``Trainer`` counts the
    loader once and ends every epoch there, ``len()`` is the most any epoch holds, so none is
    cut (``_count``). With a ``DataLoader``, give ``batch_size=batch_size`` (one step a batch)
    or use :class:`MixtureBatchSampler`.

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
        layout: ``"global"`` (one stream, Megatron's global batches) or ``"per_rank"`` (every
            rank's reads exact).

    Examples:
        >>> s = MixtureSampler([6, 4], [0.5, 0.5], batch_size=2, num_replicas=2, rank=0)
        >>> s.batch_at(0)  # step 0: rank 0's micro-batch, rank 1's (source 1 is 6..9)
        [[3, 6], [5, 9]]
        >>> s.when_read(1, 3)  # sample 3 of source 1 (index 9) in its pass 0
        Read(position=3, step=0, rank=1, slot=1)
        >>> len(s), list(s), s.bound()  # 10 positions an epoch: 3 steps of 4
        (6, [3, 6, 4, 8, 0, 9], 0.5)
    """

    def __new__(cls, *args: Any, layout: str = "global", **kwargs: Any) -> MixtureSampler:
        # the per-rank layout is this class with that layout's methods first (_PerRankSampler)
        return super().__new__(_PerRankSampler if layout == "per_rank" else cls)

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
        *,
        layout: str = "global",
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
        if sum(self.sizes) >= 2**63:  # indices into the ConcatDataset are int64
            raise ValueError(
                f"sizes should sum to at most 2**63 - 1 (the indices are int64), but got "
                f"sum(sizes)={sum(self.sizes)}"
            )
        self.offsets = [0, *accumulate(self.sizes[:-1])]
        self._plan = self._schedule(weights)  # [(step, weights)], steps increasing from 0
        self.batch_size = check_int("batch_size", batch_size, low=1)
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        self.seed, self.shuffle = check_seed(seed), check_bool("shuffle", shuffle)
        length = sum(self.sizes) if epoch_length is None else epoch_length
        self.epoch_length = check_int64("epoch_length", length, low=1)
        if layout not in LAYOUTS:
            raise ValueError(f"layout should be one of {LAYOUTS}, but got layout={layout!r}")
        self.layout = layout
        mixes = [_integer_mix(w) for _, w in self._plan]  # once per distinct weights
        self.units = [list(units) for units, _ in mixes]  # the integer weights in use
        self._trees = [tree for _, tree in mixes]
        self.epoch, self._skip, self._before = 0, 0, 0
        self._origin, self._step0 = 0, 0  # this grid's first position and training step
        self._read0 = [0] * len(self.sizes)  # each source's count at the grid's first step
        self._phase0: Any = None  # global: each node's phase at the grid's first position
        self._steps_before = 0  # the epoch's steps read on earlier grids (``_before`` indices)
        B = self.batch_size * self.num_replicas
        if self._last_epoch() < 0:  # epoch 0's last step would end past 2**63 - 1
            raise ValueError(
                f"epoch_length should be <= {2**63 // B * B}, so that its steps' global positions "
                f"(batch_size * num_replicas = {B} a step) fit in int64 (< 2**63), but got "
                f"epoch_length={self.epoch_length}"
            )
        self._counter: _Counting | None = None
        self._place()

    def __repr__(self) -> str:
        plan = [(s, [float(x) for x in w]) for s, w in self.schedule]
        w = plan[0][1] if len(plan) == 1 else plan
        return (f"MixtureSampler(sizes={self.sizes}, weights={w}, batch_size={self.batch_size}, "
                f"num_replicas={self.num_replicas}, rank={self.rank}, seed={self.seed}, "
                f"shuffle={self.shuffle}, epoch_length={self.epoch_length}"
                + (f", layout={self.layout!r})" if self.layout != "global" else ")"))  # fmt: skip

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
            array([4, 5])
        """
        step = self._check_last(check_int("step", step, low=self._step0))
        r = (
            self.rank
            if rank is None
            else check_int("rank", rank, low=0, high=self.num_replicas - 1)
        )
        first = int(self._first_positions(np.array([step], np.int64), r)[0])
        return np.arange(first, first + self.batch_size, dtype=np.int64)

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
        self._check_last(step)
        ranks = np.arange(self.num_replicas, dtype=np.int64)  # (W,)
        first = self._first_positions(np.full(self.num_replicas, step, np.int64), ranks)
        flat = self._indices(*self._sources((first[:, None] + np.arange(b)).ravel())).tolist()
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
        p = self._piece_of(k, j)  # the piece whose reads hold it
        g = self._pieces[p][1]
        if self.units[g][k] == 0:
            return None
        return self._where(k, j, p)

    def bound(self) -> Bound:
        r"""How far a count strays from its cumulative share, at most, exact, printed as a
        decimal. Global layout: every prefix of the stream within it of each source's share
        (under a schedule too: each node's phase carries across the changes; a ramp adds its
        total change, ``mixing/phases.py``), every global batch within twice it. Per rank:
        every prefix of a rank's reads within twice it (under a schedule too: each rank's phases
        carried, ``mixing/rank_phases.py``), every global batch within twice it with fixed
        weights, ``2·num_replicas`` times it under a schedule."""
        return Bound(self._bound())

    # --- epochs: DistributedSampler's contract --------------------------------------------

    def _steps(self, epoch: int) -> range:
        """The grid steps of ``epoch``: those that start in ``[epoch*L, (epoch+1)*L)``."""
        B, L = self.batch_size * self.num_replicas, self.epoch_length
        first = max(0, -(-(epoch * L - self._origin) // B))
        return range(first, max(first, -(-((epoch + 1) * L - self._origin) // B)))

    def _check_last(self, step: int) -> int:
        return _fitting_step(step, self._step0, self._origin, self.batch_size * self.num_replicas)

    def _last_epoch(self) -> int:
        return _last_epoch(self._origin, self.batch_size * self.num_replicas, self.epoch_length)

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch (the same on every rank); a position loaded for another one is dropped."""
        epoch = check_int("epoch", epoch, low=0)
        if epoch > (last := self._last_epoch()):
            raise ValueError(
                f"epoch should be <= {last}, the last epoch whose global positions fit in int64 "
                f"(< 2**63; epoch_length={self.epoch_length}), but got epoch={epoch}"
            )
        if epoch != self.epoch:
            self.epoch, self._skip, self._counter, self._before = epoch, 0, None, 0
            self._steps_before = 0

    def __len__(self) -> int:
        # the whole epoch's count (before and after a resume); under a Lightning fit, its count
        return self._count(False)

    def _count(self, steps: bool) -> int:
        r"""``len()`` in samples (``steps``: in steps, :class:`MixtureBatchSampler`'s): this
        epoch's, read on an earlier grid and then on this one (torch's ``len()``). Where a
        Lightning fit counts the loader's batches (``note_trainer``): counted once and every
        epoch ended there, the most any epoch holds, ``max(this epoch's, ceil(L / B))`` steps
        (``B = batch_size * num_replicas``; a step that starts in an epoch is its: no epoch
        holds more, and a sampler from its first position has that many in epoch 0), so a
        shorter epoch ends early and no step is lost; counted again each epoch
        (``reload_dataloaders_every_n_epochs=1``), before Lightning's ``set_epoch``: the
        ``Trainer``'s epoch's, exact."""
        unit = 1 if steps else self.batch_size
        fit = note_trainer(_UNREAD)  # a Lightning fit loop up the stack: its Trainer
        # recounted: the epoch Lightning is about to set (its current_epoch), else ours
        epoch = fit() if fit is not None and fit.recounts else self.epoch
        done = (self._steps_before if steps else self._before) if epoch == self.epoch else 0
        n = done + len(self._steps(epoch)) * unit  # read on earlier grids, then this one's steps
        if fit is None or fit.recounts:
            return n
        # counted once, every epoch cut there: the most steps an epoch holds (some hold one less)
        return max(n, -(-self.epoch_length // (self.batch_size * self.num_replicas)) * unit)

    def __iter__(self) -> Iterator[int]:
        refuse_split_again(self)  # accelerate's prepare(loader) would split this share again
        steps, skip = self._steps(self.epoch), self._skip  # read now: a later set_epoch waits
        self._counter = _Counting(self._blocks(steps, skip))
        return self._counter.ints

    # --- resume ---------------------------------------------------------------------------

    def _identity(self) -> dict[str, Any]:
        return {"sizes": list(self.sizes), "seed": self.seed, "shuffle": self.shuffle,
                "epoch_length": self.epoch_length, "layout": self.layout}  # fmt: skip

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
        return {"kind": "MixtureSampler", "version": 5, **self._identity(), "epoch": self.epoch,
                "num_replicas": self.num_replicas, "batch_size": b, "origin": self._origin,
                "step": self._step0, "read": [int(n) for n in self._read0], "phase": self._phase_state(),
                "past": self._past(reached, position % b > 0), "position": position,
                "before": self._before, "steps_before": self._steps_before}  # fmt: skip

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume at ``state``, with this sampler's schedule from the step reached on (it must
        agree with the one read before it). With another ``num_replicas`` or ``batch_size`` the
        state must be at a step boundary: the rest is read on this grid from that step."""
        fields = ("epoch", "num_replicas", "batch_size", "origin", "step", "read", "phase",
                  "past", "position", "before", "steps_before")  # fmt: skip
        state = _state(state, 5, self._identity(), fields)
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
        phase = self._check_phase(state["phase"])
        saved = type(self).__new__(type(self), layout=self.layout)
        saved.__dict__.update(self.__dict__, num_replicas=W, batch_size=b, _origin=origin,
                              _step0=step0, _read0=read, _phase0=phase, _skip=0)  # fmt: skip
        steps = saved._steps(epoch)
        position = check_int("position", state["position"], low=0, high=len(steps) * b)
        before = check_int("before", state["before"], low=0)
        steps_before = check_int("steps_before", state["steps_before"], low=0)
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
            read, phase = saved._resume_at(reached)
            skip, before, steps_before = 0, before + position, steps_before + position // b
            origin, step0 = origin + (reached - step0) * W * b, reached
        self.epoch, self._counter, self._skip, self._before = epoch, None, skip, before
        self._origin, self._step0, self._read0, self._phase0 = origin, step0, read, phase
        self._steps_before = steps_before
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
        saved = (  # a step begun is read: saved inside it, its mix is the past's too
            f"through step {step}, inside which this state was saved"
            if begun
            else f"before step {step}, where this state was saved"
        )
        hint = ""
        if before and now and len(before) == len(now):  # float32 weights read as float64?
            if max(abs(a - b) for a, b in zip(before, now)) < Fraction(1, 10**6):
                hint = (" (shares within 1e-6: float32 weights given once as an array and once "
                        "as Python floats? give both the same form)")  # fmt: skip
        raise ValueError(
            f"weights should agree with the mix read {saved}, but from step {x} it read shares "
            f"{_text(before) if before else 'none'} and these weights give "
            f"{_text(now) if now else 'none'}"
            + (" (a change of the mix there)" if before == now else hint)
            + f"; change the mix at step {step + begun} or later"
        )


class MixtureBatchSampler(Sampler[list[int]]):
    r"""Each step's micro-batch of a :class:`MixtureSampler`, for ``DataLoader(batch_sampler=)``:
    a batch is one training step, whatever the loader's settings (Megatron's form). It resumes
    as the sampler does; ``state_dict(consumed=...)`` counts samples, as the sampler's does
    (the loop's batches times their length: a count inside a batch is refused).

    Args:
        sampler: the rank's :class:`MixtureSampler`.

    Examples:
        >>> s = MixtureSampler([6, 4], [0.5, 0.5], batch_size=2, num_replicas=2, rank=0)
        >>> list(MixtureBatchSampler(s))
        [[3, 6], [4, 8], [0, 9]]
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
        # the epoch's steps: those read on earlier grids (another micro-batch), then this grid's;
        # under a Lightning fit that counts them once, the most any epoch holds (the sampler's)
        return self.sampler._count(steps=True)

    def set_epoch(self, epoch: int) -> None:
        r"""The sampler's epoch."""
        self.sampler.set_epoch(epoch)

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""The sampler's state; ``consumed``: the samples of the batches the loop used of the
        latest ``iter()``, in the sampler's unit (a plain DataLoader with workers reads ahead)."""
        if consumed is None:
            return self.sampler.state_dict()
        ends = [0, *accumulate(self._sizes)]  # the samples handed out at each batch's end
        consumed = _consumed(consumed, ends[-1], "samples")
        if consumed not in ends:
            i = bisect.bisect_right(ends, consumed)
            raise ValueError(
                f"consumed should be the samples of whole batches (a batch is a step: "
                f"{ends[i - 1]} or {ends[i]} here), but got consumed={consumed}"
            )
        return self.sampler.state_dict(consumed)

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume the sampler at ``state``."""
        self.sampler.load_state_dict(state)


class _PerRankSampler(_PerRankLayout, MixtureSampler):
    """``MixtureSampler(..., layout="per_rank")``: every rank a window of the weight tree
    (``layout.py``); the same sampler otherwise."""
