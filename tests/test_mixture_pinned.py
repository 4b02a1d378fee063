"""MixtureSampler's streams at K = 100 with float weights, pinned: the indices it yields stay
the indices it yielded when they were written down, through every speed-up of its routing,
counting and cipher.

The weights are those users compute (``n_tokens / total``, floats of 16 digits, rounded to
``2**31`` units) and decimal ones, over a long tail of 100 sources (``10**6 / (k+1)**1.3``
scaled to the epoch), at Megatron's scale (``N = 1e10``, ``W = 1024``, ``b = 4``) and on small
sources read in many passes. Each stream is iteration on some rank (the first indices from
Python ints, then the growing blocks), an epoch past the first, a resume on another grid, a
schedule, ``batch_at``, ``sources`` and ``when_read``. What is pinned is each stream's length
and a digest of each 4,096 values (SHA-256 of their int64 bytes, 12 hex digits): a change names
the first stretch that moved. The digests were computed from the sampler before its routing
was rewritten (the reference of tests/test_mixture.py proves that code on small inputs).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from functools import partial
from itertools import islice

import numpy as np
import pytest

from distsampling.mixing.sampler import MixtureSampler

PerRank = partial(MixtureSampler, layout="per_rank")  # the layout these digests were pinned on

N = 10**10
TAIL = [int(10**6 / (k + 1) ** 1.3) + 1 for k in range(100)]  # the long tail of 100 sources
CHUNK = 4096


def long_tail(n: int) -> tuple[list[int], list[float], list[float]]:
    """Sizes of the tail scaled to ``n``, weights ``n_tokens / total`` and ``size**0.3`` (3 places)."""
    sizes = [max(1, n * s // sum(TAIL)) for s in TAIL]
    return sizes, [s / sum(sizes) for s in sizes], [round(s**0.3, 3) for s in sizes]


def read(s: MixtureSampler, count: int) -> list[int]:
    return list(islice(iter(s), count))


def computed_rank0() -> list[int]:
    sizes, computed, _ = long_tail(N)
    return read(PerRank(sizes, computed, 4, 1024, 0, epoch_length=N), 1 << 17)


def computed_rank777_epoch3() -> list[int]:
    sizes, computed, _ = long_tail(N)
    s = PerRank(sizes, computed, 4, 1024, 777, seed=5, epoch_length=N // 7)
    s.set_epoch(3)
    return read(s, 20000)


def decimal_rank5() -> list[int]:
    sizes, _, decimal = long_tail(N)
    return read(PerRank(sizes, decimal, 4, 1024, 5, epoch_length=N), 1 << 16)


def unshuffled_rank1023() -> list[int]:
    sizes, computed, _ = long_tail(N)
    s = PerRank(sizes, computed, 4, 1024, 1023, shuffle=False, epoch_length=N)
    return read(s, 1 << 15)


def three_computed_w8() -> list[int]:
    sizes = [N * 90 // 100, N * 9 // 100, N - N * 90 // 100 - N * 9 // 100]
    weights = [s / sum(sizes) for s in sizes]
    return read(PerRank(sizes, weights, 8, 8, 3, epoch_length=N), 1 << 16)


def small_sources_many_passes() -> list[int]:
    """Sources of 1 to 2,500 samples, read over three epochs of 200,000: every pass its own key."""
    sizes, computed, _ = long_tail(20000)
    s = PerRank(sizes, computed, 3, 16, 2, seed=11, epoch_length=200000)
    out = []
    for epoch in range(3):
        s.set_epoch(epoch)
        out += list(s)
    return out


def elastic_resume() -> list[int]:
    """5,000 indices on 1024 ranks of 4, then the rest on 96 ranks of 5 (rank 7)."""
    sizes, computed, _ = long_tail(N)
    first = PerRank(sizes, computed, 4, 1024, 0, epoch_length=N)
    head = read(first, 5000)
    resumed = PerRank(sizes, computed, 5, 96, 7, epoch_length=N)
    resumed.load_state_dict(first.state_dict())
    return head + read(resumed, 30000)


def schedule_rank63() -> list[int]:
    sizes, computed, decimal = long_tail(N)
    third = [1.0 / (k + 1) for k in range(100)]
    s = PerRank(sizes, [(0, computed), (70, decimal), (300, third)], 4, 64, 63,
                       epoch_length=N)  # fmt: skip
    return read(s, 1 << 15)


def batches() -> list[int]:
    sizes, computed, _ = long_tail(N)
    s = PerRank(sizes, computed, 4, 1024, 0, epoch_length=N)
    steps = [0, 1, 1023, 1024, 123456789, N // 4096 - 1]
    return [i for t in steps for batch in s.batch_at(t) for i in batch]


def sources_and_when_read() -> list[int]:
    sizes, computed, _ = long_tail(N)
    s = PerRank(sizes, computed, 4, 1024, 9, epoch_length=N)
    rng = np.random.default_rng(0)
    positions = np.sort(rng.integers(0, N, 3000))
    ks, js = s.sources(positions)
    near = s.sources(np.arange(10**9, 10**9 + 5000))
    out = [*ks.tolist(), *js.tolist(), *near[0].tolist(), *near[1].tolist()]
    for k, i, pass_ in [(0, 0, 0), (1, 12345, 0), (57, 999, 0), (99, 7, 0), (30, 0, 0)]:
        out += list(s.when_read(k, i, pass_))
    return out


STREAMS: dict[str, Callable[[], list[int]]] = {
    f.__name__: f
    for f in [computed_rank0, computed_rank777_epoch3, decimal_rank5, unshuffled_rank1023,
              three_computed_w8, small_sources_many_passes, elastic_resume, schedule_rank63,
              batches, sources_and_when_read]
}  # fmt: skip


def digests(values: list[int]) -> tuple[int, list[str]]:
    """The length and the digest of each 4,096 values (their int64 bytes)."""
    a = np.array(values, dtype=np.int64)
    chunks = [a[i : i + CHUNK].tobytes() for i in range(0, len(a), CHUNK)]
    return len(a), [hashlib.sha256(c).hexdigest()[:12] for c in chunks]


PINNED: dict[str, tuple[int, list[str]]] = {
    'computed_rank0': (131072, ['70d6b3dc21b6', '96e13504cab4', '794f8c58510d', '8be88e7d3eb8', 'f1cdbed9e589', 'e5c552970303', '490a90551710', '34f4ab7d9d6c', 'ceae0f7c0dc4', '607d96acde8e', 'f5f9538ba222', '9b0525b18be5', 'f40a36135fd4', '7621541b8f5a', '62375dd684cf', '8e0ef7aa8f76', '1cbdec588fcf', '75052543c175', '5a7843cd588d', '1636418dce42', 'e8fe199d7086', 'b000acaaf1f4', '69e8ba7cf292', '6d8d98629a42', 'ccb961237813', '22ea713f1724', '6da900c6cc33', '0111cb289ff0', '376ef3fe40b4', 'ec8551030a2a', '352907d68d1e', '19fd963f2ffc']),
    'computed_rank777_epoch3': (20000, ['a727221d2b7d', '01abde9610b6', 'e23c983512fd', '3fd136c04967', 'f24b59938d61']),
    'decimal_rank5': (65536, ['fad87ef8693e', 'bb497d94a1d4', '6b1e347ffe2d', '8f08b907925f', 'efa04492addb', '2b7027252fed', 'e7610e9a306e', '3e6cbc5536d0', 'a7928a8b6ba5', '368871f983db', 'fc9e3dbddd8f', 'c261a384ebd6', '4d1a251be050', 'cab88be56189', 'a65bf8732bf2', '77aff405a9ee']),
    'unshuffled_rank1023': (32768, ['0b843e440b99', '474e068a4e9e', '4b4cae6e181b', '8f58ab7fda69', '06fa2bfbf454', 'db3ed4216096', 'b8220ba52f50', 'e8170c98f5f6']),
    'three_computed_w8': (65536, ['f2b6b02f3eec', '73d9c37dd358', '0d559d76ae99', 'afedb6dbc4ef', '5c5aad3641a0', 'b52d5d2d0426', 'cbd73c02906e', 'cfee2179900e', '70ae0d340a5d', 'c2ba1593de89', '142fddecdd1f', '526a91e033d6', 'dd3c2c316c5c', 'd4ff276c00c2', '10751bfbeaba', '1ec90912a1ad']),
    'small_sources_many_passes': (37500, ['c2b0ca60099f', 'd4bfce95a2be', '224ace408673', '154d08c32ce1', 'b6732c056033', 'ff02dc099405', '85b8f6420029', '35ee653adf0f', 'bf1ffa2caa72', '4903bf0bae78']),
    'elastic_resume': (35000, ['70d6b3dc21b6', '5ce9a846712f', '8d9e0d44fbaa', 'e697769dae5a', '37b0253a8dce', 'c00f4892841c', 'cd853d8a0e7e', '23b9bffc1fce', '09ddd3ccb5c6']),
    'schedule_rank63': (32768, ['30e33bd7edea', '2f8e6f3f9e8a', '7bd2686814be', 'cba1b06ff901', '5aa8a308ef1c', 'd934958ac1d5', '906a634c09d7', 'ed8659320ecc']),  # each rank's phases carried across the changes (its first 70 steps, the same)
    'batches': (24576, ['e0cdc12d1261', '2598a9a59a2f', '3e82ea8f2859', '473918611d1a', '4768fda1a7e8', '47ae36bfcfbf']),
    'sources_and_when_read': (16020, ['52414eb04aa4', '58d9b98108f7', '6a9fa90211b6', 'eac19bc3a600']),
}  # fmt: skip


@pytest.mark.parametrize("name", list(STREAMS))
def test_each_stream_at_100_float_weights_is_the_one_pinned(name):
    """Invariant: the stream (its length, each 4,096 values' digest) is the one written down
    before the sampler's routing, counting and cipher were made faster."""
    length, got = digests(STREAMS[name]())
    want_length, want = PINNED[name]
    assert length == want_length
    moved = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
    assert moved is None, f"{name}: values [{moved * CHUNK}, {(moved + 1) * CHUNK}) moved"


if __name__ == "__main__":  # print the pins of the code as it is
    for name, f in STREAMS.items():
        print(f"    {name!r}: {digests(f())!r},")
