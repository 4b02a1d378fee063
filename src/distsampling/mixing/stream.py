r"""The global layout (the default): one stream of the weight tree, whatever the grid, its
micro-batches dealt to the ranks in rotation.

Stream position ``n`` is the position ``n`` of the schedule's stream (``phases.py``: one tree
shape, every node's phase carried across a change; with fixed weights the tree's position ``n``).
Training step ``s`` reads the stream's positions ``[s·B, (s+1)·B)``, ``B = W·b``, as Megatron's global
batch does; its ``m``-th micro-batch ``[s·B + m·b, s·B + (m+1)·b)`` goes to rank ``(m - s) mod W``,
so rank ``r`` reads micro-batch ``(r + s) mod W``. So

- every prefix of the stream, and so every run's count after ``S`` steps, is within ``bound()``
  of its cumulative share (``β_k / 2`` with fixed weights), whatever ``W`` and ``b``: the
  stream does not depend on them;
- every global batch is a window of the tree: within ``β_k`` of ``B·w_k``;
- a rank's reads are ``W``-strided micro-batches of the stream; the rotation deals every rank
  every offset of the grid in turn (no rank is stuck at an offset a light source never
  reaches), but only the per-rank layout (``layout.py``) bounds a rank by a constant.

An elastic resume (another ``W`` or ``b``, at a step boundary) goes on at the stream position
reached, each node at its count and phase there: the run reads the stream the uninterrupted run would have read, global batch after
global batch where ``B`` stays. Source ``k``'s item number at ``n`` is its count in the stream
before ``n``.

References:
    megatron/core/datasets/blended_dataset.py (the global stream of ranks' micro-batches)
    distsampling/mixing/tree.py (the weight tree and its bound)
    distsampling/mixing/phases.py (a schedule's stream: the phases carried across changes)
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from fractions import Fraction
from functools import cached_property

import numpy as np
import torch

from .phases import _bound, _Phases, _Shape
from .state import Read

__all__: list[str] = []


class _GlobalLayout:
    """The grid's pieces (from a step on, the schedule's weights in use), the table of the
    stream's carried phases over them (``phases.py``), and where each rank reads: the sampler's
    attributes (``num_replicas``, ``batch_size``, ``rank``, ``_plan``, ``units``, ``_origin``,
    ``_step0``, ``_read0``, ``_phase0``: each node's residual at ``_origin``, ``None`` for a
    fresh stream) and its ``_indices``."""

    @cached_property
    def _shape(self) -> _Shape:
        """The stream's tree shape: the schedule's first weights' (the past of every grid)."""
        return _Shape(self.units[0])

    def _place(self) -> None:
        """The pieces ``(first step, weights)`` from the grid's first step on, their first
        stream positions (``_heads``), and the stream's table over them: each piece's node
        phases follow the last one's, from the grid's first position on."""
        B = self.batch_size * self.num_replicas
        g0 = max(g for g, (step, _) in enumerate(self._plan) if step <= self._step0)
        later = [(step, g) for g, (step, _) in enumerate(self._plan) if step > self._step0]
        self._pieces = [(self._step0, g0), *later]
        self._firsts = [s for s, _ in self._pieces]
        self._heads = [self._origin + (s - self._step0) * B for s in self._firsts]
        units = np.array([self.units[g] for _, g in self._pieces], np.int64)  # (P, K)
        lengths = [e - h for h, e in zip(self._heads, self._heads[1:])]
        phases = None if self._phase0 is None else [tuple(x) for x in self._phase0]
        self._table = _Phases(self._shape, units, lengths, self._read0, phases)
        self._firsts_array = np.array(self._firsts, np.int64)  # (P,)
        self._heads_array = np.array(self._heads, np.int64)  # (P,)

    def _bound(self) -> Fraction:
        """The stream's bound over the whole schedule (``phases.py``)."""
        return _bound(self._shape, np.array(self.units, np.int64), len(self._plan))

    def _phase_state(self) -> list[list[int]]:
        """The grid's first phases for a state: ``[numerator, denominator]`` a node."""
        return [list(x) for x in self._table.carried[0]]

    def _check_phase(self, phase: object) -> list[tuple[int, int]]:
        """A state's ``phase``: one ``[numerator, denominator]`` a node, ``0 <= n < d``."""
        n_in = self._shape.inner
        ok = isinstance(phase, (list, tuple)) and len(phase) == n_in and all(
            isinstance(x, (list, tuple)) and len(x) == 2 and all(type(y) is int for y in x)
            and 0 <= x[0] < x[1] for x in phase)  # fmt: skip
        if not ok:
            raise ValueError(
                f"phase should be {n_in} [numerator, denominator] pairs, 0 <= numerator < "
                f"denominator, one a node of the weight tree, but got phase={phase!r}"
            )
        return [(int(x[0]), int(x[1])) for x in phase]

    def _piece_of(self, k: int, j: int) -> int:
        """The last piece whose head finds source ``k``'s count at ``j`` or below."""
        return int(np.searchsorted(self._table.heads[:, k], j, side="right")) - 1

    def _resume_at(self, step: int) -> tuple[list[int], list[tuple[int, int]]]:
        """``(each source's count, each node's phase)`` at ``step``'s first stream position:
        where a new grid starting at ``step`` goes on (the same stream)."""
        B = self.batch_size * self.num_replicas
        p = bisect.bisect_right(self._firsts, step) - 1
        m = self._origin + (step - self._step0) * B - self._heads[p]  # after its head
        return self._table.counts(p, np.array([m]))[0].tolist(), self._table.state(p, m)

    def _read_of(self, n: int) -> Read:
        """Where stream position ``n`` is read: its step, rank and slot."""
        W, b = self.num_replicas, self.batch_size
        t, within = divmod(n - self._origin, W * b)
        step = self._step0 + t
        m, slot = divmod(within, b)
        return Read(n, step, (m - step) % W, slot)

    def _first_positions(self, steps: np.ndarray, rank: int) -> np.ndarray:
        """The first stream position ``rank`` reads at each of ``steps`` (of training), ``(T,)``:
        its micro-batch ``(rank + s) mod W`` of step ``s``'s global batch."""
        W, b = self.num_replicas, self.batch_size
        return self._origin + (steps - self._step0) * (W * b) + ((rank + steps) % W) * b

    # --- the stream -----------------------------------------------------------------------

    def _sources(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(source, item number overall)`` at stream ``positions`` (int64), each ``(P,)``."""
        steps = self._step0 + (positions - self._origin) // (self.batch_size * self.num_replicas)
        piece = np.searchsorted(self._firsts_array, steps, side="right") - 1  # (P,)
        return self._table.route(piece, positions - self._heads_array[piece])

    def _where(self, k: int, j: int, p: int) -> Read:
        """Where source ``k``'s item ``j`` is read, in piece ``p``: up the table's path."""
        return self._read_of(self._heads[p] + self._table.position(p, k, j))

    def _few(self, positions: list[int]) -> list[int]:
        """``_indices(*_sources(positions))`` of a few positions of one step, down one path
        each, on Python ints: the first index at once."""
        out, B = [], self.batch_size * self.num_replicas
        for n in positions:
            p = bisect.bisect_right(self._firsts, self._step0 + (n - self._origin) // B) - 1
            k, j = self._table.route_one(p, n - self._heads[p])
            out.append(self._item(k, j))  # type: ignore[attr-defined]
        return out

    def _blocks(self, steps: range, skip: int) -> Iterator[torch.Tensor | list[int]]:
        """This rank's indices of ``steps`` (of the grid) less the first ``skip``: a few down
        their paths first (the first index alone, at once), then blocks of steps doubling up to
        about 2**14 indices, each block's positions routed down the tree together."""
        b = self.batch_size
        s, cut = steps.start + skip // b, skip % b
        if s < steps.stop:  # the first index alone, then up to 15 more of its step: lists
            first = int(self._first_positions(np.array([s + self._step0]), self.rank)[0]) + cut
            head = list(range(first, first + min(16, b - cut)))
            yield self._few(head[:1])
            if len(head) > 1:
                yield self._few(head[1:])
            cut += len(head)
            if cut == b:
                s, cut = s + 1, 0
        size = 1
        while s < steps.stop:
            T = min(size, steps.stop - s)
            t = np.arange(s, s + T, dtype=np.int64) + self._step0  # (T,) training steps
            pos = (self._first_positions(t, self.rank)[:, None] + np.arange(b)).ravel()[cut:]
            yield torch.from_numpy(self._indices(*self._sources(pos)))  # (T b - cut,)
            s, cut, size = s + T, 0, min(2 * size, max(1, (1 << 14) // b))
