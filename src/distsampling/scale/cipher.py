r"""The cipher: any positions of a seeded permutation of ``[0, n)``, without building it.

``torch.randperm(n)`` draws the whole order: O(n) time and memory. ``index_shuffle(positions, n,
seed)`` evaluates a keyed bijection σ of ``[0, n)`` only where asked (a rank: ``σ(rank),
σ(rank + W), ...``), for any ``n < 2**63``; ``index_unshuffle`` is σ⁻¹; ``epoch_key`` keys one
epoch of a seed. ``IndexShuffleSampler`` (index_shuffle.py) and ``MixtureSampler`` (mixture.py)
read their orders from it; this file and ``_validate.py`` (its argument checks) copy on their own.

- Domain ``[0, 2**k)``, ``k = max(6, bit_length(n - 1))``. Cycle walking: encrypt, and encrypt
  again while the result is ≥ n; only those positions walk on, under 2 passes on average as
  ``2**k < 2n`` (above 64). A domain within max(4096, len(positions)) is encrypted once, whole.
- Feistel network: ``x = L * 2**b + R``, ``L`` the ``a = k // 2`` high bits, ``R`` the ``b = k - a``
  low ones; round ``i``: ``(L, R) -> (R, L ^ F_i(R))``, 8 rounds. With ``k`` odd the halves swap
  widths each round (``k <= 63``: 2**64 does not fit int64); 8 is even, so they end in place.
- Round function, ``w`` bits out (the width of ``L``): ``h = (R ^ K_i) * 0x604BAA5D % 2**32;
  h ^= h >> 15; F_i(R) = (h * 0x43D6CE97 % 2**32) >> (32 - w)``, the top bits of a
  xorshift-multiply hash (multipliers from hash-prospector). The halves are numpy uint32:
  unsigned products wrap modulo 2**32 by definition (no signed overflow), on every platform.
  ``K_i`` is the high half of output ``i + 1`` of splitmix64 seeded with ``mix64(seed % 2**64)``.

Why: with 4 rounds (Luby–Rackoff's minimum) positions one bit apart in ``L`` hold visibly
related indices at every size tried (2**6 to 2**20); 6 rounds pass from 2**9 up, 8 from 2**6;
below 2**6 (halves of 1-2 bits) even 8 leave neighbouring indices correlated. A round is 6
in-place numpy ops (2 multiplies) on uint32 halves of cache-sized blocks of at most 2**15, all 8
about 15 ns a position on one CPU core (int64 torch ops took 35: twice the bytes, and a call's
overhead each). Not a cryptographic cipher; on ``2**k`` itself it reaches only even
permutations, as any Feistel network does. An int, or a list of up to 16, skips numpy: the same
rounds on Python ints (``_feistel_int``), a small part of numpy's fixed cost per call (``make
bench``: "A few positions a call"), for ``where`` and a user's loop over a few indices.

References:
    J. Black, P. Rogaway, "Ciphers with Arbitrary Finite Domains", CT-RSA 2002 (cycle walking)
    M. Luby, C. Rackoff, "How to Construct Pseudorandom Permutations from Pseudorandom
    Functions", SIAM J. Comput. 1988; tensorflow/core/kernels/random_index_shuffle.cc (the same
    idea around a Simon cipher); github.com/skeeto/hash-prospector; G. Steele et al., "Fast
    Splittable Pseudorandom Number Generators", OOPSLA 2014 (splitmix64)
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from functools import lru_cache

import numpy as np
import torch

from .._checks import _SEED_HIGH, _SEED_LOW, check_int

__all__ = ["epoch_key", "index_shuffle", "index_unshuffle"]

# blocks within torch's grain size (32768): each op runs on one thread, in that thread's cache
_ROUNDS, _MIN_BITS, _CACHE, _TABLE = 8, 6, 1 << 15, 1 << 12
_M1, _M2, _MASK32, _MASK64 = 0x604BAA5D, 0x43D6CE97, 2**32 - 1, 2**64 - 1
_GOLDEN = 0x9E3779B97F4A7C15  # splitmix64's increment
_FEW = 16  # at most this many positions given as ints: the cipher on Python ints, no arrays
_UINT64 = getattr(torch, "uint64", None)  # numpy's uint64 (torch >= 2.3): int64 once in [0, n)


def _mix64(z: int) -> int:
    """splitmix64's output function: a bijection of ``[0, 2**64)`` that scatters neighbours."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
    return z ^ (z >> 31)


@lru_cache(maxsize=64)  # a loop over a few positions asks the same seed's keys again
def _round_keys(seed: int) -> tuple[int, ...]:
    state = _mix64(seed % 2**64)  # seeds one splitmix64 step apart share no round key
    return tuple(_mix64((state + (i + 1) * _GOLDEN) & _MASK64) >> 32 for i in range(_ROUNDS))


def _feistel_int(x: int, keys: Sequence[int], bits: int, inverse: bool) -> int:
    """:func:`_feistel` on one Python int, line for line: for a few positions, where numpy's
    fixed cost per call (microseconds) is all of the cost."""
    a, b = bits // 2, bits - bits // 2
    hi, lo = x >> b, x & ((1 << b) - 1)
    for i in range(_ROUNDS)[::-1] if inverse else range(_ROUNDS):
        if inverse:
            hi, lo = lo, hi
        w = a if i % 2 == 0 else b
        t = ((lo ^ keys[i]) * _M1) & _MASK32
        t ^= t >> 15
        hi ^= ((t * _M2) & _MASK32) >> (32 - w)
        if not inverse:
            hi, lo = lo, hi
    return (hi << b) | lo


def _few(values: object, n: int) -> list[int] | None:
    """``values`` as a list of ints if it is one int or a short list or tuple of them, all in
    ``[0, n)``; ``None`` otherwise (the array path then checks, and names what is wrong)."""
    few = [values] if not isinstance(values, (list, tuple)) else values
    if len(few) > _FEW or any(isinstance(v, (bool, np.bool_, torch.Tensor)) for v in few):
        return None
    try:
        ints = [operator.index(v) for v in few]
    except TypeError:
        return None
    return ints if all(0 <= v < n for v in ints) else None


def _feistel(
    x: np.ndarray, keys: Sequence[int] | np.ndarray, bits: int | np.ndarray, inverse: bool
) -> np.ndarray:
    """The cipher (or its inverse) on a 1-d int64 array of values in ``[0, 2**bits)``: ``keys``
    the 8 round keys, ``bits`` the width, of all values, or each value's own (``(8, P)`` uint32
    keys, ``(P,)`` int64 widths: a mixture's sources, each its pass and its size)."""
    a, b = bits // 2, bits - bits // 2  # widths of L (high bits) and R (low bits): ints or (P,)
    each = isinstance(keys, np.ndarray)  # a key per value (and a width: bits is (P,))
    u32, out = np.uint32, np.empty_like(x)
    rounds = range(_ROUNDS)[::-1] if inverse else range(_ROUNDS)
    for s in range(0, len(x), _CACHE):  # a block stays in cache
        block, at = x[s : s + _CACHE], slice(s, s + _CACHE)
        bb, wa, wb = (b[at], a[at], b[at]) if each else (b, a, b)
        hi, lo = (block >> bb).astype(u32), (block & ((1 << bb) - 1)).astype(u32)  # (B,) L, R
        shifts = [(32 - w).astype(u32) if each else u32(32 - w) for w in (wa, wb)]  # by parity
        t, u = np.empty_like(lo), np.empty_like(lo)  # two temporaries
        for i in rounds:
            if inverse:  # undo round i: swap back, then L ^= F_i(R) again
                hi, lo = lo, hi
            key = keys[i, at] if each else u32(keys[i])
            # uint32 products wrap modulo 2**32: unsigned arithmetic, defined on every platform
            np.multiply(np.bitwise_xor(lo, key, out=t), u32(_M1), out=t)
            t ^= np.right_shift(t, u32(15), out=u)
            hi ^= np.right_shift(np.multiply(t, u32(_M2), out=t), shifts[i % 2], out=t)
            if not inverse:
                hi, lo = lo, hi
        np.bitwise_or(hi.astype(np.int64) << bb, lo, out=out[at])
    return out


def _as_tensor(values: object) -> torch.Tensor:
    try:
        return torch.as_tensor(values)
    except TypeError:  # torch takes no list of numpy's unsigned scalars: numpy's array of them
        return torch.as_tensor(np.asarray(values))


def _check_values(name: str, values: object, n: int) -> torch.Tensor:
    """``values`` as an int64 tensor; raise unless it holds integers in ``[0, n)``."""
    try:
        x = values if isinstance(values, torch.Tensor) else _as_tensor(values)
        if x.numel() == 0 and x is not values:  # [] holds no floats
            x = x.long()
    except (TypeError, ValueError, RuntimeError, OverflowError):
        x = None
    if x is None or x.is_floating_point() or x.is_complex() or x.dtype == torch.bool:
        dtype = "" if x is None else f" of dtype {x.dtype}"
        raise TypeError(
            f"{name} should be an integer tensor or a sequence of integers, "
            f"but got {name}={values!r}{dtype}"
        )
    if x.dtype == _UINT64:  # compared in numpy: torch has few uint64 ops
        u = x.cpu().numpy()
        outside = np.argwhere(u >= n)  # (K, ndim) in C order
        if len(outside):
            _out_of_range(name, outside[0].tolist(), int(u[tuple(outside[0])]), n)
        x = torch.from_numpy(u.astype(np.int64)).to(x.device)
    x = x.to(torch.int64)
    low, high = torch.aminmax(x) if x.numel() else (0, -1)
    if low < 0 or high >= n:
        where = ((x < 0) | (x >= n)).nonzero()[0].tolist()  # the first offending element
        _out_of_range(name, where, int(x[tuple(where)]), n)
    return x


def _out_of_range(name: str, where: list[int], value: int, n: int) -> None:
    at = f"[{', '.join(map(str, where))}]" if where else ""
    raise ValueError(f"{name} should be in [0, n) = [0, {n}), but got {name}{at}={value} for n={n}")


def _walk(name: str, values: object, n: object, seed: object, inverse: bool) -> torch.Tensor:
    n = check_int("n", n, low=0, high=2**63 - 1)
    seed = check_int("seed", seed, low=_SEED_LOW, high=_SEED_HIGH)
    bits, keys = max(_MIN_BITS, (n - 1).bit_length()), _round_keys(seed)
    few = None if isinstance(values, (torch.Tensor, np.ndarray)) else _few(values, n)
    if few is not None:  # an int, or a few: the same cipher on Python ints, walked one by one
        out = []
        for v in few:
            v = _feistel_int(v, keys, bits, inverse)
            while v >= n:
                v = _feistel_int(v, keys, bits, inverse)
            out.append(v)
        return torch.tensor(out if isinstance(values, (list, tuple)) else out[0], dtype=torch.int64)
    x = _check_values(name, values, n)
    values = x.reshape(-1).cpu().numpy()  # (P,) the cipher runs on the CPU, in numpy
    table = None  # a domain no larger than the positions: encrypt all of it once, look it up
    if 2**bits <= max(_TABLE, values.size):
        table = _feistel(np.arange(2**bits, dtype=np.int64), keys, bits, inverse)

    def encrypt(v: np.ndarray) -> np.ndarray:
        return _feistel(v, keys, bits, inverse) if table is None else table[v]

    out = encrypt(values)
    todo = np.flatnonzero(out >= n)  # cycle walking: only these are encrypted again
    vals = out[todo]
    while len(todo):
        vals = encrypt(vals)
        out[todo] = vals
        still = np.flatnonzero(vals >= n)
        todo, vals = todo[still], vals[still]
    return torch.from_numpy(out).to(x.device).view(x.shape)


def index_shuffle(positions: torch.Tensor | Sequence[int], n: int, seed: int) -> torch.Tensor:
    r"""The indices at ``positions`` of the permutation of ``[0, n)`` that ``seed`` picks: an int64
    tensor of the positions' shape, on their device (computed on the CPU), the same on every
    platform.

    Args:
        positions: integers in ``[0, n)``: a tensor of any shape and integer dtype, or a sequence.
        n: the length of the permuted range, in ``[0, 2**63 - 1]``.
        seed: any integer ``torch.Generator.manual_seed`` takes (equal modulo ``2**64``, equal
            permutations). Key an epoch with :func:`epoch_key`, never with ``seed + epoch``.

    Examples:
        >>> index_shuffle(torch.arange(10), 10, seed=0)  # a whole epoch
        tensor([8, 5, 1, 4, 7, 6, 2, 9, 3, 0])
    """
    return _walk("positions", positions, n, seed, False)


def index_unshuffle(indices: torch.Tensor | Sequence[int], n: int, seed: int) -> torch.Tensor:
    r"""The inverse of :func:`index_shuffle`: the positions that hold ``indices``.

    Args:
        indices: integers in ``[0, n)``, a tensor of any shape and integer dtype or a sequence.
        n: the length of the permuted range, in ``[0, 2**63 - 1]``.
        seed: the seed the permutation was drawn with.

    Examples:
        >>> index_unshuffle(torch.tensor([8, 5, 1]), 10, seed=0)  # at positions 0, 1 and 2
        tensor([0, 1, 2])
    """
    return _walk("indices", indices, n, seed, True)


def epoch_key(seed: int, epoch: int) -> int:
    r"""The seed of one epoch's permutation: ``mix64((mix64(seed % 2**64) + epoch) % 2**64)``.

    Adjacent epochs and adjacent seeds get unrelated orders (``seed + epoch`` would give epoch 1
    of seed 0 the order of epoch 0 of seed 1); the epochs of one seed get distinct keys.

    Args:
        seed: the base seed, the same on every rank (any integer ``torch.Generator`` takes).
        epoch: the epoch number, in ``[0, 2**64 - 1]``.

    Examples:
        >>> n, seed, epoch, rank, world = 10, 0, 3, 1, 2  # rank 1's share of epoch 3
        >>> index_shuffle(torch.arange(rank, n, world), n, epoch_key(seed, epoch))
        tensor([7, 2, 9, 3, 5])
    """
    seed = check_int("seed", seed, low=_SEED_LOW, high=_SEED_HIGH)
    epoch = check_int("epoch", epoch, low=0, high=_MASK64)
    return _mix64((_mix64(seed % 2**64) + epoch) & _MASK64)
