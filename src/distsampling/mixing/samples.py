r"""Which sample: source ``k``'s item ``j`` is sample ``index_shuffle(j % size_k, size_k, key)``
of its pass ``j // size_k``, the key drawn from ``(seed, k, pass)``: all of a source once, in a
new order, before any twice. Every source and pass of a block in one cipher call.

References:
    distsampling/scale/cipher.py (the Feistel cipher and its cycle walking)
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from ..scale.cipher import _MIN_BITS, _ROUNDS, _feistel, _feistel_int, _round_keys, epoch_key

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


class _Samples:
    """The sampler's items as indices into the ConcatDataset (``sizes``, ``offsets``, ``seed``,
    ``shuffle`` and the ``_keys`` cache are the sampler's)."""

    def _key(self, k: int, pass_: int) -> int:
        return epoch_key(epoch_key(self.seed, k), pass_)

    def _round_keys(self, k: int, pass_: int) -> tuple[int, ...]:
        """The round keys of source ``k``'s pass ``pass_``, kept: each pass is asked again and
        again (and more of them than the cipher's own cache holds)."""
        keys = self._keys.get((k, pass_))
        if keys is None:
            keys = self._keys[k, pass_] = _round_keys(self._key(k, pass_))
        return keys

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
            low, span = int(passes.min()), int(passes.max() - passes.min()) + 1  # a few passes
            group = ks * span + passes - low  # (P,) each (source, pass)
            present = np.flatnonzero(np.bincount(group, minlength=len(self.sizes) * span))
            keys = np.zeros((_ROUNDS, len(self.sizes) * span), np.uint32)  # (8, G)
            keys[:, present] = np.array(
                [self._round_keys(g // span, g % span + low) for g in present.tolist()], np.uint32
            ).T.reshape(_ROUNDS, -1)
            local = _cipher(local, keys[:, group], bits_of[ks], sizes)
        return offset_of[ks] + local
