r"""The global layout (the default): one stream of the weight tree, whatever the grid, its
micro-batches dealt to the ranks in rotation.

Stream position ``n`` is the tree's position ``n`` (from the schedule's entry in use on). Training
step ``s`` reads the stream's positions ``[s·B, (s+1)·B)``, ``B = W·b``, as Megatron's global
batch does; its ``m``-th micro-batch ``[s·B + m·b, s·B + (m+1)·b)`` goes to rank ``(m - s) mod W``,
so rank ``r`` reads micro-batch ``(r + s) mod W``. So

- every prefix of the stream, and so every run's count after ``S`` steps, is within ``β_k / 2``
  of its share (``bound()``), whatever ``W`` and ``b``: the stream does not depend on them;
- every global batch is a window of the tree: within ``β_k`` of ``B·w_k``;
- a rank's reads are ``W``-strided micro-batches of the stream; the rotation deals every rank
  every offset of the grid in turn (no rank is stuck at an offset a light source never
  reaches), but only the per-rank layout (``layout.py``) bounds a rank by a constant.

An elastic resume (another ``W`` or ``b``, at a step boundary) goes on at the stream position
reached: the run reads the stream the uninterrupted run would have read, global batch after
global batch where ``B`` stays. Source ``k``'s item number at ``n`` is its count in the stream
before ``n``.

References:
    megatron/core/datasets/blended_dataset.py (the global stream of ranks' micro-batches)
    distsampling/mixing/tree.py (the weight tree and its bound)
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from functools import cached_property

import numpy as np
import torch

from .state import Read
from .tree import _counts, _counts_each, _position, _route, _route_each, _split

__all__: list[str] = []


class _GlobalLayout:
    """The grid's pieces (a tree each, from a step on, its position 0 at the stream position
    ``_starts[p]``), and where each rank reads: the sampler's attributes (``num_replicas``,
    ``batch_size``, ``rank``, ``_plan``, ``_trees``, ``_origin``, ``_step0``, ``_read0``,
    ``_phase0``: the first piece's tree position at ``_origin``) and its ``_indices``."""

    def _place(self) -> None:
        """The pieces ``(first step, tree)`` from the grid's first step on, their first stream
        positions, and where each one's tree has its position 0: the first piece's where the
        grid found it, each later one's at stream position 0 (its tree runs in phase with the
        stream, not from its own first position); their ``_bases`` are made again when asked."""
        B = self.batch_size * self.num_replicas
        g0 = max(g for g, (step, _) in enumerate(self._plan) if step <= self._step0)
        later = [(step, g) for g, (step, _) in enumerate(self._plan) if step > self._step0]
        self._pieces = [(self._step0, g0), *later]
        self._firsts = [s for s, _ in self._pieces]
        self._heads = [self._origin + (s - self._step0) * B for s in self._firsts]
        self._starts = [self._origin - self._phase0] + [0] * len(later)
        self.__dict__.pop("_bases", None)
        self.__dict__.pop("_arrays", None)
        if len(self._pieces) > 1:  # a schedule: its table now, O(changes × K), not at a read
            self._bases  # noqa: B018

    @cached_property
    def _arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``_firsts``, ``_starts`` and ``_bases`` as arrays ``(P,) (P,) (P, K)``: made once."""
        return (np.array(self._firsts, np.int64), np.array(self._starts, np.int64),
                np.array(self._bases, np.int64).reshape(len(self._pieces), -1))  # fmt: skip

    @cached_property
    def _bases(self) -> list[np.ndarray]:
        """Each piece's count offset, ``(K,)`` a piece: source ``k``'s item at tree position
        ``u`` of piece ``p`` is ``_bases[p][k] + c_k(u)``: made once for all pieces."""
        return self._make_bases()

    def _make_bases(self) -> list[np.ndarray]:
        K, P = len(self.sizes), len(self._pieces)
        trees = [self._trees[g] for _, g in self._pieces]  # (P,) one a piece
        # each tree's counts at its piece's first position and at the next piece's: at once
        ends = [*self._heads[1:], self._heads[-1]]
        at = np.array([[h - s, e - s] for h, e, s in zip(self._heads, ends, self._starts)])
        c = _counts_each(trees, at.reshape(P, 2), K)  # (P, 2, K)
        out, count = [], np.array(self._read0, np.int64)  # each source's count at the head
        self._at_heads = []
        for p in range(P):
            self._at_heads.append(count)
            out.append(count - c[p, 0])
            count = out[-1] + c[p, 1]
        return out

    def _piece_of(self, k: int, j: int) -> int:
        """The last piece whose first position finds source ``k``'s count at ``j`` or below."""
        self._bases  # noqa: B018  (its counts at the heads with it)
        return max(p for p in range(len(self._pieces)) if self._at_heads[p][k] <= j)

    def _resume_at(self, step: int) -> tuple[list[int], int]:
        """``(each source's count, the tree position)`` at ``step``'s first stream position:
        where a new grid starting at ``step`` goes on (the same stream)."""
        B = self.batch_size * self.num_replicas
        p = bisect.bisect_right(self._firsts, step) - 1
        at = self._origin + (step - self._step0) * B - self._starts[p]  # its tree position
        tree, K = self._trees[self._pieces[p][1]], len(self.sizes)
        return (self._bases[p] + _counts(tree, np.array([at]), K)[0]).tolist(), at

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
        ks, js = np.empty(len(positions), np.int64), np.empty(len(positions), np.int64)
        steps = self._step0 + (positions - self._origin) // (self.batch_size * self.num_replicas)
        piece = np.searchsorted(self._arrays[0], steps, side="right") - 1  # (P,)
        present = np.flatnonzero(np.bincount(piece))
        if len(present) > 8:  # a schedule changing every few steps: every tree at once
            trees = [self._trees[self._pieces[p][1]] for p in present.tolist()]
            which = np.searchsorted(present, piece)  # (P,) its tree among them
            k, c = _route_each(trees, which, positions - self._arrays[1][piece])
            return k, self._arrays[2][piece, k] + c
        for p in present.tolist():
            at = np.flatnonzero(piece == p)
            k, c = _route(self._trees[self._pieces[p][1]], positions[at] - self._starts[p])
            ks[at], js[at] = k, self._bases[p][k] + c
        return ks, js

    def _where(self, k: int, j: int, p: int) -> Read:
        """Where source ``k``'s item ``j`` is read, in piece ``p``: up its tree's path."""
        u = _position(self._trees[self._pieces[p][1]], k, j - int(self._bases[p][k]))
        return self._read_of(self._starts[p] + u)

    def _few(self, positions: list[int]) -> list[int]:
        """``_indices(*_sources(positions))`` of a few positions of one step, down one path
        each, on Python ints: the first index at once."""
        out, B = [], self.batch_size * self.num_replicas
        for n in positions:
            p = bisect.bisect_right(self._firsts, self._step0 + (n - self._origin) // B) - 1
            tree = self._trees[self._pieces[p][1]]
            (a, b_, left, right), node, c = tree.nodes, tree.root, n - self._starts[p]
            while node >= len(self.sizes):  # down the tree
                n_left, is_left = _split(a[node], b_[node], c)
                node, c = (left[node], n_left) if is_left else (right[node], c - n_left)
            k = node
            fresh = p == 0 and self._phase0 == 0  # the first piece from its start: no array
            j = (self._read0[k] if fresh else int(self._bases[p][k])) + c
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
