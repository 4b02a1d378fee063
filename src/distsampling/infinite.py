r"""InfiniteSampler: one endless stream of indices for training by iterations, split across ranks.

Detection codebases train for a number of iterations, not epochs. detectron2's
``TrainingSampler`` and mmengine's ``InfiniteSampler`` seed one ``torch.Generator`` once and
draw pass after pass from it: ``randperm(N)``, ``randperm(N)``, ... (or ``arange(N)`` without
shuffle). That endless global stream is split by striding: rank ``r`` reads positions
``r, r + W, r + 2W, ...``, so a pass runs into the next one across ranks, nothing is padded and
there is no ``set_epoch``. Every rank must use the same seed; with ``seed=None`` it is drawn on
rank 0 and shared over the process group (:func:`shared_random_seed`), as both originals do.

Resume: the originals can only replay the stream from its start. Here the sampler remembers
where the current pass starts and the generator's state there, so ``state_dict()`` /
``load_state_dict()`` continue at the exact position after drawing at most the current pass
(plus the passes that hold no index of this rank when ``W > N``). :class:`_PassStream` is that
engine; :mod:`distsampling.repeat_factor` reuses it with passes of another shape.

References:
    detectron2/data/samplers/distributed_sampler.py (TrainingSampler);
    mmengine/dataset/sampler.py (InfiniteSampler); mmengine/dist/utils.py (sync_random_seed)
"""

from __future__ import annotations

import base64
import binascii
import operator
from collections.abc import Iterator, Sized

import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import Sampler

from ._validate import (
    _SEED_HIGH,
    _SEED_LOW,
    _index_dtype,
    check_bool,
    check_int,
    check_len,
    resolve_world,
)
from .resume import check_state

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

    A subclass sets ``num_replicas``, ``rank``, ``seed`` and ``_seed_drawn``, calls
    ``_restart()``, and defines ``_draw_pass(g) -> 1-D tensor``, the next pass of the global
    stream drawn from ``g``. Every ``iter()`` starts the stream at the same point (its start,
    or a loaded position), as detectron2's samplers do: two iterators are independent.
    A point is ``(position, pass, pass_start, pass_state)``: indices this rank has read, and
    the pass that holds its next one (its number, the global position of its first index, and
    the generator's state before it was drawn).
    """

    num_replicas: int
    rank: int
    seed: int
    _seed_drawn: bool  # the seed came from seed=None: a saved state's seed is taken as it is

    @property
    def position(self) -> int:
        r"""Indices this rank has read since the start of the stream (by the latest ``iter()``)."""
        # [read before the current chunk, its length, its iterator, pass, pass_start, state]:
        # a list iterator knows how many items it has left, so nothing is counted per index
        before, length, it = self._reading[:3]
        return before + length - operator.length_hint(it)

    def _draw_pass(self, g: torch.Generator) -> torch.Tensor:
        raise NotImplementedError

    def _restart(self) -> None:
        g = torch.Generator()
        g.manual_seed(self.seed)
        self._from = (0, 0, 0, g.get_state())  # where every iter() starts
        self._reading = [0, 0, iter(()), *self._from[1:]]

    def __iter__(self) -> Iterator[int]:
        position, q, start, state = self._from
        self._reading = reading = [position, 0, iter(()), q, start, state]
        return self._stream(reading)

    def _stream(self, reading: list) -> Iterator[int]:
        W = self.num_replicas
        g = torch.Generator()
        g.set_state(reading[5])
        q, start = reading[3], reading[4]
        while True:
            state = g.get_state()  # the generator before pass q: where a resume restarts
            order = self._draw_pass(g)  # (L,) pass q of the global stream
            done = reading[0] + reading[1]  # read so far: the last chunk is used up here
            want = self.rank + done * W  # global position of this rank's next index
            if want < start + len(order):  # pass q holds some of this rank's positions
                reading[3:] = q, start, state
                mine = order[want - start :: W]  # (k,) positions want, want + W, ... of pass q
                for chunk in mine.split(_CHUNK):
                    values = chunk.tolist()
                    reading[:3] = reading[0] + reading[1], len(values), iter(values)
                    yield from reading[2]
            q, start = q + 1, start + len(order)

    def _stream_state(self) -> dict[str, object]:
        return {
            "num_replicas": self.num_replicas,
            "rank": self.rank,
            "seed": self.seed,
            "position": self.position,
            "pass": self._reading[3],
            "pass_start": self._reading[4],
            "generator": base64.b64encode(self._reading[5].numpy().tobytes()).decode("ascii"),
        }

    def _load_stream(
        self, state: dict[str, object], match: tuple[str, ...], pass_length: int | None = None
    ) -> None:
        """Check ``state``: the ``match`` fields, the world, the rank and the seed (unless ours
        was drawn by ``seed=None``) equal ours, the position fields in range; then load it."""
        mine = self.state_dict()
        match += ("num_replicas", "rank") + (() if self._seed_drawn else ("seed",))
        check_state(state, mine["kind"], mine["version"], {k: mine[k] for k in match})
        seed = check_int("seed", state["seed"], low=_SEED_LOW, high=_SEED_HIGH)
        position = check_int("position", state.get("position"), low=0)
        pass_ = check_int("pass", state.get("pass"), low=0)
        start = check_int("pass_start", state.get("pass_start"), low=0)
        if pass_length is not None and start != pass_ * pass_length:
            raise ValueError(
                f"pass_start should be pass * {pass_length} = {pass_ * pass_length} (every pass "
                f"has {pass_length} indices), but got pass_start={start}"
            )
        if start > self.rank + position * self.num_replicas:
            raise ValueError(
                f"pass_start should be <= the global position of this rank's next index "
                f"(rank + position * num_replicas = {self.rank + position * self.num_replicas}), "
                f"but got pass_start={start}"
            )
        generator = state.get("generator")
        try:
            raw = base64.b64decode(str(generator), validate=True)
        except (binascii.Error, ValueError):
            raw = b""
        if len(raw) != _STATE_BYTES:
            shown = generator if len(str(generator)) <= 40 else f"{str(generator)[:40]}..."
            raise ValueError(
                f"generator should be the base64 text of a {_STATE_BYTES}-byte torch.Generator "
                f"state, but got generator={shown!r}"
            )
        # the seed equals ours (check_state), unless ours was drawn by seed=None: take the saved one
        self.seed = seed
        self._from = (position, pass_, start, torch.frombuffer(bytearray(raw), dtype=torch.uint8))
        self._reading = [position, 0, iter(()), *self._from[1:]]


class InfiniteSampler(_PassStream):
    r"""An endless stream of indices, pass after pass, split across ranks by striding.

    The global stream is ``randperm(N)``, ``randperm(N)``, ... drawn from one generator seeded
    once with ``seed`` (``arange(N)`` repeated without shuffle); rank ``r`` reads its positions
    ``r, r + W, ...``. Index for index the same as detectron2's ``TrainingSampler`` and
    mmengine's ``InfiniteSampler``. Like detectron2's, every ``iter()`` starts the stream from
    its beginning, or from a loaded position: two iterators are independent. It has no ``len``
    and no ``set_epoch``: stop after your number of iterations.

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

    def state_dict(self) -> dict[str, object]:
        r"""Where this rank is in the stream: small and JSON-serialisable.

        ``position`` counts the indices this rank has yielded; ``generator`` is the generator's
        state (base64 text, about 7 KB) at the start of the pass that holds the next one, so a
        resume draws that pass and no earlier one.
        """
        return {
            "kind": "InfiniteSampler",
            "version": 1,
            "size": self.size,
            "shuffle": self.shuffle,
            **self._stream_state(),
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        r"""Continue the stream exactly where ``state`` was taken (built alike, on the same rank).

        A sampler built with ``seed=None`` takes the saved seed (its own was random anyway);
        otherwise the seed must match, as must the dataset length, ``shuffle``, the world size
        and the rank.
        """
        self._load_stream(state, ("size", "shuffle"), pass_length=self.size)
