r"""The batch pipeline of detection codebases: dataset -> sampler -> grouped batches -> iterations.

``make_data_sampler`` picks how indices are drawn (one rank's share, a seeded shuffle, or in
order); ``make_batch_data_sampler`` batches them, grouping images by aspect-ratio bin if asked,
and turns epochs into a fixed number of iterations if asked. The same chain as
maskrcnn-benchmark's ``make_data_loader``, without its two faults: a resumed run reads exactly
the batches the uninterrupted run would have read, and with ``num_iters`` every rank yields the
same number of batches even when grouping makes per-pass counts differ between ranks.

References:
    maskrcnn_benchmark/data/build.py (make_data_sampler, make_batch_data_sampler, _quantize)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence, Sized
from itertools import pairwise

import numpy as np
import torch
from torch.utils.data import Sampler, SequentialSampler

from .._checks import check_bool, check_int, check_int64, check_len
from ..guarded import BatchSampler, DistributedSampler
from .grouped import GroupedBatchSampler
from .iteration import IterationBasedBatchSampler

__all__ = [
    "aspect_ratio_groups",
    "aspect_ratios",
    "make_batch_data_sampler",
    "make_data_sampler",
]


def make_data_sampler(
    dataset: Sized,
    shuffle: bool,
    distributed: bool,
    seed: int = 0,
    *,
    num_replicas: int | None = None,
    rank: int | None = None,
) -> Sampler[int]:
    r"""Return the sampler of the pipeline: this rank's share, a seeded shuffle, or in order.

    - ``distributed=True``: :class:`~distsampling.DistributedSampler` (``num_replicas``/``rank``
      default to the process group).
    - ``shuffle=True`` alone: a one-rank ``DistributedSampler``, which is torch's
      ``RandomSampler`` with a generator seeded by ``seed + epoch``: reproducible, and it has
      ``set_epoch``, so every pass of an iteration-based run differs.
    - otherwise torch's ``SequentialSampler``.

    Args:
        dataset: anything with ``__len__``.
        shuffle: draw a new permutation each epoch.
        distributed: read only this rank's share.
        seed: base seed of the shuffle, the same on every rank.
        num_replicas: number of ranks (``distributed=True`` only).
        rank: this rank (``distributed=True`` only).

    Examples:
        >>> list(make_data_sampler(range(6), False, distributed=True, num_replicas=2, rank=1))
        [1, 3, 5]
        >>> list(make_data_sampler(range(6), shuffle=True, distributed=False, seed=0))
        [2, 5, 3, 0, 1, 4]
    """
    shuffle, distributed = check_bool("shuffle", shuffle), check_bool("distributed", distributed)
    check_len("dataset", dataset)
    if distributed:
        return DistributedSampler(dataset, num_replicas, rank, shuffle=shuffle, seed=seed)
    if num_replicas is not None or rank is not None:
        raise ValueError(
            "num_replicas and rank only apply with distributed=True, but got "
            f"distributed=False, num_replicas={num_replicas}, rank={rank}"
        )
    if shuffle:
        return DistributedSampler(dataset, num_replicas=1, rank=0, seed=seed)  # shuffles
    return SequentialSampler(dataset)


def aspect_ratios(dataset: object) -> torch.Tensor:
    r"""Height / width of every image of a dataset with ``get_img_info(i) -> {"height", "width"}``.

    That is the maskrcnn-benchmark convention (COCO annotations give the size without decoding
    the image). A 1-D list, array or tensor is taken as the aspect ratios themselves.

    Args:
        dataset: a dataset with ``get_img_info``, or a 1-D list, array or tensor of ratios.

    Examples:
        >>> class Images:
        ...     sizes = ((480, 640), (640, 480))  # (height, width)
        ...     def __len__(self):
        ...         return len(self.sizes)
        ...     def get_img_info(self, i):
        ...         return dict(zip(("height", "width"), self.sizes[i]))
        >>> aspect_ratios(Images()).tolist()
        [0.75, 1.3333333333333333]
    """
    if hasattr(dataset, "get_img_info"):
        n = check_len("dataset", dataset)
        values = [_image_ratio(i, dataset.get_img_info(i)) for i in range(n)]
    else:
        values = dataset
    ratios = None
    if isinstance(values, (list, tuple, np.ndarray, torch.Tensor)):
        try:
            ratios = torch.as_tensor(values, dtype=torch.float64)  # (N,)
        except (TypeError, ValueError, RuntimeError):
            ratios = None
    if ratios is None or ratios.dim() != 1:
        raise TypeError(
            "dataset_or_aspect_ratios should be a dataset with get_img_info(i) or a 1-D list, "
            f"array or tensor of numbers (height / width), but got {type(dataset).__name__} "
            f"dataset_or_aspect_ratios={dataset!r}"
        )
    bad = torch.nonzero(~torch.isfinite(ratios) | (ratios <= 0))
    if len(bad):
        i = bad[0].item()
        raise ValueError(
            f"aspect ratios should be finite and positive (height / width), but got "
            f"aspect_ratios[{i}]={ratios[i].item()}"
        )
    return ratios


def _image_ratio(i: int, info: object) -> float:
    """Height / width of image ``i`` from its ``get_img_info(i)``; raise naming a bad one."""
    sizes = [info.get(k) for k in ("height", "width")] if isinstance(info, dict) else [None]
    message = (
        f"get_img_info({i}) should give a positive finite height and width, "
        f"but got get_img_info({i})={info!r}"
    )
    if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in sizes):
        raise TypeError(message)
    height, width = map(float, sizes)
    if not (0 < height < math.inf and 0 < width < math.inf):  # NaN fails every comparison
        raise ValueError(message)
    return height / width


def aspect_ratio_groups(ratios: torch.Tensor, bin_edges: Sequence[float]) -> torch.Tensor:
    r"""Quantise aspect ratios by bin edges: group ``g`` holds ``edges[g-1] <= ratio < edges[g]``.

    Args:
        ratios: aspect ratios, shape ``(N,)``.
        bin_edges: a non-empty, strictly increasing sequence of finite edges.

    Examples:
        >>> aspect_ratio_groups(torch.tensor([0.5, 1.0, 1.5]), [1.0]).tolist()  # h/w < 1: group 0
        [0, 1, 1]
    """
    edges = list(bin_edges) if isinstance(bin_edges, Sequence) else None
    if not edges or not all(
        isinstance(e, numbers.Real) and not isinstance(e, bool) and math.isfinite(e) for e in edges
    ):
        raise ValueError(
            "bin edges should be a non-empty sequence of finite numbers, but got "
            f"aspect_grouping={bin_edges!r}"
        )
    if any(a >= b for a, b in pairwise(edges)):
        raise ValueError(
            f"bin edges should be strictly increasing, but got aspect_grouping={edges}"
        )
    try:  # a float tensor keeps its dtype; integers and lists are read as float64
        values = torch.as_tensor(ratios)
        if not values.dtype.is_floating_point:
            values = values.to(torch.float64)
    except (TypeError, ValueError, RuntimeError):
        values = None
    if (
        not isinstance(ratios, (list, tuple, np.ndarray, torch.Tensor))
        or values is None
        or values.dim() != 1
    ):
        raise TypeError(
            "ratios should be a 1-D tensor, list or array of aspect ratios (height / width), "
            f"but got ratios={ratios!r}"
        )
    # right=True is bisect_right: a ratio equal to an edge goes to the bin above it
    return torch.bucketize(values, torch.tensor(edges, dtype=values.dtype), right=True)  # (N,)


def make_batch_data_sampler(
    dataset_or_aspect_ratios: object,
    sampler: Sampler[int] | Iterable[int],
    aspect_grouping: Sequence[float] | None,
    batch_size: int,
    num_iters: int | None = None,
    start_iter: int = 0,
) -> Sampler[list[int]]:
    r"""Batch a sampler: group by aspect-ratio bin if asked, then a fixed number of iterations.

    Without grouping, a :class:`~distsampling.BatchSampler` (every rank the same count per
    pass). With grouping, a :class:`~distsampling.GroupedBatchSampler`: per-pass counts can
    differ between ranks, so set ``num_iters`` for distributed training; then an
    :class:`~distsampling.IterationBasedBatchSampler` yields exactly ``num_iters - start_iter``
    batches on every rank. Nothing is dropped (no ``drop_last``/``drop_uneven``).

    Args:
        dataset_or_aspect_ratios: a dataset with ``get_img_info``, or the aspect ratios
            (height / width) of every item; only read when ``aspect_grouping`` is set.
        sampler: the sampler from :func:`make_data_sampler`.
        aspect_grouping: ``None`` for no grouping, or the bin edges, e.g. ``[1.0]``.
        batch_size: images per batch on this rank, a positive ``int``.
        num_iters: total iterations of the run, or ``None`` for one pass per ``iter``.
        start_iter: iterations already done when resuming (needs ``num_iters``).

    Examples:
        >>> ratios = [0.75, 1.33, 0.75, 0.75, 1.33, 1.33]
        >>> batches = make_batch_data_sampler(ratios, range(6), [1.0], batch_size=2)
        >>> list(batches)
        [[0, 2], [1, 4], [3], [5]]
        >>> list(make_batch_data_sampler(ratios, range(6), [1.0], 2, num_iters=6, start_iter=3))
        [[5], [0, 2], [1, 4]]
    """
    batch_size = check_int64("batch_size", batch_size, low=1)
    start_iter = check_int("start_iter", start_iter, low=0)
    if num_iters is None and start_iter:
        raise ValueError(
            f"start_iter needs num_iters (the length of the run), but got num_iters=None, "
            f"start_iter={start_iter}"
        )
    # checked here too, so that the errors name this function's argument, num_iters
    if num_iters is not None and start_iter > check_int64("num_iters", num_iters, low=0):
        raise ValueError(
            "start_iter should be <= num_iters (the iterations already done), but got "
            f"start_iter={start_iter}, num_iters={num_iters}"
        )
    if aspect_grouping is None:
        batch_sampler: Sampler[list[int]] = BatchSampler(sampler, batch_size, drop_last=False)
    else:
        ratios = aspect_ratios(dataset_or_aspect_ratios)  # (N,)
        groups = aspect_ratio_groups(ratios, aspect_grouping)  # (N,)
        batch_sampler = GroupedBatchSampler(sampler, groups, batch_size)  # drops no batch
    if num_iters is not None:
        batch_sampler = IterationBasedBatchSampler(batch_sampler, num_iters, start_iter)
    return batch_sampler
