r"""prefetch_epochs: build epoch ``e + 1``'s loader while epoch ``e``'s last batches train.

A dataset that grows every epoch needs a new snapshot, dataset and DataLoader per epoch. Built
after the epoch ends, the training loop waits at every boundary for the new workers to start and
read their first batches. Here the next loader is built, and its iterator started (``iter()``
forks the workers, which at once read ``prefetch_factor`` batches each), when ``lead`` batches of
the current epoch remain; so those batches train while the next epoch's first batches load.

The snapshot of epoch ``e + 1`` is therefore taken ``lead`` batches before epoch ``e`` ends:
shards written during those last batches wait for epoch ``e + 2``.

References:
    the usual answer to "how do I read a high-IO dataset that grows every epoch", which
    rebuilds the loader at the last batch;
    torch/utils/data/dataloader.py (_MultiProcessingDataLoaderIter starts and primes its workers).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sized
from typing import Any

from .._checks import check_int

__all__ = ["prefetch_epochs"]


def _started(make_loader: Callable[[int], Iterable], epoch: int) -> tuple[int, Iterator]:
    """Build epoch ``epoch``'s loader; return ``(its number of batches, its started iterator)``."""
    loader = make_loader(epoch)
    if not isinstance(loader, Sized):
        raise TypeError(
            "make_loader(epoch) should return a loader with len() (a DataLoader over a map-style "
            f"dataset), but got make_loader({epoch})={loader!r} of type {type(loader).__name__}"
        )
    return len(loader), iter(loader)  # iter(): workers start and begin prefetching now


def prefetch_epochs(
    make_loader: Callable[[int], Iterable], epochs: Iterable[int], *, lead: int = 2
) -> Iterator[tuple[int, Iterator[Any]]]:
    r"""Yield ``(epoch, batches)`` per epoch; the next epoch's loader starts ``lead`` batches early.

    Consume each epoch's ``batches`` fully before taking the next epoch (as a ``for`` loop does).

    Args:
        make_loader: ``make_loader(epoch)`` returns that epoch's loader (snapshot, dataset,
            sampler with ``set_epoch``, DataLoader); it must have ``len()``.
        epochs: the epoch numbers, in order (e.g. ``range(start, end)``).
        lead: how many batches before the end of an epoch to start the next one's loader
            (``1``: while the last batch trains). ``lead >= 1``.

    Examples:
        >>> log = []
        >>> def make_loader(epoch):
        ...     log.append(f"build {epoch}")
        ...     return [f"{epoch}.{b}" for b in range(3)]
        >>> for epoch, batches in prefetch_epochs(make_loader, range(2), lead=1):
        ...     for batch in batches:
        ...         log.append(batch)
        >>> log  # epoch 1 is built before epoch 0's last batch trains
        ['build 0', '0.0', '0.1', 'build 1', '0.2', '1.0', '1.1', '1.2']
    """
    lead = check_int("lead", lead, low=1)
    if not callable(make_loader):
        raise TypeError(
            "make_loader should be a function of the epoch returning its loader, "
            f"but got make_loader={make_loader!r} of type {type(make_loader).__name__}"
        )
    if not isinstance(epochs, Iterable):
        raise TypeError(
            "epochs should be an iterable of epoch numbers (e.g. range(start, end)), "
            f"but got epochs={epochs!r} of type {type(epochs).__name__}"
        )
    return _epochs(make_loader, iter(epochs), lead)  # the checks above run at the call


def _epochs(
    make_loader: Callable[[int], Iterable], epochs: Iterator[int], lead: int
) -> Iterator[tuple[int, Iterator[Any]]]:
    """The generator behind :func:`prefetch_epochs`."""
    epoch = next(epochs, None)
    current = None if epoch is None else _started(make_loader, epoch)
    retired: list = []  # the previous epoch's iterator, shut down after this epoch's first batch
    while current is not None:
        following = next(epochs, None)
        ahead: list = []  # the following epoch's (len, iterator), filled while this epoch runs
        yield epoch, _batches(current, lead, make_loader, following, ahead, retired)
        if following is not None and not ahead:  # this epoch had fewer than lead batches
            ahead.append(_started(make_loader, following))
        retired = [current]  # not dropped here: its workers' shutdown would stall the boundary
        epoch, current = following, (ahead[0] if ahead else None)


def _batches(
    current: tuple[int, Iterator],
    lead: int,
    make_loader: Callable[[int], Iterable],
    following: int | None,
    ahead: list,
    retired: list,
) -> Iterator[Any]:
    """This epoch's batches; starts the following epoch when ``lead`` batches remain."""
    n, it = current
    for b in range(n):  # exactly len(loader) batches: no extra next() that waits for a shutdown
        if following is not None and n - b == lead:
            ahead.append(_started(make_loader, following))
        yield next(it)
        retired.clear()  # after the first batch trained: the old workers may shut down now
