"""Properties of RepeatFactorSampler and repeat_factors_from_category_frequency: index-exact
against detectron2's definition built here from torch calls, floor/ceil copies per pass, mean
counts tending to the factor, factors all 1 giving the plain stream, resume, bad input."""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections import Counter
from itertools import islice

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from distsampling import (
    InfiniteSampler,
    RepeatFactorSampler,
    repeat_factors_from_category_frequency,
)
from strategies import (
    elastic_worlds,
    flags,
    image_category_lists,
    repeat_factor_lists,
    repeat_thresholds,
    seeds,
    stream_reads,
    stream_sampler_args,
)


def repeat_stream_torch(factors: torch.Tensor, shuffle: bool, seed: int, length: int) -> list[int]:
    """The global stream as detectron2 defines it: per pass, stochastic rounding with
    ``torch.rand`` from the one generator, the indices listed image by image, then shuffled by
    ``randperm`` from the same generator."""
    g = torch.Generator()
    g.manual_seed(seed)
    int_part = torch.trunc(factors)
    frac_part = factors - int_part
    out: list[int] = []
    while len(out) < length:
        rands = torch.rand(len(frac_part), generator=g)
        reps = int_part + (rands < frac_part).float()
        indices = []
        for i, rep in enumerate(reps):
            indices.extend([i] * int(rep.item()))
        indices = torch.tensor(indices, dtype=torch.int64)
        if shuffle:
            indices = indices[torch.randperm(len(indices), generator=g)]
        out += indices.tolist()
    return out[:length]


fractional_factor_lists = repeat_factor_lists.filter(lambda f: any(x != int(x) for x in f))


@given(factors=fractional_factor_lists, args=stream_sampler_args, k=stream_reads)
def test_each_rank_reads_its_strided_positions_of_detectron2s_stream(factors, args, k):
    """Invariant: with a fractional factor, rank r's first k indices are positions r, r + W, ...
    of detectron2's stream (float32 factors, as its category-frequency function returns)."""
    W, r = args["num_replicas"], args["rank"]
    f32 = torch.tensor(factors, dtype=torch.float32)
    idx_ours = list(islice(RepeatFactorSampler(f32, **args), k))
    idx_torch = repeat_stream_torch(f32, args["shuffle"], args["seed"], r + k * W)[r::W]
    assert idx_ours == idx_torch


@given(n=st.integers(1, 30), args=stream_sampler_args, k=stream_reads)
def test_factors_all_one_give_the_infinite_sampler_stream_exactly(n, args, k):
    """Invariant: nothing to round, nothing drawn: the plain endless stream, index for index."""
    idx_ours = list(islice(RepeatFactorSampler([1.0] * n, **args), k))
    assert idx_ours == list(islice(InfiniteSampler(range(n), **args), k))


def passes_of(sampler: RepeatFactorSampler, count: int) -> list[list[int]]:
    """The first ``count`` whole non-empty passes of a one-rank sampler, each index grouped by
    the pass it came from: the state right after reading it names that pass by where it
    starts (an empty pass starts where the next one does)."""
    passes: dict[int, list[int]] = {}
    it = iter(sampler)
    while len(passes) <= count:  # a pass is whole once the next one has begun
        i = next(it)
        passes.setdefault(sampler.state_dict()["pass_start"], []).append(i)
    return list(passes.values())[:count]


@given(factors=repeat_factor_lists, shuffle=flags, seed=seeds)
def test_each_image_appears_floor_or_ceil_of_its_factor_times_per_pass(factors, shuffle, seed):
    """Invariant: in every whole pass, image i appears floor(r_i) or ceil(r_i) times."""
    s = RepeatFactorSampler(factors, 1, 0, shuffle=shuffle, seed=seed)
    for one_pass in passes_of(s, 4):
        counts = Counter(one_pass)
        for i, r in enumerate(factors):
            assert math.floor(r) <= counts[i] <= math.ceil(r)


@given(seed=seeds)
@settings(settings.get_profile("costly"))  # 1500 passes an example
def test_the_mean_count_per_pass_tends_to_the_factor(seed):
    """Invariant: stochastic rounding is unbiased: over 1500 passes each image's mean count is
    within 6 standard errors of its factor."""
    factors = [0.25, 1.5, 2.75, 1.0, 0.0, 3.1]
    s = RepeatFactorSampler(factors, 1, 0, seed=seed)
    passes = passes_of(s, 1500)
    counts = Counter(i for p in passes for i in p)
    for i, r in enumerate(factors):
        p = r - math.floor(r)
        assert abs(counts[i] / len(passes) - r) <= 6 * math.sqrt(p * (1 - p) / len(passes))


@given(
    factors=repeat_factor_lists, args=stream_sampler_args, k=stream_reads, more=st.integers(0, 50)
)
def test_resume_from_a_saved_state_equals_the_uninterrupted_stream(factors, args, k, more):
    """Invariant: save after k indices (through JSON), load into a new sampler: the next indices
    are exactly those the uninterrupted sampler reads next."""
    s = RepeatFactorSampler(factors, **args)
    head = list(islice(s, k))
    resumed = RepeatFactorSampler(factors, **args)
    resumed.load_state_dict(json.loads(json.dumps(s.state_dict())))
    assert head + list(islice(resumed, more)) == list(
        islice(RepeatFactorSampler(factors, **args), k + more)
    )


@given(factors=repeat_factor_lists, args=stream_sampler_args, k=stream_reads, worlds=elastic_worlds)
def test_any_ranks_state_resumes_every_rank_of_any_world_reading_each_position_once(
    factors, args, k, worlds
):
    """Invariant: after W1 ranks each read k indices, their states are all equal; loaded on W2
    ranks (W2 == W1 too), each reading m more, the old and new reads laid out at their global
    positions are the one-rank stream's first k * W1 + m * W2: every position read once."""
    (W1, W2, m), shuffle, seed = worlds, args["shuffle"], args["seed"]
    states, head = [], []
    for r in range(W1):
        s = RepeatFactorSampler(factors, W1, r, shuffle, seed)
        head.append(list(islice(s, k)))
        states.append(json.loads(json.dumps(s.state_dict())))
    assert all(state == states[0] for state in states)
    tail = []
    for r in range(W2):
        s = RepeatFactorSampler(factors, W2, r, shuffle, seed)
        s.load_state_dict(states[-1])  # the last rank's: any rank's would do
        tail.append(list(islice(s, m)))
    laid_out = [head[p % W1][p // W1] for p in range(k * W1)]
    laid_out += [tail[p % W2][p // W2] for p in range(m * W2)]
    assert laid_out == list(
        islice(RepeatFactorSampler(factors, 1, 0, shuffle, seed), len(laid_out))
    )


@given(factors=repeat_factor_lists, args=stream_sampler_args, k=stream_reads)
def test_the_ranks_together_read_the_one_rank_stream(factors, args, k):
    """Invariant: interleaving the W ranks' first k indices gives the one-rank stream's first k * W."""
    W, shuffle, seed = args["num_replicas"], args["shuffle"], args["seed"]
    per_rank = [
        list(islice(RepeatFactorSampler(factors, W, r, shuffle, seed), k)) for r in range(W)
    ]
    interleaved = [per_rank[p % W][p // W] for p in range(k * W)]
    assert interleaved == list(islice(RepeatFactorSampler(factors, 1, 0, shuffle, seed), k * W))


# repeat factors from category frequency


def lvis_factors(dataset_dicts: list[dict], t: float) -> list[float]:
    """detectron2's computation on its dataset format, step by step as the LVIS paper states it."""
    freq: dict[int, float] = {}
    for d in dataset_dicts:
        for c in {a["category_id"] for a in d["annotations"]}:
            freq[c] = freq.get(c, 0) + 1
    freq = {c: v / len(dataset_dicts) for c, v in freq.items()}
    rep = {c: max(1.0, math.sqrt(t / f)) for c, f in freq.items()}
    return [
        max({rep[a["category_id"]] for a in d["annotations"]}, default=1.0) for d in dataset_dicts
    ]


@given(images=image_category_lists, t=repeat_thresholds)
def test_factors_equal_the_lvis_rule_computed_on_dataset_dicts(images, t):
    """Invariant: the same float32 factors as the rule computed on detectron2's dataset dicts."""
    dicts = [{"annotations": [{"category_id": c} for c in cats]} for cats in images]
    ours = repeat_factors_from_category_frequency(images, t)
    assert ours.dtype == torch.float32
    assert ours.tolist() == torch.tensor(lvis_factors(dicts, t), dtype=torch.float32).tolist()


@given(images=image_category_lists, t=repeat_thresholds)
def test_factors_are_at_least_one_and_largest_for_the_rarest_category(images, t):
    """Invariant: every factor >= 1; an image without categories gets exactly 1; an image with
    the rarest category gets the largest factor; t = 0 repeats nothing."""
    factors = repeat_factors_from_category_frequency(images, t).tolist()
    assert all(f >= 1 for f in factors)
    assert all(f == 1 for f, cats in zip(factors, images) if not cats)
    counts = Counter(c for cats in images for c in set(cats))
    if counts:
        rarest = min(counts, key=counts.get)
        assert max(f for f, cats in zip(factors, images) if rarest in cats) == max(factors)
    if t == 0:
        assert factors == [1.0] * len(images)


# bad input


@pytest.mark.parametrize(
    ("factors", "error", "message"),
    [
        ([1.0, -0.5], ValueError, r"finite and >= 0, but got repeat_factors\[1\]=-0.5$"),
        ([math.nan], ValueError, r"but got repeat_factors\[0\]=nan$"),
        ([1.0, math.inf], ValueError, r"but got repeat_factors\[1\]=inf$"),
        (
            [0.0, 0.0],
            ValueError,
            r"^repeat_factors should have a positive factor, or every pass is empty and the "
            r"stream never yields, but got repeat_factors=\[0\.0, 0\.0\]$",
        ),
        ([], ValueError, r"should have a positive factor"),
        ([[1.0], [2.0]], TypeError, r"should be a 1-D list, array or tensor of real numbers"),
        (["1"], TypeError, r"but got repeat_factors=\['1'\]$"),
        (3.0, TypeError, r"but got repeat_factors=3.0$"),
    ],
)
def test_bad_factors_are_rejected_naming_the_value(factors, error, message):
    """Invariant: negative, NaN, inf, all-zero, empty, 2-D or non-numeric factors fail."""
    with pytest.raises(error, match=message):
        RepeatFactorSampler(factors, 1, 0, seed=0)


@pytest.mark.parametrize(
    ("images", "t", "error", "message"),
    [
        (
            [[1]],
            -0.1,
            ValueError,
            r"repeat_thresh should be finite and >= 0, but got repeat_thresh=-0.1$",
        ),
        ([[1]], math.nan, ValueError, r"but got repeat_thresh=nan$"),
        (
            [[1]],
            True,
            TypeError,
            r"repeat_thresh should be a real number, but got repeat_thresh=True$",
        ),
        ([[1]], "0.1", TypeError, r"but got repeat_thresh='0.1'$"),
        (
            [[1], "cat"],
            0.1,
            TypeError,
            r"image_categories\[1\] should be a collection of category ids, but got image_categories\[1\]='cat'$",
        ),
        ([[1], 3], 0.1, TypeError, r"but got image_categories\[1\]=3$"),
        (iter([[1]]), 0.1, TypeError, r"image_categories should have __len__"),
    ],
)
def test_bad_category_input_is_rejected_naming_the_value(images, t, error, message):
    """Invariant: a bad threshold or an image entry that is not a collection of ids fails."""
    with pytest.raises(error, match=message):
        repeat_factors_from_category_frequency(images, t)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"repeat_factors": "0" * 16}, r"repeat_factors was '0{16}' when saved"),
        ({"size": 4}, r"size was 4 when saved, but is 3 now"),
        ({"kind": "InfiniteSampler"}, r"kind was 'InfiniteSampler' when saved"),
        ({"pass_start": 10**6}, r"pass_start should be <= the position every rank has passed"),
        ({"pass": -1}, r"pass should be >= 0, but got pass=-1$"),
    ],
)
def test_a_bad_state_is_rejected_naming_the_field(change, message):
    """Invariant: a state taken with other factors (their digest differs), another length or
    class, or an impossible position, is refused naming the field."""
    s = RepeatFactorSampler([0.5, 2.0, 1.5], 2, 0, seed=1)
    list(islice(s, 5))
    state = {**s.state_dict(), **change}
    with pytest.raises(ValueError, match=message):
        RepeatFactorSampler([0.5, 2.0, 1.5], 2, 0, seed=1).load_state_dict(state)


def test_an_image_whose_uniform_equals_its_fraction_is_not_repeated():
    """Invariant: image i gets its extra copy when u_i < frac(r_i), strictly, as detectron2: with
    each fraction set to exactly the uniform the pass will draw, no image gets an extra copy."""
    u = torch.rand(8, generator=torch.Generator().manual_seed(3))  # pass 0's uniforms
    factors = (1.0 + u.double()).tolist()  # frac(r_i) == u_i exactly
    s = RepeatFactorSampler(factors, 1, 0, shuffle=False, seed=3)
    assert list(islice(s, 8)) == list(range(8))


def test_factors_are_read_at_float64_precision():
    """Invariant: a factor of 1 + 2**-30 has a fraction (float32 would round it to 1.0): its
    pass draws the rounding uniforms before the shuffle, so the stream is not that of 1.0."""
    plain = RepeatFactorSampler([1.0] * 10, 1, 0, seed=0)
    fine = RepeatFactorSampler([1.0 + 2**-30] + [1.0] * 9, 1, 0, seed=0)
    g = torch.Generator().manual_seed(0)
    torch.rand(10, generator=g)  # the uniforms (each u >= 2**-30 here: no extra copy)
    assert list(islice(fine, 10)) == torch.randperm(10, generator=g).tolist()
    assert list(islice(fine, 10)) != list(islice(plain, 10))


def test_category_frequency_factors_are_float32_whatever_the_default_dtype():
    """Invariant: the factors are float32, as detectron2 returns them, also when torch's default
    dtype is float64."""
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    try:
        factors = repeat_factors_from_category_frequency([["a"], ["a", "b"]], 0.9)
    finally:
        torch.set_default_dtype(before)
    assert factors.dtype == torch.float32


@pytest.mark.parametrize("factors", [[1.0, 2.0, 1.0], [1.0, 2.5, 0.5]])
def test_an_omitted_shuffle_shuffles_and_seed_none_draws_only_what_it_needs(factors):
    """Invariant: shuffle defaults to True; seed=None draws a seed from numpy's global RNG when
    the stream needs randomness (a shuffle or a fractional factor), and nothing otherwise."""
    omitted = RepeatFactorSampler(factors, 1, 0, seed=4)
    assert list(islice(omitted, 12)) == list(
        islice(RepeatFactorSampler(factors, 1, 0, shuffle=True, seed=4), 12)
    )
    np.random.seed(9)
    assert RepeatFactorSampler(factors, 1, 0).seed == np.random.RandomState(9).randint(2**31)
    np.random.seed(9)
    unshuffled = RepeatFactorSampler(factors, 1, 0, shuffle=False)
    needs_seed = any(f != int(f) for f in factors)
    drawn = np.random.RandomState(9).randint(2**31)
    assert unshuffled.seed == (drawn if needs_seed else 0)


def test_a_bad_shuffle_flag_is_rejected_naming_it():
    """Invariant: shuffle is a bool; the error names shuffle and the value."""
    with pytest.raises(TypeError, match=r"^shuffle should be a boolean value, but got shuffle=1"):
        RepeatFactorSampler([1.0], 1, 0, shuffle=1, seed=0)


def test_the_state_names_the_class_the_format_and_the_factors_digest():
    """Invariant: a checkpoint names its sampler ('RepeatFactorSampler'), format version 2 and the
    factors as the first 16 hex digits of the SHA-256 of their float64 bytes, so a state of other
    factors (or from another version of this format) is refused."""
    state = RepeatFactorSampler([1.0, 2.5], 1, 0, seed=0).state_dict()
    digest = hashlib.sha256(np.array([1.0, 2.5]).tobytes()).hexdigest()[:16]
    assert (state["kind"], state["version"], state["repeat_factors"]) == (
        "RepeatFactorSampler",
        2,
        digest,
    )
    with pytest.raises(ValueError, match=r"repeat_factors was '[0-9a-f]{16}' when saved, but is"):
        RepeatFactorSampler([1.0, 3.5], 1, 0, seed=0).load_state_dict(state)


# the sqrt flag of detectron2's category-frequency factors


def detectron2_category_factors(dataset_dicts: list[dict], repeat_thresh: float, sqrt: bool):
    """detectron2's ``RepeatFactorTrainingSampler.repeat_factors_from_category_frequency`` with
    its ``sqrt`` flag, as written there (detectron2/data/samplers/distributed_sampler.py)."""
    from collections import defaultdict

    # 1. for each category c, the fraction of images that contain it: f(c)
    category_freq: dict = defaultdict(int)
    for dataset_dict in dataset_dicts:
        for cat_id in {ann["category_id"] for ann in dataset_dict["annotations"]}:
            category_freq[cat_id] += 1
    num_images = len(dataset_dicts)
    for k, v in category_freq.items():
        category_freq[k] = v / num_images
    # 2. r(c) = max(1, sqrt(t / f(c))), or max(1, t / f(c)) with sqrt=False
    category_rep = {
        cat_id: max(1.0, math.sqrt(repeat_thresh / cat_freq) if sqrt else repeat_thresh / cat_freq)
        for cat_id, cat_freq in category_freq.items()
    }
    # 3. r(I) = max over the categories c of image I of r(c)
    rep_factors = []
    for dataset_dict in dataset_dicts:
        cat_ids = {ann["category_id"] for ann in dataset_dict["annotations"]}
        rep_factors.append(max({category_rep[cat_id] for cat_id in cat_ids}, default=1.0))
    return torch.tensor(rep_factors, dtype=torch.float32)


@given(images=image_category_lists, t=repeat_thresholds, sqrt=flags)
def test_factors_with_or_without_the_square_root_equal_detectron2s(images, t, sqrt):
    """Invariant: for either sqrt, the same float32 factors as detectron2's function with that
    flag on its dataset dicts; sqrt=True is the default; without the square root no factor is
    smaller, and an image's factor is max(1, t / f) of its rarest category."""
    dicts = [{"annotations": [{"category_id": c} for c in cats]} for cats in images]
    ours = repeat_factors_from_category_frequency(images, t, sqrt=sqrt)
    assert ours.dtype == torch.float32
    assert ours.tolist() == detectron2_category_factors(dicts, t, sqrt).tolist()
    rooted = repeat_factors_from_category_frequency(images, t)
    assert rooted.tolist() == detectron2_category_factors(dicts, t, True).tolist()
    plain = repeat_factors_from_category_frequency(images, t, sqrt=False)
    assert all(p >= r for p, r in zip(plain.tolist(), rooted.tolist()))
    counts = Counter(c for cats in images for c in set(cats))
    for cats, factor in zip(images, plain.tolist()):
        rarest = min((counts[c] for c in cats), default=None)
        expected = 1.0 if rarest is None else max(1.0, t / (rarest / len(images)))
        assert factor == torch.tensor(expected, dtype=torch.float32).item()


@pytest.mark.parametrize("sqrt", [1, 0, "no", None, 1.0])
def test_a_sqrt_flag_that_is_not_a_bool_is_rejected_naming_it(sqrt):
    """Invariant: sqrt is a bool (numpy's too); anything else fails naming sqrt and the value."""
    message = rf"^sqrt should be a boolean value, but got sqrt={sqrt!r}$"
    with pytest.raises(TypeError, match=message):
        repeat_factors_from_category_frequency([[1], [1, 2]], 0.5, sqrt=sqrt)
    factors = repeat_factors_from_category_frequency([[1], [2]], 1.0, sqrt=np.bool_(False))
    assert factors.tolist() == [2.0, 2.0]


def test_consumed_saves_the_stream_where_the_loop_stopped_and_a_world_past_int64_is_named():
    """Invariant: ``state_dict(consumed=k)`` after ``h >= k`` indices handed out is the state of
    a sampler that handed out exactly ``k``; more than ``h`` is refused, naming both; a world
    past int64 is refused, naming it."""
    factors = [1.0, 2.5, 0.5, 1.0, 3.0]
    s = RepeatFactorSampler(factors, num_replicas=2, rank=1, seed=4)
    list(islice(iter(s), 9))
    exact = RepeatFactorSampler(factors, num_replicas=2, rank=1, seed=4)
    list(islice(iter(exact), 4))
    assert s.state_dict(consumed=4) == exact.state_dict() != s.state_dict()
    words = ("consumed should be <= 9 (samples handed out): the latest iter() handed out 9, but "
             "got consumed=10")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        s.state_dict(consumed=10)
    words = (
        "num_replicas should be < 2**63 (stored as int64), but got num_replicas=9223372036854775808"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        RepeatFactorSampler(factors, num_replicas=2**63, rank=0)
