r"""Argument checks in torch's words, naming the argument and the value (References: torch's
distributed.py and sampler.py, their __init__)."""

from __future__ import annotations

import operator
import sys
from collections.abc import Sized

import numpy as np
import torch
import torch.distributed as dist

_SEED_LOW, _SEED_HIGH = -(2**63), 2**64 - 1  # torch.Generator.manual_seed takes any int in them


def _index_dtype(size: int) -> torch.dtype:  # int32 while every index fits: half of int64's memory
    return torch.int32 if size < 2**31 else torch.int64


def _is_bool(value: object) -> bool:  # Python's and numpy's bools, one-element bool tensors
    if isinstance(value, torch.Tensor):
        return value.dtype == torch.bool and value.numel() == 1
    return isinstance(value, (bool, np.bool_))


def check_int(name: str, value: object, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an ``int``: what ``operator.index`` takes, as torch does, never a bool."""
    try:  # a bool is an int to operator.index, never to us: it gets index(None)'s TypeError
        value = operator.index(None if _is_bool(value) else value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"{name} should be an integer, but got {name}={value!r} of type {type(value).__name__}"
        ) from None
    if (low is not None and value < low) or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"<= {high}" if low is None else None
        bound = bound or f"in the interval [{low}, {high}]"
        raise ValueError(f"{name} should be {bound}, but got {name}={value}")
    return value


def check_int64(name: str, value: object, *, low: int | None = None) -> int:
    """:func:`check_int`, and ``< 2**63``: numpy and torch hold it as int64, never overflowing."""
    if (value := check_int(name, value, low=low)) >= 2**63:
        raise ValueError(f"{name} should be < 2**63 (stored as int64), but got {name}={value}")
    return value


def check_bool(name: str, value: object) -> bool:
    """Return ``value`` as a ``bool``; raise unless it is one (``shuffle="no"`` is a bug)."""
    if not _is_bool(value):
        raise TypeError(f"{name} should be a boolean value, but got {name}={value!r}")
    return bool(value)


def check_len(name: str, obj: object) -> int:
    """Return ``len(obj)``; raise if ``obj`` has no length (an iterable-style dataset)."""
    if not isinstance(obj, Sized):
        raise TypeError(
            f"{name} should have __len__ (a map-style dataset or a sized sampler), "
            f"but got {name}={obj!r} of type {type(obj).__name__}"
        )
    try:
        return len(obj)
    except OverflowError:  # range(2**70): Python's len() stops at sys.maxsize
        too_long = f"{name} should have a length <= {sys.maxsize}, but got {name}={obj!r}"
        raise ValueError(too_long) from None


def resolve_world(num_replicas: object, rank: object) -> tuple[int, int]:
    """``(num_replicas, rank)`` checked, each from the default process group where it is ``None``."""
    if num_replicas is None or rank is None:
        how = (  # after torch's own words (RuntimeError, or dist.get_world_size's ValueError)
            "num_replicas and rank default to the world size and rank of the default process group"
            f", but got num_replicas={num_replicas}, rank={rank} and no process group. Call torch."
            "distributed.init_process_group(...) first (torchrun sets the environment for it), "
            "or pass num_replicas= and rank= explicitly."
        )
        if not dist.is_available():
            raise RuntimeError(f"Requires distributed package to be available: {how}")
        if not dist.is_initialized():
            init = "please make sure to call init_process_group"
            raise ValueError(f"Default process group has not been initialized, {init}: {how}")
        num_replicas = dist.get_world_size() if num_replicas is None else num_replicas
        rank = dist.get_rank() if rank is None else rank
    num_replicas, rank = check_int("num_replicas", num_replicas, low=1), check_int("rank", rank)
    if not 0 <= rank < num_replicas:  # torch's words: its own tests match "Invalid rank"
        raise ValueError(
            f"Invalid rank {rank}, rank should be in the interval [0, {num_replicas - 1}], "
            f"but got rank={rank} for num_replicas={num_replicas}"
        )
    return num_replicas, rank


def check_seed(seed: object, epoch: int = 0) -> int:
    """Return ``seed`` as an ``int``; raise unless it, and ``seed + epoch``, can seed a generator."""
    seed = check_int("seed", seed, low=_SEED_LOW, high=_SEED_HIGH)
    if not _SEED_LOW <= seed + epoch <= _SEED_HIGH:
        raise ValueError(
            f"seed + epoch should be in [{_SEED_LOW}, {_SEED_HIGH}] (torch.Generator's range), "
            f"but got seed={seed}, epoch={epoch}"
        )
    return seed
