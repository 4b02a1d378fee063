"""Properties of the cipher (cipher.py: index_shuffle, index_unshuffle, epoch_key): index for
index a pure-Python reference written from the module docstring's formulas; a bijection of
[0, n) (whole for short ranges, on samples up to 2**63 - 1) that index_unshuffle inverts; the
statistics of a random permutation, each computed beside torch.randperm's; the scalar path
(an int or a few, on Python ints) against the array path; bad input.

The statistical tests use fixed seeds and are deterministic. Each states its false-alarm rate:
how often a truly random permutation would fail it. torch.randperm is held to the same
threshold in the same test, so a reader sees both figures and that the bar is fair."""

from __future__ import annotations

import math
import re
from statistics import NormalDist

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from distsampling.scale.cipher import epoch_key, index_shuffle, index_unshuffle
from strategies import (
    key_epochs,
    negative_generator_seeds,
    sample_seeds,
    short_shuffle_lengths,
    shuffle_lengths,
    shuffle_positions,
    shuffle_seeds,
)

# --- the reference: Python ints, one position at a time, from the module docstring -------------


def mix64(z: int) -> int:
    """splitmix64's output function."""
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9 % 2**64
    z = (z ^ (z >> 27)) * 0x94D049BB133111EB % 2**64
    return z ^ (z >> 31)


def reference_keys(seed: int) -> list[int]:
    """K_0..K_7: the high 32 bits of the first 8 splitmix64 outputs from mix64(seed % 2**64)."""
    state, keys = mix64(seed % 2**64), []
    for _ in range(8):
        state = (state + 0x9E3779B97F4A7C15) % 2**64
        keys.append(mix64(state) >> 32)
    return keys


def reference_round(v: int, key: int, width: int) -> int:
    """F_i(v): the top ``width`` bits of a 32-bit xorshift-multiply hash of ``v ^ K_i``."""
    h = (v ^ key) * 0x604BAA5D % 2**32
    h ^= h >> 15
    return (h * 0x43D6CE97 % 2**32) >> (32 - width)


def reference_index_shuffle(position: int, n: int, seed: int) -> int:
    """Encrypt on [0, 2**k), k = max(6, bit_length(n - 1)), until the result is below n."""
    k = max(6, (n - 1).bit_length())
    a, b = k // 2, k - k // 2  # bits of the left (high) and right (low) halves
    keys, x = reference_keys(seed), position
    while True:
        left, right = divmod(x, 2**b)
        for i, key in enumerate(keys):  # the left half is a bits wide in even rounds, b in odd
            left, right = right, left ^ reference_round(right, key, a if i % 2 == 0 else b)
        x = left * 2**b + right
        if x < n:
            return x


@given(n=shuffle_lengths, seed=shuffle_seeds, data=st.data())
def test_index_shuffle_equals_the_pure_python_reference(n, seed, data):
    """Invariant: index for index the reference (Python ints, per position, cycle walking
    included) for any length up to 2**63 - 1 and any seed torch.Generator takes."""
    positions = data.draw(shuffle_positions(n), label="positions")
    ours = index_shuffle(torch.tensor(positions, dtype=torch.int64), n, seed)
    assert ours.tolist() == [reference_index_shuffle(p, n, seed) for p in positions]


# --- a bijection, and index_unshuffle its inverse ----------------------------------------------


@pytest.mark.parametrize("seed", [0, 1, 2**64 - 1])
def test_every_length_to_130_and_around_each_power_of_two_to_2048_is_permuted(seed):
    """Invariant: for every n in [0, 130] (all of the 64-element minimum domain and the next
    two) and each power of two from 256 to 2048 and its neighbours, the whole range
    index_shuffle(arange(n)) sorted is arange(n), and index_unshuffle brings it back."""
    lengths = [*range(131), *(2**k + d for k in range(8, 12) for d in (-1, 0, 1)), 1999]
    for n in lengths:
        order = index_shuffle(torch.arange(n), n, seed)
        assert torch.equal(order.sort().values, torch.arange(n)), n
        assert torch.equal(index_unshuffle(order, n, seed), torch.arange(n)), n


@given(n=short_shuffle_lengths, seed=shuffle_seeds)
def test_a_whole_short_range_is_permuted_and_unshuffled_back(n, seed):
    """Invariant: for any n up to 2000 and any seed, index_shuffle(arange(n)) is a permutation
    of arange(n), and index_unshuffle of it is arange(n) again."""
    order = index_shuffle(torch.arange(n), n, seed)
    assert torch.equal(order.sort().values, torch.arange(n))
    assert torch.equal(index_unshuffle(order, n, seed), torch.arange(n))


@pytest.mark.parametrize("n", [2**40 + 7, 5_850_000_000, 2**63 - 1])
@given(seed=shuffle_seeds, sample_seed=sample_seeds)
def test_a_huge_range_is_permuted_on_a_sample_of_positions(n, seed, sample_seed):
    """Invariant: on 2,000 distinct positions (both ends included) the indices are in [0, n)
    and distinct (no two positions to one index); index_unshuffle(index_shuffle(p)) == p, and
    index_shuffle(index_unshuffle(i)) == i for 2,000 indices."""
    g = torch.Generator().manual_seed(sample_seed)
    ends = torch.tensor([0, 1, n - 2, n - 1])
    positions = torch.cat([ends, torch.randint(0, n, (2000,), generator=g)]).unique()
    indices = index_shuffle(positions, n, seed)
    assert 0 <= indices.min() and indices.max() < n
    assert len(indices.unique()) == len(positions)
    assert torch.equal(index_unshuffle(indices, n, seed), positions)
    some = torch.cat([ends, torch.randint(0, n, (2000,), generator=g)])
    assert torch.equal(index_shuffle(index_unshuffle(some, n, seed), n, seed), some)


@given(seed=negative_generator_seeds)
def test_seeds_equal_modulo_2_64_give_the_same_permutation(seed):
    """Invariant: a negative seed and its twin seed + 2**64 (both in torch.Generator's range,
    where they seed the same state) key the same permutation."""
    p = torch.arange(0, 5_850_000_000, 58_500_001)
    twin = seed + 2**64
    assert torch.equal(index_shuffle(p, 5_850_000_000, seed), index_shuffle(p, 5_850_000_000, twin))


@given(seed=shuffle_seeds, epoch=key_epochs)
def test_epoch_key_is_a_seed_of_torch_generators_range_distinct_per_epoch(seed, epoch):
    """Invariant: epoch_key(seed, epoch) is in [0, 2**64) (a torch.Generator seed, so a valid
    index_shuffle seed), and the next epoch of one seed gets another key."""
    key = epoch_key(seed, epoch)
    assert 0 <= key < 2**64
    torch.Generator().manual_seed(key)
    assert epoch_key(seed, (epoch + 1) % 2**64) != key


def test_positions_in_any_integer_form_give_the_same_int64_indices_in_their_shape():
    """Invariant: a list, an int32 tensor, a numpy array, a 2-d tensor and a scalar give the
    int64 indices of the same positions, in the positions' shape (an empty list: an empty int64
    tensor); n and seed may be numpy ints or one-element tensors."""
    expected = index_shuffle(torch.arange(6), 10, 3)
    assert expected.dtype == torch.int64
    assert torch.equal(index_shuffle(list(range(6)), 10, 3), expected)
    assert torch.equal(index_shuffle(torch.arange(6, dtype=torch.int32), 10, 3), expected)
    assert torch.equal(index_shuffle(np.arange(6), np.int64(10), torch.tensor(3)), expected)
    assert torch.equal(index_shuffle(torch.arange(6).view(2, 3), 10, 3), expected.view(2, 3))
    assert index_shuffle(4, 10, 3).shape == () and index_shuffle(4, 10, 3) == expected[4]
    assert torch.equal(index_unshuffle(expected.view(3, 2), 10, 3), torch.arange(6).view(3, 2))
    assert torch.equal(index_shuffle([], 0, 3), torch.empty(0, dtype=torch.int64))
    # past the domain that is encrypted whole into a table: narrow positions are widened before
    # the rounds, whose products need 63 bits
    wide = index_shuffle(torch.arange(0, 10**9, 10**6), 10**9, 3)
    narrow = torch.arange(0, 10**9, 10**6, dtype=torch.int32)
    assert torch.equal(index_shuffle(narrow, 10**9, 3), wide)
    assert torch.equal(index_unshuffle(wide.int(), 10**9, 3), narrow.long())
    # int32 positions of a range past 2**31: int64 indices that int32 could not hold
    small = torch.tensor([0, 1, 2**31 - 1], dtype=torch.int32)
    for got in (index_shuffle(small, 2**40, 3), index_shuffle(narrow, 10**9, 3)):
        assert got.dtype == torch.int64
    assert torch.equal(index_shuffle(small, 2**40, 3), index_shuffle(small.long(), 2**40, 3))
    assert index_shuffle(small, 2**40, 3).max() >= 2**31  # seed 3 puts them past int32


@pytest.mark.cuda
@pytest.mark.skipif(
    not torch.cuda.is_available(),
    reason="CUDA is not available: positions on a GPU need one (the CPU's are tested above)",
)
def test_indices_come_back_on_the_positions_device():
    """Invariant: positions on a GPU give their indices on that GPU (computed on the CPU), the
    same values as from the CPU."""
    positions = torch.arange(5000, device="cuda")
    got = index_shuffle(positions, 10**12, 7)
    assert got.device == positions.device
    assert torch.equal(got.cpu(), index_shuffle(positions.cpu(), 10**12, 7))


# --- statistics, each beside torch.randperm's on the same seeds --------------------------------

#: |z| < Z for a statistic that is standard normal for a random permutation: it fails with
#: probability 5.7e-7
Z = 5.0


def chi2_limit(dof: int, rate: float = 1e-6) -> float:
    """The 1 - rate quantile of the chi-square distribution (Wilson–Hilferty's approximation)."""
    z = NormalDist().inv_cdf(1 - rate)
    return dof * (1 - 2 / (9 * dof) + z * math.sqrt(2 / (9 * dof))) ** 3


def chi2(counts: torch.Tensor, expected: torch.Tensor) -> float:
    return float(((counts.double() - expected) ** 2 / expected).sum())


def randperm(n: int, seed: int) -> torch.Tensor:
    return torch.randperm(n, generator=torch.Generator().manual_seed(seed))


def ours(n: int, seed: int) -> torch.Tensor:
    return index_shuffle(torch.arange(n), n, seed)


def correlation_z(x: torch.Tensor, y: torch.Tensor) -> float:
    """sqrt(m) times Pearson's r of m pairs: about standard normal for independent orders."""
    r = torch.corrcoef(torch.stack([x.double(), y.double()]))[0, 1]
    return float(r) * math.sqrt(len(x))


@pytest.mark.parametrize("n", [10, 1000])
def test_the_position_of_a_fixed_index_is_uniform_over_seeds(n):
    """Invariant: over seeds 0..999, the position that holds index n // 3 falls in each tenth
    of [0, n) (each position when n = 10) equally often: the chi-square statistic of the ten
    counts (9 degrees of freedom) stays below its 1 - 1e-6 quantile (≈ 46); a uniform
    position fails with probability 1e-6."""
    index, seeds, limit = n // 3, range(1000), chi2_limit(9)
    pos_ours = torch.cat([index_unshuffle([index], n, s) for s in seeds])
    pos_torch = torch.stack([(randperm(n, s) == index).nonzero()[0, 0] for s in seeds])
    expected = torch.full((10,), len(seeds) / 10, dtype=torch.float64)
    stat_ours = chi2(torch.bincount(pos_ours * 10 // n, minlength=10), expected)
    stat_torch = chi2(torch.bincount(pos_torch * 10 // n, minlength=10), expected)
    figures = f"chi2 ours={stat_ours:.1f}, randperm={stat_torch:.1f}, limit={limit:.1f}"
    assert stat_ours < limit and stat_torch < limit, figures


@pytest.mark.parametrize("n", [10, 1000])
def test_a_permutation_has_one_fixed_point_on_average(n):
    """Invariant: over seeds 0..399 the mean number of positions p with index p is 1 within
    Z = 5 standard errors (the count has mean 1 and variance 1 for a random permutation of
    n >= 2 elements, so the bound is 0.25; false alarm ≈ 5.7e-7)."""
    seeds = range(400)
    fixed_ours = sum(int((ours(n, s) == torch.arange(n)).sum()) for s in seeds) / len(seeds)
    fixed_torch = sum(int((randperm(n, s) == torch.arange(n)).sum()) for s in seeds) / len(seeds)
    bound = Z / math.sqrt(len(seeds))
    figures = f"mean fixed points ours={fixed_ours:.3f}, randperm={fixed_torch:.3f}"
    assert abs(fixed_ours - 1) < bound and abs(fixed_torch - 1) < bound, figures


def test_neighbouring_positions_hold_uncorrelated_indices():
    """Invariant: the indices at positions p and p + 1 are uncorrelated: sqrt(m) r < Z = 5 over
    all m = n - 1 neighbours for n = 100,000 and seeds 0..2, and over 100,000 consecutive
    positions across 2**32 when n = 5,850,000,000 (false alarm ≈ 5.7e-7 per figure)."""
    n = 100_000
    for s in range(3):
        order_ours, order_torch = ours(n, s), randperm(n, s)
        z_ours = correlation_z(order_ours[:-1], order_ours[1:])
        z_torch = correlation_z(order_torch[:-1], order_torch[1:])
        assert abs(z_ours) < Z and abs(z_torch) < Z, f"z ours={z_ours:.2f}, randperm={z_torch:.2f}"
    block = index_shuffle(torch.arange(2**32 - 50_000, 2**32 + 50_001), 5_850_000_000, 0)
    assert abs(correlation_z(block[:-1], block[1:])) < Z


def test_a_short_range_puts_every_ordered_pair_of_indices_side_by_side_equally_often():
    """Invariant: for n = 8 (walked down from the 64-element minimum domain) and seeds
    0..3999, the 7 pairs of indices at positions (p, p + 1) of each order, pooled, fall on each
    of the 56 ordered pairs equally often: chi-square below the 1 - 1e-6 quantile for 55
    degrees of freedom (≈ 120; the pooled pairs are nearly independent, so the rate is
    approximate): ours ≈ 56, randperm ≈ 46. On a 2**3 domain even 8 Feistel rounds fail it
    (≈ 186): hence the module's 64-element minimum domain."""
    n, seeds, limit = 8, range(4000), chi2_limit(55)
    off_diagonal = ~torch.eye(n, dtype=torch.bool).flatten()
    expected = torch.full((n * (n - 1),), len(seeds) * (n - 1) / (n * (n - 1)), dtype=torch.float64)
    for make in (ours, randperm):
        orders = torch.stack([make(n, s) for s in seeds])  # (seeds, n)
        pairs = (orders[:, :-1] * n + orders[:, 1:]).flatten()
        stat = chi2(torch.bincount(pairs, minlength=n * n)[off_diagonal], expected)
        assert stat < limit, f"{make.__name__}: chi2={stat:.1f}, limit={limit:.1f}"


@pytest.mark.parametrize(
    ("n", "bit", "seeds"),
    [
        (2**6, 2, 2000),
        (2**6, 3, 2000),
        (2**6, 5, 2000),
        (2**16, 7, 4),
        (2**16, 8, 4),
        (2**16, 15, 4),
    ],
)
def test_positions_one_bit_apart_hold_unrelated_indices(n, bit, seeds):
    """Invariant: on [0, n), n a power of two (no cycle walking: the cipher alone), for the
    pairs of positions p, p ^ 2**bit, the top 6 bits of index(p) ^ index(p ^ 2**bit) are as
    uniform as for two distinct random indices: chi-square over their 64 values, pooled over
    the seeds, below the 1 - 1e-6 quantile for its 62 or 63 degrees of freedom (≈ 131). The bits
    are the top of the right half, the bottom and the top of the left one. With 4 Feistel rounds
    all but bit 7 fail (≈ 480 to 6,800), with 6 bits 3 and 5 of 2**6 fail (≈ 185); the
    module's 8 pass (55 to 73; randperm 55 to 87)."""
    delta, shift = 2**bit, n.bit_length() - 7
    p = torch.arange(n)
    p = p[p < p ^ delta]
    values = torch.arange(1, n)  # the difference of two distinct indices, uniform for randperm
    expected = torch.bincount(values >> shift, minlength=64).double() * seeds * len(p) / len(values)
    seen = expected > 0  # all 64 values but 0 when n = 64
    limit = chi2_limit(int(seen.sum()) - 1)
    for make in (ours, randperm):
        diffs = torch.cat([(o := make(n, s))[p] ^ o[p ^ delta] for s in range(seeds)])
        counts = torch.bincount(diffs >> shift, minlength=64)
        stat = chi2(counts[seen], expected[seen])
        assert stat < limit, f"{make.__name__}: chi2={stat:.1f}, limit={limit:.1f}"


def test_an_index_has_the_parity_of_its_position_half_the_time():
    """Invariant: the count of positions p whose index has p's parity is its expectation
    within Z = 5 standard deviations (sd ≈ sqrt(n) / 2; false alarm ≈ 5.7e-7 per figure), for
    n = 100,001 (all positions, seeds 0..2) and n = 5,850,000,000 (100,000 random positions)."""
    n = 100_001
    even, odd = (n + 1) // 2, n // 2
    mean = (even**2 + odd**2) / n  # P(index even | position even) = even / n, and so on
    sd = math.sqrt(n) / 2
    for s in range(3):
        z_ours = (int((ours(n, s) % 2 == torch.arange(n) % 2).sum()) - mean) / sd
        z_torch = (int((randperm(n, s) % 2 == torch.arange(n) % 2).sum()) - mean) / sd
        assert abs(z_ours) < Z and abs(z_torch) < Z, f"z ours={z_ours:.2f}, randperm={z_torch:.2f}"
    p = torch.randint(0, 5_850_000_000, (100_000,), generator=torch.Generator().manual_seed(0))
    same = int((index_shuffle(p, 5_850_000_000, 0) % 2 == p % 2).sum())
    assert abs((same - len(p) / 2) / (math.sqrt(len(p)) / 2)) < Z


def test_adjacent_epochs_and_adjacent_seeds_give_unrelated_orders():
    """Invariant: for n = 100,000, the orders of epochs e and e + 1 (epoch_key(0, e)), of seeds
    s and s + 1 at one epoch (epoch_key(s, 0)), and of raw seeds s and s + 1 are uncorrelated
    (sqrt(n) r < Z = 5: false alarm ≈ 5.7e-7) and agree on fewer than 10 positions (the
    agreements are ≈ Poisson(1): P(>= 10) ≈ 1.1e-7). Beside them, randperm keyed as torch's
    DistributedSampler keys it (seed + epoch): its epochs and seeds pass the same bar."""
    n = 100_000
    pairs_ours = [(epoch_key(0, e), epoch_key(0, e + 1)) for e in range(3)]
    pairs_ours += [(epoch_key(s, 0), epoch_key(s + 1, 0)) for s in range(3)]
    pairs_ours += [(s, s + 1) for s in range(3)]
    for make, pairs in ((ours, pairs_ours), (randperm, [(s, s + 1) for s in range(3)])):
        for first, second in pairs:
            a, b = make(n, first), make(n, second)
            z, same = correlation_z(a, b), int((a == b).sum())
            assert abs(z) < Z and same < 10, f"{make.__name__}({first}, {second}): z={z:.2f}"


@pytest.mark.parametrize("world", [2, 8])
def test_each_ranks_share_has_the_mean_of_a_random_subset(world):
    """Invariant: every rank's strided share (positions rank, rank + W, ...) holds indices whose
    mean is (n - 1) / 2 within Z = 5 standard errors of a random subset of that size (finite
    population: var = (n**2 - 1) / 12 / m * (n - m) / (n - 1)); false alarm ≈ 5.7e-7 per rank.
    n = 100,003 whole (ours beside randperm), and n = 5,850,000,000 on 100,000 random
    positions of each share (infinite-population variance)."""
    n = 100_003
    for name, order in (("ours", ours(n, epoch_key(0, 0))), ("randperm", randperm(n, 0))):
        for rank in range(world):
            share = order[rank::world].double()
            m = len(share)
            sd = math.sqrt((n**2 - 1) / 12 / m * (n - m) / (n - 1))
            z = (float(share.mean()) - (n - 1) / 2) / sd
            assert abs(z) < Z, f"{name} rank {rank}: z={z:.2f}"
    huge, g = 5_850_000_000, torch.Generator().manual_seed(1)
    for rank in range(world):
        j = torch.randint(0, (huge - rank) // world, (100_000,), generator=g)
        share = index_shuffle(rank + world * j, huge, epoch_key(0, 0)).double()
        z = (float(share.mean()) - (huge - 1) / 2) / math.sqrt(huge**2 / 12 / len(share))
        assert abs(z) < Z, f"huge rank {rank}: z={z:.2f}"


# --- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: index_shuffle([0, 10], 10, 0), ValueError,
         r"^positions should be in \[0, n\) = \[0, 10\), but got positions\[1\]=10 for n=10$"),
        (lambda: index_shuffle(torch.tensor([[0, 1], [-1, 2]]), 10, 0), ValueError,
         r"^positions should be in \[0, n\) = \[0, 10\), but got positions\[1, 0\]=-1 for n=10$"),
        (lambda: index_shuffle(12, 10, 0), ValueError,
         r"^positions should be in \[0, n\) = \[0, 10\), but got positions=12 for n=10$"),
        (lambda: index_shuffle([0], 0, 0), ValueError,
         r"but got positions\[0\]=0 for n=0$"),
        (lambda: index_unshuffle([3, 12], 10, 0), ValueError,
         r"^indices should be in \[0, n\) = \[0, 10\), but got indices\[1\]=12 for n=10$"),
        (lambda: index_shuffle(torch.tensor([0.5]), 10, 0), TypeError,
         r"^positions should be an integer tensor or a sequence of integers, but got "
         r"positions=tensor\(\[0.5000\]\) of dtype torch.float32$"),
        (lambda: index_shuffle([1.0, 2.0], 10, 0), TypeError,
         r"but got positions=\[1.0, 2.0\] of dtype torch.float32$"),
        (lambda: index_shuffle(torch.tensor([True]), 10, 0), TypeError,
         r"but got positions=tensor\(\[True\]\) of dtype torch.bool$"),
        (lambda: index_unshuffle("12", 10, 0), TypeError,
         r"^indices should be an integer tensor or a sequence of integers, but got indices='12'$"),
        (lambda: index_shuffle([2**64], 10, 0), TypeError,
         r"but got positions=\[18446744073709551616\]$"),
        (lambda: index_shuffle([0], -1, 0), ValueError,
         r"^n should be in the interval \[0, 9223372036854775807\], but got n=-1$"),
        (lambda: index_shuffle([0], 2**63, 0), ValueError, r"but got n=9223372036854775808$"),
        (lambda: index_unshuffle([0], 10.0, 0), TypeError,
         r"^n should be an integer, but got n=10.0 of type float$"),
        (lambda: index_shuffle([0], 10, 2**64), ValueError,
         r"^seed should be in the interval \[-9223372036854775808, 18446744073709551615\], "
         r"but got seed=18446744073709551616$"),
        (lambda: index_shuffle([0], 10, "0"), TypeError,
         r"^seed should be an integer, but got seed='0' of type str$"),
        (lambda: epoch_key(0, -1), ValueError,
         r"^epoch should be in the interval \[0, 18446744073709551615\], but got epoch=-1$"),
        (lambda: epoch_key(-(2**63) - 1, 0), ValueError,
         r"but got seed=-9223372036854775809$"),
        (lambda: epoch_key(0, True), TypeError,
         r"^epoch should be an integer, but got epoch=True of type bool$"),
    ],
)  # fmt: skip
def test_bad_input_raises_an_error_naming_the_argument_and_value(call, error, message):
    """Invariant: each bad argument raises the stated error whose message names the argument
    and the offending value (for positions and indices: the first offending element)."""
    with pytest.raises(error, match=message):
        call()


@given(seed=shuffle_seeds, epoch=key_epochs)
def test_epoch_key_is_the_documented_mix_of_seed_and_epoch(seed, epoch):
    """Invariant: epoch_key(seed, epoch) == mix64((mix64(seed mod 2**64) + epoch) mod 2**64), the
    formula of its docstring, computed here on Python ints."""
    assert epoch_key(seed, epoch) == mix64((mix64(seed % 2**64) + epoch) % 2**64)


@pytest.mark.parametrize("seed", [2**64, -(2**63) - 1])
def test_epoch_key_refuses_a_seed_outside_torchs_range_naming_it(seed):
    """Invariant: epoch_key takes the seeds torch.Generator takes, and names any other."""
    with pytest.raises(
        ValueError, match=rf"^seed should be in the interval .* but got seed={seed}$"
    ):
        epoch_key(seed, 0)


# --- a few positions as Python ints: the scalar path -------------------------------------------


@given(n=shuffle_lengths.filter(bool), seed=shuffle_seeds, inverse=st.booleans(), data=st.data())
def test_an_int_or_a_few_take_the_python_path_and_give_the_arrays_answer(n, seed, inverse, data):
    """Invariant: an int, or a list or tuple of up to 16 (Python's or numpy's), is ciphered on
    Python ints and gives what the same positions as a tensor give through numpy: the same
    values, dtype (int64) and shape (0-d for an int), both ways (index_unshuffle too)."""
    fn = index_unshuffle if inverse else index_shuffle
    ints = data.draw(st.lists(st.integers(0, n - 1), max_size=17), label="positions")
    kind = data.draw(st.sampled_from([int, np.int64, np.uint64, np.int32]), label="kind")
    ints = [p for p in ints if p <= np.iinfo(kind).max]
    as_array = fn(torch.tensor(ints, dtype=torch.int64), n, seed)
    for few in (ints, tuple(ints), [kind(p) for p in ints]):
        got = fn(few, n, seed)
        assert got.dtype == torch.int64 and got.tolist() == as_array.tolist()
    for p, expected in zip(ints[:3], as_array.tolist()):
        got = fn(kind(p), n, seed)
        assert got.shape == () and got.dtype == torch.int64 and got.item() == expected


@pytest.mark.parametrize(
    "bad", [[3, 10], [True], [3, None], [[1, 12]], [torch.tensor(True)], 10, -1, True]
)
def test_a_few_positions_out_of_range_or_of_another_type_get_the_arrays_error(bad):
    """Invariant: the Python path takes only ints in range: anything else goes the array's way
    and gets its error, word for word (the first offender named)."""
    as_array = torch.as_tensor(bad) if not isinstance(bad, list) or bad != [3, None] else None
    with pytest.raises((TypeError, ValueError)) as few:
        index_shuffle(bad, 10, 0)
    if as_array is not None and as_array.dtype != torch.bool:
        with pytest.raises((TypeError, ValueError)) as array:
            index_shuffle(as_array, 10, 0)
        assert str(few.value).split(", but got")[0] == str(array.value).split(", but got")[0]
    assert "positions" in str(few.value)


def test_refusals_name_the_first_offending_position_whatever_the_dtype():
    """Invariant: the first value out of ``[0, n)`` is named with its position and exact value:
    a negative one before a too large one, a ``uint64`` past ``2**63`` (never wrapped to a
    negative), an index pair in 2-D; an empty array of numpy's default float dtype holds no
    floats and shuffles to an empty int64 tensor."""
    cases = [
        (torch.tensor([-1, 99]), "positions[0]=-1"),
        (torch.from_numpy(np.array([1, 2**64 - 1], dtype=np.uint64)), "positions[1]=18446744073709551615"),
        (torch.from_numpy(np.array([[1, 2], [3, 9]], dtype=np.uint64)), "positions[1, 1]=9"),
        (torch.from_numpy(np.array([0, 5], dtype=np.uint64)), "positions[1]=5"),
    ]  # fmt: skip
    for values, named in cases:
        words = f"positions should be in [0, n) = [0, 5), but got {named} for n=5"
        with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
            index_shuffle(values, 5, 0)
    empty = index_shuffle(np.array([]), 5, 0)
    assert empty.dtype == torch.int64 and empty.shape == (0,)


def test_uint64_positions_past_float_precision_are_shuffled_exactly():
    """Invariant: ``uint64`` positions are converted to int64 exactly (never through a float):
    positions past 2**53 map as the same int64 positions do."""
    n = 2**61
    values = [2**60 + 1, 2**53 + 1, 3]
    unsigned = torch.from_numpy(np.array(values, dtype=np.uint64))
    assert torch.equal(index_shuffle(unsigned, n, 7), index_shuffle(torch.tensor(values), n, 7))
