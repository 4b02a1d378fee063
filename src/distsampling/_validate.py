"""Argument checks shared by every sampler: each error names the argument and the value.

The messages follow torch's style (``... but got batch_size=0``) so that a user who reads one
knows at once which argument to fix and what was passed. Also here, because every sampler that
holds an epoch's indices needs it: the dtype they are held in (``_index_dtype``).
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Sequence, Sized

import numpy as np
import torch
import torch.distributed as dist

__all__ = [
    "check_bool",
    "check_int",
    "check_len",
    "check_rank",
    "check_state",
    "index_tensor",
    "resolve_world",
]


def _index_dtype(size: int) -> torch.dtype:
    """The dtype of an order of ``size`` positions: int32 while every index fits, else int64.

    int32 halves the memory of an epoch's order (``make bench`` measures the peaks);
    ``torch.randperm`` draws the same permutation whatever the dtype (tests/test_distributed.py
    checks it), so parity with torch holds. int64 once an index can reach ``2**31``.
    """
    return torch.int32 if size < 2**31 else torch.int64


def _is_bool(value: object) -> bool:
    # Python's and numpy's bools, and one-element bool tensors (torch.tensor(True))
    if isinstance(value, torch.Tensor):
        return value.dtype == torch.bool and value.numel() == 1
    return isinstance(value, (bool, np.bool_))


def check_int(name: str, value: object, *, low: int | None = None, high: int | None = None) -> int:
    """Return ``value`` as an ``int``; raise if it is not an integer (bools excluded) in range.

    An integer is what ``operator.index`` takes, as torch's samplers take it: Python and numpy
    ints and one-element integer tensors (``torch.tensor(2)``). A bool is never taken for 0 or 1.
    """
    try:
        if _is_bool(value):
            raise TypeError
        value = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{name} should be an integer, but got {name}={value!r} of type {type(value).__name__}"
        ) from None
    if low is not None and high is not None and not low <= value <= high:
        raise ValueError(
            f"{name} should be in the interval [{low}, {high}], but got {name}={value}"
        )
    if low is not None and value < low:
        raise ValueError(f"{name} should be >= {low}, but got {name}={value}")
    if high is not None and value > high:
        raise ValueError(f"{name} should be <= {high}, but got {name}={value}")
    return value


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` as a ``bool``; raise unless it is a boolean (``0``/``1`` are not taken).

    Python's and numpy's bools and one-element bool tensors are booleans; torch's samplers
    would take any truthy value, but ``shuffle="no"`` shuffling is a bug, not a choice.
    """
    if not _is_bool(value):
        raise TypeError(f"{name} should be a boolean value, but got {name}={value!r}")
    return bool(value)


def check_len(name: str, obj: object) -> int:
    """Return ``len(obj)``; raise if ``obj`` has no length (an iterable-style dataset, a generator)."""
    if not isinstance(obj, Sized):
        raise TypeError(
            f"{name} should have __len__ (a map-style dataset or a sized sampler), "
            f"but got {name}={obj!r} of type {type(obj).__name__}"
        )
    try:
        return len(obj)
    except OverflowError:  # range(2**70): Python's len() stops at sys.maxsize
        raise ValueError(
            f"{name} should have a length <= {sys.maxsize}, but got {name}={obj!r}"
        ) from None


def index_tensor(sampler: object) -> torch.Tensor:
    """One pass of ``sampler`` as an int64 tensor ``(m,)``; raise unless it yields integers."""
    try:
        # operator.index takes ints (numpy's and one-element integer tensors too) and refuses
        # floats, strings and lists (a batch sampler): np.fromiter alone would truncate 1.5 to 1
        # and parse "1"
        ints = map(operator.index, sampler)  # type: ignore[call-overload]
        return torch.from_numpy(np.fromiter(ints, dtype=np.int64))
    except (TypeError, ValueError, OverflowError) as err:
        raise TypeError(
            f"sampler should yield integer indices, but got sampler={sampler!r} ({err})"
        ) from err


def resolve_world(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    """Fill ``num_replicas``/``rank`` from the default process group where they are ``None``."""
    if num_replicas is None or rank is None:
        # torch's words first (RuntimeError, or ValueError from dist.get_world_size), then ours
        how = (
            "num_replicas and rank default to the world size and rank of the default process "
            f"group, but got num_replicas={num_replicas}, rank={rank} and no process group. Call "
            "torch.distributed.init_process_group(...) first (torchrun sets the environment "
            "for it), or pass num_replicas= and rank= explicitly."
        )
        if not dist.is_available():
            raise RuntimeError(f"Requires distributed package to be available: {how}")
        if not dist.is_initialized():
            raise ValueError(
                "Default process group has not been initialized, please make sure to call "
                f"init_process_group: {how}"
            )
        num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
        rank = dist.get_rank() if rank is None else rank
    num_replicas = check_int("num_replicas", num_replicas, low=1)
    return num_replicas, check_rank(rank, num_replicas)


def check_rank(rank: object, num_replicas: int) -> int:
    """Return ``rank`` as an ``int``; raise, in torch's words, unless it is in ``[0, num_replicas)``."""
    rank = check_int("rank", rank)
    if not 0 <= rank < num_replicas:
        # torch's DistributedSampler says "Invalid rank ...": its own tests match those words
        raise ValueError(
            f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}], "
            f"but got rank={rank} for num_replicas={num_replicas}"
        )
    return rank


def check_state(
    state: object,
    kind: str,
    version: int,
    must_match: dict[str, object],
    *,
    required: Sequence[str] = (),
) -> dict[str, object]:
    r"""Check a saved ``state_dict()`` before ``load_state_dict`` uses it, and return it.

    Every sampler's state is a small JSON-serialisable dict: ``"kind"`` (the class name),
    ``"version"`` (the format), the fields that must match on resume (seed, dataset length,
    shuffle, drop_last, ...) and the position fields the sampler reads itself. A mismatch names
    the field, the saved value and the current one, so a checkpoint from another run, another
    dataset or another class is refused instead of silently resuming the wrong epoch.

    Args:
        state: what ``state_dict()`` returned (after ``json.loads`` or ``torch.load``).
        kind: the class name this state must come from.
        version: the format version this class reads.
        must_match: field -> current value; the saved value must be equal.
        required: further fields that must be present (the position fields the caller reads).

    Examples:
        >>> check_state({"kind": "S", "version": 1, "seed": 0}, "S", 1, {"seed": 0})["seed"]
        0
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
