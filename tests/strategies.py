"""Named Hypothesis strategies shared by every test module.

Each is a noun for the argument it draws, sized so that edge cases (empty data, fewer samples
than ranks, one rank) come up often while a whole suite stays fast.
"""

from __future__ import annotations

import numpy as np
import torch
from hypothesis import strategies as st

#: dataset lengths: 0 and lengths smaller than any world size included
dataset_lengths = st.integers(min_value=0, max_value=200)
#: number of ranks
world_sizes = st.integers(min_value=1, max_value=9)
#: seeds, negative ones included (torch accepts any int64-compatible seed)
seeds = st.integers(min_value=-(2**31), max_value=2**31)
#: torch.Generator's seed range: manual_seed takes exactly the integers in [-2**63, 2**64 - 1]
GENERATOR_SEED_LOW, GENERATOR_SEED_HIGH = -(2**63), 2**64 - 1
#: seeds at and next to the exact bounds of torch.Generator, where an off-by-one check shows
seeds_at_generator_bounds = st.sampled_from(
    [GENERATOR_SEED_LOW, GENERATOR_SEED_LOW + 1, GENERATOR_SEED_HIGH - 1, GENERATOR_SEED_HIGH]
)
#: epoch numbers
epochs = st.integers(min_value=0, max_value=1000)
#: batch sizes
batch_sizes = st.integers(min_value=1, max_value=12)
#: shuffle / drop_last flags
flags = st.booleans()


def ranks_for(world_size: int) -> st.SearchStrategy[int]:
    """A rank valid for ``world_size``: in ``[0, world_size)``."""
    return st.integers(min_value=0, max_value=world_size - 1)


@st.composite
def sampler_args(draw: st.DrawFn) -> dict:
    """Every argument of ``DistributedSampler`` but the dataset, with a rank valid for the world."""
    world = draw(world_sizes)
    return {
        "num_replicas": world,
        "rank": draw(ranks_for(world)),
        "shuffle": draw(flags),
        "seed": draw(seeds),
        "drop_last": draw(flags),
    }


@st.composite
def sampler_args_some_omitted(draw: st.DrawFn) -> dict:
    """Like :func:`sampler_args`, but shuffle, seed and drop_last are each sometimes left out,
    so that the default the user gets is compared with torch's default."""
    args = draw(sampler_args())
    for name in ("shuffle", "seed", "drop_last"):
        if draw(st.booleans()):
            del args[name]
    return args


#: one value of an argument in every form a caller may pass: Python's, numpy's and torch's ints
#: and bools, one-element tensors, floats, strings, None, a list and a two-element tensor
argument_values = st.one_of(
    st.integers(-2, 4),
    st.booleans(),
    st.integers(-2, 4).map(np.int64),
    st.integers(0, 4).map(np.uint8),
    st.booleans().map(np.bool_),
    st.integers(-2, 4).map(torch.tensor),
    st.integers(-2, 4).map(lambda v: torch.tensor([v])),
    st.booleans().map(torch.tensor),
    st.floats(-2, 4),
    st.integers(-2, 4).map(np.float64),
    st.integers(-2, 4).map(lambda v: torch.tensor(float(v))),
    st.sampled_from(["1", "no", None, [1], torch.tensor([1, 2])]),
)

#: ``(value, the int it stands for)``: every integer form the checks take, ``None`` where the
#: value is not an integer at all (bools of every kind, floats, strings, lists, larger tensors)
tagged_integers = st.one_of(
    st.integers().map(lambda v: (v, v)),
    st.integers(-(2**63), 2**63 - 1).map(lambda v: (np.int64(v), v)),
    st.integers(0, 255).map(lambda v: (np.uint8(v), v)),
    st.integers(-(2**63), 2**63 - 1).map(lambda v: (torch.tensor(v), v)),
    st.integers(-5, 5).map(lambda v: (torch.tensor([v], dtype=torch.int32), v)),
    st.booleans().map(lambda v: (v, None)),
    st.booleans().map(lambda v: (np.bool_(v), None)),
    st.booleans().map(lambda v: (torch.tensor(v), None)),
    st.floats(allow_nan=True).map(lambda v: (v, None)),
    st.integers(-5, 5).map(lambda v: (torch.tensor(float(v)), None)),
    st.sampled_from(["1", None, [1], torch.tensor([1, 2])]).map(lambda v: (v, None)),
)

#: ``(value, the bool it stands for)``: Python's, numpy's and one-element tensor bools, and
#: ``None`` for what only looks like one (0, 1, strings, a two-element bool tensor)
tagged_bools = st.one_of(
    st.booleans().map(lambda v: (v, v)),
    st.booleans().map(lambda v: (np.bool_(v), v)),
    st.booleans().map(lambda v: (torch.tensor(v), v)),
    st.booleans().map(lambda v: (torch.tensor([v]), v)),
    st.sampled_from([0, 1, "no", "", None, 1.0, torch.tensor(1), torch.tensor([True, False])]).map(
        lambda v: (v, None)
    ),
)

#: optional bounds of an integer check: ``(low, high)``, either ``None``
integer_bounds = st.tuples(
    st.one_of(st.none(), st.integers(-(2**64), 2**64)),
    st.one_of(st.none(), st.integers(-(2**64), 2**64)),
)

#: values that are not integers, for bad-input tests
non_integers = st.one_of(
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=3),
    st.just([1]),
)


# windowed
#: seeds of SequentialWindowedDataset: non-negative (they feed numpy's SeedSequence)
windowed_seeds = st.integers(min_value=0, max_value=2**64)


@st.composite
def windowed_args(draw: st.DrawFn) -> dict:
    """Every argument of ``SequentialWindowedDataset``: a data size, a window in ``[1, size]``."""
    size = draw(st.integers(min_value=1, max_value=120))
    return {
        "size": size,
        "window": draw(st.integers(min_value=1, max_value=min(size, 16))),
        "seed": draw(windowed_seeds),
        "drop_last": draw(flags),
    }


# grouped / iteration / pipeline
#: group ids of a small dataset: few distinct groups, so groups both fill and leave short batches
group_id_lists = st.lists(st.integers(min_value=-2, max_value=3), max_size=60)
#: total iterations of an iteration-based run
num_iterations = st.integers(min_value=0, max_value=40)
#: image aspect ratios (height / width), portrait to panorama
aspect_ratio_values = st.floats(min_value=0.2, max_value=5.0, allow_nan=False)
#: aspect-ratio bin edges: non-empty and strictly increasing
bin_edges = st.lists(
    st.floats(min_value=0.25, max_value=4.0, allow_nan=False), min_size=1, max_size=3, unique=True
).map(sorted)


# weighted / wrapper
#: one class weight: integers and floats, zero included (a class left out)
class_weight_values = st.one_of(
    st.integers(min_value=0, max_value=50), st.floats(min_value=0.0, max_value=100.0)
)
#: per-class weights with a positive sum
class_weight_lists = st.lists(class_weight_values, min_size=1, max_size=8).filter(
    lambda w: sum(w) > 0
)
#: epoch lengths of the weighted sampler (0 included), also totals to apportion
epoch_lengths = st.integers(min_value=0, max_value=300)
#: distinct class labels: ints with gaps and negatives, or strings (labels need not be 0..C-1)
label_sets = st.one_of(
    st.lists(st.integers(min_value=-50, max_value=10**6), min_size=1, max_size=6, unique=True),
    st.lists(st.text("abcxyz", min_size=1, max_size=3), min_size=1, max_size=6, unique=True),
)


#: numbers of classes of a whole dataset: a few, the 8-bit class codes' limit and one past it,
#: ImageNet's 1,000 and LVIS's 1,203
dataset_class_counts = st.one_of(
    st.integers(min_value=1, max_value=300), st.sampled_from([256, 257, 1000, 1203])
)
#: numbers of classes for grouping labels alone: also the 16-bit limit and beyond 65,536
class_counts = st.one_of(dataset_class_counts, st.sampled_from([65536, 65537, 70000]))
#: the smallest label of a dataset: -1 (an "ignore" class), 0, 1 (1-based) or anything
lowest_labels = st.one_of(
    st.sampled_from([-1, 0, 1]), st.integers(min_value=-(2**40), max_value=2**40)
)


@st.composite
def class_labelled_arrays(draw: st.DrawFn, counts: st.SearchStrategy[int] = class_counts) -> tuple:
    """``(labels, sizes, form)``: integer labels of many classes (one to three samples each) as a
    numpy array in shuffled order, each class's sample count, and the form to hand them in
    (``list``, ``numpy`` or ``tensor``). Labels start at a drawn lowest label and are spaced by 1
    (dense: counted) or by a larger gap (sparse: sorted), so both grouping paths run."""
    import numpy as np

    num_classes, low = draw(counts), draw(lowest_labels)
    gap = draw(st.sampled_from([1, 1, 3, 10**6]))
    rng = np.random.default_rng(draw(st.integers(min_value=0, max_value=2**32 - 1)))
    sizes = rng.integers(1, 4, num_classes)  # (C,) samples per class
    values = low + gap * np.arange(num_classes, dtype=np.int64)  # (C,) sorted distinct labels
    labels = rng.permutation(np.repeat(values, sizes))  # (N,)
    return labels, sizes, draw(st.sampled_from(["list", "numpy", "tensor"]))


@st.composite
def labelled_datasets(draw: st.DrawFn) -> dict:
    """Arguments of ``WeightedBalanceClassSampler``: shuffled labels, aligned weights, a length."""
    classes = sorted(draw(label_sets))
    sizes = draw(st.lists(st.integers(1, 25), min_size=len(classes), max_size=len(classes)))
    labels = draw(st.permutations([c for c, n in zip(classes, sizes) for _ in range(n)]))
    weights = draw(
        st.lists(class_weight_values, min_size=len(classes), max_size=len(classes)).filter(
            lambda w: sum(w) > 0
        )
    )
    return {"labels": labels, "weight": weights, "length": draw(epoch_lengths)}


#: inner epochs for the wrapper: any integer indices, repeats and negatives included
inner_epochs = st.lists(st.integers(min_value=-5, max_value=10**9), max_size=120)


# cache
#: samples per shard of a growing cache: small, so a test writes many shards quickly
shard_samples = st.integers(min_value=1, max_value=6)
#: a sequence of shard sizes added to a cache one after another
shard_sizes = st.lists(shard_samples, min_size=1, max_size=8)
#: cache capacities in bytes, from "holds one small shard" to "holds everything drawn here"
#: (a shard of k int32 samples of shape (2,) takes 128 + 8k bytes on disk)
cache_capacities = st.integers(min_value=184, max_value=1200)
#: the numeric dtypes a shard may hold (numpy names: bool, ints, uints, floats, complex)
shard_dtypes = st.sampled_from(
    ["bool", "int8", "uint16", "int32", "int64", "float16", "float32", "float64", "complex64"]
)


# growing
#: samples per shard of a hand-built snapshot (a snapshot may list no shard at all)
snapshot_layouts = st.lists(st.integers(min_value=1, max_value=5), min_size=0, max_size=5)
#: the shape of one sample: a scalar, a vector or a small image
sample_shapes = st.sampled_from([(), (3,), (2, 3)])
#: batches per epoch of a fake loader, one entry per epoch
epoch_batch_counts = st.lists(st.integers(min_value=0, max_value=6), min_size=0, max_size=4)
#: how many batches before an epoch's end the next loader starts
leads = st.integers(min_value=1, max_value=4)


# resume
#: world sizes before and after an elastic resume (1..8 ranks)
elastic_world_sizes = st.integers(min_value=1, max_value=8)
#: the kinds of sampler that resume, each built alike by tests/test_resume.py's factories
resumable_kinds = st.sampled_from(
    [
        "ResumableDistributedSampler",
        "ResumableUnpaddedDistributedSampler",
        "ResumableDistributedSamplerWrapper(ResumableWeightedBalanceClassSampler)",
        "ResumableDistributedSamplerWrapper(list)",
        "ResumableWeightedBalanceClassSampler",
        "ResumableBatchSampler(ResumableDistributedSampler)",
        "GroupedBatchSampler(ResumableDistributedSampler)",
        "IterationBasedBatchSampler(ResumableBatchSampler(ResumableDistributedSampler))",
        "ResumableDistributedSampler(SequentialWindowedDataset)",
        "ResumableIndexShuffleSampler",
    ]
)
#: the kinds that resume on another number of ranks, each sample of the epoch read once
elastic_kinds = st.sampled_from(
    [
        "ResumableDistributedSampler",
        "ResumableUnpaddedDistributedSampler",
        "ResumableDistributedSamplerWrapper(ResumableWeightedBalanceClassSampler)",
        "ResumableDistributedSamplerWrapper(list)",
        "ResumableBatchSampler(ResumableDistributedSampler)",
        "ResumableDistributedSampler(SequentialWindowedDataset)",
        "ResumableIndexShuffleSampler",
    ]
)


def stop_points(length: int) -> st.SearchStrategy[int]:
    """Where a run is interrupted: 0, the end, and everything between (mid-batch included)."""
    return st.one_of(st.just(0), st.just(length), st.integers(min_value=0, max_value=length))


@st.composite
def torch_sampler_args(draw: st.DrawFn) -> tuple[str, dict]:
    """``(kind, args)``: one of torch's samplers that draw their epoch from ``generator=``, with
    every argument but the generator: ``RandomSampler`` (with or without replacement, with or
    without ``num_samples``, more than the data included), ``WeightedRandomSampler`` (with or
    without replacement) or ``SubsetRandomSampler`` (repeats and an empty subset included)."""
    kind = draw(st.sampled_from(["RandomSampler", "WeightedRandomSampler", "SubsetRandomSampler"]))
    if kind == "RandomSampler":
        num_samples = draw(st.one_of(st.none(), st.integers(min_value=1, max_value=70)))
        n, replacement = draw(st.integers(min_value=1, max_value=30)), draw(flags)
        return kind, {
            "data_source": range(n),
            "replacement": replacement,
            "num_samples": num_samples,
        }
    if kind == "WeightedRandomSampler":
        weights = draw(st.lists(st.floats(min_value=0.1, max_value=10.0), min_size=1, max_size=20))
        replacement = draw(flags)  # without it, at most one draw per (positive) weight
        most = 40 if replacement else len(weights)
        num_samples = draw(st.integers(min_value=1, max_value=most))
        return kind, {"weights": weights, "num_samples": num_samples, "replacement": replacement}
    return kind, {"indices": draw(st.lists(st.integers(min_value=0, max_value=50), max_size=30))}


# detection and metric-learning samplers: infinite streams, repeat factors, inference shards,
# class-balanced batches
#: dataset lengths of an endless stream: at least one sample
stream_lengths = st.integers(min_value=1, max_value=40)
#: how many indices a test reads from one rank's endless stream (several passes' worth)
stream_reads = st.integers(min_value=0, max_value=120)


#: the arguments of an endless sampler but its data: a world, a rank in it, shuffle, seed
stream_sampler_args = sampler_args().map(
    lambda args: {k: v for k, v in args.items() if k != "drop_last"}
)
#: an elastic resume of an endless stream: ranks before, ranks after, indices each new rank reads
elastic_worlds = st.tuples(elastic_world_sizes, elastic_world_sizes, st.integers(0, 60))
#: one image's repeat factor: whole numbers (0 included) and fractions, up to 4 copies per pass
#: (float32 values, as detectron2's factors are; none tiny, which would make most passes empty)
repeat_factor_values = st.one_of(
    st.integers(min_value=0, max_value=4).map(float),
    st.floats(min_value=0.0625, max_value=4.0, width=32),
)
#: per-image repeat factors, adding up to at least one copy per pass on average
repeat_factor_lists = st.lists(repeat_factor_values, min_size=1, max_size=30).filter(
    lambda f: sum(f) >= 1
)
#: per image, the categories it contains: few category ids so that some are rare, some common
image_category_lists = st.lists(
    st.lists(st.integers(min_value=0, max_value=6), max_size=4), min_size=1, max_size=40
)
#: LVIS's frequency threshold t (0 included: no repeats)
repeat_thresholds = st.one_of(st.just(0.0), st.floats(min_value=1e-4, max_value=1.0))


@st.composite
def balanced_batch_args(draw: st.DrawFn) -> dict:
    """Arguments of ``BatchBalanceClassSampler``: shuffled labels (some classes smaller than K),
    P classes per batch (at most the classes there are), K samples per class, batches per rank."""
    classes = sorted(draw(label_sets))
    sizes = draw(st.lists(st.integers(1, 9), min_size=len(classes), max_size=len(classes)))
    labels = draw(st.permutations([c for c, n in zip(classes, sizes) for _ in range(n)]))
    return {
        "labels": labels,
        "num_classes": draw(st.integers(1, len(classes))),
        "num_samples": draw(st.integers(1, 5)),
        "num_batches": draw(st.integers(1, 6)),
    }


# --- mutation: weighted, wrapper, grouped, pipeline, detection samplers
#: one side of an image (height or width): any positive finite size, normalised ones below 1 too
image_sides = st.one_of(
    st.floats(min_value=1e-6, max_value=1.0),
    st.floats(min_value=1.0, max_value=1e6),
    st.integers(min_value=1, max_value=10**5),
)


# detectron2's training loader: DataLoader workers that each read chunks of one rank's stream
#: DataLoader worker processes sharing one sampler (one worker reads the whole stream unsharded)
loader_worker_counts = st.integers(min_value=2, max_value=4)
#: detectron2's shard_chunk_size (its batch size): consecutive positions one worker reads together
shard_chunk_sizes = st.integers(min_value=1, max_value=6)
#: the endless samplers detectron2's loader and mmengine's Runner read
endless_sampler_kinds = st.sampled_from(["InfiniteSampler", "RepeatFactorSampler"])
#: repeat factors with a fractional part, so that detectron2 draws its rounding uniforms (with
#: whole factors only it still draws them, and we don't: the streams differ by design)
fractional_repeat_factor_lists = repeat_factor_lists.filter(lambda f: any(x != int(x) for x in f))


# index shuffle
#: lengths short enough to permute whole in a test: 0 and 1, those below the 64-element
#: minimum domain, and domains up to 2**11
short_shuffle_lengths = st.integers(min_value=0, max_value=2000)
#: lengths of a shuffled range: short ones, each power of two and its neighbours (where the
#: domain doubles), any length up to 2**63 - 1, and the three the tests name
shuffle_lengths = st.one_of(
    short_shuffle_lengths,
    st.builds(lambda k, d: min(2**k + d, 2**63 - 1), st.integers(0, 63), st.integers(-1, 1)),
    st.integers(min_value=0, max_value=2**63 - 1),
    st.sampled_from([2**40 + 7, 5_850_000_000, 2**63 - 1]),
)
#: keys of index_shuffle: small seeds, any torch.Generator seed, and the generator's bounds
shuffle_seeds = st.one_of(
    seeds,
    st.integers(min_value=GENERATOR_SEED_LOW, max_value=GENERATOR_SEED_HIGH),
    seeds_at_generator_bounds,
)
#: epochs of epoch_key: small ones and any in its range [0, 2**64 - 1]
key_epochs = st.one_of(epochs, st.integers(min_value=0, max_value=2**64 - 1))
#: seeds of the torch generator that draws a test's large sample of positions
sample_seeds = st.integers(min_value=0, max_value=2**32 - 1)


def shuffle_positions(n: int) -> st.SearchStrategy[list[int]]:
    """Up to 20 positions in ``[0, n)``: the two ends and any between (none when ``n`` is 0)."""
    if n == 0:
        return st.just([])
    return st.lists(st.one_of(st.sampled_from([0, n - 1]), st.integers(0, n - 1)), max_size=20)


#: negative torch.Generator seeds: each has a twin, itself + 2**64, in the generator's range
negative_generator_seeds = st.integers(min_value=GENERATOR_SEED_LOW, max_value=-1)


# --- batches by token budget (TokenBudgetBatchSampler) ---------------------------------------

#: sample lengths in tokens: short lists, many repeated lengths, a few long ones
token_lengths = st.lists(st.one_of(st.integers(1, 6), st.integers(1, 40)), max_size=60)


@st.composite
def token_budget_args(draw: st.DrawFn) -> dict:
    """Every argument of ``TokenBudgetBatchSampler`` but the rank: lengths, a budget that fits
    the longest sample (sometimes exactly), the cost, buckets, batch cap, world, flags, seed."""
    lengths = draw(token_lengths)
    longest = max(lengths, default=1)
    return {
        "lengths": lengths,
        "max_tokens": draw(st.one_of(st.just(longest), st.integers(longest, 3 * longest + 5))),
        "cost": draw(st.sampled_from(["padded", "sum"])),
        "num_buckets": draw(st.integers(1, 8)),
        "max_batch_size": draw(st.one_of(st.none(), st.integers(1, 6))),
        "num_replicas": draw(st.integers(1, 5)),
        "shuffle": draw(flags),
        "seed": draw(seeds),
        "drop_last": draw(flags),
    }


# --- sharded: shard sizes, worlds and workers of ShardedIterableDataset

#: samples per shard: empty shards often, and sometimes one huge shard among small ones
shard_size_lists = st.one_of(
    st.lists(st.integers(min_value=0, max_value=9), min_size=1, max_size=10),
    st.tuples(st.lists(st.integers(0, 9), max_size=8), st.integers(200, 600))
    .map(lambda t: [*t[0], t[1]])
    .flatmap(st.permutations),
)
#: ranks reading one stream of shards
shard_world_sizes = st.integers(min_value=1, max_value=8)
#: DataLoader workers of a rank simulated in process (worker k of n, n >= 1)
shard_worker_counts = st.integers(min_value=1, max_value=3)


# --- weighted mixtures of datasets (MixtureSampler) ------------------------------------------

#: one weight of a mixture: 0, tiny ones (below 1/B of any batch here), small integers, floats
mixture_weight_values = st.one_of(
    st.just(0),
    st.sampled_from([1e-4, 0.001, 0.3, 0.5, 0.25]),
    st.integers(min_value=1, max_value=9),
    st.floats(min_value=0.0, max_value=1.0),
)


@st.composite
def mixture_sources(draw: st.DrawFn, most: int = 6) -> tuple[list[int], list[float]]:
    """``(sizes, weights)`` of 1 to ``most`` sources: a positive sum, a length of 0 only where
    the weight is 0, and sources shorter than a batch included."""
    weights = draw(st.lists(mixture_weight_values, min_size=1, max_size=most))
    if not any(weights):
        weights[draw(st.integers(0, len(weights) - 1))] = 1
    sizes = [draw(st.integers(0 if w == 0 else 1, 30)) for w in weights]
    return sizes, weights


@st.composite
def mixture_schedules(
    draw: st.DrawFn, gap: int = 40
) -> tuple[list[int], list[tuple[int, list[float]]]]:
    """``(sizes, schedule)``: 1 to 3 segments of the same sources, changes at increasing steps
    (at most ``gap`` apart); a source may start at weight 0 and join later (its length then is
    >= 1)."""
    sizes, first = draw(mixture_sources(most=4))
    sizes = [max(n, 1) for n in sizes]
    schedule, start = [(0, first)], 0
    for _ in range(draw(st.integers(0, 2))):
        start += draw(st.integers(1, gap))
        weights = draw(st.lists(mixture_weight_values, min_size=len(sizes), max_size=len(sizes)))
        schedule.append((start, weights if any(weights) else [1] * len(sizes)))
    return sizes, schedule


#: a mixture's micro-batch per rank
mixture_batch_sizes = st.integers(min_value=1, max_value=5)


#: the positive weights of 1 to 12 mixed sources: small integers, floats down to a millionth,
#: and sets with one source far lighter than the rest (the deep leaves of a Huffman tree)
mixture_positive_weights = st.lists(
    st.one_of(st.integers(1, 9), st.floats(1e-6, 1.0), st.sampled_from([1e-6, 1e-3])),
    min_size=1,
    max_size=12,
)


#: integer weights around a unit total of 16 (the rounding's rule at a scale where its every
#: boundary is reachable): 1 to 5 of them, zeros among them, a positive sum
small_unit_weights = st.lists(st.integers(0, 64), min_size=1, max_size=5).filter(any)


@st.composite
def sharded_mixtures(draw: st.DrawFn) -> tuple[list[list[int]], object]:
    """``(shard sizes per source, weights or a schedule)``: each source's total cut into 1 to 5
    shards (empty ones included), from :func:`mixture_sources` or :func:`mixture_schedules`."""
    sizes, weights = draw(st.one_of(mixture_sources(most=4), mixture_schedules(gap=6)))
    shards = []
    for total in sizes:
        cuts = sorted(draw(st.lists(st.integers(0, total), max_size=4)))
        shards.append([b - a for a, b in zip([0, *cuts], [*cuts, total], strict=True)])
    return shards, weights


#: DataLoader workers of a rank (0: the main process reads)
mixture_worker_counts = st.integers(min_value=0, max_value=3)


@st.composite
def light_among_heavy_weights(draw: st.DrawFn) -> tuple[list[int], int]:
    """``(weights, k)``: 2 to 6 integer weights, source ``k`` light (1 to 7) beside at least
    one heavy source (100 to 1000): a share of a few thousandths, whose readers' small
    departures from it add up to many steps."""
    weights = draw(st.lists(st.one_of(st.integers(1, 7), st.integers(100, 1000)), max_size=4))
    weights += [draw(st.integers(100, 1000))]  # one heavy at least
    k = draw(st.integers(0, len(weights)))
    weights.insert(k, draw(st.integers(1, 7)))
    return weights, k


@st.composite
def mutation_counts_by_function(draw: st.DrawFn) -> dict[str, dict[str, int]]:
    """One mutation run's counts per function (``f`` or ``Class.method``) of a module, as
    mutation/run.py keeps them: ``mutants`` the sum of the other four."""
    names = draw(st.sets(st.sampled_from(["_f", "g", "C.__init__", "C.m", "D.m"]), max_size=5))
    out = {}
    for name in sorted(names):
        c = {k: draw(st.integers(0, 4)) for k in ("killed", "equivalent", "timeout", "survived")}
        out[name] = {"mutants": sum(c.values()), **c}
    return out


# --- a look at the data in the main process, then a DataLoader (tests/test_peek_resume.py) ----

#: items a loop takes from a fresh iter() in the main process before its DataLoader starts
peek_lengths = st.one_of(st.just(0), st.just(1), st.integers(min_value=0, max_value=12))
#: batches the loop trains on before it takes the state (0: none)
loop_batch_counts = st.integers(min_value=0, max_value=5)


# --- a producer's error report (tests/growing/test_faults.py) -----------------------------------

#: a traceback of a few lines of any text (some non-ASCII, some empty)
short_tracebacks = st.lists(st.text(max_size=300), min_size=1, max_size=40).map("\n".join)
#: a traceback of n frames whose last line, the cause, is n characters long (n up to 3000)
deep_tracebacks = st.builds(
    lambda n, c: "  frame\n" * n + "ValueError: " + c * n,
    st.integers(0, 3000),
    st.sampled_from(["x", "é", " "]),
)
traceback_texts = short_tracebacks | deep_tracebacks


@st.composite
def changing_weights(draw: st.DrawFn) -> tuple[list[list[int]], list[int]]:
    """``(units, lengths)``: 1 to 30 pieces of a schedule's integer weights over 1 to 5 sources
    (small ones, or up to ``2**28`` so that a node weighs past ``2**30``; zeros among them, a
    positive sum a piece; the first piece's zeros wait under a node of
    weight 0), and each piece's stream positions, 1 to 12 (the last piece's: read past it)."""
    K = draw(st.integers(1, 5))
    unit = st.one_of(st.integers(0, 9), st.integers(0, 2**28))  # small, or past 2**30 a node
    piece = st.lists(unit, min_size=K, max_size=K).filter(any)
    units = draw(st.lists(piece, min_size=1, max_size=30))
    return units, draw(st.lists(st.integers(1, 12), min_size=len(units), max_size=len(units)))


@st.composite
def large_changing_weights(draw: st.DrawFn) -> tuple[list[list[int]], list[int]]:
    """:func:`changing_weights` at the largest scale: 1 to 8 pieces of up to 4 sources' integer
    weights up to ``2**29`` each (a node's sum up to ``2**31``, where its scale is 1: float
    weights are rounded to ``2**31`` units), and each piece's length, 1 to 6."""
    K = draw(st.integers(1, 4))
    weight = st.integers(0, 2**29) | st.sampled_from([0, 1, 2**29])
    units = draw(st.lists(st.lists(weight, min_size=K, max_size=K).filter(any),
                          min_size=1, max_size=8))  # fmt: skip
    return units, draw(st.lists(st.integers(1, 6), min_size=len(units), max_size=len(units)))


# the bytes a per-rank phase table may keep every piece in (mixing/rank_phases.py): its own
# default (every piece kept, for these small grids) or a few hundred bytes, so that only every
# C-th piece is kept and a read makes its rank's stream again from the one before
rank_table_budgets = st.just(1 << 26) | st.integers(1, 600)
