r"""Which sample: source ``k``'s item ``j`` is sample ``index_shuffle(j % size_k, size_k, key)``
of its pass ``j // size_k``, the key drawn from ``(seed, k, pass)``: all of a source once, in a
new order, before any twice. Every source and pass of a block in one cipher call.

References:
    distsampling/scale/cipher.py (the Feistel cipher and its cycle walking)
"""

from __future__ import annotations

from functools import cached_property, lru_cache

import numpy as np

from ..scale.cipher import (
    _GOLDEN,
    _MASK64,
    _MIN_BITS,
    _ROUNDS,
    _feistel,
    _feistel_int,
    _round_keys,
    epoch_key,
)
from ..scale.cipher import _mix64 as _mix64_int

__all__: list[str] = []

_WALK = 8  # cycle walks left to _cipher's arrays past this many; as few, one Python int each


def _cipher(x: np.ndarray, keys: np.ndarray, bits: np.ndarray, n: np.ndarray) -> np.ndarray:
    """:func:`index_shuffle` of values ``x`` in ``[0, n)``, each its own ``n``, ``bits`` and round
    ``keys`` (``(8, P)`` uint32): the cipher's rounds (its ``_feistel``), and cycle walking."""
    out = _feistel(x, keys, bits, False)
    todo = np.flatnonzero(out >= n)  # encrypt again those that land at n or past it
    while len(todo) > _WALK:
        out[todo] = _feistel(out[todo], keys[:, todo], bits[todo], False)
        todo = todo[out[todo] >= n[todo]]
    for i in todo.tolist():  # the last few walks (a small source's are long): one int each
        v, size, key, w = int(out[i]), int(n[i]), keys[:, i].tolist(), int(bits[i])
        while v >= size:
            v = _feistel_int(v, key, w, False)
        out[i] = v
    return out


def _mix64(z: np.ndarray) -> np.ndarray:
    """The cipher's ``_mix64`` (splitmix64's output function) on a uint64 array: its products
    wrap modulo 2**64, as the masked Python ints do."""
    z = (z ^ (z >> _U30)) * _C1
    z = (z ^ (z >> _U27)) * _C2
    return z ^ (z >> _U31)


_U27, _U30, _U31, _U32 = (np.uint64(x) for x in (27, 30, 31, 32))
_C1, _C2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
# (8, 1) uint64: (i + 1) * golden for round i, modulo 2**64 (the cipher's _round_keys)
_STEPS = np.array([((i + 1) * _GOLDEN) & _MASK64 for i in range(_ROUNDS)], np.uint64)[:, None]


@lru_cache(maxsize=1024)  # bounded: a tiny source asks for a new pass every few reads
def _pass_round_keys(seed: int, k: int, pass_: int) -> tuple[int, ...]:
    """The round keys of source ``k``'s pass ``pass_``: one Python int each (a few reads)."""
    return _round_keys(epoch_key(epoch_key(seed, k), pass_))


class _Samples:
    """The sampler's items as indices into the ConcatDataset (``sizes``, ``offsets``, ``seed``
    and ``shuffle`` are the sampler's)."""

    def _key(self, k: int, pass_: int) -> int:
        return epoch_key(epoch_key(self.seed, k), pass_)

    def _round_keys(self, k: int, pass_: int) -> tuple[int, ...]:
        """The round keys of source ``k``'s pass ``pass_`` (a bounded cache keeps the latest)."""
        return _pass_round_keys(self.seed, k, pass_)

    def _item(self, k: int, j: int) -> int:
        """The dataset index of source ``k``'s ``j``-th read (of all its passes): its pass
        ``j // size``, that pass's order at ``j % size``; one int, for the first index."""
        size = self.sizes[k]  # type: ignore[attr-defined]
        pass_, i = divmod(j, size)
        if self.shuffle:  # type: ignore[attr-defined]  # index_shuffle's cipher and cycle walking
            keys, bits = self._round_keys(k, pass_), max(_MIN_BITS, (size - 1).bit_length())
            i = _feistel_int(i, keys, bits, False)
            while i >= size:
                i = _feistel_int(i, keys, bits, False)
        return self.offsets[k] + i  # type: ignore[attr-defined]

    @cached_property
    def _source_keys(self) -> np.ndarray:
        """``mix64(epoch_key(seed, k))`` of each source, ``(K,)`` uint64: pass ``p``'s key is
        ``mix64(that + p)`` (:func:`epoch_key`), made once."""
        return np.array(
            [_mix64_int(epoch_key(self.seed, k)) for k in range(len(self.sizes))], np.uint64
        )

    def _keys_of(self, ks: np.ndarray, passes: np.ndarray) -> np.ndarray:
        """The round keys of each read's (source, pass), ``(8, P)`` uint32, all at once in
        uint64 arithmetic: however many passes a block holds (a tiny source's), no loop."""
        key = _mix64(self._source_keys[ks] + passes.astype(np.uint64))  # (P,) epoch_key(., p)
        state = _mix64(key)  # (P,) the cipher's _round_keys: mix64(seed), then one a round
        return (_mix64(state[None, :] + _STEPS) >> _U32).astype(np.uint32)  # (8, P)

    @cached_property
    def _by_source(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each source's size, offset and cipher width in bits, ``(K,)`` each: for the blocks,
        made when first asked for (the first index needs none of them)."""
        return self._make_by_source()

    def _make_by_source(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        bits = [max(_MIN_BITS, (n - 1).bit_length()) for n in self.sizes]
        return tuple(np.array(x, np.int64) for x in (self.sizes, self.offsets, bits))

    def _indices(self, ks: np.ndarray, js: np.ndarray) -> np.ndarray:
        """Indices into the ConcatDataset of sources ``ks``'s items ``js``, each ``(P,)``: every
        source and pass in one cipher call (:func:`index_shuffle`'s, a key per value)."""
        size_of, offset_of, bits_of = self._by_source
        sizes = size_of[ks]  # (P,)
        passes, local = np.divmod(js, np.maximum(sizes, 1))  # (P,) (P,)
        if self.shuffle and len(ks):
            local = _cipher(local, self._keys_of(ks, passes), bits_of[ks], sizes)
        return offset_of[ks] + local
