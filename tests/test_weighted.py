"""Properties of largest_remainder_counts and WeightedBalanceClassSampler, and a comparison with
torch's WeightedRandomSampler (same expected class shares; ours exact, torch's scattered)."""

from __future__ import annotations

import json
import math
import numbers
import random
import subprocess
import sys
from collections import Counter
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from hypothesis import assume, example, given
from hypothesis import strategies as st

from distsampling import WeightedBalanceClassSampler, largest_remainder_counts
from distsampling.weighted import _distinct_picks, _group
from strategies import (
    class_labelled_arrays,
    class_weight_lists,
    class_weight_values,
    dataset_class_counts,
    epoch_lengths,
    epochs,
    labelled_datasets,
    non_integers,
    seeds,
)

#: every seed the sampler accepts (torch's range), and epochs, negative ones included
any_seeds = st.one_of(seeds, st.integers(min_value=-(2**63), max_value=2**64 - 1))
any_epochs = st.one_of(epochs, st.integers(min_value=-(2**64), max_value=2**64))


def quotas(weights, total):
    """Exact quotas ``total * w / sum(w)`` as fractions."""
    exact = [Fraction(w) for w in weights]
    return [total * w / sum(exact) for w in exact]


def epoch_of(args, seed=0, epoch=0):
    s = WeightedBalanceClassSampler(**args, seed=seed)
    s.set_epoch(epoch)
    return list(s)


# the oracles: the arithmetic and the loop this module replaced, kept as they were


def largest_remainder_counts_reference(weights, total):
    """The exact Fraction arithmetic of largest_remainder_counts before it went vectorised: a
    float read as its exact binary fraction, an int as itself; each count the floor of its quota
    total * w / sum(w), then one seat each to the largest remainders, ties to the earlier class."""
    exact = [
        Fraction(int(w)) if isinstance(w, numbers.Integral) else Fraction(float(w)) for w in weights
    ]
    whole = sum(exact)
    quotas = [total * f / whole for f in exact]
    counts = [math.floor(q) for q in quotas]
    # the remainders times one positive constant, whole * lcm(denominators), are exact ints in
    # the same order: sorted as ints, not Fractions (100,000 classes: 0.2 s, not 10); the sort
    # is stable, so ties go to the earlier class
    scale = whole * math.lcm(*(f.denominator for f in exact))
    keys = [(c - q) * scale for c, q in zip(counts, quotas)]
    assert all(k.denominator == 1 for k in keys)
    by_remainder = sorted(range(len(quotas)), key=[int(k) for k in keys].__getitem__)
    for i in by_remainder[: total - sum(counts)]:
        counts[i] += 1
    return counts


#: one weight for the oracle: values that tie, zero, the extremes of float64 (the smallest
#: subnormal, the smallest normal, the largest), the neighbours of 1 (remainders a hair apart),
#: any float, and ints past 2**53 (which float64 would round)
apportion_weight_values = st.one_of(
    st.sampled_from(
        [0, 0.0, 1, 1.0, 2, 3, 5, 0.1, 0.5, 1 / 3, 5e-324, 2.2250738585072014e-308]
        + [1.7976931348623157e308, 1 - 2**-53, 1 + 2**-52, 2**53, 2**53 + 1]
    ),
    st.floats(min_value=0.0, allow_nan=False, allow_infinity=False),
    st.integers(min_value=0, max_value=2**70),
)
#: totals: epoch lengths, large ones (float64 quotas off by far more than 2**-52), any 64-bit
#: one, and those where float64 quotas give out
apportion_totals = st.one_of(
    st.integers(min_value=0, max_value=300),
    st.integers(min_value=2**30, max_value=2**52),
    st.integers(min_value=0, max_value=2**64),
    st.sampled_from([2**52 - 1, 2**52, 2**62, 10**30]),
)


@st.composite
def apportion_weights(draw):
    """Per-class weights with a positive sum, for 1 to 3,000 classes: a few drawn values dealt
    out at random (so most weights tie with others), and sometimes floats of every magnitude
    from 2**-1074 to 2**1000 among them (each its own, remainders all apart)."""
    pool = draw(st.lists(apportion_weight_values, min_size=1, max_size=5))
    size = draw(st.one_of(st.integers(1, 10), st.sampled_from([100, 3000])))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    weights = [pool[i] for i in rng.integers(0, len(pool), size).tolist()]
    if draw(st.booleans()):
        spread = np.ldexp(rng.random(size), rng.integers(-1074, 1000, size)).tolist()
        weights = [x if keep else y for x, y, keep in zip(weights, spread, rng.random(size) < 0.5)]
    if not any(weights):
        weights[draw(st.integers(0, size - 1))] = draw(st.sampled_from([1, 5e-324, 2**70]))
    return weights


@st.composite
def near_tie_weights(draw):
    """``(weights, total)``: 2 to 8 weights a few ulps apart around one float, and a total of
    2**20 to 2**51 near a multiple of their number: float64 quotas then err by more than the
    remainders differ, and land a hair either side of integers."""
    base = draw(st.floats(min_value=2.0**-30, max_value=2.0**30))
    size = draw(st.integers(2, 8))
    weights = []
    for ulps in draw(st.lists(st.integers(-3, 3), min_size=size, max_size=size)):
        w = base
        for _ in range(abs(ulps)):
            w = math.nextafter(w, math.inf if ulps > 0 else 0.0)
        weights.append(w)
    scale = draw(st.integers(20, 51))
    total = size * draw(st.integers(2 ** (scale - 4), 2**scale // size)) + draw(st.integers(-3, 3))
    return weights, max(total, 0)


@st.composite
def pick_sizes(draw):
    """``(n, k)`` per class, ``0 <= k <= n``: small classes with any k (k past n / 2 draws the
    values left out), exactly half, all or none, and classes of up to 100,000 samples."""
    ns = draw(
        st.lists(st.one_of(st.integers(1, 40), st.integers(1, 10**5)), min_size=1, max_size=12)
    )
    ks = [
        draw(st.one_of(st.integers(0, min(n, 3000)), st.sampled_from([0, n // 2, n // 2 + 1, n])))
        if n <= 3000
        else draw(st.integers(0, 3000))
        for n in ns
    ]
    return np.array(ns, dtype=np.int64), np.array(ks, dtype=np.int64)


@st.composite
def weighted_samplers(draw):
    """Arguments of WeightedBalanceClassSampler: 1 to 2,000 classes of 1 to 6 samples, now and
    then one of 10,001 or 20,000, weights that tie and zeros, lengths from 0 to three times the
    samples."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    num_classes = draw(st.one_of(st.integers(1, 8), st.sampled_from([300, 2000])))
    sizes = rng.integers(1, 7, num_classes)  # (C,)
    if draw(st.booleans()):
        sizes[rng.integers(num_classes)] = draw(st.sampled_from([10_001, 20_000]))
    labels = rng.permutation(np.repeat(np.arange(num_classes), sizes))  # (N,)
    pool = draw(st.lists(class_weight_values, min_size=1, max_size=4))
    weight = [pool[i] for i in rng.integers(0, len(pool), num_classes).tolist()]
    if not any(weight):
        weight[0] = 1
    n = labels.size
    length = draw(st.one_of(st.integers(0, 50), st.sampled_from([n, 3 * n]), st.integers(0, 2 * n)))
    return {"labels": labels, "weight": weight, "length": length}


# largest_remainder_counts


@given(weights=class_weight_lists, total=epoch_lengths)
def test_counts_are_non_negative_ints_summing_to_exactly_total(weights, total):
    """Invariant: no sample lost or added by rounding (int() truncation would lose some)."""
    counts = largest_remainder_counts(weights, total)
    assert all(isinstance(c, int) and c >= 0 for c in counts)
    assert sum(counts) == total and len(counts) == len(weights)


@given(weights=apportion_weights(), total=apportion_totals)
@example(weights=[1, 4, 5], total=5)  # remainders .5, 0, .5 of two distinct weights: a tie
@example(weights=[1.0] * 7, total=10**30)  # a total past float64: exact integers throughout
@example(weights=[5e-324, 1.7976931348623157e308, 0.0], total=3)  # 2**-1074 beside 2**1024
@example(weights=[2**53 + 1, 2**53, 1.0], total=3)  # an int float64 rounds
# where float64 quotas, off by ~total * 2**-52, would decide wrongly: the exact integers decide
@example(weights=[0.4256188319668169, 0.42561883196681743, 0.42561883196681705], total=3 * 2**43)
@example(weights=[1 + 2**-52, 1.0, 1.0, 1 - 2**-53], total=844232881344)  # remainders 1e-16 apart
@example(weights=[0.7000000000000001, 0.9, 0.1, 0.7000000000000001, 0.5], total=10**11)
@example(
    weights=[7048608217889410.0, 4686140888644399.0, 8470662197413580.0, 3664395971472403.0],
    total=712507913899873,
)
# a large quota rounded by float64 past a small one's remainder: fractions in the wrong order
# at the edge of the one seat, which only the exact integers put right
@example(weights=[100000026047.04799, 7.062807790469378, 1048576.4871922096], total=274877911265)
# an exact quota of 1 that float64 puts a hair below 1, beside remainders that fill every seat
@example(weights=[1.0, 1099511627776.25, 1099511627776.25, 1099511627776.5], total=3 * 2**40 + 2)
@example(weights=[1.0, 274877906945.25, 274877906945.25, 274877906945.5], total=824633720837)
# exact remainders on a grid of 2**-50 (sum 2**102, total 2**52): 1/4, 1/4 + 2**-50 and
# 1/4 + 2**-49 take the 2 seats' edge, where a fraction sits exactly two margins above the next
@example(
    weights=[2**50 + 2**48, 2**50 + 2**48 + 1, 2**50 + 2**48 + 2]
    + [2**50 + 2**47] * 9
    + [(2**52 - 14) * 2**50 + 2**47 - 3],
    total=2**52,
)
def test_counts_are_those_of_the_exact_fraction_arithmetic(weights, total):
    """Invariant: the vectorised apportionment is the Fraction arithmetic it replaced, count for
    count: floors of the exact quotas, the seats left to the largest exact remainders, ties to
    the earlier class; for ties, zeros, subnormal to the largest floats, ints past 2**53, totals
    past 2**52 and up to 3,000 classes."""
    assert largest_remainder_counts(weights, total) == largest_remainder_counts_reference(
        weights, total
    )


@given(case=near_tie_weights())
@example(case=([2**53, 2**53 + 1, 1.0], 3))  # an int float64 rounds, after a float: exact
def test_near_ties_get_the_counts_of_the_exact_arithmetic(case):
    """Invariant: where float64 quotas err by more than the remainders differ (weights a few ulps
    apart, totals past 2**20) and fall a hair either side of an integer, every floor and every
    seat is still the exact Fraction arithmetic's."""
    weights, total = case
    assert largest_remainder_counts(weights, total) == largest_remainder_counts_reference(
        weights, total
    )


@pytest.mark.parametrize(
    "weights, total",
    [
        ([np.int64(2**53 + 1), 1], 2**53 + 2),  # read one by one: an int float64 would round
        ([np.float32(1), int(sys.float_info.max)], 3),  # the largest float64, as an int: accepted
    ],
)
def test_ints_read_one_by_one_stay_exact(weights, total):
    """Invariant: weights read one by one (a numpy scalar among them) keep ints exact, up to the
    largest float64, and get the counts of the exact Fraction arithmetic."""
    assert largest_remainder_counts(weights, total) == largest_remainder_counts_reference(
        weights, total
    )


@pytest.mark.parametrize(
    "weights",
    [
        [np.float64(0.0), np.float32(0.5), 1, 0.25],  # numpy scalars: checked one by one
        [Fraction(1, 3), Fraction(0), np.int64(2), 0.75],  # exact rationals, a zero among them
        [2**1000, 1, 0],  # an int far past 2**53: exact, where float64 would round it
        [np.float16(0.1), np.uint8(3), np.float64(7e-5)],
    ],
)
@pytest.mark.parametrize("total", [0, 1, 7, 1000, 10**20])
def test_weights_of_any_real_type_get_the_counts_of_the_exact_arithmetic(weights, total):
    """Invariant: weights that are not plain ints and floats (numpy scalars, Fractions, zeros and
    values below 1 among them) are read exactly, one by one, as are ints far past 2**53, and get
    the counts of the exact Fraction arithmetic."""
    assert largest_remainder_counts(weights, total) == largest_remainder_counts_reference(
        weights, total
    )


@given(m=st.integers(min_value=2**53, max_value=2**80))
def test_integer_weights_are_exact_at_any_size(m):
    """Invariant: integer weights are never rounded to floats: m + 1 outweighs m however large
    (as floats, 2**53 + 1 == 2**53 and the tie would go to the first class)."""
    assert largest_remainder_counts([m, m + 1], 1) == [0, 1]
    u = m % (2**64 - 1)  # numpy's unsigned 64-bit ints too, up to their largest
    assert largest_remainder_counts([np.uint64(u), np.uint64(u + 1)], 1) == [0, 1]


@given(weights=class_weight_lists, total=epoch_lengths)
def test_weights_as_a_numpy_array_or_a_tensor_get_the_counts_of_the_list(weights, total):
    """Invariant: the weights' container does not matter: a list, a numpy array and a float64
    tensor of the same values get the same counts."""
    counts = largest_remainder_counts(weights, total)
    assert largest_remainder_counts(np.array(weights, dtype=np.float64), total) == counts
    assert largest_remainder_counts(torch.tensor(weights, dtype=torch.float64), total) == counts


@given(weights=class_weight_lists, total=epoch_lengths)
def test_each_count_is_the_floor_or_the_ceiling_of_its_quota(weights, total):
    """Invariant: the quota rule: every count is within 1 of its exact quota, rounded down or up."""
    for count, quota in zip(largest_remainder_counts(weights, total), quotas(weights, total)):
        assert math.floor(quota) <= count <= math.ceil(quota)


@given(weights=class_weight_lists, total=epoch_lengths)
def test_a_zero_weight_gets_zero(weights, total):
    """Invariant: a class weighted 0 is never drawn."""
    counts = largest_remainder_counts(weights, total)
    assert all(c == 0 for c, w in zip(counts, weights) if w == 0)


@given(weights=class_weight_lists, total=epoch_lengths)
def test_a_larger_weight_never_gets_a_smaller_count(weights, total):
    """Invariant: monotone within one call: w_i > w_j implies count_i >= count_j."""
    counts = largest_remainder_counts(weights, total)
    for i in range(len(weights)):
        for j in range(len(weights)):
            if weights[i] > weights[j]:
                assert counts[i] >= counts[j]


@given(
    weights=st.lists(st.integers(0, 50), min_size=1, max_size=8).filter(any),
    total=epoch_lengths,
    factor=st.integers(1, 10**6),
    power=st.integers(-40, 40),
)
def test_scaling_all_weights_changes_no_count(weights, total, factor, power):
    """Invariant: only the weights' ratios matter (exact scalings: an int factor, a power of 2)."""
    counts = largest_remainder_counts(weights, total)
    assert largest_remainder_counts([w * factor for w in weights], total) == counts
    assert largest_remainder_counts([w * 2.0**power for w in weights], total) == counts


@given(n=st.integers(1, 8), total=epoch_lengths)
def test_ties_go_to_the_earlier_class(n, total):
    """Invariant: equal weights are split as evenly as possible, the extra seats to the first ones."""
    counts = largest_remainder_counts([1] * n, total)
    assert counts == [total // n + (i < total % n) for i in range(n)]


@pytest.mark.parametrize(
    ("weights", "error", "message"),
    [
        ([1, -1], ValueError, r"weights\[1\] should be finite and >= 0, but got weights\[1\]=-1$"),
        ([1, math.nan], ValueError, r"but got weights\[1\]=nan$"),
        ([math.inf, 1], ValueError, r"but got weights\[0\]=inf$"),
        ([0, 0.0], ValueError, r"weights should have a positive sum, but got weights=\[0, 0.0\]$"),
        ([], ValueError, r"weights should have a positive sum, but got weights=\[\]$"),
        ([1, "2"], TypeError, r"weights\[1\] should be a real number, but got weights\[1\]='2'$"),
        ([True], TypeError, r"but got weights\[0\]=True$"),
        (3, TypeError, r"weights should be a sequence or a mapping, but got weights=3$"),
        ({1, 2}, TypeError, r"weights should be a sequence or a mapping, but got weights=\{1, 2\}"),
        ({"cat": -1}, ValueError, r"but got weights\['cat'\]=-1$"),
        (  # an int no float64 holds: its quota could not be compared with the others'
            [1, 2**1100],
            ValueError,
            r"^weights\[1\] should be at most 1.7976931348623157e\+308 \(the largest float64\), "
            r"but got weights\[1\]=1358",
        ),
        ([np.float32(-0.5)], ValueError, r"weights\[0\] should be finite and >= 0, but got "),
    ],
)
def test_bad_weights_are_rejected_naming_the_value(weights, error, message):
    """Invariant: negative, NaN, inf, all-zero, empty or non-numeric weights fail, naming the entry."""
    with pytest.raises(error, match=message):
        largest_remainder_counts(weights, 10)


@given(weights=class_weight_lists, total=epoch_lengths, data=st.data())
def test_a_mapping_gets_each_key_the_count_of_its_value(weights, total, data):
    """Invariant: ``{label: weight}`` is split as the list of its values, in the mapping's
    order, and returned as ``{label: count}``: the keys are labels, never weights
    (``{0: 1, 1: 3}`` of 4 is ``{0: 1, 1: 3}``)."""
    labels = data.draw(
        st.lists(st.integers(), min_size=len(weights), max_size=len(weights), unique=True)
    )
    counts = largest_remainder_counts(dict(zip(labels, weights)), total)
    assert counts == dict(zip(labels, largest_remainder_counts(weights, total)))
    assert list(counts) == labels
    assert largest_remainder_counts({0: 1, 1: 3}, 4) == {0: 1, 1: 3}


@given(total=st.one_of(st.integers(max_value=-1), non_integers))
def test_a_bad_total_is_rejected_naming_the_value(total):
    """Invariant: total is an int >= 0."""
    with pytest.raises((TypeError, ValueError), match=r"total should be .*but got total="):
        largest_remainder_counts([1, 2], total)


# WeightedBalanceClassSampler


@given(args=labelled_datasets(), seed=seeds, epoch=epochs)
def test_class_counts_of_an_epoch_are_the_largest_remainder_counts(args, seed, epoch):
    """Invariant: every epoch draws exactly largest_remainder_counts(weight, length) per class."""
    labels, idx_ours = args["labels"], epoch_of(args, seed, epoch)
    expected = largest_remainder_counts(args["weight"], args["length"])
    drawn = Counter(labels[i] for i in idx_ours)
    assert [drawn[c] for c in sorted(set(labels))] == expected
    assert len(idx_ours) == len(WeightedBalanceClassSampler(**args)) == args["length"]


@given(sizes=pick_sizes(), seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_picks_are_k_distinct_values_of_each_class(sizes, seed):
    """Invariant: the mask holds, for every class c, exactly k[c] of its own n[c] values (a mask
    cannot hold one twice), whether k is below, at or past half of n."""
    n, k = sizes
    mask = _distinct_picks(np.random.default_rng(seed), n, k)
    assert mask.shape == (int(n.sum()),) and mask.dtype == bool
    chosen = np.add.reduceat(mask, np.cumsum(n) - n) if mask.size else np.zeros(0)
    assert chosen.tolist() == k.tolist()


@pytest.mark.parametrize("n, k", [(5, 2), (6, 4), (4, 2), (7, 1)])
def test_every_set_of_picks_is_equally_likely(n, k):
    """Invariant: over 6,000 seeds, each of the C(n, k) sets of k values is picked equally often
    (k below half of n, past it, and at it): the chi-square of the counts stays under the bar that
    uniform picks exceed once in a million runs (C(n, k) - 1 degrees of freedom)."""
    runs, sets = 6000, math.comb(n, k)
    counts = Counter(
        tuple(
            np.flatnonzero(_distinct_picks(np.random.default_rng(s), np.array([n]), np.array([k])))
        )
        for s in range(runs)
    )
    assert len(counts) == sets and all(len(c) == k for c in counts)
    expected = runs / sets
    chi2 = sum((v - expected) ** 2 / expected for v in counts.values())
    bars = {5: 35.9, 6: 38.3, 9: 44.8, 14: 54.6}  # chi-square's 1 - 1e-6 quantile, by dof
    assert chi2 < bars[sets - 1], (n, k, chi2)


@given(args=weighted_samplers(), seed=any_seeds, epoch=any_epochs)
def test_an_epoch_is_each_member_full_times_and_distinct_picks_of_the_rest(args, seed, epoch):
    """Invariant: with the Fraction arithmetic's k draws of a class of n samples, every member is
    drawn k // n times, and k % n distinct members once more, for classes of up to 20,000."""
    sampler = WeightedBalanceClassSampler(**args, seed=seed)
    sampler.set_epoch(epoch)
    expected = largest_remainder_counts_reference(args["weight"], args["length"])
    assert sampler.samples_per_class == expected
    times = np.bincount(sampler.epoch_order().numpy(), minlength=args["labels"].size)
    for c, k in enumerate(expected):
        members = np.flatnonzero(args["labels"] == c)
        full, rest = divmod(k, members.size)
        assert (
            np.sort(times[members]).tolist() == [full] * (members.size - rest) + [full + 1] * rest
        )


def test_a_hundred_thousand_classes_get_the_exact_counts():
    """Invariant: at 100,000 classes (past the 16-bit class codes) of 1 to 3 samples, weighted
    by random floats, the counts are the Fraction arithmetic's and the epoch draws them."""
    rng = np.random.default_rng(7)
    sizes = rng.integers(1, 4, 100_000)  # (C,)
    labels = rng.permutation(np.repeat(np.arange(sizes.size), sizes))  # (N,)
    weight, length = rng.random(sizes.size).tolist(), 150_001
    sampler = WeightedBalanceClassSampler(labels, weight, length, seed=5)
    expected = largest_remainder_counts_reference(weight, length)
    assert sampler.samples_per_class == expected
    drawn = np.bincount(labels[sampler.epoch_order().numpy()], minlength=sizes.size)
    assert drawn.tolist() == expected


@given(args=labelled_datasets(), seed=seeds, epoch=epochs)
def test_every_yielded_index_is_a_sample_of_a_class_given_draws(args, seed, epoch):
    """Invariant: indices are ints in 0..N-1 (no negative or past-the-end index, which labels[i]
    would quietly accept), and each one's label is a class with a positive count."""
    labels, idx_ours = args["labels"], epoch_of(args, seed, epoch)
    counts = largest_remainder_counts(args["weight"], args["length"])
    drawn_classes = {c for c, k in zip(sorted(set(labels)), counts) if k > 0}
    assert all(type(i) is int and 0 <= i < len(labels) for i in idx_ours)
    assert {labels[i] for i in idx_ours} <= drawn_classes


@given(args=labelled_datasets(), seed=seeds, epoch=epochs)
def test_no_repeat_within_a_class_until_the_class_is_used_up(args, seed, epoch):
    """Invariant: k <= n draws k distinct samples; beyond, each repeats floor(k/n) or ceil(k/n) times."""
    labels, idx_ours = args["labels"], epoch_of(args, seed, epoch)
    times = Counter(idx_ours)
    sizes = Counter(labels)
    per_class = dict(zip(sorted(sizes), largest_remainder_counts(args["weight"], args["length"])))
    for i, label in enumerate(labels):
        k, n = per_class[label], sizes[label]
        assert k // n <= times[i] <= -(-k // n)


@given(args=labelled_datasets(), seed=seeds, epoch=epochs, noise=st.integers(0, 2**32 - 1))
def test_the_epoch_ignores_every_global_rng(args, seed, epoch, noise):
    """Invariant: the draw is a function of (seed, epoch): reseeding numpy, random and torch changes nothing."""
    before = epoch_of(args, seed, epoch)
    np.random.seed(noise)
    random.seed(noise)
    torch.manual_seed(noise)
    assert epoch_of(args, seed, epoch) == before


def test_a_fresh_process_with_other_global_rng_state_draws_the_same_epoch():
    """Invariant: same (seed, epoch) -> the same list in another process with other global RNG states."""
    labels = [i % 7 for i in range(200)]
    weight = [1, 2, 3, 0, 5, 1, 9]
    code = (
        "import json, random, numpy, torch\n"
        "random.seed(3); numpy.random.seed(3); torch.manual_seed(3); numpy.random.rand(9)\n"
        "from distsampling import WeightedBalanceClassSampler\n"
        f"s = WeightedBalanceClassSampler({labels}, {weight}, 500, seed=-4)\n"
        "s.set_epoch(6)\n"
        "print(json.dumps(list(s)))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    np.random.seed(99)
    ours = WeightedBalanceClassSampler(labels, weight, 500, seed=-4)
    ours.set_epoch(6)
    assert json.loads(proc.stdout) == list(ours)


@given(a=st.tuples(any_seeds, any_epochs), b=st.tuples(any_seeds, any_epochs))
@example(a=(2**32, 0), b=(0, 1))  # one entropy list [seed, epoch] fed both the same words
@example(a=(2**31, 0), b=(0, -1))
@example(a=(0, 0), b=(0, 1))
@example(a=(0, 0), b=(1, 0))
def test_distinct_seed_epoch_pairs_draw_distinct_epochs(a, b):
    """Invariant: (seed, epoch) -> epoch is one-to-one: two pairs never share a draw. 20 samples,
    each drawn once, have 20! ~ 2.4e18 orders, so distinct streams tie with probability ~ 4e-19."""
    assume(a != b)
    args = {"labels": list(range(20)), "weight": [1] * 20, "length": 20}
    assert epoch_of(args, *a) != epoch_of(args, *b)


@given(args=labelled_datasets(), seed=seeds)
def test_a_mapping_a_numpy_array_and_a_tensor_give_the_same_draw(args, seed):
    """Invariant: weight as {label: w} equals weight aligned with the sorted labels; labels as arrays too."""
    classes = sorted(set(args["labels"]))
    as_mapping = {**args, "weight": dict(zip(classes, args["weight"]))}
    expected = epoch_of(args, seed)
    assert epoch_of(as_mapping, seed) == expected
    assert epoch_of({**args, "labels": np.asarray(args["labels"])}, seed) == expected
    if isinstance(classes[0], int):
        assert epoch_of({**args, "labels": torch.tensor(args["labels"])}, seed) == expected


def test_exact_class_shares_where_torchs_weighted_random_sampler_scatters():
    """Invariant: per-sample weights w_c / n_c give torch the same expected shares; ours hits them exactly.

    Fixed seeds, 400 epochs of 1000 draws, classes of 900/90/10 samples weighted 1:2:3. Torch's
    class count is Binomial(1000, p_c): its mean over 400 epochs must lie within 4 standard errors
    of the quota, and its spread within 20% of the binomial one (both hold with probability
    > 0.999 for any seed; the seed is fixed, so the test is deterministic). Ours never deviates
    from the rounded quota.
    """
    sizes, weight, length, runs = [900, 90, 10], [1, 2, 3], 1000, 400
    labels = torch.repeat_interleave(torch.arange(3), torch.tensor(sizes))
    shares = torch.tensor(weight, dtype=torch.double) / sum(weight)
    quota = (shares * length).tolist()  # [166.67, 333.33, 500.0]
    per_sample = (torch.tensor(weight, dtype=torch.double) / torch.tensor(sizes))[labels]
    theirs = tud.WeightedRandomSampler(
        per_sample, length, generator=torch.Generator().manual_seed(0)
    )
    ours = WeightedBalanceClassSampler(labels, weight, length)
    counts_torch, counts_ours = [], []
    for epoch in range(runs):
        ours.set_epoch(epoch)
        counts_ours.append(torch.bincount(labels[list(ours)], minlength=3))
        counts_torch.append(torch.bincount(labels[list(theirs)], minlength=3))
    t, o = torch.stack(counts_torch).double(), torch.stack(counts_ours).double()
    binomial_sd = (length * shares * (1 - shares)).sqrt()  # (3,)
    assert torch.all((t.mean(0) - torch.tensor(quota)).abs() <= 4 * binomial_sd / runs**0.5)
    assert torch.all((t.std(0) / binomial_sd - 1).abs() <= 0.2)
    assert (t - torch.tensor(quota)).abs().max() > 20  # torch: tens of samples off in some epoch
    assert o.tolist() == [largest_remainder_counts(weight, length)] * runs  # ours: [167, 333, 500]
    assert (o - torch.tensor(quota)).abs().max() < 1


def handed_in(values: np.ndarray, form: str) -> object:
    """``values`` as the user hands them in: a list, a numpy array or a tensor."""
    return {
        "list": values.tolist,
        "numpy": values.copy,
        "tensor": lambda: torch.from_numpy(values),
    }[form]()


@given(data=class_labelled_arrays())
def test_labels_of_any_number_of_classes_group_into_sorted_classes(data):
    """Invariant: grouping finds the sorted distinct labels, their counts, and every sample under its
    own class in index order; for 1 to 70,000 classes (past the 8- and 16-bit class codes), labels
    from -1, 0, 1 or anywhere, dense or sparse."""
    labels, sizes, form = data
    values, counts = np.unique(labels, return_counts=True)
    classes, class_sizes, members = _group(handed_in(labels, form))
    assert classes == values.tolist()
    assert class_sizes.tolist() == counts.tolist() == sizes.tolist()
    # members: a permutation of the samples, class after class, each class in index order
    order = np.lexsort((np.arange(len(labels)), labels))
    assert np.array_equal(members, order)


@given(
    data=class_labelled_arrays(dataset_class_counts),
    weight_form=st.sampled_from(["list", "numpy", "tensor"]),
)
def test_weights_as_class_sizes_and_length_n_draw_every_sample_once(data, weight_form):
    """Invariant: with each class weighted by its size and length N, an epoch is a permutation of
    the samples and class_sizes / samples_per_class are the label counts; up to LVIS's 1,203
    classes, weights as lists, numpy arrays or tensors."""
    labels, sizes, form = data
    ours = WeightedBalanceClassSampler(
        handed_in(labels, form), handed_in(sizes, weight_form), len(labels)
    )
    assert ours.class_sizes == ours.samples_per_class == sizes.tolist()
    idx_ours = ours.epoch_order().numpy()
    assert np.array_equal(np.sort(idx_ours), np.arange(len(labels)))
    assert list(ours) == idx_ours.tolist()


@given(args=labelled_datasets())
def test_an_omitted_seed_and_epoch_are_seed_0_and_epoch_0(args):
    """Invariant: without seed= and without set_epoch the sampler draws seed 0's epoch 0."""
    omitted = WeightedBalanceClassSampler(**args)
    assert (omitted.seed, omitted.epoch) == (0, 0)
    assert list(omitted) == epoch_of(args, seed=0, epoch=0)


@pytest.mark.parametrize("dtype", [np.int8, np.uint16, np.int64, np.uint64])
def test_integer_labels_of_any_dtype_are_the_same_classes_and_draws(dtype):
    """Invariant: numpy integer labels of any width (uint64 past 2**63 too) group as their values."""
    small = [5, 9, 5, 7, 9, 5, 7]
    base = 2**63 if dtype is np.uint64 else 0  # past int64: numpy cannot subtract it as int64
    labels = np.array(small, dtype=dtype) + dtype(base)
    ours = WeightedBalanceClassSampler(labels, [1, 2, 3], 12, seed=3)
    assert ours.classes == [base + 5, base + 7, base + 9]
    assert list(ours) == list(WeightedBalanceClassSampler(small, [1, 2, 3], 12, seed=3))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.uint8, np.int64])
def test_integer_labels_at_their_dtypes_limits_group_as_their_values(dtype):
    """Invariant: labels at both ends of their integer dtype (int8's -128 and 127, int64's -2**63
    and 2**63 - 1) are grouped as their values: no difference between them wraps around."""
    info = np.iinfo(dtype)
    values = [info.min, info.max, 0, info.max, info.min + 1]
    classes, sizes, members = _group(np.array(values, dtype=dtype))
    assert classes == sorted(set(values))
    assert sizes.tolist() == [values.count(c) for c in classes]
    assert [values[i] for i in members] == sorted(values)


def test_labels_far_apart_are_grouped_without_counting_the_span_between():
    """Invariant: labels 2 * 10**15 apart (but summing to about 0) group as two classes; no
    count of every value in between (petabytes) is attempted."""
    classes, sizes, members = _group([10**15, -(10**15), 10**15])
    assert (classes, sizes.tolist(), members.tolist()) == ([-(10**15), 10**15], [1, 2], [1, 0, 2])


def test_float_labels_in_a_tensor_that_requires_grad_are_their_values():
    """Invariant: a float label tensor that requires grad (a model's output, say) is read as its
    values: it is detached, not refused."""
    labels = torch.tensor([0.5, 1.5, 0.5], requires_grad=True)
    s = WeightedBalanceClassSampler(labels, [1, 3], length=4)
    assert (s.classes, s.class_sizes, s.samples_per_class) == ([0.5, 1.5], [2, 1], [1, 3])


@given(args=labelled_datasets(), seed=seeds)
def test_the_epoch_is_held_as_4_byte_indices(args, seed):
    """Invariant: epoch_order() is an int32 tensor below 2**31 samples (half the memory of
    int64), as DistributedSampler's order is, holding the same indices iter() yields."""
    sampler = WeightedBalanceClassSampler(**args, seed=seed)
    order = sampler.epoch_order()
    assert order.dtype == torch.int32
    assert order.tolist() == list(sampler)


def test_labels_that_are_not_0_to_c_minus_1_are_classes_not_positions():
    """Invariant: labels are looked up as values (7, 100, -3), never used as positions in weight."""
    labels = [100, 7, 7, -3, 100, 100]
    s = WeightedBalanceClassSampler(labels, [1, 0, 3], length=8)  # sorted classes: -3, 7, 100
    assert s.classes == [-3, 7, 100]
    assert Counter(labels[i] for i in s) == {-3: 2, 100: 6}


@pytest.mark.parametrize(
    ("weight", "error", "message"),
    [
        ([1, -2], ValueError, r"weight\[1\] should be finite and >= 0, but got weight\[1\]=-2$"),
        ([math.nan, 1], ValueError, r"weight\[0\] should be finite.*got weight\[0\]=nan$"),
        ({"a": 1, "b": math.inf}, ValueError, r"but got weight\['b'\]=inf$"),
        ([0, 0], ValueError, r"weight should have a positive sum, but got weight=\[0, 0\]$"),
        ([1, 2, 3], ValueError, r"one entry per distinct label \(2: \['a', 'b'\]\), but got 3"),
        ({"a": 1}, ValueError, r"no entry for label 'b': weight=\{'a': 1\}$"),
        ({"a": 1, "b": 1, "z": 2}, ValueError, r"label 'z' does not occur.*weight\['z'\]=2$"),
        ("ab", TypeError, r"weight should be a sequence or a mapping, but got weight='ab'$"),
    ],
)
def test_bad_weight_is_rejected_naming_the_value(weight, error, message):
    """Invariant: negative/NaN/inf/all-zero weights, a weight for an absent class, a wrong length
    or missing keys fail at construction, naming the entry and its value."""
    with pytest.raises(error, match=message):
        WeightedBalanceClassSampler(["a", "b", "a"], weight, length=4)


@pytest.mark.parametrize(
    ("num_classes", "shown"),
    [
        (10, r"\[0, 1, 2, 3, 4, 5, 6, 7, 8, 9\]"),
        (11, r"\[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, '\.\.\.'\]"),
        (1000, r"\[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, '\.\.\.'\]"),
    ],
)
def test_a_weight_error_shows_at_most_ten_labels(num_classes, shown):
    """Invariant: an error about the labels names up to 10 of them, then '...' (ImageNet's 1,000
    classes would flood the message)."""
    message = rf"one entry per distinct label \({num_classes}: {shown}\), but got 3 entries"
    with pytest.raises(ValueError, match=message):
        WeightedBalanceClassSampler(list(range(num_classes)), [1, 1, 1], length=4)


def test_a_zero_weight_for_an_absent_class_is_accepted():
    """Invariant: a mapping may carry classes this split lacks, if they are weighted 0."""
    s = WeightedBalanceClassSampler([0, 1, 1], {0: 1, 1: 1, 2: 0}, length=4)
    assert s.samples_per_class == [2, 2]


@given(length=st.one_of(st.integers(max_value=-1), non_integers))
def test_a_bad_length_is_rejected_naming_the_value(length):
    """Invariant: length is an int >= 0; the error names length and the value."""
    with pytest.raises((TypeError, ValueError), match=r"length should be .*but got length="):
        WeightedBalanceClassSampler([0, 1], [1, 1], length)


@pytest.mark.parametrize(
    ("labels", "error", "message"),
    [
        ([], ValueError, r"labels should have at least one sample, but got labels=\[\]$"),
        (iter([0, 1]), TypeError, r"labels should have __len__.*but got labels=<list_iterator"),
        ([[0, 1], [1, 0]], ValueError, r"labels should be 1-D.*but got shape \(2, 2\)$"),
        (np.array([1, "a", None], dtype=object), TypeError, r"labels should be mutually sortable"),
    ],
)
def test_bad_labels_are_rejected_naming_the_value(labels, error, message):
    """Invariant: empty, unsized, 2-D or unsortable labels fail with the value named."""
    with pytest.raises(error, match=message):
        WeightedBalanceClassSampler(labels, [1, 1], 4)


@pytest.mark.parametrize("seed", [-(2**63) - 1, 2**64])
def test_a_seed_outside_torchs_range_is_rejected(seed):
    """Invariant: seeds are in [-2**63, 2**64 - 1], as for torch (and the epoch stream stays one-to-one)."""
    with pytest.raises(ValueError, match=rf"seed should be in the interval .*but got seed={seed}$"):
        WeightedBalanceClassSampler([0, 1], [1, 1], 4, seed=seed)


@given(value=non_integers)
def test_seed_and_epoch_must_be_integers(value):
    """Invariant: seed and set_epoch take ints (bool excluded); the error names the value."""
    with pytest.raises(TypeError, match=r"seed should be an integer, but got seed="):
        WeightedBalanceClassSampler([0, 1], [1, 1], 4, seed=value)
    s = WeightedBalanceClassSampler([0, 1], [1, 1], 4)
    with pytest.raises(TypeError, match=r"epoch should be an integer, but got epoch="):
        s.set_epoch(value)
