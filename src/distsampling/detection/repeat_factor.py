r"""Repeat-factor sampling: rare categories seen more often, in an endless stream split across ranks.

LVIS has a long tail of categories with a handful of images each. Repeat-factor sampling gives
every image a float repeat factor ``r >= 0``; each pass of the stream holds image ``i``
``floor(r_i)`` times, plus once more when a uniform draw falls below the fractional part
(stochastic rounding: ``r_i`` times on average), shuffled. The passes come one after another
from one generator and are split across ranks by striding, exactly as in
:class:`~distsampling.InfiniteSampler`, whose engine this module reuses.

The usual factors come from category frequency (:func:`repeat_factors_from_category_frequency`):
``f(c)`` is the share of images that contain category ``c``, ``r(c) = max(1, sqrt(t / f(c)))``
and an image's factor is the largest ``r(c)`` of its categories.

detectron2 draws the rounding uniforms even when every factor is a whole number, so its stream
with factors all ``1`` differs from its ``TrainingSampler``'s. Here nothing is drawn when there
is nothing to round: factors all ``1`` give exactly the :class:`~distsampling.InfiniteSampler`
stream, and factors with a fractional part give exactly detectron2's.

References:
    detectron2/data/samplers/distributed_sampler.py (RepeatFactorTrainingSampler);
    Gupta et al., "LVIS: A Dataset for Large Vocabulary Instance Segmentation", appendix B.2
"""

from __future__ import annotations

import hashlib
import math
import numbers
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence

import numpy as np
import torch

from .._checks import check_bool, check_int64, check_len, resolve_world
from .infinite import _PassStream, _resolve_seed

__all__ = ["RepeatFactorSampler", "repeat_factors_from_category_frequency"]


def repeat_factors_from_category_frequency(
    image_categories: Sequence[Iterable[Hashable]], repeat_thresh: float, *, sqrt: bool = True
) -> torch.Tensor:
    r"""Per-image repeat factors from how often each category occurs (LVIS's rule).

    ``f(c)`` = share of images containing category ``c`` (each image counted once per
    category), ``r(c) = max(1, sqrt(repeat_thresh / f(c)))`` (``max(1, repeat_thresh / f(c))``
    with ``sqrt=False``), and an image's factor is the largest ``r(c)`` over its categories,
    ``1`` for an image with none. A category in half of ``repeat_thresh``'s share of images is
    repeated about ``sqrt(2)`` times, or twice without the square root. The same arithmetic as
    detectron2 (its ``sqrt`` flag included), returned as ``float32`` as detectron2 does.

    Args:
        image_categories: per image, the categories it contains (any hashable ids; repeats
            are fine), e.g. ``[{a["category_id"] for a in d["annotations"]} for d in dicts]``.
        repeat_thresh: the frequency threshold ``t``, finite and ``>= 0``; categories in fewer
            than that share of images are repeated.
        sqrt: take the square root of ``t / f(c)`` (LVIS's rule); ``False`` repeats a rare
            category in proportion to its rarity, a stronger rebalancing.

    Examples:
        >>> images = [["cat"], ["cat", "dog"], ["cat"], []]  # dog in 1 of 4 images
        >>> repeat_factors_from_category_frequency(images, repeat_thresh=0.5).tolist()
        [1.0, 1.4142135381698608, 1.0, 1.0]
        >>> repeat_factors_from_category_frequency(images, repeat_thresh=0.5, sqrt=False).tolist()
        [1.0, 2.0, 1.0, 1.0]
    """
    if isinstance(repeat_thresh, bool) or not isinstance(repeat_thresh, numbers.Real):
        raise TypeError(
            f"repeat_thresh should be a real number, but got repeat_thresh={repeat_thresh!r}"
        )
    if not math.isfinite(repeat_thresh) or repeat_thresh < 0:
        raise ValueError(
            f"repeat_thresh should be finite and >= 0, but got repeat_thresh={repeat_thresh!r}"
        )
    sqrt = check_bool("sqrt", sqrt)
    n = check_len("image_categories", image_categories)
    images = []
    for i, cats in enumerate(image_categories):
        if isinstance(cats, (str, bytes)) or not isinstance(cats, Iterable):
            raise TypeError(
                f"image_categories[{i}] should be a collection of category ids, but got "
                f"image_categories[{i}]={cats!r}"
            )
        images.append(set(cats))  # each category counts once per image
    # 1. f(c): the share of images in which category c appears
    images_with = Counter(c for cats in images for c in cats)
    # 2. r(c) = max(1, sqrt(t / f(c))), or max(1, t / f(c)) without the square root
    ratios = {c: repeat_thresh / (k / n) for c, k in images_with.items()}
    per_category = {c: max(1.0, math.sqrt(x) if sqrt else x) for c, x in ratios.items()}
    # 3. r(image) = max of r(c) over its categories; 1 for an image without any
    factors = [max((per_category[c] for c in cats), default=1.0) for cats in images]
    return torch.tensor(factors, dtype=torch.float32)  # (N,)


def _factors(repeat_factors: object) -> torch.Tensor:
    values = repeat_factors
    if isinstance(values, (list, tuple, np.ndarray, torch.Tensor)):
        try:
            values = torch.as_tensor(values, dtype=torch.float64)  # (N,) exact for float32 input
        except (TypeError, ValueError, RuntimeError):
            values = None
    if not isinstance(values, torch.Tensor) or values.dim() != 1 or values.is_complex():
        raise TypeError(
            "repeat_factors should be a 1-D list, array or tensor of real numbers, but got "
            f"repeat_factors={repeat_factors!r}"
        )
    bad = torch.nonzero(~torch.isfinite(values) | (values < 0))
    if len(bad):
        i = bad[0].item()
        raise ValueError(
            f"repeat factors should be finite and >= 0, but got repeat_factors[{i}]={values[i].item()}"
        )
    if not (values > 0).any():
        raise ValueError(
            "repeat_factors should have a positive factor, or every pass is empty and the stream "
            f"never yields, but got repeat_factors={repeat_factors!r}"
        )
    return values


class RepeatFactorSampler(_PassStream):
    r"""An endless stream where image ``i`` appears ``r_i`` times per pass on average.

    Each pass, image ``i`` gets ``floor(r_i)`` copies, plus one when
    ``torch.rand(N, generator=g)[i] < r_i - floor(r_i)`` (drawn only if some factor has a
    fractional part); the pass's indices are then shuffled by ``randperm`` from the same
    generator (left in index order without shuffle). Passes follow each other and rank ``r``
    reads the global positions ``r, r + W, ...``, as :class:`~distsampling.InfiniteSampler`.
    Pass lengths vary with the rounding; resume still draws only the passes from the saved point on.

    Args:
        repeat_factors: one finite factor ``>= 0`` per image (list, array or tensor), at least
            one positive, e.g. from :func:`repeat_factors_from_category_frequency`.
        num_replicas: number of ranks; defaults to the world size of the default process group.
        rank: this rank in ``[0, num_replicas)``; defaults to the rank in the default group.
        shuffle: shuffle every pass.
        seed: the generator's seed, the same on every rank; ``None`` draws one on rank 0 and
            shares it over the process group.

    Examples:
        >>> from itertools import islice
        >>> s = RepeatFactorSampler([1, 3, 1], num_replicas=1, rank=0, shuffle=False)
        >>> list(islice(s, 10))  # whole factors: every pass is [0, 1, 1, 1, 2]
        [0, 1, 1, 1, 2, 0, 1, 1, 1, 2]
        >>> s = RepeatFactorSampler([1, 2.5], num_replicas=1, rank=0, seed=0, shuffle=False)
        >>> list(islice(s, 11))  # passes [0, 1, 1], [0, 1, 1, 1], [0, 1, 1], ...
        [0, 1, 1, 0, 1, 1, 1, 0, 1, 1, 0]
    """

    def __init__(
        self,
        repeat_factors: Sequence[float] | np.ndarray | torch.Tensor,
        num_replicas: int | None = None,
        rank: int | None = None,
        shuffle: bool = True,
        seed: int | None = None,
    ) -> None:
        self.num_replicas, self.rank = resolve_world(num_replicas, rank)
        check_int64("num_replicas", self.num_replicas)  # its stride is an int64 tensor's
        factors = _factors(repeat_factors)  # (N,) float64
        self.size = len(factors)  # images: what len() answers
        self.shuffle = check_bool("shuffle", shuffle)
        self._int_part = torch.trunc(factors).long()  # (N,) copies every pass
        self._frac_part = factors - torch.trunc(factors)  # (N,) chance of one more
        self._has_fraction = bool((self._frac_part > 0).any())
        random = self.shuffle or self._has_fraction
        self.seed, self._seed_drawn = _resolve_seed(seed, self.num_replicas, random)
        # what a saved state must have been taken with: the factors, as a short digest
        self._digest = hashlib.sha256(factors.numpy().tobytes()).hexdigest()[:16]
        self._restart()

    def _draw_pass(self, g: torch.Generator) -> torch.Tensor:
        counts = self._int_part  # (N,)
        if self._has_fraction:
            # stochastic rounding: float32 uniforms, as detectron2 draws them
            rands = torch.rand(len(counts), generator=g)  # (N,)
            counts = counts + (rands < self._frac_part)  # (N,) floor(r) or floor(r) + 1
        # (L,) image i, counts[i] times, in order. numpy's repeat: torch.repeat_interleave splits
        # even a tiny input over its thread pool, thousands of times slower on a busy machine
        indices = torch.from_numpy(np.repeat(np.arange(len(counts)), counts.numpy()))
        if self.shuffle:
            indices = indices[torch.randperm(len(indices), generator=g)]  # (L,)
        return indices

    def state_dict(self, consumed: int | None = None) -> dict[str, object]:
        r"""Where this rank is in the stream: small and JSON-serialisable (see ``InfiniteSampler``;
        ``consumed``: indices of the latest ``iter()`` the loop used, as there)."""
        if consumed is not None:
            return self._after(consumed).state_dict()
        return {
            "kind": "RepeatFactorSampler",
            "version": 2,
            "size": self.size,
            "shuffle": self.shuffle,
            "repeat_factors": self._digest,
            **self._stream_state(),
        }

    def load_state_dict(self, state: dict[str, object]) -> None:
        r"""Continue the stream exactly where ``state`` was taken, on any rank of any world.

        As ``InfiniteSampler.load_state_dict``. The factors (compared by a digest), their
        number, ``shuffle`` and the seed must match; a sampler built with ``seed=None`` takes the
        saved seed.
        """
        self._load_stream(state, ("size", "shuffle", "repeat_factors"))
