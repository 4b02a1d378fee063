r"""InfiniteSampler: one endless stream of indices for training by iterations, split across ranks.

Detection codebases train for a number of iterations, not epochs. detectron2's
``TrainingSampler`` and mmengine's ``InfiniteSampler`` seed one ``torch.Generator`` once and
draw pass after pass from it: ``randperm(N)``, ``randperm(N)``, ... (or ``arange(N)`` without
shuffle). That endless global stream is split by striding: rank ``r`` reads positions
``r, r + W, r + 2W, ...``, so a pass runs into the next one across ranks, nothing is padded and
there is no ``set_epoch``. Every rank must use the same seed; with ``seed=None`` it is drawn on
rank 0 and shared over the process group (:func:`shared_random_seed`), as both originals do.

Resume: the originals can only replay the stream from its start. Here the sampler remembers
the point every rank has passed, the pass holding it and the generator's state there, so
``state_dict()`` / ``load_state_dict()`` continue at the exact position after drawing at most
a few passes, on any rank, and on another number of ranks (elastic), every position of the
stream read exactly once. :class:`_PassStream` is that
engine; :mod:`distsampling.detection.repeat_factor` reuses it with passes of another shape.

References:
    detectron2/data/samplers/distributed_sampler.py (TrainingSampler);
    mmengine/dataset/sampler.py (InfiniteSampler); mmengine/dist/utils.py (sync_random_seed)
"""

from __future__ import annotations

import operator
import pickle
from collections import deque
from collections.abc import Iterator, Sized
from itertools import islice

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import Sampler

from .._checks import (
    _SEED_HIGH,
    _SEED_LOW,
    _index_dtype,
    check_bool,
    check_int,
    check_int64,
    check_len,
    resolve_world,
)
from ..resume.state import check_consumed, check_state, generator_state, generator_text

__all__ = ["InfiniteSampler", "shared_random_seed"]

# a CPU generator's state is a fixed-size byte tensor (the Mersenne Twister's words and more)
_STATE_BYTES = torch.Generator().get_state().numel()
_CHUNK = 1 << 16  # indices turned into Python ints at a time


def shared_random_seed() -> int:
    r"""A random seed, the same on every rank: drawn on rank 0 and broadcast over the group.

    Every rank draws ``np.random.randint(2**31)`` from numpy's global RNG (so their global
    states advance alike, and a run seeded globally is reproducible), then all keep rank 0's.
    Without an initialised process group it is this process's own draw. A collective: call it
    on every rank of the default group, or none.

    Examples:
        >>> np.random.seed(0)
        >>> shared_random_seed()
        209652396
    """
    seed = int(np.random.randint(2**31))
    if dist.is_available() and dist.is_initialized():
        box = [seed]
        dist.broadcast_object_list(box)  # from rank 0 (the default): all hold its draw
        seed = box[0]
    return seed


def _resolve_seed(seed: int | None, num_replicas: int, needed: bool = True) -> tuple[int, bool]:
    """``(seed, drawn)``: the seed itself, or one shared over the group when ``seed=None``
    (``0`` without drawing when no randomness is ``needed``: nothing to agree on)."""
    if seed is not None:
        return check_int("seed", seed, low=_SEED_LOW, high=_SEED_HIGH), False
    if not needed:
        return 0, True
    grouped = dist.is_available() and dist.is_initialized()
    if num_replicas > 1 and not (grouped and dist.get_world_size() == num_replicas):
        raise ValueError(
            f"seed=None draws one seed on rank 0 and shares it over the process group, but got "
            f"num_replicas={num_replicas} without a process group of that size: pass the same "
            "seed=<int> on every rank, or initialise the process group first"
        )
    return shared_random_seed(), True


class _PassStream(Sampler[int]):
    """The engine: an endless stream of passes drawn from one generator, strided over ranks.

    A subclass sets ``num_replicas``, ``rank``, ``seed``, ``size`` and ``_seed_drawn``, calls
    ``_restart()``, and defines ``_draw_pass(g) -> 1-D tensor``, the next pass of the global
    stream drawn from ``g``. Every ``iter()`` starts the stream at the same point (its start,
    or a loaded position), as detectron2's samplers do: two iterators are independent.

    A point is ``(start, position, pass, pass_start, generator)``: this rank reads the global
    positions ``start + rank + k * W`` and has read ``position`` of them, so every rank that
    read as many (ranks read in step) has passed ``c = start + position * W``, the same ``c``
    on every rank. ``(pass, pass_start, generator)`` is a pass at or before ``c``: its number,
    the global position of its first index, and the generator's state before it was drawn;
    the one of rank 0's latest read (every rank has drawn it), or the start point's before a
    read. So every rank saves the same state, and it loads on every rank of any world.
    """

    num_replicas: int
    rank: int
    seed: int
    size: int
    _seed_drawn: bool  # the seed came from seed=None: a saved state's seed is taken as it is

    @property
    def position(self) -> int:
        r"""Indices this rank has read since ``start`` (by the latest ``iter()``)."""
        # [read before the current chunk, its length, its iterator, passes]: a list iterator
        # knows how many items it has left, so nothing is counted per index
        before, length, it = self._reading[:3]
        return before + length - operator.length_hint(it)

    def _draw_pass(self, g: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def __len__(self) -> int:
        r"""The number of samples in the dataset (images, for repeat factors), as mmengine's
        ``InfiniteSampler`` answers: a size to log progress against, not the stream's length,
        which is endless."""
        return self.size

    def set_epoch(self, epoch: int) -> None:
        r"""Does nothing once ``epoch`` is checked to be an integer: the stream has no epochs. Here
        for the loops and hooks that call it on every sampler (mmengine's Runner does)."""
        check_int("epoch", epoch)

    def _after(self, consumed: object) -> _PassStream:
        """A copy that read ``consumed`` indices from where every ``iter()`` starts: the state
        of a plain ``DataLoader`` whose workers asked this sampler for more than the loop used."""
        handed_out = self.position - self._from[1]
        consumed = check_consumed(
            consumed, handed_out, f"the latest iter() handed out {handed_out}"
        )
        twin = pickle.loads(pickle.dumps(self))
        deque(islice(iter(twin), consumed), maxlen=0)
        return twin

    def _restart(self) -> None:
        g = torch.Generator()
        g.manual_seed(self.seed)
        self._from = (0, 0, 0, 0, g.get_state())  # where every iter() starts
        self._reading = [0, 0, iter(()), []]  # no iter() yet: a state is the start point

    def __iter__(self) -> Iterator[int]:
        position = self._from[1]
        self._reading = reading = [position, 0, iter(()), [self._from[2:]]]
        return self._stream(reading)

    def _stream(self, reading: list) -> Iterator[int]:
        W, start = self.num_replicas, self._from[0]
        # passes: (pass, pass_start, generator before it), from the one holding c on, and the
        # next one to draw
        passes = reading[3]
        q, pass_start, state = passes[-1]
        g = torch.Generator()
        g.set_state(state)
        while True:
            order = self._draw_pass(g)  # (L,) pass q of the global stream
            passes.append((q + 1, pass_start + len(order), g.get_state()))  # the next one
            done = reading[0] + reading[1]  # read so far: the last chunk is used up here
            c = start + done * W  # what every rank has passed: no state goes back before it
            while len(passes) > 1 and passes[1][1] <= c:  # the first pass ends by c: forget it
                passes.pop(0)
            want = c + self.rank  # global position of this rank's next index
            if want < pass_start + len(order):  # pass q holds some of this rank's positions
                mine = order[want - pass_start :: W]  # (k,) positions want, want + W, ...
                for chunk in mine.split(_CHUNK):
                    values = chunk.tolist()
                    reading[:3] = reading[0] + reading[1], len(values), iter(values)
                    yield from reading[2]
            q, pass_start = q + 1, pass_start + len(order)

    def _stream_state(self) -> dict[str, object]:
        start, position = self._from[0], self.position
        q, pass_start, state = self._from[2:]  # nothing read since the start point: it stays
        if position > self._from[1]:
            # the pass of rank 0's latest read, c - W: every rank has drawn it, so all save it
            latest = start + (position - 1) * self.num_replicas
            q, pass_start, state = [p for p in self._reading[3] if p[1] <= latest][-1]
        return {
            "seed": self.seed,
            "num_replicas": self.num_replicas,
            "start": start,
            "position": position,
            "pass": q,
            "pass_start": pass_start,
            "generator": generator_text(state),
        }

    def _load_stream(
        self, state: dict[str, object], match: tuple[str, ...], pass_length: int | None = None
    ) -> None:
        """Check ``state``: the ``match`` fields and the seed (unless ours was drawn by
        ``seed=None``) equal ours, the position fields in range; then load it."""
        mine = self.state_dict()
        match += () if self._seed_drawn else ("seed",)
        fields = ("num_replicas", "start", "position", "pass", "pass_start", "generator")
        same = {k: mine[k] for k in match}
        check_state(state, mine["kind"], mine["version"], same, required=fields)
        seed = check_int("seed", state["seed"], low=_SEED_LOW, high=_SEED_HIGH)
        saved_world = check_int("num_replicas", state["num_replicas"], low=1)
        start = check_int("start", state["start"], low=0)
        position = check_int("position", state["position"], low=0)
        pass_ = check_int("pass", state["pass"], low=0)
        pass_start = check_int("pass_start", state["pass_start"], low=0)
        if pass_length is not None and pass_start != pass_ * pass_length:
            raise ValueError(
                f"pass_start should be pass * {pass_length} = {pass_ * pass_length} (every pass "
                f"has {pass_length} indices), but got pass_start={pass_start}"
            )
        c = start + position * saved_world
        if pass_start > c:
            raise ValueError(
                f"pass_start should be <= the position every rank has passed (start + position "
                f"* num_replicas = {c}), but got pass_start={pass_start}"
            )
        g = generator_state(state["generator"], _STATE_BYTES)
        if saved_world != self.num_replicas:  # another world: split the stream from c on
            start, position = c, 0
        # the seed equals ours (check_state), unless ours was drawn by seed=None: take the saved one
        self.seed = seed
        self._from = (start, position, pass_, pass_start, g)
        self._reading = [position, 0, iter(()), []]  # no iter() yet: a state is this point


class InfiniteSampler(_PassStream):
    r"""An endless stream of indices, pass after pass, split across ranks by striding.

    The global stream is ``randperm(N)``, ``randperm(N)``, ... drawn from one generator seeded
    once with ``seed`` (``arange(N)`` repeated without shuffle); rank ``r`` reads its positions
    ``r, r + W, ...``. Index for index the same as detectron2's ``TrainingSampler`` and
    mmengine's ``InfiniteSampler``. Like detectron2's, every ``iter()`` starts the stream from
    its beginning, or from a loaded position: two iterators are independent. Like mmengine's,
    ``len()`` is the dataset's size and ``set_epoch`` does nothing: stop after your number of
    iterations.

    Args:
        dataset: anything with ``__len__`` (at least one sample); only its length is used.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        shuffle: a new permutation every pass; else ``0, 1, ..., N - 1`` over and over.
        seed: the generator's seed, the same on every rank; ``None`` draws one on rank 0 and
            shares it over the process group (a collective: every rank builds its sampler;
            without shuffle nothing is drawn).

    Examples:
        >>> from itertools import islice
        >>> [list(islice(InfiniteSampler(range(3), 2, r, shuffle=False), 4)) for r in (0, 1)]
        [[0, 2, 1, 0], [1, 0, 2, 1]]
        >>> s = InfiniteSampler(range(4), num_replicas=1, rank=0, seed=0)
        >>> it = iter(s)
        >>> list(islice(it, 6)), list(islice(it, 2))  # passes [0, 1, 3, 2], [0, 2, 3, 1]
        ([0, 1, 3, 2, 0, 2], [3, 1])
        >>> list(islice(s, 2))  # a new iter() starts the stream again
        [0, 1]
    """

    def __init__(
        self,
        dataset: Sized,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int | None = None,
    ) -> None:
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        check_int64("num_replicas", self.num_replicas)  # its stride is an int64 tensor's
        self.size = check_len("dataset", dataset)
        if self.size == 0:
            raise ValueError(
                f"dataset should have at least one sample for an endless stream, but got "
                f"len(dataset)=0 (dataset={dataset!r})"
            )
        self.shuffle = check_bool("shuffle", shuffle)
        self.seed, self._seed_drawn = _resolve_seed(seed, self.num_replicas, self.shuffle)
        self._restart()

    def _draw_pass(self, g: torch.Generator) -> torch.Tensor:
        if not self.shuffle:
            return torch.arange(self.size)  # (N,) no draw: the generator stays where it is
        # int32 halves the memory; randperm draws the same permutation whatever the dtype
        return torch.randperm(self.size, generator=g, dtype=_index_dtype(self.size))  # (N,)

    def state_dict(self, consumed: int | None = None) -> dict[str, object]:
        r"""Where the ranks are in the stream: small, JSON-serialisable, the same on every rank.

        This rank has read ``position`` of its positions ``start + rank + k * W``; ranks that
        read in step have all passed ``start + position * num_replicas``. ``generator`` is the
        generator's state (base64 text, about 7 KB) at the start of the pass holding that
        point, so a resume draws that pass and no earlier one.

        Args:
            consumed: indices of the latest ``iter()`` the loop used, when a plain
                ``DataLoader`` with workers asked for more (``None``: all it handed out).
        """
        if consumed is not None:  # what the loop used of the latest iter(), not what it prefetched
            return self._after(consumed).state_dict()
        return {
            "kind": "InfiniteSampler",
            "version": 2,
            "size": self.size,
            "shuffle": self.shuffle,
            **self._stream_state(),
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        r"""Continue the stream exactly where ``state`` was taken, on any rank of any world.

        Any rank's state loads on every rank (ranks read in step, so they save the same). On
        the saved number of ranks each rank goes on where it was; on another, the stream from
        ``start + position * num_replicas`` on is split over this world: every position is
        read exactly once. A sampler built with ``seed=None`` takes the saved seed (its own
        was random anyway); otherwise the seed must match, as must the dataset length and
        ``shuffle``.
        """
        self._load_stream(state, ("size", "shuffle"), pass_length=self.size)
