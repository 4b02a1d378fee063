r"""WeightedBalanceClassSampler: draw an epoch of exactly ``length`` indices with chosen class shares.

torch's ``WeightedRandomSampler`` weighs *samples*, and its class counts scatter from epoch to
epoch; catalyst's ``BalanceClassSampler`` forces *equal* class counts. Here each class gets a
weight, and the class counts are the weights' shares of ``length``, rounded by the largest
remainder method so that they add up to ``length`` exactly (``int()`` truncation loses samples).

All randomness comes from a generator seeded by ``(seed, epoch)``, never from a global RNG, so
every rank that builds the sampler with the same arguments draws the same epoch: the contract
:class:`~distsampling.DistributedSamplerWrapper` needs to split it across ranks.

References:
    catalyst/data/sampler.py (BalanceClassSampler); torch/utils/data/sampler.py
    (WeightedRandomSampler); Hamilton's (largest remainder) apportionment method.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator, Mapping, Sequence
from fractions import Fraction
from itertools import chain

import numpy as np
import torch
from torch.utils.data import Sampler

from ._validate import _index_dtype, check_int, check_len, check_seed

__all__ = ["WeightedBalanceClassSampler", "largest_remainder_counts"]

# the numpy twin of _validate._index_dtype's answer: int32 indices below 2**31 samples
_NUMPY_INDEX = {torch.int32: np.int32, torch.int64: np.int64}


def _fractions(name: str, weights: Sequence[object], keys: Sequence[object]) -> list[Fraction]:
    # exact rationals: a float is a binary fraction, so Fraction(float) loses nothing and the
    # quotas, floors and remainders below are computed without rounding error
    out = []
    for key, w in zip(keys, weights):
        if isinstance(w, bool) or not isinstance(w, numbers.Real):
            raise TypeError(
                f"{name}[{key!r}] should be a real number, but got {name}[{key!r}]={w!r}"
            )
        if not math.isfinite(w) or w < 0:
            raise ValueError(
                f"{name}[{key!r}] should be finite and >= 0, but got {name}[{key!r}]={w!r}"
            )
        out.append(Fraction(int(w)) if isinstance(w, numbers.Integral) else Fraction(float(w)))
    if not out or sum(out) == 0:
        raise ValueError(f"{name} should have a positive sum, but got {name}={list(weights)!r}")
    return out


def _apportion(
    name: str, weights: Sequence[object], total: int, keys: Sequence[object]
) -> list[int]:
    fractions = _fractions(name, weights, keys)
    whole = sum(fractions)
    quotas = [total * f / whole for f in fractions]  # exact: sum(quotas) == total
    counts = [math.floor(q) for q in quotas]
    # total - sum(floors) seats are left, fewer than the number of classes; give one each to the
    # largest remainders, ties to the earlier class (a zero weight has remainder 0: never a seat)
    left = total - sum(counts)
    by_remainder = sorted(range(len(quotas)), key=lambda i: (counts[i] - quotas[i], i))
    for i in by_remainder[:left]:
        counts[i] += 1
    return counts


def largest_remainder_counts(
    weights: Sequence[float] | Mapping[object, float], total: int
) -> list[int] | dict[object, int]:
    r"""Split ``total`` into non-negative integers proportional to ``weights``, summing to ``total``.

    Each class's exact quota is ``total * w / sum(weights)``. Every class first gets the floor of
    its quota; the seats left over (fewer than the number of classes) go one each to the largest
    fractional remainders (Hamilton's method). Ties go to the class that comes first in
    ``weights``. So each count is the floor or the ceiling of its quota, a zero weight gets zero,
    and the arithmetic is exact (floats are read as the exact binary fractions they are).

    Args:
        weights: non-negative finite real numbers with a positive sum (any scale): a sequence
            (returns a list of counts), or a mapping ``label -> weight`` (returns
            ``{label: count}``, ties to the earlier key).
        total: the number to split, an ``int >= 0``.

    Examples:
        >>> largest_remainder_counts([0.5, 0.3, 0.2], 7)  # quotas 3.5, 2.1, 1.4
        [4, 2, 1]
        >>> [int(7 * w) for w in (0.5, 0.3, 0.2)]  # truncation loses one of the 7
        [3, 2, 1]
        >>> largest_remainder_counts([1, 1, 1], 10)  # a tie: the first class gets the seat
        [4, 3, 3]
        >>> largest_remainder_counts({"cat": 1, "dog": 3}, 4)  # the keys are labels
        {'cat': 1, 'dog': 3}
    """
    total = check_int("total", total, low=0)
    if isinstance(weights, Mapping):
        keys = list(weights)
        return dict(zip(keys, _apportion("weights", list(weights.values()), total, keys)))
    if isinstance(weights, (torch.Tensor, np.ndarray)):
        weights = weights.tolist()
    if not isinstance(weights, Sequence):  # a set or a generator has no order to align with
        raise TypeError(f"weights should be a sequence or a mapping, but got weights={weights!r}")
    return _apportion("weights", list(weights), total, range(len(weights)))


def _group(labels: object) -> tuple[list[object], np.ndarray, np.ndarray]:
    """Return ``(classes, sizes, members)``: sorted distinct labels, their counts, and the sample
    indices grouped by class (class ``c`` owns ``members[starts[c]:starts[c + 1]]``)."""
    arr = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"labels should be 1-D, one label per sample, but got shape {arr.shape}")
    # (uint64 labels may exceed int64, which the shift below needs: they take the sort path)
    compact = arr.dtype.kind in "iu" and np.can_cast(arr.dtype, np.int64)
    if compact and int(arr.max()) - int(arr.min()) <= 4 * arr.size + 1024:
        # integer labels in a compact range: count with bincount, O(N), no sort
        low = int(arr.min())
        safe = low == 0 and np.can_cast(arr.dtype, np.intp)  # bincount takes it as it is
        shifted = arr if safe else np.subtract(arr, low, dtype=np.int64)  # (N,) >= 0
        counts = np.bincount(shifted)  # (span,) samples per label value
        present = np.flatnonzero(counts)  # (C,) label - low of each class, sorted
        lookup = np.zeros(counts.size, dtype=_code_dtype(present.size))
        lookup[present] = np.arange(present.size)
        classes, sizes, codes = (present + low).tolist(), counts[present], lookup[shifted]
    else:
        try:  # any sortable labels (strings, sparse ints, floats): sort them once
            uniques, codes = np.unique(arr, return_inverse=True)
        except TypeError as err:
            raise TypeError(
                f"labels should be mutually sortable, but got labels={labels!r}"
            ) from err
        codes = codes.ravel()  # every unique label occurs: one count per class below
        classes, sizes = uniques.tolist(), np.bincount(codes)
    # codes: (N,) class number of each sample; with the counting path's 8/16-bit codes numpy's
    # stable argsort is a radix sort, so grouping the samples by class is O(N)
    members = np.argsort(codes, kind="stable")  # (N,) sample indices, class after class
    return classes, sizes, members.astype(_NUMPY_INDEX[_index_dtype(arr.size)])


def _code_dtype(num_classes: int) -> type:
    return np.uint8 if num_classes <= 2**8 else np.uint16 if num_classes <= 2**16 else np.int64


def _align(weight: object, classes: list[object]) -> tuple[list[object], Sequence[object]]:
    """The weights in the order of ``classes`` (sorted distinct labels), and how errors name them."""
    shown = classes if len(classes) <= 10 else [*classes[:10], "..."]
    if isinstance(weight, Mapping):
        for label in classes:
            if label not in weight:
                raise ValueError(
                    f"weight should have an entry for every label {shown}, but got no entry "
                    f"for label {label!r}: weight={weight!r}"
                )
        present = set(classes)
        for key, w in weight.items():
            # a zero weight for an absent class is harmless; a positive one cannot be honoured
            if key not in present and not (isinstance(w, numbers.Real) and w == 0):
                raise ValueError(
                    f"weight gives a class with no samples a weight: label {key!r} does not "
                    f"occur in labels {shown}, but got weight[{key!r}]={w!r}"
                )
        return [weight[label] for label in classes], classes
    if isinstance(weight, (torch.Tensor, np.ndarray)):
        weight = weight.tolist()
    if not isinstance(weight, Sequence) or isinstance(weight, str):
        raise TypeError(f"weight should be a sequence or a mapping, but got weight={weight!r}")
    if len(weight) != len(classes):
        raise ValueError(
            f"weight should have one entry per distinct label ({len(classes)}: {shown}), "
            f"but got {len(weight)} entries: weight={weight!r}"
        )
    return list(weight), range(len(weight))


def _rng(seed: int, epoch: int) -> np.random.Generator:
    """The generator of epoch ``epoch``: a function of ``(seed, epoch)``, one-to-one."""
    # numpy's seed sequence takes non-negative ints: zigzag 0, -1, 1, -2, ... to 0, 1, 2, 3, ...
    seed, epoch = (2 * v if v >= 0 else -2 * v - 1 for v in (seed, epoch))
    # the epoch goes in as the spawn key: numpy then pads the seed's 32-bit words (at most 3
    # for torch's seed range) to a fixed 4, so distinct pairs never feed the same words. A plain
    # list would: [zigzag(2**32), 0] is the words [0, 2, 0], read like seed 0, epoch 1's [0, 2]
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=[epoch]))


class WeightedBalanceClassSampler(Sampler[int]):
    r"""Draw ``length`` indices per epoch, with class counts proportional to per-class weights.

    Per-class counts come from :func:`largest_remainder_counts` and are the same every epoch.
    Within a class of ``n`` samples asked for ``k`` draws: ``k <= n`` draws ``k`` distinct
    samples (no replacement); ``k > n`` takes every sample ``k // n`` times plus ``k % n``
    distinct ones, so repeats happen only beyond the class size, each sample ``floor(k / n)``
    or ``ceil(k / n)`` times. The epoch is then shuffled.

    Randomness contract: the epoch is a function of ``(seed, epoch)`` and the arguments only,
    drawn on each ``iter`` from a fresh ``numpy.random.Generator``, seeded by a ``SeedSequence``
    of ``seed`` with ``epoch`` as its spawn key (distinct pairs, distinct streams); global RNGs
    (``numpy.random``, ``random``, ``torch``) are never used. Ranks that build it alike and call
    :meth:`set_epoch` alike draw the same epoch, which is what
    :class:`~distsampling.DistributedSamplerWrapper` needs.

    Args:
        labels: one label per sample (list, numpy array or tensor); any sortable values.
        weight: a sequence aligned with the *sorted distinct* labels, or a mapping
            ``label -> weight``; non-negative, finite, any scale.
        length: indices per epoch, an ``int >= 0``.
        seed: base seed, the same on every rank, in ``[-2**63, 2**64 - 1]`` as torch's.

    Examples:
        >>> labels = ["cat"] * 6 + ["dog"] * 3 + ["eel"]
        >>> s = WeightedBalanceClassSampler(labels, {"cat": 1, "dog": 1, "eel": 2}, length=8)
        >>> s.samples_per_class
        [2, 2, 4]
        >>> sorted(labels[i] for i in s)  # the eel (one sample) is repeated 4 times
        ['cat', 'cat', 'dog', 'dog', 'eel', 'eel', 'eel', 'eel']
    """

    def __init__(
        self,
        labels: Sequence[object] | np.ndarray | torch.Tensor,
        weight: Sequence[float] | Mapping[object, float],
        length: int,
        seed: int = 0,
    ) -> None:
        if check_len("labels", labels) == 0:
            raise ValueError(f"labels should have at least one sample, but got labels={labels!r}")
        self.length = check_int("length", length, low=0)
        self.seed = check_seed(seed)
        self.epoch = 0
        #: the sorted distinct labels, and how many samples carry each
        self.classes, sizes, self._members = _group(labels)
        self.class_sizes: list[int] = sizes.tolist()
        self._starts = np.concatenate([[0], np.cumsum(sizes)])  # (C + 1,) class c's slice
        weights, keys = _align(weight, self.classes)
        #: draws per class this and every epoch, aligned with ``classes``; sums to ``length``
        self.samples_per_class = _apportion("weight", weights, self.length, keys)

    def epoch_order(self) -> torch.Tensor:
        r"""The epoch's ``length`` indices, ``(length,)``: a pure function of ``(seed, epoch)``."""
        rng = _rng(self.seed, self.epoch)
        out = np.empty(self.length, dtype=self._members.dtype)  # (length,)
        at = 0
        for c, k in enumerate(self.samples_per_class):
            members = self._members[self._starts[c] : self._starts[c + 1]]  # (n,) this class
            n = members.size
            full, rest = divmod(k, n)
            # every member `full` times (only when k > n), written as a (full, n) block
            out[at : at + full * n].reshape(full, n)[:] = members
            at += full * n
            # then `rest < n` distinct members, without replacement
            out[at : at + rest] = members[rng.choice(n, rest, replace=False, shuffle=False)]
            at += rest
        rng.shuffle(out)  # classes were laid out one after another: mix them
        return torch.from_numpy(out)

    def indices(self) -> torch.Tensor:
        r"""What ``iter()`` yields, as a tensor: the epoch's order (this sampler is not split)."""
        return self.epoch_order()

    def _chunks(self) -> Iterator[list[int]]:
        for chunk in self.indices().split(1 << 16):
            yield chunk.tolist()

    def __iter__(self) -> Iterator[int]:
        return chain.from_iterable(self._chunks())  # drawn at the first next()

    def __len__(self) -> int:
        return self.length

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch: each ``(seed, epoch)`` pair draws its own epoch, the same on all ranks.

        Args:
            epoch: epoch number (an integer; call it with the same value on every rank).
        """
        self.epoch = check_int("epoch", epoch)
