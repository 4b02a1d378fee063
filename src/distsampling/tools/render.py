r"""Text rendering of who reads what: the plans that ``split`` and ``demo`` print, and ``where``.

A plan is ``plan[epoch][rank]``, the items each rank reads, simulated here for every rank. Padding
(repeats of the epoch's head, so that every rank reads the same number) is marked ``*``; windows
of ``T`` consecutive samples print as ``first-...-last``. :mod:`distsampling.tools.cli` and
:mod:`distsampling.tools.demo` both print through this module.

At any size: rank ``r`` reads positions ``r, r + W, r + 2W, ...`` of the padded epoch, so the
items shown are computed at those positions only. A rank reading more than a few dozen prints
its count, how many are padding, and its first and last few (``head``). The epoch's order at a
position is ``p`` itself without shuffle, ``index_shuffle(p, N, epoch_key(seed, epoch))`` for
``order="index-shuffle"`` (``IndexShuffleSampler``), and ``torch.randperm(N)[p]`` for torch's
shuffle: the one order that needs the whole permutation, refused above ``max_memory``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import groupby
from typing import Any

import torch

from .._checks import _index_dtype, check_int, check_seed
from .._split import epoch_permutation
from ..batch import BatchSampler
from ..distributed import DistributedSampler
from ..scale.cipher import epoch_key, index_shuffle, index_unshuffle
from ..scale.index_shuffle import IndexShuffleSampler
from ..windowed import SequentialWindowedDataset, epoch_offset

__all__ = [
    "MAX_MEMORY",
    "ORDERS",
    "format_split",
    "format_where",
    "plan_split",
    "rank_indices",
    "rank_windows",
    "split_lines",
    "where_read",
]

#: the orders `split` and `where` compute: DistributedSampler's (torch) and IndexShuffleSampler's
ORDERS = ("torch", "index-shuffle")
#: the most memory torch's shuffled order may take by default (``torch.randperm(N)``): 1 GiB
MAX_MEMORY = 2**30
#: bytes an index torch's DistributedSampler holds at its peak: an int64 randperm, then Python
#: lists of every index (460.4 MiB for 10**7 in `make bench`; tests/test_cli.py checks the two)
TORCH_SAMPLER_BYTES = 48
_FULL = 32  # a rank reading at most this many items (or 2 * head) is printed whole
_BLOCK = 1 << 16  # positions computed at a time: a block of ranks, so memory stays flat
_WHOLE_WINDOW = 8  # longer windows print as first-...-last
_READS_SHOWN = 8  # where: the reads listed one by one, the rest summed up


def plan_split(
    size: int,
    replicas: int,
    epochs: int,
    *,
    window: int | None = None,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
) -> list[list[list[int]]]:
    r"""Return ``plan[epoch][rank]``: the indices each rank reads (with ``window``, the starts
    of the windows of :class:`~distsampling.SequentialWindowedDataset` it reads), simulating
    every rank here.

    Examples:
        >>> plan_split(5, 2, 1, shuffle=False)
        [[[0, 2, 4], [1, 3, 0]]]
        >>> plan_split(10, 2, 1, window=3)  # epoch 0: windows start at 1, 4, 7 and 0 (offset 1)
        [[[1, 0], [4, 7]]]
    """
    replicas, epochs = check_int("replicas", replicas, low=1), check_int("epochs", epochs, low=1)
    kwargs = {"shuffle": shuffle, "seed": seed, "drop_last": drop_last}
    if window is None:
        size = check_int("size", size, low=0)
        return [
            [rank_indices(size, replicas, r, e, **kwargs) for r in range(replicas)]
            for e in range(epochs)
        ]
    return [
        [rank_windows(size, window, replicas, r, e, **kwargs) for r in range(replicas)]
        for e in range(epochs)
    ]


def rank_indices(
    size: int,
    replicas: int,
    rank: int,
    epoch: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
) -> list[int]:
    r"""The indices that ``rank`` reads in ``epoch``: what a training loop's sampler yields.

    Examples:
        >>> rank_indices(5, replicas=2, rank=1, epoch=0, shuffle=False)  # 0 again: padding
        [1, 3, 0]
    """
    sampler = DistributedSampler(range(size), replicas, rank, shuffle, seed, drop_last)
    sampler.set_epoch(epoch)
    return sampler.indices().tolist()  # what iter() yields, without iterating


def _check_order(order: object) -> str:
    if order not in ORDERS:
        raise ValueError(
            f"order should be one of {', '.join(map(repr, ORDERS))}, but got order={order!r}"
        )
    return order  # type: ignore[return-value]


def _bytes(n: int) -> str:
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{n} bytes"


def randperm_bytes(n: int) -> int:
    r"""Bytes ``torch.randperm(n)`` holds at its peak, as ``DistributedSampler`` draws it: the
    permutation itself (shuffled in place), 4 bytes an index below ``2**31``, else 8.

    Examples:
        >>> randperm_bytes(10**9), randperm_bytes(2**31)
        (4000000000, 17179869184)
    """
    return n * _index_dtype(n).itemsize


def _check_memory(n: int, order: str, shuffle: bool, max_memory: int, what: str) -> None:
    """Refuse torch's shuffled order of ``n`` items before drawing it if it exceeds the budget."""
    need = randperm_bytes(n)
    if order == "torch" and shuffle and need > max_memory:
        dtype = str(_index_dtype(n)).removeprefix("torch.")
        raise ValueError(
            f"torch's shuffled order of {n} {what} is torch.randperm({n}), drawn whole every "
            f"epoch: {_bytes(need)} ({dtype}, {need // n} bytes an index) at its peak, over "
            f"--max-memory={_bytes(max_memory)} (that is the permutation alone, as drawn here; "
            f"torch's DistributedSampler holds about {TORCH_SAMPLER_BYTES} bytes an index, "
            f"{_bytes(n * TORCH_SAMPLER_BYTES)}: an int64 randperm, then Python lists). "
            f"Use --order index-shuffle (IndexShuffleSampler "
            f"computes only the positions asked for) or --no-shuffle (the order is then 0, 1, "
            f"2, ...: nothing to draw), or raise --max-memory"
        )


def _order(
    n: int, order: str, shuffle: bool, seed: int, epoch: int
) -> Callable[[torch.Tensor], torch.Tensor]:
    """The epoch's order as a function of positions in ``[0, n)`` (an int64 tensor)."""
    if not shuffle:
        return lambda p: p  # torch's order is 0, 1, ..., n - 1: positions are indices
    if order == "index-shuffle":
        key = epoch_key(seed, epoch)
        return lambda p: index_shuffle(p, n, key)
    perm = epoch_permutation(n, True, seed, epoch)  # (n,): checked against the budget before
    return lambda p: perm[p]


def _check_epochs(first: DistributedSampler, order: str, epochs: int) -> None:
    """Refuse up front an epoch that the sampler could not seed, and positions beyond int64."""
    if first.shuffle and order == "torch":
        check_seed(first.seed, epochs - 1)  # seed + epoch seeds torch's generator
    elif first.shuffle:
        epoch_key(first.seed, epochs - 1)
    if first.total_size > 2**63 - 1:  # positions are int64
        raise ValueError(
            f"replicas should leave a padded epoch below 2**63 positions, but got "
            f"replicas={first.num_replicas} for size={first.dataset_len}: "
            f"total_size={first.total_size}"
        )


def _read(first: DistributedSampler, batch_size: int | None, drop_last: bool) -> int:
    """How many items each rank reads: ``num_samples``, or its whole batches with ``drop_last``."""
    if batch_size is None or not drop_last:
        return first.num_samples
    return first.num_samples // batch_size * batch_size


def _elide(items: list[tuple[int, str]], low: int, high: int) -> list[str]:
    # the shown (step, text) of steps [low, high), with "..." wherever steps are left out
    out, expect = [], low
    for step, text in items:
        if step > expect:
            out.append("...")
        out.append(text)
        expect = step + 1
    return out + ["..."] * (expect < high)


def _row(items: list[tuple[int, str]], read: int, batch_size: int | None) -> str:
    # one rank's items as one list, or as its batches when batch_size is given; "..." stands
    # for the items (within a batch) or the whole batches (between two) that are not shown
    if batch_size is None:
        return "[" + ", ".join(_elide(items, 0, read)) + "]"
    parts, last = [], -1
    for b, batch in groupby(items, key=lambda item: item[0] // batch_size):
        parts += ["..."] * (b > last + 1)
        low, high = b * batch_size, min((b + 1) * batch_size, read)
        parts.append("[" + ", ".join(_elide(list(batch), low, high)) + "]")
        last = b
    return " ".join(parts)


def _rank_rows(
    n: int,
    replicas: int,
    read: int,
    order_at: Callable[[torch.Tensor], torch.Tensor],
    label: Callable[[int], str],
    *,
    head: int,
    batch_size: int | None,
    word: str,
) -> Iterator[str]:
    """One line per rank: its items in full, or its count, padding and first and last ``head``."""
    whole = read <= max(_FULL, 2 * head)
    steps = list(range(read)) if whole else [*range(head), *range(read - head, read)]
    per_block = max(1, _BLOCK // max(len(steps), 1))
    for first in range(0, replicas, per_block):
        ranks = torch.arange(first, min(first + per_block, replicas))  # (R,)
        # (R, S): rank r's step k reads position r + k * W of the padded epoch, which holds
        # the order at p % n (past n: the head again)
        positions = ranks[:, None] + replicas * torch.tensor(steps, dtype=torch.int64)
        items = order_at(positions % max(n, 1)).tolist()
        for rank, row, pos in zip(ranks.tolist(), items, positions.tolist()):
            shown = [(k, label(i) + "*" * (p >= n)) for k, i, p in zip(steps, row, pos)]
            text = _row(shown, read, batch_size)
            if whole:
                yield f"  rank {rank}: {text}"
            else:  # rank + k * W < n for k < ceil((n - rank) / W): the rest is padding
                padded = read - min(read, max(0, -(-(n - rank) // replicas)))
                yield f"  rank {rank}: {read} {word}, {padded} padded: {text}"


def _summary_line(read: int, head: int, word: str) -> list[str]:
    whole = max(_FULL, 2 * head)
    if read <= whole:
        return []
    return [
        f"more than {whole} {word} a rank: each rank's count, how many are padding, and its "
        f"first and last {head} (--head {head})"
    ]


def split_lines(
    size: int,
    replicas: int,
    epochs: int,
    *,
    window: int | None = None,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
    batch_size: int | None = None,
    order: str = "torch",
    head: int = 5,
    max_memory: int = MAX_MEMORY,
) -> Iterator[str]:
    r"""The lines of :func:`format_split`, one at a time; every argument is checked (and torch's
    shuffled order refused above ``max_memory``) before the first line.

    Args:
        size: dataset length.
        replicas: number of ranks.
        epochs: epochs to show, from 0.
        window: split the windows of :class:`~distsampling.SequentialWindowedDataset` (``size``
            and ``window`` the dataset's, ``seed`` its offset's too) as samples are, each
            printed ``first-...-last`` (whole up to 8 samples): ``split --window``.
        shuffle: permute the indices (torch's ``randperm``, or ``index_shuffle``).
        seed: base seed.
        drop_last: cut the tail instead of padding with the head.
        batch_size: also group each rank's indices into batches (``BatchSampler``).
        order: ``"torch"`` (``DistributedSampler``) or ``"index-shuffle"``
            (``IndexShuffleSampler``).
        head: a rank reading more than ``max(32, 2 * head)`` indices prints its first and last
            ``head`` only, with its count and how many are padding.
        max_memory: bytes that torch's shuffled order, ``torch.randperm(size)``, may take.

    Examples:
        >>> for line in split_lines(100, 3, 1, shuffle=False, head=2):  # 34 a rank: a summary
        ...     print(line)
        DistributedSampler(size=100, num_replicas=3, shuffle=False, seed=0, drop_last=False)
        each rank reads num_samples=34; the padded epoch has total_size=102 (2 padded, marked *)
        more than 32 indices a rank: each rank's count, how many are padding, and its first and last 2 (--head 2)
        epoch 0
          rank 0: 34 indices, 0 padded: [0, 3, ..., 96, 99]
          rank 1: 34 indices, 1 padded: [1, 4, ..., 97, 0*]
          rank 2: 34 indices, 1 padded: [2, 5, ..., 98, 1*]
    """
    order, head = _check_order(order), check_int("head", head, low=1)
    max_memory = check_int("max_memory", max_memory, low=0)
    if window is None:  # windows: the dataset checks size below
        size = check_int("size", size, low=0)
    replicas, epochs = check_int("replicas", replicas, low=1), check_int("epochs", epochs, low=1)
    kind = DistributedSampler if order == "torch" else IndexShuffleSampler
    if window is None:  # samples: index i is written i
        first = kind(range(size), replicas, 0, shuffle, seed, drop_last)  # checks the rest
        n, word = size, "indices"
        pad = first.total_size - size
        what = (
            f"{pad} padded, marked *" if pad > 0 else f"{-pad} dropped" if pad < 0 else "no padding"
        )
        header = [
            f"{kind.__name__}(size={size}, num_replicas={replicas}, shuffle={shuffle}, "
            f"seed={seed}, drop_last={drop_last})",
            f"each rank reads num_samples={first.num_samples}; "
            f"the padded epoch has total_size={first.total_size} ({what})",
        ]
    else:  # the windows of SequentialWindowedDataset, split as samples are: i is window i
        dataset = SequentialWindowedDataset(size, window, seed)  # checks size, window and seed
        first = kind(dataset, replicas, 0, shuffle, seed, drop_last)
        n, word = len(dataset), "windows"
        wraps = ", the last wraps around" if size % window else ""
        header = [
            f"SequentialWindowedDataset(size={size}, window={window}, seed={seed}): {n} windows{wraps}",
            f"{kind.__name__}(num_replicas={replicas}, shuffle={shuffle}, seed={seed}, "
            f"drop_last={drop_last}): {first.num_samples} windows per rank",
        ]
    _check_epochs(first, order, epochs)
    _check_memory(n, order, shuffle, max_memory, word)
    if batch_size is not None:
        header.append(_batch_line(first, batch_size, drop_last))
    read = _read(first, batch_size, drop_last)
    header += _summary_line(read, head, word)

    def generate() -> Iterator[str]:
        yield from header
        for epoch in range(epochs):
            label = str  # an index is written as it is; a window as its samples, this epoch's
            if window is None:
                yield f"epoch {epoch}"
            else:
                offset = epoch_offset(size, seed, epoch)  # the dataset's set_epoch(epoch)
                yield f"epoch {epoch} (offset {offset})"
                label = _window_label(size, window, offset)
            order_at = _order(n, order, shuffle, seed, epoch)
            yield from _rank_rows(
                n,
                replicas,
                read,
                order_at,
                label,
                head=head,
                batch_size=batch_size,
                word=word,
            )
            del order_at  # torch's permutation: gone before the next epoch's is drawn

    return generate()


def format_split(size: int, replicas: int, epochs: int, **options: Any) -> str:
    r"""Render the table that ``python -m distsampling split`` prints: the lines of
    :func:`split_lines` (the same arguments), each rank's indices (or windows), per epoch.

    Examples:
        >>> print(format_split(5, 2, 1, shuffle=False, batch_size=2))
        DistributedSampler(size=5, num_replicas=2, shuffle=False, seed=0, drop_last=False)
        each rank reads num_samples=3; the padded epoch has total_size=6 (1 padded, marked *)
        BatchSampler(batch_size=2, drop_last=False): 2 batches per rank
        epoch 0
          rank 0: [0, 2] [4]
          rank 1: [1, 3] [0*]
        >>> print(format_split(10, 2, 1, window=3, batch_size=2))
        SequentialWindowedDataset(size=10, window=3, seed=0): 4 windows, the last wraps around
        DistributedSampler(num_replicas=2, shuffle=True, seed=0, drop_last=False): 2 windows per rank
        BatchSampler(batch_size=2, drop_last=False): 1 batch per rank
        epoch 0 (offset 1)
          rank 0: [1-2-3, 0-1-2]
          rank 1: [4-5-6, 7-8-9]
    """
    return "\n".join(split_lines(size, replicas, epochs, **options))


def rank_windows(
    size: int,
    window: int,
    replicas: int,
    rank: int,
    epoch: int,
    *,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
) -> list[int]:
    r"""The window starts that ``rank`` reads in ``epoch`` (what a training loop would do).

    Examples:
        >>> rank_windows(10, 3, replicas=2, rank=1, epoch=0)  # windows 4-5-6 and 7-8-9
        [4, 7]
    """
    dataset = SequentialWindowedDataset(size, window, seed)
    dataset.set_epoch(epoch)  # every rank draws the same offset from (seed, epoch)
    sampler = DistributedSampler(dataset, replicas, rank, shuffle, seed, drop_last)
    sampler.set_epoch(epoch)  # ... and the same shuffle of the windows
    return [dataset[i] for i in sampler.indices().tolist()]


def _window_label(size: int, window: int, offset: int) -> Callable[[int], str]:
    """Window ``i`` of the epoch as text: its samples ``first-...-last`` (mod ``size``), written
    out whole up to 8 samples."""

    def label(i: int) -> str:
        start = (offset + i * window) % size  # the dataset's item i
        if window <= _WHOLE_WINDOW:
            return "-".join(str((start + t) % size) for t in range(window))
        return f"{start}-...-{(start + window - 1) % size}"

    return label


def _batch_line(first: DistributedSampler, batch_size: int, drop_last: bool) -> str:
    n_batches = len(BatchSampler(first, batch_size, drop_last))  # checks batch_size
    batches = "batch" if n_batches == 1 else "batches"
    return f"BatchSampler(batch_size={batch_size}, drop_last={drop_last}): {n_batches} {batches} per rank"


def where_read(
    index: int,
    size: int,
    replicas: int,
    *,
    epoch: int = 0,
    shuffle: bool = True,
    seed: int = 0,
    drop_last: bool = False,
    order: str = "torch",
    max_memory: int = MAX_MEMORY,
) -> tuple[int, range]:
    r"""Where ``index`` is read in ``epoch``: ``(p, reads)``, its position ``p`` in the epoch's
    order and the positions ``q`` of the padded (or cut) epoch that read it. Rank ``q % replicas``
    reads position ``q`` at its step ``q // replicas``.

    ``p`` is ``index`` without shuffle, ``index_unshuffle(index, size, epoch_key(seed, epoch))``
    for ``IndexShuffleSampler``: O(1) at any size. For torch's shuffle it is found in
    ``torch.randperm(size)``, refused above ``max_memory``. Padding repeats the head: position
    ``q >= size`` holds the order at ``q % size``, so ``reads`` is ``range(p, total_size, size)``:
    one position, more where padding reads the index again (several when ``replicas > size``),
    none where ``drop_last`` cuts it.

    Args:
        index: the dataset index asked about, in ``[0, size)``.
        size: dataset length.
        replicas: number of ranks.
        epoch: the epoch, ``>= 0``.
        shuffle: permute the indices (torch's ``randperm``, or ``index_shuffle``).
        seed: base seed.
        drop_last: cut the tail instead of padding with the head.
        order: ``"torch"`` (``DistributedSampler``) or ``"index-shuffle"``
            (``IndexShuffleSampler``).
        max_memory: bytes that torch's shuffled order, ``torch.randperm(size)``, may take.

    Examples:
        >>> where_read(4, size=5, replicas=3, shuffle=False)  # read at position 4, no padding
        (4, range(4, 6, 5))
        >>> where_read(0, size=5, replicas=3, shuffle=False)  # ... and 0 again as padding at 5
        (0, range(0, 6, 5))
    """
    order, max_memory = _check_order(order), check_int("max_memory", max_memory, low=0)
    size, replicas = check_int("size", size, low=0), check_int("replicas", replicas, low=1)
    kind = DistributedSampler if order == "torch" else IndexShuffleSampler
    first = kind(range(size), replicas, 0, shuffle, seed, drop_last)  # checks the rest
    epoch = check_int("epoch", epoch, low=0)
    index = check_int("index", index)
    if not 0 <= index < size:
        raise ValueError(f"index should be in [0, size) = [0, {size}), but got index={index}")
    if not shuffle:
        p = index  # the order is 0, 1, ..., size - 1
    elif order == "index-shuffle":
        p = int(index_unshuffle([index], size, epoch_key(seed, epoch))[0])
    else:
        check_seed(seed, epoch)
        _check_memory(size, order, shuffle, max_memory, "indices")
        perm = epoch_permutation(size, True, seed, epoch)  # (size,)
        begin = 0
        for chunk in perm.split(1 << 20):  # a chunk's mask at a time, not one of size bytes
            hit = (chunk == index).nonzero()
            if len(hit):
                p = begin + int(hit[0])
                break
            begin += len(chunk)
    return p, range(p, first.total_size, size)


def format_where(index: int, size: int, replicas: int, **options: Any) -> str:
    r"""Render :func:`where_read` as ``python -m distsampling where`` prints it (its arguments).

    Examples:
        >>> print(format_where(0, size=5, replicas=3, shuffle=False))
        index 0 of epoch 0 is read by rank 0 at step 0 (position 0 of the epoch)
          and again, as padding, by rank 2 at step 1 (position 5 of the epoch)
        >>> print(format_where(4, size=5, replicas=3, shuffle=False, drop_last=True))
        index 4 of epoch 0 is dropped this epoch: drop_last keeps positions 0 to 2, and it sits at position 4
    """
    p, reads = where_read(index, size, replicas, **options)  # checks every argument
    epoch = options.get("epoch", 0)
    what = f"index {index} of epoch {epoch}"
    if not reads:
        last = reads.stop - 1
        kept = f"positions 0 to {last}" if last >= 0 else "no position"
        return f"{what} is dropped this epoch: drop_last keeps {kept}, and it sits at position {p}"
    lines = []
    for q in reads[:_READS_SHOWN]:
        where = f"by rank {q % replicas} at step {q // replicas} (position {q} of the epoch)"
        lines.append(f"{what} is read {where}" if q == p else f"  and again, as padding, {where}")
    rest = reads[_READS_SHOWN:]
    if rest:  # every size-th position up to total_size: the first two and the last
        shown = [*rest] if len(rest) <= 3 else [rest[0], rest[1], "...", rest[-1]]
        times, at = ("time", "position") if len(rest) == 1 else ("times", "positions")
        lines.append(
            f"  and {len(rest)} more {times} as padding, at {at} {', '.join(map(str, shown))}"
        )
    return "\n".join(lines)
