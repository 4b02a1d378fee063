r"""WeightedBalanceClassSampler: epochs of exactly ``length`` indices with chosen class shares.

torch's ``WeightedRandomSampler`` weighs *samples*, so class counts vary by epoch; catalyst's
``BalanceClassSampler`` forces *equal* ones. Here each class's count is its weight's share of
``length``, rounded by largest remainders so that the counts add up to ``length`` exactly.

References: catalyst/data/sampler.py (BalanceClassSampler); torch/utils/data/sampler.py
    (WeightedRandomSampler); Hamilton's (largest remainder) apportionment method.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import sys
from collections.abc import Iterator, Mapping, Sequence
from itertools import chain

import numpy as np
import torch
from torch.utils.data import Sampler

from ._checks import _index_dtype, check_int, check_int64, check_len, check_seed

__all__ = ["WeightedBalanceClassSampler", "largest_remainder_counts"]

Labels = Sequence[object] | np.ndarray | torch.Tensor  # one label per sample
Weights = Sequence[float] | Mapping[object, float]  # per class: in label order, or label -> weight


def _reals(name: str, weights: list[object], keys: Sequence[object]) -> tuple[list, np.ndarray]:
    """The weights as exact Python ints and floats, and as float64; raise at the first bad one."""
    if set(map(type, weights)) <= {int, float}:  # the usual case, checked at numpy's speed
        with contextlib.suppress(OverflowError):  # an int past float's range: one by one below
            w = np.array(weights, dtype=np.float64)  # (C,)
            if np.isfinite(w).all() and (w >= 0).all():
                return weights, w
    exact = []
    for key, w in zip(keys, weights):
        at = f"{name}[{key!r}]"
        if isinstance(w, bool) or not isinstance(w, numbers.Real):
            raise TypeError(f"{at} should be a real number, but got {at}={w!r}")
        if isinstance(w, numbers.Integral) and w > sys.float_info.max:  # no float holds it
            largest = sys.float_info.max
            raise ValueError(
                f"{at} should be at most {largest!r} (the largest float64), but got {at}={w!r}"
            )
        if not math.isfinite(w) or w < 0:
            raise ValueError(f"{at} should be finite and >= 0, but got {at}={w!r}")
        exact.append(int(w) if isinstance(w, numbers.Integral) else float(w))
    return exact, np.array(exact, dtype=np.float64)


def _apportion(name: str, total: int, weights: list[object], keys: Sequence[object]) -> list[int]:
    exact, w = _reals(name, weights, keys)  # (C,) the weights, exact, and as float64
    if not w.any():
        raise ValueError(f"{name} should have a positive sum, but got {name}={weights!r}")
    # integers: a float is m * 2**(e - 53) (m a 53-bit int), so in units of 2**-shift every weight
    # is an int a_i, and class i's quota total * a_i / A (A = sum a) is divmod(total * a_i, A)
    man, ex = np.frexp(w[w > 0])  # (P,) positive weights = man * 2**ex, 0.5 <= man < 1
    low = int(ex.min())
    shift = max(0, 53 - low)
    floats_exact = w.tolist() == exact  # no int past 2**53, rounded by float64
    if floats_exact:  # A per exponent, in 18-bit slices of the mantissas: each float sum exact
        m, x = np.ldexp(man, 53).astype(np.int64), ex - low  # (P,) w = m * 2**(x + low - 53)
        parts = ((s, np.bincount(x, (m >> s) & (2**18 - 1))) for s in (0, 18, 36))
        A = sum(int(t) << (s + j + low - 53 + shift) for s, ts in parts for j, t in enumerate(ts))
    else:
        A = sum(p * (2**shift // q) for p, q in (v.as_integer_ratio() for v in exact))
    distinct = w if floats_exact else np.array(exact, dtype=object)  # (C,) equal iff equal

    def divmods(i: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # exact, per distinct weight:
        u, back = np.unique(distinct[i], return_inverse=True)  # (U,) and each class's, (len(i),)
        ratios = (v.as_integer_ratio() for v in u.tolist())
        pairs = [divmod(total * p * (2**shift // q), A) for p, q in ratios]  # floor, remainder
        return np.array(pairs, dtype=object).reshape(-1, 2), back  # (U, 2) Python ints

    C, fast = w.size, floats_exact and total < 2**52
    err = (total * 2.0**-40 if fast else 0.0) + 2.0**-50  # each remainder within err of frac
    if fast:  # float64 quotas, off the exact ones by < total * 2**-50: most floors are sure
        bits = A.bit_length()
        q = total * (np.ldexp(w, shift - bits) / (A / (1 << bits)))  # (C,) total * w_i / sum(w)
        counts = np.floor(q)
        frac, counts = q - counts, counts.astype(np.int64)  # (C,) (C,)
    else:  # an int past 2**53 or a total past 2**52: every count from the exact divmods
        frac, counts = np.zeros(C), np.zeros(C, dtype=np.int64 if total < 2**62 else object)
    # a floor is undecided where the quota may lie across an integer (never below 0)
    i = np.flatnonzero((frac < err) & (counts > 0) | (frac + err >= 1) | (not fast))
    d, back = divmods(i)
    counts[i], frac[i] = d[back, 0], (d[:, 1] / A)[back]  # exact floors; remainders rounded
    seats = total - int(counts.sum())  # 0 <= seats < C left: to the largest remainders
    if seats > 0:
        top = np.sort(frac)  # (C,)
        t = top[C - seats] - err  # >= seats remainders are >= t: one below t gets no seat
        s = top[C - seats - 1] + err  # <= seats remainders are > s: one above s gets a seat
        sure, i = frac - err > s, np.flatnonzero((frac - err <= s) & (frac + err >= t))
        d, back = divmods(i)  # the undecided ones, by their exact remainders
        rank = np.unique(-d[:, 1], return_inverse=True)[1][back]  # descending, ties alike
        counts[sure] += 1
        counts[i[np.lexsort((i, rank))][: seats - int(sure.sum())]] += 1  # ties: the earlier class
    return counts.tolist()


def _distinct_picks(rng: np.random.Generator, n: np.ndarray, k: np.ndarray) -> np.ndarray:
    r"""For every class ``c``, ``k[c] <= n[c]`` distinct values of ``range(n[c])``, each set of
    that size equally likely; as a mask over the classes' values laid end to end, ``(sum(n),)``.

    Values are drawn with replacement until ``k[c]`` distinct ones are held, every class a round at
    a time; past half a class, its ``n - k`` values left out are drawn instead, so a draw is new
    with chance >= 1/2 and the rounds stay few. The rule treats every value alike: every set is
    equally likely.
    """
    flip = 2 * k > n  # (C,) draw the values left out instead
    missing = np.where(flip, n - k, k)  # (C,) <= n // 2 still to draw
    offset = np.cumsum(n) - n  # (C,) class c's values are offset[c] + range(n[c])
    mask = np.zeros(int(n.sum()), dtype=bool)  # (sum(n),) the values drawn so far
    while missing.any():
        c = np.repeat(np.arange(n.size), missing)  # (sum(missing),) the class of each draw
        v, first = np.unique(offset[c] + rng.integers(0, n[c]), return_index=True)
        new = ~mask[v]  # drawn once in this round, and never before
        mask[v[new]] = True
        missing = missing - np.bincount(c[first[new]], minlength=n.size)
    return mask ^ np.repeat(flip, n)  # a left-out class: all its values but the drawn ones


def largest_remainder_counts(weights: Weights, total: int) -> list[int] | dict[object, int]:
    r"""Split ``total`` into integers ``>= 0`` proportional to ``weights``, summing to ``total``.

    Each gets the floor of its exact quota ``total * w / sum(weights)``; the seats left go one
    each to the largest remainders (Hamilton's method), ties to the earlier one.

    Args:
        weights: non-negative finite reals, positive sum: a sequence, or ``label -> weight``.
        total: the number to split, an ``int >= 0``.

    Examples:
        >>> largest_remainder_counts({"a": 0.5, "b": 0.3, "c": 0.2}, 7)  # quotas 3.5, 2.1, 1.4
        {'a': 4, 'b': 2, 'c': 1}
    """
    total = check_int("total", total, low=0)
    if isinstance(weights, Mapping):
        keys = list(weights)
        return dict(zip(keys, _apportion("weights", total, list(weights.values()), keys)))
    if isinstance(weights, (torch.Tensor, np.ndarray)):
        weights = weights.tolist()
    if not isinstance(weights, Sequence):  # a set or a generator has no order to align with
        raise TypeError(f"weights should be a sequence or a mapping, but got weights={weights!r}")
    return _apportion("weights", total, list(weights), range(len(weights)))


def _group(labels: object) -> tuple[list[object], np.ndarray, np.ndarray]:
    """Sorted distinct labels, their counts, and the sample indices grouped by class."""
    arr = labels.detach().cpu().numpy() if isinstance(labels, torch.Tensor) else np.asarray(labels)
    if arr.ndim != 1:
        raise ValueError(f"labels should be 1-D, one label per sample, but got shape {arr.shape}")
    # compact integer labels are counted, O(N); uint64 ones (maybe past int64) are sorted
    compact = arr.dtype.kind in "iu" and np.can_cast(arr.dtype, np.int64)
    if compact and int(arr.max()) - int(arr.min()) <= 4 * arr.size + 1024:
        low = int(arr.min())
        safe = low == 0 and np.can_cast(arr.dtype, np.intp)  # bincount takes it as it is
        shifted = arr if safe else np.subtract(arr, low, dtype=np.int64)  # (N,) >= 0
        counts = np.bincount(shifted)  # (span,) samples per label value
        present = np.flatnonzero(counts)  # (C,) label - low of each class, sorted
        # class codes as narrow as they fit: 8/16-bit ones numpy's argsort below radix-sorts, O(N)
        lookup = np.zeros(counts.size, dtype=np.min_scalar_type(present.size - 1))
        lookup[present] = np.arange(present.size)
        uniques, sizes, codes = present + low, counts[present], lookup[shifted]
    else:
        try:  # any sortable labels (strings, sparse ints, floats): sort them once
            uniques, codes, sizes = np.unique(arr, return_inverse=True, return_counts=True)
        except TypeError as e:
            raise TypeError(f"labels should be mutually sortable, but got labels={labels!r}") from e
    # (N,) sample indices, class after class: numpy radix-sorts 8/16-bit codes, O(N); wider
    # ones (past 65,536 classes) by their 16-bit digits, lowest first, each pass stable
    narrow = codes if codes.dtype.itemsize <= 2 else codes.astype(np.uint16)  # the low digit
    members = np.argsort(narrow, kind="stable")
    for bit in range(16, int(codes.max(initial=0)).bit_length(), 16):
        members = members[np.argsort((codes[members] >> bit).astype(np.uint16), kind="stable")]
    return uniques.tolist(), sizes, torch.from_numpy(members).to(_index_dtype(arr.size)).numpy()


def _align(weight: object, classes: list[object]) -> tuple[list[object], Sequence[object]]:
    """The weights in the order of ``classes`` (the sorted labels), and how errors name them."""
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


class WeightedBalanceClassSampler(Sampler[int]):
    r"""Draw ``length`` indices per epoch, with class counts proportional to per-class weights.

    Every epoch draws ``samples_per_class`` per class (:func:`largest_remainder_counts`, summing
    to ``length``): of ``n`` samples drawn ``k`` times, each ``k // n`` times plus ``k % n``
    distinct ones. The shuffled epoch comes from a generator seeded by ``(seed, epoch)`` alone,
    never a global RNG: ranks that build it and call :meth:`set_epoch` alike draw the same epoch.

    Args:
        labels: one label per sample (list, numpy array or tensor); any sortable values.
        weight: per class (finite, >= 0), in *sorted distinct* label order, or ``label -> weight``.
        length: indices per epoch, an ``int >= 0``.
        seed: base seed, the same on every rank, in ``[-2**63, 2**64 - 1]`` as torch's.

    Examples:
        >>> labels = ["cat"] * 6 + ["dog"] * 3 + ["eel"]
        >>> s = WeightedBalanceClassSampler(labels, {"cat": 1, "dog": 1, "eel": 2}, length=8)
        >>> sorted(labels[i] for i in s)  # 2, 2 and 4 draws: the one eel is repeated 4 times
        ['cat', 'cat', 'dog', 'dog', 'eel', 'eel', 'eel', 'eel']
    """

    def __init__(self, labels: Labels, weight: Weights, length: int, seed: int = 0) -> None:
        if check_len("labels", labels) == 0:
            raise ValueError(f"labels should have at least one sample, but got labels={labels!r}")
        self.length = check_int64("length", length, low=0)
        self.seed = check_seed(seed)
        self.epoch = 0
        self.classes, sizes, self._members = _group(labels)  # sorted distinct labels, ...
        self.class_sizes: list[int] = sizes.tolist()  # ... how many samples carry each
        self._starts = np.concatenate([[0], np.cumsum(sizes)])  # (C + 1,) class c's slice
        self.samples_per_class = _apportion("weight", self.length, *_align(weight, self.classes))

    def epoch_order(self) -> torch.Tensor:
        r"""The epoch's ``length`` indices, ``(length,)``: a pure function of ``(seed, epoch)``."""
        # SeedSequence takes ints >= 0: zigzag 0, -1, 1, -2, ... to 0, 1, 2, 3, ...; the epoch as
        # spawn key pads the seed's words to a fixed 4, so no two pairs feed numpy the same words
        seed, epoch = (2 * v if v >= 0 else -2 * v - 1 for v in (self.seed, self.epoch))
        rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=[epoch]))
        k = np.array(self.samples_per_class, dtype=np.int64)  # (C,) draws per class
        n = np.diff(self._starts)  # (C,) samples per class, laid out class after class
        full, rest = np.divmod(k, n)  # every member `full` times, then `rest < n` distinct ones
        every = np.repeat(self._members, np.repeat(full, n))  # (sum(full * n),)
        some = self._members[_distinct_picks(rng, n, rest)]  # (sum(rest),)
        out = np.concatenate([every, some])  # (length,)
        rng.shuffle(out)  # classes were laid out one after another: mix them
        return torch.from_numpy(out)

    indices = epoch_order  # what iter() yields, as a tensor: this sampler is not split

    def __iter__(self) -> Iterator[int]:  # the epoch is drawn at iter(), then handed out in C
        return chain.from_iterable(chunk.tolist() for chunk in self.indices().split(1 << 16))

    def __len__(self) -> int:
        return self.length

    def set_epoch(self, epoch: int) -> None:
        r"""Set the epoch (an integer, the same on every rank): each ``(seed, epoch)`` its own."""
        self.epoch = check_int("epoch", epoch)
