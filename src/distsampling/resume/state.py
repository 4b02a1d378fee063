r"""Resume mid-epoch, on any number of ranks: the layer that makes a sampler resumable.

A sampler that yields ``indices()`` (a tensor: this rank's share of the epoch) becomes
resumable by putting :class:`Resumable` first among its bases, as
:mod:`distsampling.resume.resumable` does for every sampler of this package:

    class ResumableDistributedSampler(Resumable, DistributedSampler): ...

The state is ``(epoch, num_replicas, start, position)``: this rank read ``position`` indices
of its share since stream position ``start``. One rule for every ``iter()``: a loaded position
is where every ``iter()`` of that epoch starts, until ``set_epoch`` moves to another epoch. So
a DataLoader that calls ``iter()`` twice (``batch_size=None`` with workers), or a loop that
peeks one batch first, never reads the epoch's first part again.

Elastic resume. Read the padded epoch as one *stream*: stream position ``p`` holds
``order[p % N]``, and torch gives rank ``r`` the positions ``r, r + W, r + 2W, ...``. Once each
of ``W1`` ranks has read ``m`` indices, exactly the prefix ``[0, c)``, ``c = m * W1``, is
consumed, whichever rank read what. On ``W2`` ranks the ``N - c`` positions left are split as
torch splits a dataset of ``N - c`` (:func:`resumed_positions`): rank ``r`` reads ``c + r,
c + r + W2, ...``, padded past ``N`` by the stream itself (the head of the order, as torch
pads) to a multiple of ``W2``, or cut to one with ``drop_last``. So every position of
``[0, N)`` is read exactly once over the epoch, the only repeats are padding (fewer than
``W2``), every new rank reads the same count, and each computes its share from
``(N, c, W2, rank)`` alone. With ``W2 == W1`` this is the uninterrupted run itself.

Also here, for the batch samplers that draw their own epoch and keep their own state:
``EpochHandle``, the ``sampler`` where frameworks call ``set_epoch``; and for the iterable
datasets, the check that every pass reads its own epoch (``begin_pass``), which under
Lightning's ``Trainer`` is the ``Trainer``'s (``note_trainer``).

References:
    torchdata/stateful_dataloader/sampler.py (StatefulDistributedSampler: the state_dict calls)
"""

from __future__ import annotations

import base64
import binascii
import re
import sys
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from itertools import chain
from operator import length_hint
from typing import Any

import torch
from torch.utils.data import DataLoader, get_worker_info

from .._checks import check_bool, check_int, check_int64, resolve_world
from .._split import split_sizes
from ..guards import FrameworkWarning, begin_dataset_pass, refuse_split_again

__all__ = ["CountingIterator", "Resumable", "check_consumed", "check_state", "resumed_positions"]


def check_state(
    state: object,
    kind: str,
    version: int,
    must_match: dict[str, object],
    *,
    required: Sequence[str] = (),
) -> dict[str, Any]:
    r"""Check a saved ``state_dict()`` before ``load_state_dict`` uses it, and return it.

    ``kind`` (the class name) and ``version`` (the format) come first, then every field of
    ``must_match`` (the data, seed and flags) must be present and equal, and every ``required``
    field present: a checkpoint of another run is refused, naming the field, never resumed.

    Examples:
        >>> check_state({"kind": "S", "version": 1, "seed": 0}, "S", 1, {"seed": 1})
        Traceback (most recent call last):
        ...
        ValueError: state does not match this sampler: seed was 0 when saved, but is 1 now
    """
    if not isinstance(state, dict):
        raise TypeError(
            f"state should be a dict from state_dict(), but got state={state!r} "
            f"of type {type(state).__name__}"
        )

    def present(*keys: str) -> None:
        for key in keys:
            if key not in state:
                raise KeyError(
                    f"state has no {key!r}: it is not a {kind} state_dict() (got {state!r})"
                )

    present("kind", "version")  # the class and format first: they explain any other gap
    if state["kind"] != kind:
        raise ValueError(
            f"state comes from another sampler: kind was {state['kind']!r} when saved, "
            f"but this is a {kind}"
        )
    if state["version"] != version:
        raise ValueError(
            f"state has format version={state['version']!r}, but this {kind} reads version={version}"
        )
    present(*must_match, *required)
    for key, current in must_match.items():
        if state[key] != current:
            raise ValueError(
                f"state does not match this sampler: {key} was {state[key]!r} when saved, "
                f"but is {current!r} now"
            )
    return state


def resumed_positions(
    n: int,
    num_replicas: int,
    rank: int,
    start: int,
    *,
    drop_last: bool = False,
    pad: bool = True,
    steps: range | None = None,
) -> torch.Tensor:
    r"""Positions into an epoch order of length ``n`` that ``rank`` reads from stream ``start`` on.

    The stream positions ``[start, n)`` are split as torch splits a dataset of ``n - start``:
    rank ``r`` reads ``start + r, start + r + W, ...``, padded (position ``p >= n`` reads
    ``p % n``, the head of the order, as torch pads) to a multiple of ``W``, or cut to one with
    ``drop_last``; ``pad=False`` stops below ``n``. With ``start=0`` these are
    :func:`~distsampling.rank_positions`' positions (``pad=False``: those below ``n``).
    ``steps`` picks some of them (``range(a, b)``: the ``a``-th to the ``b - 1``-th), in O(b - a).

    Examples:
        >>> resumed_positions(10, 3, 0, start=4).tolist()  # 6 left on 3 ranks: 4, 7
        [4, 7]
        >>> resumed_positions(10, 4, 3, start=4).tolist()  # 6 left on 4 ranks: 7, then 11 % 10
        [7, 1]
    """
    n, (num_replicas, rank) = check_int64("n", n, low=0), resolve_world(num_replicas, rank)
    start = check_int("start", start, low=0, high=n)
    count = _rest_count(n, num_replicas, rank, start, drop_last, check_bool("pad", pad))
    steps = range(count) if steps is None else range(count)[steps.start : steps.stop]
    positions = start + rank + num_replicas * torch.arange(steps.start, steps.stop)  # (count,)
    return positions % max(n, 1)  # the stream past n repeats the head of the order


def _rest_count(
    n: int, num_replicas: int, rank: int, start: int, drop_last: bool, pad: bool
) -> int:
    if pad:  # each rank reads the same count: torch's split of the rest
        return split_sizes(n - start, num_replicas, drop_last)[0]
    return len(range(start + rank, n, num_replicas))  # positions below n only


def check_consumed(consumed: object, handed_out: int, why: str, unit: str = "samples") -> int:
    r"""``consumed`` as an int in ``[0, handed_out]``: a loop cannot have used more than it got
    (``unit``: what the object yields, samples or batches).

    Examples:
        >>> check_consumed(2, 3, "the latest iter() handed out 3")
        2
        >>> check_consumed(4, 3, "the latest iter() handed out 3")
        Traceback (most recent call last):
          ...
        ValueError: consumed should be <= 3 (samples handed out): the latest iter() handed out 3, but got consumed=4
    """
    consumed = check_int("consumed", consumed, low=0)
    if consumed > handed_out:
        raise ValueError(
            f"consumed should be <= {handed_out} ({unit} handed out): {why}, but got "
            f"consumed={consumed}"
        )
    return consumed


def generator_text(state: torch.Tensor) -> str:
    r"""A ``torch.Generator``'s state (``g.get_state()``) as JSON-safe text: base64, about 7 KB."""
    return base64.b64encode(state.numpy().tobytes()).decode("ascii")


def generator_state(text: object, size: int) -> torch.Tensor:
    r"""The state that :func:`generator_text` wrote, for ``g.set_state``: raise unless ``text``
    is the base64 text of ``size`` bytes (``g.get_state().numel()``), showing its head."""
    try:
        raw = base64.b64decode(str(text), validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        shown = text if len(str(text)) <= 40 else f"{str(text)[:40]}..."
        raise ValueError(
            f"generator should be the base64 text of a {size}-byte torch.Generator state, but "
            f"got generator={shown!r}"
        )
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8)


class CountingIterator:
    """One ``iter()``: its ints at C speed (``ints``) and how many it has handed out.

    ``blocks()`` gives the indices as tensors, computed on the first ``next`` (an ``iter()``
    never read costs nothing) and turned into ints a block at a time. The count is read off the
    block's list iterator (``length_hint``): handed out = finished blocks + block length - what
    is left of it.

    Examples:
        >>> counter = CountingIterator(lambda: iter([torch.arange(3), torch.arange(3, 5)]))
        >>> [next(counter.ints) for _ in range(4)], counter.yielded
        ([0, 1, 2, 3], 4)
    """

    def __init__(self, blocks: Callable[[], Iterable[torch.Tensor]]) -> None:
        self._done, self._len, self._it = 0, 0, iter(())  # finished blocks, current block
        self.ints: Iterator[int] = chain.from_iterable(self._lists(blocks))

    def _lists(self, blocks: Callable[[], Iterable[torch.Tensor]]) -> Iterator[Iterator[int]]:
        for part in blocks():
            self._done += self._len
            self._it, self._len = iter(part.tolist()), len(part)
            yield self._it
        self._done, self._len = self._done + self._len, 0

    @property
    def yielded(self) -> int:
        return self._done + self._len - length_hint(self._it)


class EpochHandle:
    r"""``set_epoch`` for a batch sampler, where frameworks look for it: Lightning calls
    ``loader.batch_sampler.sampler.set_epoch(epoch)`` every epoch, never the batch sampler's own.
    A batch sampler that draws its own epoch returns one from its ``sampler`` property."""

    def __init__(self, owner: object) -> None:
        self.owner = owner

    def set_epoch(self, epoch: int) -> None:
        self.owner.set_epoch(epoch)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"EpochHandle({type(self.owner).__name__})"


class Resumable:
    r"""Mixin: ``state_dict()`` / ``load_state_dict()`` for a sampler that yields ``indices()``.

    The sampler it is mixed into provides ``indices()`` (this rank's share, a tensor),
    ``epoch_order()`` (the whole epoch's order, the stream that ranks take shares of; or
    ``order_at(positions)``, that order at some positions, if it is a function of position),
    ``epoch``, ``set_epoch``, ``num_replicas``, ``rank`` and ``drop_last`` (a sampler that is not
    split: 1, 0 and False), and ``pad = False`` if its split pads nothing. The resumable class
    names what a state must match in ``_identity()``. The module docstring has the arithmetic.
    """

    _loaded: tuple[int, int] = (0, 0)  # (start, position) where every iter() of the epoch starts
    _before = 0  # indices this rank read of the epoch before `start`, on other worlds
    _counter: CountingIterator | None = None  # the latest iter(), counting what it handed out

    def _identity(self) -> dict[str, Any]:
        raise NotImplementedError(
            f"{type(self).__name__} should define _identity(): the fields a saved state must "
            "match (the data's length, the seed, the flags), as distsampling.resume.resumable does"
        )

    def _stream_len(self) -> int:
        return len(self.dataset)  # type: ignore[attr-defined]

    def _positions(self, steps: range, n: int | None = None) -> torch.Tensor:
        """The stream positions the next ``iter()`` reads, the ``steps``-th of them (counted
        from the loaded ``start``), in an order of length ``n`` (the dataset's)."""
        W, rank, drop_last = self.num_replicas, self.rank, self.drop_last  # type: ignore[attr-defined]
        pad = getattr(self, "pad", True)  # UnpaddedDistributedSampler: False
        n = self._stream_len() if n is None else n
        start = self._loaded[0]
        return resumed_positions(n, W, rank, start, drop_last=drop_last, pad=pad, steps=steps)

    def indices(self) -> torch.Tensor:
        r"""What the next ``iter()`` yields, as a tensor: the rest of the share after a load."""
        start, position = self._loaded
        if start == 0:  # torch's split of the epoch, less the indices already read
            return super().indices()[position:]  # type: ignore[misc]
        rest = range(position, 2**63)
        order_at = getattr(self, "order_at", None)  # an order that is a function of position
        if order_at is None:
            order = self.epoch_order()  # type: ignore[attr-defined]  # (N,)
            return order[self._positions(rest, len(order))]
        return order_at(self._positions(rest))

    def _blocks(self) -> Iterable[torch.Tensor]:
        """What the next ``iter()`` yields, a block at a time: an order computed per position
        (``_order_blocks``) is computed as it is read, at ``_positions`` from the loaded one."""
        order_blocks = getattr(self, "_order_blocks", None)
        if order_blocks is None:
            return self.indices().split(1 << 16)
        return order_blocks(self._loaded[1])

    def __len__(self) -> int:
        r"""This rank's indices of the whole epoch, before and after a resume alike: what it read
        before the state was saved (on any world) and what ``iter()`` reads from there. Trainers
        count the steps done from their own checkpoint (Lightning), so a resumed ``iter()``
        yields ``len()`` minus the position."""
        start = self._loaded[0]
        if start == 0:  # the epoch's own split: torch's num_samples
            return super().__len__()  # type: ignore[misc]
        W, rank, drop_last = self.num_replicas, self.rank, self.drop_last  # type: ignore[attr-defined]
        pad = getattr(self, "pad", True)
        return self._before + _rest_count(self._stream_len(), W, rank, start, drop_last, pad)

    def __iter__(self) -> Iterator[int]:
        refuse_split_again(self)  # accelerate's prepare(loader) would split this share again
        self._counter = CountingIterator(self._blocks)  # a new count; the loaded position stays
        # a dataset with an epoch of its own: checked, and held while the pass is read
        return begin_dataset_pass(self, self._counter.ints)

    def set_epoch(self, epoch: int) -> None:
        before = self.epoch  # type: ignore[attr-defined]
        super().set_epoch(epoch)  # type: ignore[misc]
        if self.epoch != before:  # type: ignore[attr-defined]  # a position belongs to its epoch
            self._loaded, self._counter, self._before = (0, 0), None, 0

    def state_dict(self, consumed: int | None = None) -> dict[str, Any]:
        r"""Where this rank is in the epoch: a small JSON-ready dict.

        ``position`` counts this rank's indices since stream position ``start``: the loaded
        position plus what the latest ``iter()`` handed out. A plain ``DataLoader`` with
        workers asks for indices ahead of the loop: pass ``consumed``, the samples the loop
        took from the current ``iter()`` (torchdata's ``StatefulDataLoader`` needs none).

        Args:
            consumed: samples of the latest ``iter()`` the loop used, at most those handed out.
        """
        start, position = self._loaded
        handed_out = 0 if self._counter is None else self._counter.yielded
        if consumed is not None:
            why = (
                f"the latest iter() handed out {handed_out}"
                if self._counter is not None
                else f"no iter() of epoch {self.epoch} has run since it was set or loaded"  # type: ignore[attr-defined]
            )
            handed_out = check_consumed(consumed, handed_out, why)
        return {
            "kind": type(self).__name__,
            "version": 1,
            **self._identity(),
            "epoch": self.epoch,  # type: ignore[attr-defined]
            "num_replicas": self.num_replicas,  # type: ignore[attr-defined]
            "start": start,
            "position": position + handed_out,
            "before": self._before,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        r"""Resume at ``state``, on this sampler's number of ranks (any number).

        On the saved number of ranks every ``iter()`` of the saved epoch yields the rest of this
        rank's share; on another, the rest of the epoch's stream is split over this world.

        Args:
            state: a :meth:`state_dict` (after ``json.loads`` or ``torch.load`` too).
        """
        fields = ("epoch", "num_replicas", "start", "position", "before")
        state = check_state(state, type(self).__name__, 1, self._identity(), required=fields)
        super().set_epoch(check_int("epoch", state["epoch"]))  # type: ignore[misc]
        n, num_replicas, drop_last = self._stream_len(), self.num_replicas, self.drop_last  # type: ignore[attr-defined]
        saved_world = check_int("num_replicas", state["num_replicas"], low=1)
        start = check_int("start", state["start"], low=0, high=n)
        # the most a rank can have read from `start`: rank 0's count, ceil (floor with drop_last)
        most = split_sizes(n - start, saved_world, drop_last)[0]
        position = check_int("position", state["position"], low=0, high=most)
        before = check_int("before", state["before"], low=0)
        if saved_world != num_replicas:  # every rank read `position`: that prefix is consumed
            start, position, before = min(start + position * saved_world, n), 0, before + position
        self._loaded, self._counter, self._before = (start, position), None, before


# --- every pass of an iterable dataset reads its own epoch ----------------------------------


#: Lightning's loops (either package's): the first one up the stack of a len() is its reader
_LOOP = re.compile(r"(?:lightning\.pytorch|pytorch_lightning)\.loops\.(\w+_loop)")


class TrainerEpoch:
    r"""The ``current_epoch`` of the Lightning ``Trainer`` that trains on a dataset (0 with
    none), through a weak reference: a dataset never keeps a ``Trainer`` alive. A forked
    DataLoader worker reads the ``Trainer`` as it was at ``iter(loader)``; a spawned one, what
    it was pickled with then. A persistent worker reads, besides, the epoch Lightning set on the
    loader's sampler in the main process (``marks[4]``, shared: :class:`SharedEpoch`), as it was
    when the worker's pass began (:meth:`training`): a pass reads one epoch to its end."""

    def __init__(self, trainer: object = None, marks: torch.Tensor | None = None) -> None:
        self._ref = None if trainer is None else weakref.ref(trainer)
        self._last, self._training = 0, False  # as last seen
        self._marks = marks  # pass_marks(): [4] is the epoch the main process's Lightning set
        self._set = -1  # marks[4] as the latest pass began (-1: none)
        # whether it counts the loader's batches again each epoch (else once, and cuts there)
        self.recounts = getattr(trainer, "reload_dataloaders_every_n_epochs", 0) == 1

    def trainer(self) -> object:
        """The ``Trainer`` (None: none, or gone)."""
        return None if self._ref is None else self._ref()

    def __call__(self) -> int:
        trainer = self.trainer()
        if trainer is not None:
            self._last = int(trainer.current_epoch)  # type: ignore[attr-defined]
            self._training = bool(trainer.training)  # type: ignore[attr-defined]
        elif self._ref is not None:  # the Trainer is gone: its fit is over
            self._training = False
        return max(self._last, self._set)  # a worker's Trainer is a copy: the epoch set since

    def training(self) -> bool:
        """Whether the ``Trainer``'s fit is training (not validating, not done). A pass calls
        this as it begins: the epoch set in the main process since then is the next pass's."""
        if self._marks is not None:
            self._set = int(self._marks[4])
        self()
        return self._training

    def __getstate__(self) -> dict[str, Any]:
        self()
        return {**self.__dict__, "_ref": None}


def pass_marks() -> torch.Tensor:
    """``[since, epochs, last, evaluated, set]`` in shared memory, so that DataLoader workers
    (forked, spawned or persistent) see the main process's: ``since`` 1 while a set_epoch came
    since the latest pass began, ``epochs`` the ``max_epochs`` of a Lightning fit that trains on
    the dataset (0: none), ``last`` the latest pass's epoch (-1: none yet), ``evaluated`` 1
    under Lightning's validation or prediction loop (which reads it again, on purpose), ``set``
    the epoch that fit's Lightning set on a loader of persistent workers (-1: none yet)."""
    return torch.tensor([1, 0, -1, 0, -1]).share_memory_()


class SharedEpoch:
    r"""``set_epoch`` for the sampler of a ``DataLoader`` whose workers persist, under a Lightning
    fit: Lightning calls ``loader.sampler.set_epoch(epoch)`` at every epoch's start, before that
    epoch's ``iter(loader)``, on samplers only; an iterable dataset's loader holds torch's
    placeholder sampler, which has none. This one shares the epoch with the workers (``marks[4]``
    of :func:`pass_marks`), which keep the ``Trainer`` as it was when they started.

    Examples:
        >>> marks = pass_marks()
        >>> SharedEpoch(marks)(3); int(marks[4])
        3
    """

    def __init__(self, marks: torch.Tensor) -> None:
        self.marks = marks

    def __call__(self, epoch: int) -> None:
        self.marks[4] = int(epoch)

    def __repr__(self) -> str:
        return f"SharedEpoch(set={int(self.marks[4])})"


def note_trainer(marks: torch.Tensor, noted: TrainerEpoch | None = None) -> TrainerEpoch | None:
    """In ``__len__``: the Lightning ``Trainer`` whose fit loop counts the loader's batches, found
    up the caller's stack (it counts them before the first epoch's pass, and uses that count
    for every epoch unless it ``recounts``), with its ``max_epochs`` noted in ``marks``; None
    where no fit loop of Lightning counts them. The ``DataLoader`` it counts is on that stack
    too (its ``__len__``): where its workers persist, its sampler gets a :class:`SharedEpoch`.
    ``noted``: what the dataset noted last; a count by that same ``Trainer`` keeps the epoch it
    set (its data fetcher counts again after each epoch's ``iter(loader)``, while a persistent
    worker may not have begun its pass yet)."""
    if "lightning" not in sys.modules and "pytorch_lightning" not in sys.modules:
        return None
    # from here up: __len__, its callers (the DataLoader's __len__), the loop
    frame, loop, loader = sys._getframe(), None, None
    while frame is not None and not (loop := _LOOP.fullmatch(frame.f_globals.get("__name__", ""))):
        if loader is None and frame.f_code.co_name == "__len__":  # the dataset's, the loader's
            owner = frame.f_locals.get("self")
            loader = owner if isinstance(owner, DataLoader) else None
        frame = frame.f_back
    trainer = getattr(frame and frame.f_locals.get("self"), "trainer", None)
    if loop is None or trainer is None:  # no loop of Lightning's counts them
        return None
    if loop[1] not in ("fit_loop", "training_epoch_loop"):
        marks[3] = 1  # a validation or prediction loader: each pass reads the same data
        return None
    epochs = trainer.max_epochs
    if isinstance(epochs, int) and epochs != 1:  # -1: no limit (0: nothing to train)
        marks[1] = epochs
    if noted is None or noted.trainer() is not trainer:  # a new fit: no epoch set by it yet
        marks[4] = -1  # (an earlier fit's is not this one's)
    if loader is not None and loader.persistent_workers:  # workers that keep the Trainer's copy
        # torch's placeholder sampler has no set_epoch; a sampler's own is never replaced
        current = getattr(loader.sampler, "set_epoch", None)
        if current is None or isinstance(current, SharedEpoch):
            loader.sampler.set_epoch = SharedEpoch(marks)  # type: ignore[attr-defined]
    return TrainerEpoch(trainer, marks)


def _raising(error: Exception) -> Iterator[Any]:
    yield from ()  # a generator: the error comes at its first next()
    raise error


def begin_pass(dataset: object, marks: torch.Tensor, fitting: bool, fresh: bool) -> Iterator[Any]:
    """A pass of ``dataset`` begins (its ``__iter__``), checked once (in the main process or
    worker 0): one that reads the previous pass's epoch with no set_epoch since. While a
    Lightning fit trains on it (``fitting``, as this process sees its ``Trainer``): where this
    process sees the ``Trainer`` as it is (``fresh``: the main process, a worker's first pass),
    the ``Trainer`` chose that epoch (a loader cycled within an epoch), nothing to say; where it
    sees it as it was (a persistent worker), under a fit of several epochs, an error at the
    pass's first ``next()`` (a persistent worker whose ``iter()`` raised would end without a
    word). A warning elsewhere. Returns what the pass yields first: nothing, or that error."""
    info = get_worker_info()
    if info is not None and info.id != 0:
        return iter(())
    name, epoch, epochs = type(dataset).__name__, dataset.epoch, int(marks[1])  # type: ignore[attr-defined]
    again = not marks[0] and int(marks[2]) == epoch and not marks[3] and not (fitting and fresh)
    marks[0], marks[2] = 0, epoch
    if again and fitting and epochs:
        return _raising(RuntimeError(
            f"{name} began a pass with no set_epoch since the previous one began, under "
            f"Lightning's Trainer (max_epochs={epochs}): it would train on epoch {epoch} again. "
            "The dataset follows the Trainer's current_epoch in DataLoader workers started for "
            "each epoch, and in persistent ones through the sampler of the DataLoader that "
            "Lightning counted; these persist without it (they keep the Trainer as it was when "
            "they started): call dataset.set_epoch(self.current_epoch) in the LightningModule's "
            "on_train_epoch_start, or leave persistent_workers off"
        ))  # fmt: skip
    if again:
        warnings.warn(
            f"{name} began a pass with no set_epoch since the previous one began: it reads epoch "
            f"{epoch} again. Call dataset.set_epoch(epoch) at the start of every epoch; to read "
            "an epoch again on purpose, call set_epoch with it first",
            FrameworkWarning, stacklevel=3,
        )  # fmt: skip
    return iter(())
