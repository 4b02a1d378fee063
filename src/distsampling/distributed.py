r"""DistributedSampler: which rank reads which sample, index for index the same as torch's.

Every rank builds the same epoch order (a permutation seeded by ``seed + epoch``, or ``0..N-1``),
pads it by repeating its head until its length divides by ``num_replicas`` (or cuts the tail
with ``drop_last``), and keeps every ``num_replicas``-th position starting at ``rank``. So the
split is *strided*, never contiguous halves: with 2 ranks, rank 0 reads positions 0, 2, 4, ...

Torch builds the whole padded epoch as a Python list on every rank and then slices it. Here the
same arithmetic runs on tensors, and only this rank's ``N / num_replicas`` indices ever become
Python ints. :func:`rank_positions` is the whole algorithm; the sampler class is its
bookkeeping, and :mod:`distsampling.wrapper` reuses it over any sampler's epoch.

Resume, on any number of ranks. Read the padded epoch as one *stream*: stream position ``p``
holds ``order[p % N]`` (positions ``>= N`` are torch's padding, the head of the order again).
Torch's split is "rank ``r`` reads positions ``r, r + W, r + 2W, ...`` below ``total_size``".
So once every one of ``W1`` ranks has read ``m`` samples, exactly the stream prefix
``[0, c)`` with ``c = m * W1`` is consumed, whichever rank read what. That prefix is all a
checkpoint must name (``start + position * num_replicas`` in :meth:`DistributedSampler.state_dict`).
Resumed on ``W2`` ranks, the rest of the epoch is the ``N - c`` stream positions
``[c, N)``: they are split as torch splits a dataset of ``N - c`` (:func:`resumed_positions`),
rank ``r`` reading ``c + r, c + r + W2, ...``, padded past ``N`` by the stream itself (the head
of the order, as torch pads) up to a multiple of ``W2``, or cut down to one with ``drop_last``.
Hence every position of ``[0, N)`` is read exactly once over the whole epoch, the only repeats
are padding (stream positions ``>= N``, fewer than ``W2`` of them), every new rank reads the
same count, and each rank computes its share from ``(N, c, W2, rank)`` alone. With ``W2 == W1``
this is the uninterrupted run itself: ``[c + r :: W1]`` is the rest of rank ``r``'s share. The
"padded epoch" of an elastic run is therefore the stream cut at ``c + ceil((N - c) / W2) * W2``
(``floor`` with ``drop_last``): the same order, padded for the world that finishes the epoch.

References:
    torch/utils/data/distributed.py (DistributedSampler);
    torchdata/stateful_dataloader/sampler.py (StatefulDistributedSampler: the state_dict calls)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sized
from functools import partial
from itertools import chain
from operator import length_hint
from typing import Any

import torch
from torch.utils.data import Sampler

from ._validate import (
    _index_dtype,
    check_bool,
    check_int,
    check_len,
    check_rank,
    check_state,
    resolve_world,
)

__all__ = ["DistributedSampler", "rank_positions", "resumed_positions", "split_sizes"]

# torch.Generator.manual_seed takes any integer in [-2**63, 2**64 - 1]
_SEED_LOW, _SEED_HIGH = -(2**63), 2**64 - 1


def split_sizes(n: int, num_replicas: int, drop_last: bool) -> tuple[int, int]:
    r"""Return ``(num_samples, total_size)``: items per rank, and the padded (or cut) epoch length.

    Args:
        n: length of the epoch (the dataset).
        num_replicas: number of ranks.
        drop_last: cut the tail instead of padding.

    Examples:
        >>> split_sizes(10, 3, drop_last=False)  # pad 10 -> 12: two indices repeat
        (4, 12)
        >>> split_sizes(10, 3, drop_last=True)  # cut 10 -> 9: the last index of the order is dropped
        (3, 9)
    """
    n = check_int("n", n, low=0)
    num_replicas = check_int("num_replicas", num_replicas, low=1)
    if check_bool("drop_last", drop_last):
        # torch writes ceil((n - W) / W) when n % W != 0: that is floor(n / W), 0 when n < W;
        # when W divides n torch takes n / W, which floor(n / W) is too
        num_samples = n // num_replicas
    else:
        num_samples = -(-n // num_replicas)  # ceil(n / W) in exact integer arithmetic
    return num_samples, num_samples * num_replicas


def rank_positions(
    n: int,
    num_replicas: int,
    rank: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    epoch: int = 0,
    drop_last: bool = False,
) -> torch.Tensor:
    r"""Return the indices into ``range(n)`` that ``rank`` reads this epoch, as a 1-D tensor.

    The tensor is int32 (int64 once the padded epoch has ``2**31`` positions or more).

    Equal to ``list(torch.utils.data.DistributedSampler(range(n), ...))`` with the same
    arguments, without building the other ranks' indices as Python objects.

    Args:
        n: length of the epoch.
        num_replicas: number of ranks ``W``.
        rank: this rank, in ``[0, W)``.
        shuffle: permute the epoch with a generator seeded by ``seed + epoch``.
        seed: base seed, the same on every rank.
        epoch: the epoch number, the same on every rank.
        drop_last: cut the tail instead of padding with the head.

    Examples:
        >>> rank_positions(5, 2, 1, shuffle=False).tolist()  # padded: 0 1 2 3 4 | 0
        [1, 3, 0]
    """
    # the sampler's checks, in its words: this is its algorithm, called with any arguments
    n, num_replicas = check_int("n", n, low=0), check_int("num_replicas", num_replicas, low=1)
    rank = check_rank(rank, num_replicas)
    shuffle = check_bool("shuffle", shuffle)
    seed = check_int("seed", seed, low=_SEED_LOW, high=_SEED_HIGH)
    epoch = check_int("epoch", epoch)
    if shuffle and not _SEED_LOW <= seed + epoch <= _SEED_HIGH:
        raise ValueError(
            f"seed + epoch should be in [{_SEED_LOW}, {_SEED_HIGH}] (torch.Generator's "
            f"range), but got seed={seed}, epoch={epoch}"
        )
    _num_samples, total_size = split_sizes(n, num_replicas, drop_last)
    if total_size > 2**63 - 1:  # positions are int64 (torch would build a list this long)
        raise ValueError(
            f"num_replicas should leave a padded epoch below 2**63 positions, but got "
            f"num_replicas={num_replicas} for n={n}: total_size={total_size}"
        )
    dtype = _index_dtype(max(n, total_size))
    if shuffle:
        # the same generator, seed and call as torch: this is what makes the order identical
        g = torch.Generator()
        g.manual_seed(seed + epoch)
        order = torch.randperm(n, generator=g, dtype=dtype)  # (n,)
    else:
        order = torch.arange(n, dtype=dtype)  # (n,)
    if total_size <= n:
        # no padding (or the tail cut by drop_last): a strided view, nothing copied
        return order[rank:total_size:num_replicas]  # (num_samples,)
    # pad: position p >= n repeats the head of the order, wrapping as often as needed (n < W
    # repeats it several times), so the padded epoch at position p is order[p % n]
    positions = torch.arange(rank, total_size, num_replicas)  # (num_samples,) int64
    return order[positions % n]  # (num_samples,)


def resumed_positions(
    n: int, num_replicas: int, rank: int, start: int, *, drop_last: bool = False, pad: bool = True
) -> torch.Tensor:
    r"""Positions into the epoch order that ``rank`` reads when the epoch resumes at stream ``start``.

    The stream positions ``[start, n)`` are split as torch splits a dataset of ``n - start``:
    rank ``r`` reads ``start + r, start + r + W, ...``, padded (position ``p >= n`` reads
    ``order[p % n]``, the head of the order, as torch pads) to a multiple of ``W``, or cut down
    to one with ``drop_last``; ``pad=False`` stops below ``n`` (:class:`UnpaddedDistributedSampler`).
    With ``start=0`` these are :func:`rank_positions`' positions.

    Args:
        n: length of the epoch.
        num_replicas: number of ranks ``W`` that finish the epoch.
        rank: this rank, in ``[0, W)``.
        start: stream positions already consumed, in ``[0, n]``.
        drop_last: cut the rest to a multiple of ``W`` instead of padding it.
        pad: pad the rest (``False``: ranks read ``ceil((n - start - rank) / W)`` each).

    Examples:
        >>> resumed_positions(10, 3, 0, start=4).tolist()  # 6 left on 3 ranks: 4, 7
        [4, 7]
        >>> resumed_positions(10, 4, 3, start=4).tolist()  # 6 left on 4 ranks: 7, then 11 % 10
        [7, 1]
    """
    n, num_replicas = check_int("n", n, low=0), check_int("num_replicas", num_replicas, low=1)
    rank = check_rank(rank, num_replicas)
    start = check_int("start", start, low=0, high=n)
    drop_last, pad = check_bool("drop_last", drop_last), check_bool("pad", pad)
    if pad:  # each rank reads the same count: torch's split of the n - start left
        count = split_sizes(max(n - start, 0), num_replicas, drop_last)[0]
    else:  # positions below n only
        count = len(range(start + rank, n, num_replicas))
    positions = start + rank + num_replicas * torch.arange(count)  # (count,)
    return positions % max(n, 1)  # the stream past n repeats the head of the order


def _share_at(
    n: int, num_replicas: int, rank: int, start: int, drop_last: bool, pad: bool, **order: Any
) -> torch.Tensor:
    """The epoch order's entries ``rank`` reads from stream ``start`` (order: shuffle, seed, epoch)."""
    if start == 0:  # torch's split, exactly; unpadded: only the positions below n
        at = rank_positions(n, num_replicas, rank, drop_last=drop_last, **order)
        return at if pad else at[: len(range(rank, n, num_replicas))]
    # an elastic resume: the rest of the stream split over this world (module docstring)
    whole = rank_positions(n, 1, 0, **order)  # (n,) the whole epoch order
    return whole[resumed_positions(n, num_replicas, rank, start, drop_last=drop_last, pad=pad)]


def _resume_point(
    state: dict[str, Any], n: int, num_replicas: int, drop_last: bool
) -> tuple[int, int]:
    """``(start, skip)`` for the next ``iter()`` on ``num_replicas`` ranks, from a checked state.

    On the saved number of ranks: the rest of this rank's own share. On another: every rank
    read ``position``, so the stream prefix ``start + position * W1`` is consumed (module doc).
    """
    saved_world = check_int("num_replicas", state["num_replicas"], low=1)
    start = check_int("start", state["start"], low=0, high=n)
    # the most a rank can have read is rank 0's count from `start`: ceil(rest / W1), floor with
    # drop_last (an unpadded sampler has drop_last=False: its rank 0 reads the ceiling too)
    most = split_sizes(n - start, saved_world, drop_last)[0]
    position = check_int("position", state["position"], low=0, high=most)
    if saved_world == num_replicas:
        return start, position
    return min(start + position * saved_world, n), 0


def _where(
    pending: tuple[int, int] | None, reading: tuple[int, int, Any] | None
) -> tuple[int, int]:
    """``(start, position)`` now: a loaded point not yet read, else the last ``iter()``'s count."""
    if pending is not None:
        return pending
    if reading is not None:
        start, skip, reader = reading
        return start, skip + reader.yielded
    return 0, 0


def _epoch_order_of(sampler: object) -> torch.Tensor | None:
    """``sampler.epoch_order()`` where it describes ``iter(sampler)``, else ``None``.

    A subclass that overrides ``__iter__`` but not ``epoch_order`` yields something else: only
    trust ``epoch_order`` when the class that defines ``__iter__`` defines it too.
    """
    if not callable(getattr(sampler, "epoch_order", None)):
        return None
    owner = next((c for c in type(sampler).__mro__ if "__iter__" in vars(c)), None)
    if owner is None or "epoch_order" not in vars(owner):
        return None
    return sampler.epoch_order()  # type: ignore[attr-defined]


class _Reader:
    """One ``iter()`` of a sampler: its ints at C speed (``ints``) and how many it handed out.

    The indices are computed on the first ``next`` (so an ``iter()`` that is never read costs
    nothing) and converted a chunk at a time. Counting each int in Python would cost more than
    handing it out, so the count is read off the chunk's list iterator instead: handed out =
    ints of finished chunks + chunk length - what its iterator still holds (``length_hint``).
    """

    def __init__(self, indices: Callable[[], torch.Tensor], chunk: int = 1 << 16) -> None:
        self._done, self._len, self._it = 0, 0, iter(())  # finished chunks, current chunk
        self.ints: Iterator[int] = chain.from_iterable(self._chunks(indices, chunk))

    def _chunks(self, indices: Callable[[], torch.Tensor], chunk: int) -> Iterator[Iterator[int]]:
        for part in indices().split(chunk):
            self._done += self._len
            self._it, self._len = iter(part.tolist()), len(part)
            yield self._it
        self._done, self._len = self._done + self._len, 0

    @property
    def yielded(self) -> int:
        return self._done + self._len - length_hint(self._it)


_STATE_VERSION = 1
_POSITION_FIELDS = ("epoch", "num_replicas", "start", "position")


class DistributedSampler(Sampler[int]):
    r"""Restrict data loading to one rank's share of the dataset, exactly as torch does.

    Each rank reads ``num_samples = ceil(N / num_replicas)`` indices (``floor`` with
    ``drop_last=True``). Without ``drop_last`` the epoch is padded by repeating its first
    indices so that every rank reads the same number; with it the tail is cut and nothing
    repeats. Call :meth:`set_epoch` at the start of every epoch, or every epoch reads the same
    order.

    Args:
        dataset: anything with ``__len__``; only its length is used.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        shuffle: permute the indices, seeded by ``seed + epoch``.
        seed: base seed; must be the same on every rank.
        drop_last: drop the tail to make the split even instead of padding.

    Examples:
        >>> [list(DistributedSampler(range(10), 2, rank, shuffle=False)) for rank in (0, 1)]
        [[0, 2, 4, 6, 8], [1, 3, 5, 7, 9]]
        >>> s = DistributedSampler(range(10), num_replicas=2, rank=0, seed=0)
        >>> s.set_epoch(1)
        >>> list(s)
        [5, 1, 0, 9, 7]
    """

    _pad = True  # UnpaddedDistributedSampler: False

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int = 0,
        drop_last: bool = False,
    ) -> None:
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        n = check_len("dataset", dataset)
        self.dataset = dataset
        self.shuffle = check_bool("shuffle", shuffle)
        self.seed = check_int("seed", seed, low=_SEED_LOW, high=_SEED_HIGH)
        self.drop_last = check_bool("drop_last", drop_last)
        self.epoch = 0
        self.num_samples, self.total_size = split_sizes(n, self.num_replicas, self.drop_last)
        self._pending: tuple[int, int] | None = None  # (start, position) from load_state_dict
        self._reading: tuple[int, int, _Reader] | None = None  # (start, skip, reader) of iter()

    def _check(self) -> None:
        self._check_length()
        if self.shuffle and not _SEED_LOW <= self.seed + self.epoch <= _SEED_HIGH:
            raise ValueError(
                f"seed + epoch should be in [{_SEED_LOW}, {_SEED_HIGH}] (torch.Generator's "
                f"range), but got seed={self.seed}, epoch={self.epoch}"
            )

    def _check_length(self) -> None:
        n = len(self.dataset)
        if split_sizes(n, self.num_replicas, self.drop_last)[1] != self.total_size:
            raise RuntimeError(
                f"len(dataset) changed since this sampler was built: total_size={self.total_size} "
                f"was computed for another length, but got len(dataset)={n}. Build a new sampler "
                "(or use DistributedSamplerWrapper, which follows a changing length)."
            )

    def _share(self, epoch: int, start: int, skip: int) -> torch.Tensor:
        # this rank's indices of `epoch` read from stream position `start`, the first `skip` cut
        n, order = len(self.dataset), {"shuffle": self.shuffle, "seed": self.seed, "epoch": epoch}
        at = _share_at(n, self.num_replicas, self.rank, start, self.drop_last, self._pad, **order)
        return at[skip:]  # (num_samples - skip,) or the resumed count

    def epoch_order(self) -> torch.Tensor:
        r"""The indices the next ``iter()`` yields, as a 1-D tensor; nothing is consumed or drawn.

        ``epoch_order().tolist() == list(self)``: this rank's share of the epoch (the rest of it
        after :meth:`load_state_dict`).
        """
        self._check()
        start, skip = self._pending or (0, 0)
        return self._share(self.epoch, start, skip)

    def __iter__(self) -> Iterator[int]:
        # checked and read now, like torch (the epoch is read at iter() time); the indices are
        # computed on the first next(), and only this rank's become Python ints, in chunks
        self._check()
        start, skip = self._pending or (0, 0)
        self._pending = None  # a loaded position resumes one iter(), as a fresh epoch would not
        reader = _Reader(partial(self._share, self.epoch, start, skip))
        self._reading = (start, skip, reader)
        return reader.ints

    def __len__(self) -> int:
        return self.num_samples

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch; with ``shuffle=True`` each epoch gets its own order, the same on all ranks.

        A position loaded by :meth:`load_state_dict` survives ``set_epoch`` of its own epoch
        (a training loop calls it on resume) and is dropped by any other epoch.

        Args:
            epoch: epoch number (an integer; call it with the same value on every rank).
        """
        epoch = check_int("epoch", epoch)
        if epoch != self.epoch:
            self._pending = self._reading = None
        self.epoch = epoch

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""Where this rank is in the epoch, as a small JSON-serialisable dict.

        ``position`` counts the samples this rank read since stream position ``start`` (0 unless
        the epoch was resumed on another number of ranks): by default the ints the current
        ``iter()`` handed out, which is what torchdata's ``StatefulDataLoader`` snapshots. A
        plain ``DataLoader`` with workers prefetches ahead of the loop: pass ``consumed``, the
        samples of this ``iter()`` the loop has used (``batches_done * batch_size``).

        Args:
            consumed: samples of the current ``iter()`` consumed, in ``[0, handed out]``.

        Examples:
            >>> s = DistributedSampler(range(10), num_replicas=2, rank=0)
            >>> it = iter(s); _ = [next(it) for _ in range(3)]
            >>> {k: v for k, v in s.state_dict().items() if k in ("epoch", "start", "position")}
            {'epoch': 0, 'start': 0, 'position': 3}
        """
        start, position = _where(self._pending, self._reading)
        if consumed is not None and (self._pending is not None or self._reading is None):
            check_int("consumed", consumed, low=0, high=0)  # no iter() has handed anything out
        elif consumed is not None:  # the loop's count, at most what the last iter() handed out
            _, skip, reader = self._reading
            position = skip + check_int("consumed", consumed, low=0, high=reader.yielded)
        return {
            "kind": type(self).__name__,
            "version": _STATE_VERSION,
            "dataset_len": len(self.dataset),
            "shuffle": self.shuffle,
            "seed": self.seed,
            "drop_last": self.drop_last,
            "epoch": self.epoch,
            "num_replicas": self.num_replicas,
            "start": start,
            "position": position,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume where ``state`` was taken, on this sampler's number of ranks (any number).

        On the same number of ranks the next ``iter()`` yields the rest of this rank's share;
        on another, the rest of the epoch's stream is split over this world (module doc).
        ``state`` must come from a sampler of this class over the same data, seed and flags.

        Args:
            state: a :meth:`state_dict` (after ``json.loads`` or ``torch.load`` too).

        Examples:
            >>> old = [DistributedSampler(range(10), 2, r, shuffle=False) for r in (0, 1)]
            >>> [[next(it) for _ in range(2)] for it in map(iter, old)]  # each rank read 2
            [[0, 2], [1, 3]]
            >>> new = [DistributedSampler(range(10), 3, r, shuffle=False) for r in (0, 1, 2)]
            >>> for s in new:  # on 3 ranks now: positions 4..9 are left, 2 each
            ...     s.load_state_dict(old[0].state_dict())
            >>> [list(s) for s in new]
            [[4, 7], [5, 8], [6, 9]]
        """
        must_match = {
            "dataset_len": len(self.dataset),
            "shuffle": self.shuffle,
            "seed": self.seed,
            "drop_last": self.drop_last,
        }
        state = check_state(
            state, type(self).__name__, _STATE_VERSION, must_match, required=_POSITION_FIELDS
        )
        epoch = check_int("epoch", state["epoch"])
        n = len(self.dataset)
        self._pending = _resume_point(state, n, self.num_replicas, self.drop_last)
        self.epoch, self._reading = epoch, None
