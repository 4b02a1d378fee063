r"""The one small helper of the sampler files: checks that name the argument and the value in
torch's words (``... but got batch_size=0``), the split arithmetic of DistributedSampler, and
the errors and warnings where a framework's default would train a rank on another plan.

References: torch/utils/data/distributed.py (DistributedSampler.__init__ and __iter__);
accelerate/data_loader.py (BatchSamplerShard, IterableDatasetShard, DataLoaderDispatcher)
"""

from __future__ import annotations

import operator
import sys
import warnings
from collections.abc import Iterator, Sized

import numpy as np
import torch
import torch.distributed as dist

_SEED_LOW, _SEED_HIGH = -(2**63), 2**64 - 1  # torch.Generator.manual_seed takes any int in them


def _index_dtype(size: int) -> torch.dtype:
    """int32 while every index below ``size`` fits (half the memory of int64), else int64."""
    return torch.int32 if size < 2**31 else torch.int64


def _is_bool(value: object) -> bool:
    # Python's and numpy's bools, and one-element bool tensors (torch.tensor(True))
    if isinstance(value, torch.Tensor):
        return value.dtype == torch.bool and value.numel() == 1
    return isinstance(value, (bool, np.bool_))


def check_int(name: str, value: object, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` as an ``int``; raise unless it is an integer in range: what ``operator.index``
    takes, as torch does (Python and numpy ints, one-element integer tensors), never a bool."""
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
    value = check_int(name, value, low=low)
    if value >= 2**63:  # past int64, the largest size or count numpy and torch hold
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


def split_sizes(n: int, num_replicas: int, drop_last: bool) -> tuple[int, int]:
    r"""``(num_samples, total_size)``: indices per rank, and the padded (or cut) epoch's length.

    Examples:
        >>> split_sizes(10, 3, drop_last=False), split_sizes(10, 3, drop_last=True)  # pad, cut
        ((4, 12), (3, 9))
    """
    n, num_replicas = check_int("n", n, low=0), check_int("num_replicas", num_replicas, low=1)
    # torch's ceil((n - W) / W) with drop_last is floor(n / W); without it, ceil(n / W)
    num_samples = n // num_replicas if check_bool("drop_last", drop_last) else -(-n // num_replicas)
    return num_samples, num_samples * num_replicas


def epoch_permutation(n: int, shuffle: bool, seed: int, epoch: int) -> torch.Tensor:
    r"""The epoch's order ``(n,)``: torch's ``randperm(n)`` seeded by ``seed + epoch``, or ``0..n-1``
    (int32 below ``2**31`` samples: ``randperm`` draws the same permutation whatever the dtype).

    Examples:
        >>> epoch_permutation(5, shuffle=True, seed=0, epoch=0).tolist()
        [4, 0, 1, 3, 2]
    """
    n, epoch = check_int64("n", n, low=0), check_int("epoch", epoch)
    seed = check_seed(seed, epoch if check_bool("shuffle", shuffle) else 0)
    if not shuffle:
        return torch.arange(n, dtype=_index_dtype(n))
    g = torch.Generator().manual_seed(seed + epoch)  # the same generator, seed and call as torch
    return torch.randperm(n, generator=g, dtype=_index_dtype(n))


def rank_positions(n: int, num_replicas: int, rank: int, drop_last: bool = False) -> torch.Tensor:
    r"""The positions of an epoch order of length ``n`` that ``rank`` reads: ``(num_samples,)``.

    torch's split: padded with the head (``p >= n`` reads ``p % n``) or cut, every W-th from rank.

    Examples:
        >>> rank_positions(5, 2, 1).tolist()  # padded to 6: positions 1, 3 and 5 -> 5 % 5 = 0
        [1, 3, 0]
    """
    n, (num_replicas, rank) = check_int("n", n, low=0), resolve_world(num_replicas, rank)
    num_samples, total_size = split_sizes(n, num_replicas, drop_last)
    if total_size > 2**63 - 1:  # positions are int64 (torch would build a list this long)
        raise ValueError(
            f"num_replicas should leave a padded epoch below 2**63 positions, but got "
            f"num_replicas={num_replicas} for n={n}: total_size={total_size}"
        )
    positions = rank + num_replicas * torch.arange(num_samples)  # (num_samples,)
    return positions % max(n, 1)  # past n: the head of the order again


# --- loud where a framework's default would read another plan without a word ---------------------


class FrameworkWarning(UserWarning):
    r"""A loop is about to read a dataset's epoch again: an iterable dataset no ``set_epoch``
    reached (outside Lightning's ``Trainer``), or a dataset set to another epoch than its
    sampler's. To stop instead, ``warnings.filterwarnings("error", category=FrameworkWarning)``.

    Examples:
        >>> import warnings
        >>> from distsampling import ShardedIterableDataset
        >>> read = lambda shard: range(2 * shard, 2 * shard + 2)  # shard k: 2k and 2k + 1
        >>> shards = ShardedIterableDataset([0, 1], [2, 2], read, num_replicas=1, rank=0)
        >>> first = list(shards)  # epoch 0; then, with no set_epoch, epoch 0 again:
        >>> with warnings.catch_warnings(record=True) as heard:
        ...     warnings.simplefilter("always", FrameworkWarning)
        ...     again = list(shards)
        >>> str(heard[0].message).split(":")[0]
        'ShardedIterableDataset began a pass with no set_epoch since the previous one began'
    """


#: accelerate's wrappers of a prepared loader, and what each does to the share it consumes
_RESPLIT = {
    "BatchSamplerShard": "would split it again over {n} processes",
    "IterableDatasetShard": "would split it again over {n} processes",
    "DataLoaderDispatcher": "would read it on process 0 only and split its batches over {n} processes",
}


def refuse_split_again(
    share: object, wrappers: tuple[str, ...] = tuple(_RESPLIT), num_replicas: int = 0
) -> None:
    """Raise if ``share`` (one rank's share of ``num_replicas`` > 1, its own by default) is
    consumed by one of accelerate's ``wrappers`` (``accelerator.prepare(loader)``'s), found up the
    caller's stack: each process would train on a part of its share. Called first in ``__iter__``
    (each process iterates its wrapper), or for the dispatcher in ``set_epoch``, which it calls on
    every process first: every process raises before a batch, none waits in its broadcast."""
    if "accelerate" not in sys.modules:  # none of its wrappers can be up the stack: no walk
        return
    frame, num_replicas = sys._getframe(2), num_replicas or getattr(share, "num_replicas", 1)
    name = next(c.__name__ for c in type(share).__mro__ if not c.__name__.startswith("_"))
    while frame is not None and num_replicas > 1:
        module = frame.f_globals.get("__name__", "")
        wrapper = frame.f_locals.get("self") if module.startswith("accelerate.") else None
        kind = type(wrapper).__name__  # type(): accelerate's loaders mask their __class__
        if kind in wrappers:
            n = getattr(wrapper, "num_processes", None) or wrapper.state.num_processes
            if n < 2:  # one process: nothing is split again
                return
            raise RuntimeError(
                f"{name} already holds one rank's share (of num_replicas={num_replicas}), "
                f"and accelerate's {kind} {_RESPLIT[kind].format(n=n)}: each process would "
                f"train on about 1/{n} of its share. Prepare the model and optimizer, not the "
                "loader (model, optimizer = accelerator.prepare(model, optimizer)), and iterate "
                "the loader as built"
            )
        frame = frame.f_back


def begin_dataset_pass(sampler: object, ints: Iterator[int]) -> Iterator[int]:
    """``ints``, a pass of ``sampler``, as it begins: warn if the dataset it splits has an epoch
    of its own (``set_epoch``) that is not the sampler's (set after the sampler's, whose
    ``set_epoch`` sets it too); then hold the dataset's epoch (``_hold_epoch``) while the
    DataLoader iterator that reads the pass lives (or ``ints``, read directly): a ``set_epoch``
    meanwhile waits, never changing the samples of a pass mid-way."""
    dataset = getattr(sampler, "dataset", None)  # a wrapper's own: its set_epoch sets it too
    epoch = getattr(dataset, "epoch", None) if hasattr(dataset, "set_epoch") else None
    if isinstance(epoch, int) and epoch != sampler.epoch:  # type: ignore[attr-defined]
        warnings.warn(
            f"{type(dataset).__name__} is at epoch {epoch} while its sampler, "
            f"{type(sampler).__name__}, is at epoch {sampler.epoch}: this pass reads the "  # type: ignore[attr-defined]
            f"dataset's epoch {epoch}. sampler.set_epoch(epoch) sets its dataset's epoch too: "
            "call it after dataset.set_epoch, or alone",
            FrameworkWarning, stacklevel=3,
        )  # fmt: skip
    if not callable(hold := getattr(dataset, "_hold_epoch", None)):
        return ints
    # up to the DataLoader iterator reading the pass (torch's own _next_index, or _reset, asks
    # the sampler: torchdata's StatefulDataLoader too); only torch's frames: their locals are its
    frame, owner = sys._getframe(), None
    while frame is not None and owner is None:
        if frame.f_globals.get("__name__", "").startswith("torch.utils.data"):
            found = frame.f_locals.get("self")
            owner = found if "DataLoaderIter" in type(found).__name__ else None
        frame = frame.f_back
    if owner is None:  # read directly: the pass lasts as long as its iterator
        ints = owner = (i for i in ints)  # a generator: weak-referenceable, unlike chain
    hold(owner)
    return ints
