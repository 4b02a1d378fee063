"""Properties of the detection pipeline: make_data_sampler -> make_batch_data_sampler, per rank."""

from __future__ import annotations

import bisect
from itertools import accumulate, pairwise

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from hypothesis import given
from hypothesis import strategies as st

from distsampling import (
    BatchSampler,
    GroupedBatchSampler,
    aspect_ratio_groups,
    aspect_ratios,
    make_batch_data_sampler,
    make_data_sampler,
)
from strategies import (
    aspect_ratio_values,
    batch_sizes,
    bin_edges,
    epochs,
    flags,
    image_sides,
    num_iterations,
    seeds,
    world_sizes,
)

#: the aspect ratios of a small dataset (its length is the dataset length)
ratio_lists = st.lists(aspect_ratio_values, max_size=40)
#: no grouping, or bin edges
groupings = st.none() | bin_edges


def rank_pipeline(ratios, world, rank, *, shuffle, seed, grouping, batch_size, **iters):
    """The whole chain for one rank, ranks simulated in this process."""
    sampler = make_data_sampler(ratios, shuffle, True, seed, num_replicas=world, rank=rank)
    return make_batch_data_sampler(ratios, sampler, grouping, batch_size, **iters)


@given(
    ratios=ratio_lists,
    world=world_sizes,
    shuffle=flags,
    seed=seeds,
    grouping=groupings,
    batch_size=batch_sizes,
    total=num_iterations,
    data=st.data(),
)
def test_with_num_iters_every_rank_yields_the_same_number_of_batches(
    ratios, world, shuffle, seed, grouping, batch_size, total, data
):
    """Invariant: distributed=True and num_iters set: every rank yields num_iters - start_iter batches.

    The only other outcome is an empty dataset with iterations left, where every rank raises the
    same error instead of looping forever: no rank ever waits for another in a collective.
    """
    start = data.draw(st.integers(0, total), label="start_iter")
    outcomes = set()
    for rank in range(world):
        pipeline = rank_pipeline(
            ratios,
            world,
            rank,
            shuffle=shuffle,
            seed=seed,
            grouping=grouping,
            batch_size=batch_size,
            num_iters=total,
            start_iter=start,
        )
        try:
            outcomes.add(len(list(pipeline)))
        except RuntimeError as err:
            outcomes.add(str(err))
    if ratios or start == total:
        assert outcomes == {total - start}
    else:  # an empty dataset with iterations left: the same error on every rank
        assert len(outcomes) == 1
        assert "no batch in pass epoch=0" in str(outcomes.pop())


def test_grouping_alone_can_give_ranks_different_batch_counts_per_epoch():
    """Invariant: the fault num_iters fixes exists: grouped per-epoch counts differ across ranks."""
    ratios = [0.75, 0.75, 0.75, 1.33, 0.75, 0.75]  # rank 0 reads 0 2 4, rank 1 reads 1 3 5
    counts = [
        len(list(rank_pipeline(ratios, 2, r, shuffle=False, seed=0, grouping=[1.0], batch_size=3)))
        for r in range(2)
    ]
    assert counts == [1, 2]  # rank 0: [0, 2, 4]; rank 1: [1, 5], [3]: DDP would hang
    fixed = [
        len(
            list(
                rank_pipeline(
                    ratios, 2, r, shuffle=False, seed=0, grouping=[1.0], batch_size=3, num_iters=4
                )
            )
        )
        for r in range(2)
    ]
    assert fixed == [4, 4]


@given(
    ratios=ratio_lists.filter(bool),
    world=world_sizes,
    seed=seeds,
    grouping=groupings,
    batch_size=batch_sizes,
    passes=st.integers(1, 3),
)
def test_pass_p_of_every_rank_is_its_torch_share_of_epoch_p_so_ranks_stay_disjoint(
    ratios, world, seed, grouping, batch_size, passes
):
    """Invariant: with num_iters, rank r's pass p holds torch's DistributedSampler share of epoch p.

    Passes are seeded by their number, not by the iteration count (maskrcnn-benchmark's
    ``set_epoch(iteration)``): grouped ranks start pass 1 at different iterations, and seeding
    by the count would shuffle their shares with different epochs, so they would overlap.
    """
    n = len(ratios)
    shares = []  # shares[r][p]: the indices of rank r's pass p, sorted
    for rank in range(world):
        sampler = make_data_sampler(ratios, True, True, seed, num_replicas=world, rank=rank)
        one_pass = make_batch_data_sampler(ratios, sampler, grouping, batch_size)
        lengths = []
        for p in range(passes):
            sampler.set_epoch(p)
            lengths.append(len(one_pass))
        run = list(make_batch_data_sampler(ratios, sampler, grouping, batch_size, sum(lengths)))
        cuts = pairwise(accumulate(lengths, initial=0))
        shares.append([sorted(i for b in run[a:z] for i in b) for a, z in cuts])
    for p in range(passes):
        for rank in range(world):
            theirs = tud.DistributedSampler(ratios, world, rank, shuffle=True, seed=seed)
            theirs.set_epoch(p)
            assert shares[rank][p] == sorted(theirs)
        assert set().union(*(shares[r][p] for r in range(world))) == set(range(n))


@given(
    ratios=ratio_lists.filter(bool),
    world=world_sizes,
    seed=seeds,
    grouping=groupings,
    batch_size=batch_sizes,
    total=num_iterations,
    data=st.data(),
)
def test_a_resumed_rank_reads_exactly_the_batches_of_the_uninterrupted_run(
    ratios, world, seed, grouping, batch_size, total, data
):
    """Invariant: through the whole chain, start_iter=k yields the uninterrupted run from batch k."""
    rank = data.draw(st.integers(0, world - 1), label="rank")
    k = data.draw(st.integers(0, total), label="k")
    args = {"shuffle": True, "seed": seed, "grouping": grouping, "batch_size": batch_size}
    full = list(rank_pipeline(ratios, world, rank, **args, num_iters=total))
    resumed = list(rank_pipeline(ratios, world, rank, **args, num_iters=total, start_iter=k))
    assert resumed == full[k:]


@given(n=st.integers(1, 60), seed=seeds, epoch=epochs)  # torch rejects an empty RandomSampler
def test_shuffle_without_distribution_is_torchs_random_sampler_seeded_by_seed_plus_epoch(
    n, seed, epoch
):
    """Invariant: the non-distributed shuffle is RandomSampler with a seed + epoch generator."""
    sampler = make_data_sampler(range(n), shuffle=True, distributed=False, seed=seed)
    sampler.set_epoch(epoch)
    generator = torch.Generator().manual_seed(seed + epoch)
    idx_ours = list(sampler)
    idx_torch = list(tud.RandomSampler(range(n), generator=generator))
    assert idx_ours == idx_torch


@given(
    n=st.integers(0, 60), world=world_sizes, shuffle=flags, seed=seeds, epoch=epochs, data=st.data()
)
def test_distributed_sampling_is_torchs_distributed_sampler(n, world, shuffle, seed, epoch, data):
    """Invariant: distributed=True reads exactly torch's DistributedSampler share for the rank."""
    rank = data.draw(st.integers(0, world - 1), label="rank")
    ours = make_data_sampler(range(n), shuffle, True, seed, num_replicas=world, rank=rank)
    theirs = tud.DistributedSampler(range(n), world, rank, shuffle=shuffle, seed=seed)
    ours.set_epoch(epoch)
    theirs.set_epoch(epoch)
    assert list(ours) == list(theirs)


@given(
    n=st.integers(0, 60), world=world_sizes, shuffle=flags, epoch=st.none() | epochs, data=st.data()
)
def test_an_omitted_seed_is_torchs_default_seed(n, world, shuffle, epoch, data):
    """Invariant: without seed= (and with or without set_epoch) the pipeline reads what torch's
    DistributedSampler, or RandomSampler seeded by 0 + epoch, reads without it."""
    rank = data.draw(st.integers(0, world - 1), label="rank")
    ours = make_data_sampler(range(n), shuffle, True, num_replicas=world, rank=rank)
    theirs = tud.DistributedSampler(range(n), world, rank, shuffle=shuffle)
    alone = make_data_sampler(range(n), True, False)
    if epoch is not None:
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
        alone.set_epoch(epoch)
    assert list(ours) == list(theirs)
    if n:  # torch rejects an empty RandomSampler
        generator = torch.Generator().manual_seed(epoch or 0)
        assert list(alone) == list(tud.RandomSampler(range(n), generator=generator))


@given(
    ratios=st.lists(aspect_ratio_values, min_size=1, max_size=40),  # a run needs a batch
    grouping=groupings,
    batch_size=batch_sizes,
    total=num_iterations,
    omit=st.sampled_from(["num_iters", "start_iter"]),
)
def test_omitted_num_iters_is_one_pass_and_omitted_start_iter_is_the_start(
    ratios, grouping, batch_size, total, omit
):
    """Invariant: leaving out num_iters is num_iters=None (one pass per iter); leaving out
    start_iter is start_iter=0 (a run from its first batch)."""
    sampler = range(len(ratios))
    given_args = {"num_iters": None} if omit == "num_iters" else {"num_iters": total}
    explicit = make_batch_data_sampler(
        ratios, sampler, grouping, batch_size, **{"start_iter": 0, **given_args}
    )
    omitted = make_batch_data_sampler(
        ratios, sampler, grouping, batch_size, **({} if omit == "num_iters" else given_args)
    )
    assert list(omitted) == list(explicit)
    assert len(omitted) == len(explicit)


@given(n=st.integers(0, 60))
def test_no_shuffle_no_distribution_reads_in_order(n):
    """Invariant: shuffle=False, distributed=False is torch's SequentialSampler."""
    sampler = make_data_sampler(range(n), shuffle=False, distributed=False)
    assert isinstance(sampler, tud.SequentialSampler)
    assert list(sampler) == list(range(n))


@given(ratios=ratio_lists, edges=bin_edges)
def test_quantising_is_bisect_right_over_the_bin_edges(ratios, edges):
    """Invariant: group = bisect_right(edges, ratio): an edge value goes to the bin above it."""
    ratios = ratios + edges  # the edges themselves are the boundary cases
    groups = aspect_ratio_groups(aspect_ratios(ratios), edges)
    assert groups.tolist() == [bisect.bisect_right(edges, r) for r in ratios]


@given(ratios=ratio_lists, edges=bin_edges, batch_size=batch_sizes)
def test_grouping_builds_a_grouped_batch_sampler_over_the_quantised_ratios(
    ratios, edges, batch_size
):
    """Invariant: aspect_grouping=edges is GroupedBatchSampler(groups by bisect_right, no drops)."""
    sampler = tud.SequentialSampler(ratios)
    groups = [bisect.bisect_right(edges, r) for r in ratios]
    ours = make_batch_data_sampler(ratios, sampler, edges, batch_size)
    assert list(ours) == list(GroupedBatchSampler(sampler, groups, batch_size))


@given(ratios=ratio_lists, batch_size=batch_sizes)
def test_no_grouping_is_plain_batching_like_torch(ratios, batch_size):
    """Invariant: aspect_grouping=None is a BatchSampler without drop_last: torch's batches."""
    sampler = tud.SequentialSampler(ratios)
    ours = make_batch_data_sampler(ratios, sampler, None, batch_size)
    assert isinstance(ours, BatchSampler)
    assert list(ours) == list(tud.BatchSampler(sampler, batch_size, drop_last=False))


def test_aspect_ratios_are_read_from_get_img_info():
    """Invariant: a maskrcnn-style dataset gives height / width per image, by index."""

    class Images:
        sizes = ((480, 640), (640, 480), (500, 500))

        def __len__(self):
            return len(self.sizes)

        def get_img_info(self, i):
            return {"height": self.sizes[i][0], "width": self.sizes[i][1]}

    assert aspect_ratios(Images()).tolist() == [0.75, 640 / 480, 1.0]
    batches = make_batch_data_sampler(Images(), range(3), [1.0], batch_size=2)
    assert list(batches) == [[0], [1, 2]]


@given(sizes=st.lists(st.tuples(image_sides, image_sides), min_size=1, max_size=5))
def test_any_positive_finite_image_size_gives_its_height_over_width(sizes):
    """Invariant: heights and widths of any positive finite size (below 1 too: normalised sizes)
    are read as height / width, image by image."""

    class Images:
        def __len__(self):
            return len(sizes)

        def get_img_info(self, i):
            return {"height": sizes[i][0], "width": sizes[i][1]}

    assert aspect_ratios(Images()).tolist() == [h / w for h, w in sizes]


@pytest.mark.parametrize("ratios", [1.5, None, "1.0", [[1.0]], [1.0, "a"]])
def test_aspect_ratio_groups_rejects_ratios_that_are_not_a_1d_list_of_numbers(ratios):
    """Invariant: ratios that are not a 1-D tensor, list or array of numbers raise a TypeError
    naming them, never an AttributeError."""
    with pytest.raises(TypeError, match=r"^ratios should be a 1-D tensor, list or array of aspect"):
        aspect_ratio_groups(ratios, [1.0])


def test_aspect_ratio_groups_bins_integer_and_list_ratios_by_their_values():
    """Invariant: ratios given as a list, an array or an integer tensor are binned by value
    (an integer tensor does not round the edges: 1 < 1.5 is group 0, 2 is group 1)."""
    expected = aspect_ratio_groups(torch.tensor([1.0, 2.0]), [1.5]).tolist()
    assert expected == [0, 1]
    for ratios in ([1, 2], np.array([1.0, 2.0]), torch.tensor([1, 2])):
        assert aspect_ratio_groups(ratios, [1.5]).tolist() == expected


@pytest.mark.parametrize(
    ("info", "error"),
    [
        ({"height": 480, "width": 0}, ValueError),
        ({"height": 0, "width": 640}, ValueError),
        ({"height": -480, "width": 640}, ValueError),
        ({"height": 480, "width": float("nan")}, ValueError),
        ({"height": 480, "width": float("inf")}, ValueError),
        ({"height": float("inf"), "width": 640}, ValueError),
        ({"height": 480}, TypeError),
        ({"height": "480", "width": 640}, TypeError),
        ({"height": True, "width": 640}, TypeError),
        ((480, 640), TypeError),
    ],
)
def test_an_image_without_a_positive_height_and_width_is_rejected_naming_it(info, error):
    """Invariant: an image of width 0 (or no width, a negative, NaN or non-numeric size) is
    named by its index and its info, never a ZeroDivisionError or a KeyError."""

    class Images:
        infos = ({"height": 480, "width": 640}, info)

        def __len__(self):
            return 2

        def get_img_info(self, i):
            return self.infos[i]

    with pytest.raises(error) as err:
        aspect_ratios(Images())
    assert str(err.value) == (
        "get_img_info(1) should give a positive finite height and width, "
        f"but got get_img_info(1)={info!r}"
    )


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        ([], r"non-empty sequence of finite numbers, but got aspect_grouping=\[\]"),
        ([2.0, 1.0], r"strictly increasing, but got aspect_grouping=\[2.0, 1.0\]"),
        ([1.0, 1.0], r"strictly increasing, but got aspect_grouping=\[1.0, 1.0\]"),
        ([float("nan")], r"finite numbers, but got aspect_grouping=\[nan\]"),
        (1.0, r"finite numbers, but got aspect_grouping=1.0"),
        (True, r"finite numbers, but got aspect_grouping=True"),
    ],
)
def test_empty_unsorted_or_non_numeric_bin_edges_are_rejected(edges, message):
    """Invariant: bin edges must be a non-empty, strictly increasing list of finite numbers."""
    with pytest.raises(ValueError, match=message):
        make_batch_data_sampler([1.0, 2.0], range(2), edges, 2)


@pytest.mark.parametrize("bad", [0.0, -1.0, float("inf"), float("nan")])
def test_a_non_positive_or_non_finite_aspect_ratio_is_rejected_naming_its_index(bad):
    """Invariant: the error names the first bad ratio and its index."""
    with pytest.raises(ValueError, match=rf"aspect_ratios\[1\]={bad}"):
        make_batch_data_sampler([1.0, bad], range(2), [1.0], 2)


def test_aspect_ratios_of_another_length_than_the_dataset_are_rejected():
    """Invariant: one ratio per dataset item, checked against the sampler's dataset."""
    sampler = make_data_sampler(range(5), False, True, num_replicas=2, rank=0)
    with pytest.raises(ValueError, match=r"len\(group_ids\)=4 for a sampler over len\(dataset\)=5"):
        make_batch_data_sampler([1.0] * 4, sampler, [1.0], 2)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"batch_size": 0}, ValueError, "batch_size should be >= 1, but got batch_size=0"),
        ({"batch_size": "2"}, TypeError, "batch_size should be an integer, but got batch_size='2'"),
        ({"start_iter": 3}, ValueError, "start_iter needs num_iters (the length of the run), "),
        ({"start_iter": -1}, ValueError, "start_iter should be >= 0, but got start_iter=-1"),
        (
            {"num_iters": 4, "start_iter": -1},
            ValueError,
            "start_iter should be >= 0, but got start_iter=-1",
        ),
        (
            {"num_iters": 4, "start_iter": 5},
            ValueError,
            "start_iter should be <= num_iters (the iterations already done), "
            "but got start_iter=5, num_iters=4",
        ),
        (
            {"start_iter": None},
            TypeError,
            "start_iter should be an integer, but got start_iter=None",
        ),
        ({"num_iters": -1}, ValueError, "num_iters should be >= 0, but got num_iters=-1"),
        ({"num_iters": 2.5}, TypeError, "num_iters should be an integer, but got num_iters=2.5"),
        ({"num_iters": True}, TypeError, "num_iters should be an integer, but got num_iters=True"),
    ],
)
@pytest.mark.parametrize("grouping", [None, [1.0]])
def test_bad_batch_size_num_iters_or_start_iter_is_rejected_naming_the_value(
    kwargs, error, message, grouping
):
    """Invariant: bad batch sizes, run lengths and resume points fail before any batch, naming
    this function's own argument (num_iters, not IterationBasedBatchSampler's num_iterations),
    in the same words with or without grouping."""
    args = {"batch_size": 2, **kwargs}
    with pytest.raises(error) as info:
        make_batch_data_sampler([1.0, 2.0], range(2), grouping, **args)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"shuffle": 1}, TypeError, "shuffle should be a boolean value, but got shuffle=1"),
        ({"distributed": "yes"}, TypeError, "distributed should be a boolean value"),
        ({"num_replicas": 2}, ValueError, "num_replicas and rank only apply with distributed=True"),
        (
            {"distributed": True, "num_replicas": 2, "rank": 2},
            ValueError,
            "Invalid rank 2, rank should be in the interval [0, 1], but got rank=2",
        ),
    ],
)
def test_bad_make_data_sampler_arguments_are_rejected_naming_the_value(kwargs, error, message):
    """Invariant: flags must be bools, and a world only makes sense with distributed=True."""
    args = {"shuffle": False, "distributed": False, **kwargs}
    with pytest.raises(error) as info:
        make_data_sampler(range(4), **args)
    assert str(info.value).startswith(message)


@pytest.mark.parametrize("distributed", [False, True])
@pytest.mark.parametrize("shuffle", [False, True])
def test_a_dataset_without_len_is_rejected_on_every_path(shuffle, distributed):
    """Invariant: the pipeline needs a map-style dataset, and says so when the sampler is made,
    on every path: ``shuffle=False`` without ``distributed`` too, where torch's
    SequentialSampler would take an iterator and fail only at the first ``len()``; and before
    the world is resolved (here there is no process group)."""
    data = iter(range(3))
    with pytest.raises(TypeError) as info:
        make_data_sampler(data, shuffle=shuffle, distributed=distributed)
    assert str(info.value) == (
        "dataset should have __len__ (a map-style dataset or a sized sampler), but got "
        f"dataset={data!r} of type range_iterator"
    )


@given(
    ratios=ratio_lists,
    world=world_sizes,
    seed=seeds,
    edges=bin_edges,
    batch_size=batch_sizes,
    epoch=epochs,
)
def test_grouped_per_epoch_counts_differ_across_ranks_by_less_than_the_number_of_groups(
    ratios, world, seed, edges, batch_size, epoch
):
    """Invariant: without num_iters, grouped ranks' counts differ by at most len(edges) (groups - 1)."""
    counts = []
    for rank in range(world):
        sampler = make_data_sampler(ratios, True, True, seed, num_replicas=world, rank=rank)
        sampler.set_epoch(epoch)
        counts.append(len(list(make_batch_data_sampler(ratios, sampler, edges, batch_size))))
    assert max(counts) - min(counts) <= len(edges)


@pytest.mark.parametrize(
    "bad",
    [["a", "b"], [[1.0], [2.0]], 1.5, tud.TensorDataset(torch.ones(2))],
    ids=["text", "2-D", "scalar", "dataset-without-get_img_info"],
)
def test_something_that_is_neither_ratios_nor_an_image_dataset_is_rejected(bad):
    """Invariant: only get_img_info datasets or 1-D numbers are read as aspect ratios."""
    with pytest.raises(TypeError, match=r"get_img_info\(i\) or a 1-D list, array or tensor"):
        make_batch_data_sampler(bad, range(2), [1.0], 2)


def test_the_aspect_ratio_errors_name_the_type_and_the_argument():
    """Invariant: the error names what was passed (its type and value), and an image dataset
    without __len__ is refused as the dataset it is."""
    with pytest.raises(TypeError, match=r"but got float dataset_or_aspect_ratios=1\.5$"):
        aspect_ratios(1.5)

    class Unsized:
        def get_img_info(self, i):
            return {"height": 1, "width": 1}

    with pytest.raises(TypeError, match=r"^dataset should have __len__ .*of type Unsized$"):
        aspect_ratios(Unsized())
