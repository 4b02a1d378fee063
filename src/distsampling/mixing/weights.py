r"""Exact weights: each weight the rational it prints as, and the integers the weight tree uses.

A float is the decimal it prints as (``0.3`` is ``3/10``; a float32 array's, the decimal float32
prints); a ``Fraction`` or an int is itself. The positive weights become integers over their
common denominator; past ``2**31`` in all, rounded to a sum of ``2**31`` by largest remainder, so
each share moves by less than ``2**-31`` (``(1 + m)·2**-31`` with ``m`` positive weights below
``2**-31`` of the sum, each kept at one unit), and all of the tree's arithmetic stays in int64.

References:
    M. Balinski, H. P. Young, "Fair Representation" (largest remainder)
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Sequence
from fractions import Fraction

import numpy as np
import torch

__all__: list[str] = []

UNITS = 2**31  # integer weights past this sum are rounded to it: every product fits int64


def _decimal(text: str) -> tuple[int, int]:
    """The exact ``(numerator, denominator)`` of a decimal as a float prints it: ``"0.3"``,
    ``"1e-05"``, ``"1.5e+20"`` (not reduced: ``"0.5"`` is ``(5, 10)``)."""
    digits, e, exp = text.partition("e")
    whole, _, frac = digits.partition(".")
    if not e:  # most: no exponent
        return int(whole + frac), 10 ** len(frac)
    num, e = int(whole + frac), int(exp) - len(frac)
    return (num * 10**e, 1) if e >= 0 else (num, 10**-e)


Mix = tuple[tuple[int, ...], tuple[int, ...]]  # exact weights: numerators, denominators


def _exact(pairs: Iterable[tuple[int, int]]) -> Mix:
    """``(numerators, denominators)`` of ``(n, d)`` pairs."""
    nums, dens = zip(*pairs)
    return nums, dens


def _decimals(weights: list[float]) -> Mix:
    """:func:`_decimal` of each float, over one denominator: their texts made by one ``repr`` of
    the list and, where none has an exponent (most weights), cut at ``", "`` and ``"."`` into
    whole and fraction, each fraction padded to the longest (``0.5, 0.25`` is ``50, 25`` over
    ``100``)."""
    text = repr(weights)[1:-1]
    if "e" in text:
        return _exact(map(_decimal, text.split(", ")))
    parts = text.replace(", ", ".").split(".")  # (2K,) whole, fraction, whole, fraction, ...
    wholes, fractions = parts[0::2], parts[1::2]
    places = max(map(len, fractions))
    nums = tuple([int(w + f.ljust(places, "0")) for w, f in zip(wholes, fractions)])
    return nums, (10**places,) * len(nums)


def _scalars(name: str, weights: list) -> tuple[list, list[str | None]]:
    """Weights given one by one as 0-d tensors or numpy scalars: each the number it holds, a
    float the decimal its own dtype prints (a float32 ``0.3`` is ``"0.3"``, as in an array)."""
    out, texts = [], []
    for k, w in enumerate(weights):
        if isinstance(w, torch.Tensor):
            if w.numel() != 1:
                raise TypeError(
                    f"{name}[{k}] should be a real number (a tensor of one element), but got "
                    f"{name}[{k}]={w!r}"
                )
            w = w.detach().cpu()
            w = (w.float() if w.dtype == torch.bfloat16 else w).numpy().reshape(())
        if isinstance(w, np.ndarray) and w.size == 1:
            w = w.reshape(())[()]  # the numpy scalar it holds
        if isinstance(w, np.floating):
            out.append(float(w))
            texts.append(str(w))
        elif isinstance(w, np.integer):
            out.append(int(w))
            texts.append(None)
        else:  # a numpy bool stays one, to be refused by name
            out.append(bool(w) if isinstance(w, np.bool_) else w)
            texts.append(repr(w) if type(w) is float else None)
    return out, texts


def _weights(name: str, weights: object, sizes: list[int]) -> Mix:
    """The weights as exact ``(numerators, denominators)``: a float the decimal it prints as."""
    texts = None
    if isinstance(weights, torch.Tensor):  # bfloat16 has no numpy twin: float32 holds it exactly
        weights = weights.detach().cpu()
        weights = (weights.float() if weights.dtype == torch.bfloat16 else weights).numpy()
    if isinstance(weights, np.ndarray):  # a float32 0.3 is "0.3", as float32 prints it
        texts = [str(x) for x in weights.reshape(-1)] if weights.dtype.kind == "f" else None
        weights = weights.tolist()
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Sequence):
        raise TypeError(
            f"{name} should be a sequence of {len(sizes)} numbers, but got {name}={weights!r}"
        )
    weights = list(weights)
    if any(isinstance(w, (torch.Tensor, np.generic, np.ndarray)) for w in weights):
        weights, texts = _scalars(name, weights)  # 0-d tensors, numpy scalars: as their arrays
    if len(weights) != len(sizes):
        raise ValueError(
            f"{name} should hold one weight per source ({len(sizes)}), but got {name}={weights!r}"
        )
    floats = set(map(type, weights)) == {float}  # most weights: checked at once (a NaN sums to NaN)
    if floats and min(weights) >= 0 and sum(weights) < math.inf and all(sizes):
        out = _exact(map(_decimal, texts)) if texts else _decimals(weights)  # checked at once
    else:  # each weight checked in turn, the first bad one named
        out = []
        for k, w in enumerate(weights):
            real = type(w) is float
            if not real and (isinstance(w, bool) or not isinstance(w, numbers.Real)):
                raise TypeError(f"{name}[{k}] should be a real number, but got {name}[{k}]={w!r}")
            if not math.isfinite(w) or w < 0:
                raise ValueError(
                    f"{name}[{k}] should be finite and >= 0, but got {name}[{k}]={w!r}"
                )
            if w > 0 and sizes[k] == 0:
                raise ValueError(
                    f"{name}[{k}]={w!r} should be 0 for a source of length 0: sizes[{k}]=0"
                )
            if not real and isinstance(w, numbers.Rational):
                out.append((int(w.numerator), int(w.denominator)))
            else:  # the decimal it prints as
                out.append(_decimal((texts[k] if texts else None) or repr(float(w))))
        out = _exact(out)
    if not any(out[0]):
        raise ValueError(f"{name} should have a positive sum, but got {name}={weights!r}")
    return out


def _units(weights: Mix) -> list[int]:
    """The integer weights the tree uses: exact up to ``UNITS`` in all, else rounded to ``UNITS``
    by largest remainder, a weight below one unit kept at one: each share within
    ``(1 + m) * 2**-31`` of the given one, ``m`` the weights below one unit (usually none)."""
    nums, dens = weights
    if len(set(dens)) == 1:  # one denominator (floats' decimals): the numerators are the integers
        ints = list(nums)
    else:
        scale = math.lcm(*set(dens))
        ints = [n * (scale // d) for n, d in zip(nums, dens)]
    common = math.gcd(*ints)  # the smallest integers of these shares: 1/3, 1/3, 1/3 is 1, 1, 1
    if common > 1:
        ints = [n // common for n in ints]
    total = sum(ints)
    if total <= UNITS:
        return ints
    small = (total - 1) // UNITS  # n * UNITS < total: below one unit, kept at one
    tiny = (
        [k for k, n in enumerate(ints) if 0 < n <= small]
        if min(filter(None, ints)) <= small
        else []
    )
    rest, left = UNITS - len(tiny), total - sum(ints[k] for k in tiny)
    out, rems = zip(*[divmod(n * rest, left) for n in ints])  # (K,) n * rest = out * left + rems
    out, rems = list(out), list(rems)
    for k in tiny:  # one unit each, never one more
        out[k], rems[k] = 1, -1
    ahead = sorted(range(len(ints)), key=rems.__getitem__, reverse=True)  # ties: smaller k first
    for k in ahead[: UNITS - sum(out)]:  # the largest remainders: one more
        out[k] += 1
    return out


def _text(shares: Sequence[Fraction]) -> str:
    return ", ".join(f"{float(x):.10g}" for x in shares)
