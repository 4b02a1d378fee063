r"""IndexShuffleSampler: a DistributedSampler whose epoch costs each rank its own share.

``torch.randperm(n)`` draws the whole order: O(n) time and memory per rank and epoch. This
sampler reads its order from the cipher (cipher.py: ``index_shuffle(positions, n, seed)``, a
keyed bijection of ``[0, n)`` evaluated only where asked, ``index_unshuffle`` its inverse,
``epoch_key`` an epoch's key; all three importable from here as well): a rank computes
``σ(rank), σ(rank + W), ...`` and nothing of length ``n``.

The sampler walks a share's blocks together (``_shuffle_blocks``): the values still walking
ride along with the next block's call, so the walk adds its third of a pass on average and no
calls; blocks of 2**14 positions, with the values walking along, stay within torch's grain size.

References:
    torch/utils/data/distributed.py (the split, the padding, set_epoch);
    J. Black, P. Rogaway, "Ciphers with Arbitrary Finite Domains", CT-RSA 2002 (cycle walking)
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import count, takewhile

import numpy as np
import torch

from .._split import rank_positions
from ..distributed import DistributedSampler
from ..guards import ShareGuards
from .cipher import _MIN_BITS, _feistel, _round_keys, epoch_key, index_shuffle, index_unshuffle

__all__ = ["IndexShuffleSampler", "epoch_key", "index_shuffle", "index_unshuffle"]

_BLOCK = 1 << 14  # the sampler's blocks of positions: 2**14, within torch's grain size (32768)


def _shuffle_blocks(blocks: Iterable[torch.Tensor], n: int, seed: int) -> Iterator[torch.Tensor]:
    """``index_shuffle(block, n, seed)`` of each block of CPU positions in turn, one cipher call a
    block: the values still walking ride along with the next block's call, so the walk's tail
    (a quarter of a block, a sixteenth, ...) costs no calls of its own. A block comes out once
    all its values have landed; after the last one, what still walks is walked through. All
    of it is numpy's, on one thread (torch would spread these small gathers and copies over its
    intra-op threads, which costs far more than it saves)."""
    bits, keys = max(_MIN_BITS, (n - 1).bit_length()), _round_keys(seed)
    out = np.empty(0, dtype=np.int64)  # the blocks not yet given out, end to end, ...
    base, ends = 0, deque()  # ... from slot `base` of the whole output on; where each ends
    vals = slot = np.empty(0, dtype=np.int64)  # (C,) walking: its value, its slot
    blocks = iter(blocks)
    while (positions := next(blocks, None)) is not None or len(vals):
        x = vals if positions is None else np.concatenate([positions.numpy(), vals])  # (B + C,)
        enc = _feistel(x, keys, bits, False)
        new, vals = enc[: len(x) - len(vals)], enc[len(x) - len(vals) :]  # (B,) (C,)
        landed = vals < n  # (C,) in range now: into its slot
        out[slot[landed] - base] = vals[landed]
        vals, slot = vals[~landed], slot[~landed]
        if positions is not None:  # this block's misses walk on with the next call
            miss = np.flatnonzero(new >= n)  # (M,)
            vals, slot = (
                np.concatenate([vals, new[miss]]),
                np.concatenate([slot, miss + base + len(out)]),
            )
            out = np.concatenate([out, new])
            ends.append(base + len(out))
        walking = int(slot.min()) if len(slot) else base + len(out)  # the first slot not done
        while ends and ends[0] <= walking:  # in order: the blocks whose walks are over
            end = ends.popleft()
            yield torch.from_numpy(out[: end - base])
            out, base = out[end - base :], end


class IndexShuffleSampler(ShareGuards, DistributedSampler):  # the exported's guards
    r"""DistributedSampler with an epoch order computed per position: a rank pays for its share.

    Position ``p`` of epoch ``e`` holds ``index_shuffle(p, N, epoch_key(seed, e))``, or ``p``
    itself without shuffle (torch's ``DistributedSampler``, index for index). The rest is
    :class:`~distsampling.DistributedSampler`'s: ``num_samples``, ``total_size``, padding by the
    head of the order (position ``p >= N`` reads position ``p % N``), ``drop_last``,
    ``set_epoch``, ranks that agree without communicating. Nothing of length ``N`` is built: the
    share is computed and yielded a block of ``2**14`` at a time (32 first), so the first index
    comes at once and memory stays flat; the resumable form saves and resumes (elastic too) as
    ``ResumableDistributedSampler`` does, in ``O(share)``.

    Args: as :class:`~distsampling.DistributedSampler`; ``epoch`` must be ``>= 0``.

    Examples:
        >>> [list(IndexShuffleSampler(range(5), 2, r, shuffle=False)) for r in (0, 1)]
        [[0, 2, 4], [1, 3, 0]]
        >>> s = IndexShuffleSampler(range(10**10), num_replicas=1024, rank=3, seed=0)
        >>> s.set_epoch(1); len(s), next(iter(s))  # a share of 9765625, the first at once
        (9765625, 7753043769)
    """

    def order_at(self, positions: torch.Tensor) -> torch.Tensor:
        r"""The epoch's order at ``positions`` (int64, in ``[0, N)``): what they hold this epoch."""
        n = self._length()
        if not self.shuffle:
            return positions.to(torch.int64)  # torch's order: 0, 1, ..., N - 1
        return index_shuffle(positions, n, epoch_key(self.seed, self.epoch))

    def epoch_order(self) -> torch.Tensor:
        r"""The whole epoch's order, ``(N,)``: for a small ``N`` (``order_at`` is the lean way)."""
        return self.order_at(torch.arange(self._length()))

    def indices(self) -> torch.Tensor:
        r"""This rank's share, ``(num_samples,)``: the order at torch's positions of this rank."""
        W, rank = self.num_replicas, self.rank
        return self.order_at(rank_positions(self._length(), W, rank, self.drop_last))

    def _positions(self, steps: range) -> torch.Tensor:
        """This rank's positions, the ``steps``-th of them: ``rank + W * step``, ``% N`` past ``N``
        (the resumable form reads its own, from where it resumed)."""
        steps = range(self.num_samples)[steps.start : steps.stop]
        positions = self.rank + self.num_replicas * torch.arange(steps.start, steps.stop)
        return positions % max(self._length(), 1)

    def _order_blocks(self, begin: int = 0) -> Iterator[torch.Tensor]:
        """The order at this rank's positions from step ``begin`` on, a block at a time: 32 first,
        walked through (the first index at once), then blocks of ``2**14`` walked together.

        The epoch (and a loaded position) is read once, at the first ``next``, as torch's
        sampler reads it: a ``set_epoch`` while the iterator runs (a loop that calls it after
        its first batch) changes the next ``iter()``, never the blocks of this one."""
        now = copy.copy(self)  # this iterator's sampler: a later set_epoch or load leaves it alone
        n, W = now._length(), now.num_replicas
        if now.total_size > 2**63 - 1:  # positions are int64
            raise ValueError(
                f"num_replicas should leave a padded epoch below 2**63 positions, but got "
                f"num_replicas={W} for n={n}: total_size={now.total_size}"
            )
        yield now.order_at(now._positions(range(begin, begin + 32)))
        starts = count(begin + 32, _BLOCK)
        blocks = takewhile(len, (now._positions(range(b, b + _BLOCK)) for b in starts))
        if not now.shuffle:
            yield from blocks  # torch's order: the positions themselves
        else:
            yield from _shuffle_blocks(blocks, n, epoch_key(now.seed, now.epoch))

    def _chunks(self) -> Iterator[list[int]]:
        return (block.numpy().tolist() for block in self._order_blocks())  # numpy's: faster
