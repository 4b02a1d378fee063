r"""OrderAhead: draw the next epoch's order in the background, so ``iter()`` after ``set_epoch`` is instant.

A shuffled epoch starts with ``torch.randperm(N)``: at ``N = 10^8`` the first index of every
epoch waits seconds for it. That draw depends on nothing but the sampler's settings and the
epoch number, so it can be made while the previous epoch trains. ``torch.randperm`` releases
the GIL, so a Python thread draws it next to the training loop without slowing the loop's
Python code (it takes a core, not the interpreter).

:class:`OrderAhead` wraps a sampler. When the loop reads epoch ``e``, it starts drawing epoch
``e + 1`` on a background thread, from a copy of the sampler set to that epoch. At the next
``iter()`` it hands out that order only if the sampler is exactly where the copy was: the same
epoch, and for a resumable sampler the same ``state_dict()`` (nothing loaded, same settings:
the contract resuming already relies on, equal states, equal rest of the epoch). Anything else (a
skipped, repeated or earlier epoch, a loaded checkpoint) is read from the sampler itself, as if
there were no wrapper. So the indices are always the sampler's own, only sometimes drawn early.

References:
    torch/utils/data/distributed.py (DistributedSampler: set_epoch, then iter reads the epoch);
    torch's generated Python bindings (tools/autograd: the GIL is released around the op)
"""

from __future__ import annotations

import copy
import inspect
import threading
from collections.abc import Iterator
from itertools import chain, islice
from typing import Any

import torch
from torch.utils.data import DistributedSampler, Sampler, SequentialSampler

from ..guards import refuse_split_again
from ..resume.state import CountingIterator, check_consumed

__all__ = ["OrderAhead"]

#: what OrderAhead calls on the sampler (and on a DistributedSamplerWrapper's inner sampler)
_NEEDED = ("set_epoch", "indices")
#: inner epochs that never change: a copy reads them without drawing anything
_FIXED = (list, tuple, range, SequentialSampler)


def _key(sampler: Any) -> object:
    """What decides the sampler's next ``iter()``: its ``state_dict()`` (epoch, position,
    settings), or, for a plain sampler that has no position to load, its epoch."""
    if callable(getattr(sampler, "state_dict", None)):
        return sampler.state_dict()
    return sampler.epoch


def _check_sampler(sampler: object, name: str = "sampler") -> None:
    """Refuse a sampler whose epoch OrderAhead cannot draw on a copy, naming what it lacks."""
    missing = [f"{m}()" for m in _NEEDED if not callable(getattr(sampler, m, None))]
    if not hasattr(sampler, "epoch"):
        missing.append("an epoch attribute")
    if missing:
        raise TypeError(
            f"{name} should have set_epoch(), indices() and an epoch attribute (this package's "
            f"samplers), but got {name}={sampler!r} of type {type(sampler).__name__}, which "
            f"lacks {', '.join(missing)}"
        )
    # a subclass that overrides __iter__ but not indices yields something else than its
    # indices(): only trust indices when the class that defines __iter__ defines it too
    owner = next((c for c in type(sampler).__mro__ if "__iter__" in vars(c)), None)
    if owner is None or "indices" not in vars(owner):
        why = "it has no __iter__" if owner is None else f"{owner.__name__} overrides __iter__"
        raise TypeError(
            f"{name} should yield its indices(), but got {name}={sampler!r}: "
            f"{why} without indices()"
        )
    # a wrapper (DistributedSamplerWrapper) that forwards set_epoch to an inner sampler: the
    # inner one is drawn on a copy too, so the same rules hold for it
    inner = getattr(sampler, "sampler", None)
    if callable(getattr(inner, "set_epoch", None)):
        _check_sampler(inner, f"{name}.sampler")
    elif inner is not None and not isinstance(inner, _FIXED):
        raise TypeError(
            f"{name}.sampler should draw its epoch from set_epoch (this package's samplers) or "
            f"be a fixed order (a list, SequentialSampler): a copy of any other one would draw "
            f"from its generator on another thread, but got {name}.sampler={inner!r}"
        )
    try:
        _key(sampler)
    except TypeError as err:  # e.g. a wrapper over a sampler it cannot draw again: no state
        raise TypeError(
            f"{name} should describe its epoch by state_dict(), which OrderAhead compares to "
            f"know a drawn order is the one iter() would yield, but {name}.state_dict() of "
            f"{name}={sampler!r} raised: {err}"
        ) from err


def _twin(sampler: Any) -> Any:
    """A copy of ``sampler`` that ``set_epoch`` and ``indices`` can use without touching it.

    A shallow copy: this package's samplers only rebind their own attributes in ``set_epoch``,
    ``load_state_dict`` and ``indices``, never write into what the copy shares with them
    (the dataset, the labels). DistributedSamplerWrapper, whose ``set_epoch`` reaches its inner
    sampler, says in its ``__copy__`` that a copy gets an inner sampler of its own.
    """
    return copy.copy(sampler)


class _Draw:
    """One epoch's share, drawn by ``twin.indices()`` on a thread of its own.

    ``key`` is the twin's :func:`_key` before the draw: the order is the next ``iter()``
    of any sampler in that state. A draw that raises leaves ``None``: the sampler then draws
    (and raises) on the loop's own thread, where the error belongs.
    """

    def __init__(self, key: object, twin: Any) -> None:
        self.key, self.order = key, None
        name = f"OrderAhead epoch {twin.epoch}"  # threading.enumerate() says what it draws
        self._thread = threading.Thread(target=self._run, args=(twin,), name=name)
        # not a daemon: the interpreter waits for it at exit (at most one draw). A daemon
        # thread still inside torch's randperm when Python shuts down aborts the process
        self._thread.daemon = False
        self._thread.start()

    def _run(self, twin: Any) -> None:
        try:
            # contiguous: keep only this rank's share, not the whole permutation it is a view of
            self.order = twin.indices().contiguous()
        except Exception:  # the sampler raises it again, in the loop, if that epoch is asked for
            self.order = None

    def result(self) -> torch.Tensor | None:
        self._thread.join()  # an instant once the draw is done; the rest of it otherwise
        return self.order


class OrderAhead(Sampler[int]):
    r"""Yield ``sampler``'s indices, with each next epoch's order drawn while this one is read.

    Reading epoch ``e`` starts drawing epoch ``e + 1`` on a background thread (after the first
    index of ``e`` is out). After ``set_epoch(e + 1)``, ``iter()`` hands out that order at once.
    Any other sequence (another epoch, the same one again, a loaded checkpoint) reads the
    sampler as it is, so the indices are always exactly ``list(sampler)``: the drawn order is
    used only when the sampler is in the state it was drawn for (its epoch, and its
    ``state_dict()`` where it has one).

    It holds one drawn order (this rank's share of the next epoch) besides the one being read,
    and runs at most one thread, which ends with its draw (a program that ends during a draw
    waits for it). The sampler stays in the main process: with a DataLoader (any
    ``num_workers``) pass ``sampler=OrderAhead(...)`` as usual. Workers forked while a draw
    still runs (an epoch shorter than the draw) inherit no part of it; Python 3.12+ warns
    about any fork beside a running thread, which ``persistent_workers=True`` avoids.
    Change the sampler only through this wrapper (or its own ``set_epoch`` and
    ``load_state_dict``): its settings are copied when a draw starts.

    Over one rank's share (a torch ``DistributedSampler``, as this package's shares are), the
    wrapper is a ``DistributedSampler`` too, with the share's ``num_replicas`` and ``rank``: a
    framework that leaves a share alone (Lightning's default) leaves this one alone, and calls
    its ``set_epoch``; over any other sampler it is none.

    Args:
        sampler: a sampler with ``set_epoch()``, ``indices()`` and ``epoch`` whose order depends
            on its settings, epoch and state only, as this package's samplers, plain or
            resumable (:mod:`distsampling.resume.resumable`; a wrapper around one of them or around a
            fixed list). Only a resumable one can save and load its position through this.

    Examples:
        >>> from distsampling import DistributedSampler
        >>> s = OrderAhead(DistributedSampler(range(10), num_replicas=2, rank=0, seed=0))
        >>> list(s)  # epoch 0; epoch 1 is drawn meanwhile
        [4, 7, 3, 0, 6]
        >>> s.set_epoch(1)
        >>> list(s)  # the order drawn in the background: DistributedSampler's epoch 1
        [5, 1, 0, 9, 7]
        >>> import torch.utils.data
        >>> isinstance(s, torch.utils.data.DistributedSampler)  # a share: Lightning keeps it
        True
    """

    def __new__(cls, sampler: Any = None) -> OrderAhead:
        # over one rank's share (a torch DistributedSampler), the wrapper is one too: Lightning's
        # default then leaves it alone, as it leaves the share, where it would split it again
        if cls is OrderAhead and isinstance(sampler, DistributedSampler):
            cls = _OrderAheadShare
        return super().__new__(cls)

    def __init__(self, sampler: Sampler[int]) -> None:
        _check_sampler(sampler)
        self.sampler = sampler
        self._next: _Draw | None = None  # the order drawn (or being drawn) for the next epoch
        # (state, reader) while iter() hands out a drawn order; None: the sampler's own iter()
        self._own: tuple[Any, CountingIterator] | None = None

    @property
    def epoch(self) -> int:
        r"""The wrapped sampler's epoch."""
        return self.sampler.epoch  # type: ignore[attr-defined]

    def _take(self, state: object) -> torch.Tensor | None:
        # the drawn order if it was drawn for exactly this state (waiting for the rest of the
        # draw if needed), else None; a taken order is handed over, never kept here as well
        draw = self._next
        if draw is None or draw.key != state:
            return None
        self._next = None
        return draw.result()

    def _draw(self, epoch: int) -> None:
        # start drawing `epoch` on a copy, unless that very state is drawn (or drawing) already
        twin = _twin(self.sampler)
        twin.set_epoch(epoch)
        key = _key(twin)
        if self._next is not None and self._next.key == key:
            return
        if self._next is not None:  # another epoch's draw: let it end, so one thread at most
            self._next.result()
        self._next = _Draw(key, twin)

    def _then_draw(self, ints: Iterator[int], epoch: int) -> Iterator[Iterator[int]]:
        # the first index, then start drawing the next epoch, then the rest (chained in C)
        yield islice(ints, 1)
        self._draw(epoch + 1)
        yield ints

    def __iter__(self) -> Iterator[int]:
        refuse_split_again(self)  # accelerate's prepare(loader) would split this share again
        state = _key(self.sampler)
        order, epoch = self._take(state), self.epoch
        if order is None:  # not drawn for this state: the sampler's own iter(), as without us
            self._own = None
            ints = iter(self.sampler)
        else:  # drawn for this state: hand it out, counting for state_dict
            reader = CountingIterator(lambda: order.split(1 << 16))
            self._own = (state, reader)
            ints = reader.ints
        return chain.from_iterable(self._then_draw(ints, epoch))

    def __len__(self) -> int:
        return len(self.sampler)  # type: ignore[arg-type]

    def set_epoch(self, epoch: int) -> None:
        r"""Set the sampler's epoch: ``iter()`` then hands out the order drawn for it, if any.

        Args:
            epoch: epoch number (whatever the sampler's ``set_epoch`` takes).
        """
        before = self.epoch
        self.sampler.set_epoch(epoch)  # type: ignore[attr-defined]
        if self.epoch != before:  # as the samplers do: another epoch forgets the last iter()
            self._own = None

    def indices(self) -> torch.Tensor:
        r"""The indices the next ``iter()`` yields, as a 1-D tensor: the sampler's ``indices()``."""
        draw = self._next
        if draw is not None and draw.key == _key(self.sampler):
            order = draw.result()
            if order is not None:
                return order.clone()  # a copy: the caller may write into it, iter() reads it
        return self.sampler.indices()  # type: ignore[attr-defined]

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""The sampler's ``state_dict()``, as if it had handed out the indices itself.

        Args:
            consumed: samples of the current ``iter()`` the loop has used (DistributedSampler's
                argument, for a DataLoader whose workers prefetch; see its ``state_dict``).
        """
        if not callable(getattr(self.sampler, "state_dict", None)):
            raise TypeError(
                "OrderAhead saves its position through its sampler's state_dict(), but got "
                f"sampler={self.sampler!r}, a plain sampler without one: wrap its resumable form "
                "(distsampling.resume.resumable)"
            )
        params = inspect.signature(self.sampler.state_dict).parameters  # type: ignore[attr-defined]
        if consumed is not None and "consumed" not in params:
            raise TypeError(
                f"consumed is DistributedSampler.state_dict's argument, but sampler="
                f"{self.sampler!r} has a state_dict() without it; got consumed={consumed!r}"
            )
        if self._own is None:  # the sampler read its own epoch: its state is the state
            args = () if consumed is None else (consumed,)
            return self.sampler.state_dict(*args)  # type: ignore[attr-defined]
        state, reader = self._own  # its state when iter() began, `position` later by what we read
        count = reader.yielded
        if consumed is not None:
            count = check_consumed(consumed, count, f"the latest iter() handed out {count}")
        return {**state, "position": state["position"] + count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Load ``state`` into the sampler; the next ``iter()`` resumes there.

        Args:
            state: a ``state_dict()`` of this wrapper or of the sampler (they are the same).
        """
        self.sampler.load_state_dict(state)  # type: ignore[attr-defined]
        self._own = None

    def __getstate__(self) -> dict[str, Any]:
        # a thread cannot be pickled or copied: a copy draws its next epoch itself
        return {**vars(self), "_next": None}


class _OrderAheadShare(OrderAhead, DistributedSampler):
    """:class:`OrderAhead` over one rank's share: a torch ``DistributedSampler`` (what Lightning
    and torch's own checks look for), whose world is the share's. torch's ``__init__`` is not
    run: the share holds the split, this only hands out its indices."""

    @property
    def num_replicas(self) -> int:  # type: ignore[override]
        return self.sampler.num_replicas  # type: ignore[attr-defined]

    @property
    def rank(self) -> int:  # type: ignore[override]
        return self.sampler.rank  # type: ignore[attr-defined]


_OrderAheadShare.__name__ = "OrderAhead"  # what users see; pickle finds it by its __qualname__
