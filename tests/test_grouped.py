"""Properties of distsampling.GroupedBatchSampler: one group per batch, exactly once, a true len."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from hypothesis import given
from hypothesis import strategies as st

from distsampling import DistributedSampler, GroupedBatchSampler
from strategies import batch_sizes, dataset_lengths, epochs, flags, group_id_lists, sampler_args


@st.composite
def grouped_passes(draw: st.DrawFn) -> tuple[list[int], list[int]]:
    """``(group_ids, pass)``: a pass of indices into group_ids, duplicates allowed (replacement)."""
    groups = draw(group_id_lists)
    if not groups:
        return groups, []
    return groups, draw(st.lists(st.integers(0, len(groups) - 1), max_size=60))


def rule_by_hand(indices: list[int], groups: list[int], b: int, drop_uneven: bool) -> list[list]:
    """The rule written out directly: fill one open batch per group, order by first position."""
    open_batch: dict[int, list[int]] = {}  # group -> its batch being filled
    done: list[tuple[int, list[int]]] = []  # (position of first element, batch)
    for position, index in enumerate(indices):
        g = groups[index]
        if g not in open_batch:
            open_batch[g] = []
            done.append((position, open_batch[g]))
        open_batch[g].append(index)
        if len(open_batch[g]) == b:
            del open_batch[g]
    batches = [batch for _, batch in sorted(done, key=lambda pair: pair[0])]
    return [batch for batch in batches if len(batch) == b or not drop_uneven]


@given(data=grouped_passes(), batch_size=batch_sizes, drop_uneven=flags)
def test_every_batch_holds_indices_of_one_group_only(data, batch_size, drop_uneven):
    """Invariant: all indices of a batch share one group id; no batch is empty or too long."""
    groups, indices = data
    for batch in GroupedBatchSampler(indices, groups, batch_size, drop_uneven):
        assert len({groups[i] for i in batch}) == 1
        assert 0 < len(batch) <= batch_size


@given(data=grouped_passes(), batch_size=batch_sizes)
def test_every_position_of_the_pass_is_yielded_exactly_once(data, batch_size):
    """Invariant: without drop_uneven the batches hold the pass's indices, duplicates included."""
    groups, indices = data
    batches = list(GroupedBatchSampler(indices, groups, batch_size))
    assert Counter(i for b in batches for i in b) == Counter(indices)


@given(data=grouped_passes(), batch_size=batch_sizes)
def test_drop_uneven_drops_exactly_each_groups_short_last_batch(data, batch_size):
    """Invariant: drop_uneven keeps the full batches, in the same order, and drops only short ones."""
    groups, indices = data
    kept = list(GroupedBatchSampler(indices, groups, batch_size, drop_uneven=True))
    every = list(GroupedBatchSampler(indices, groups, batch_size, drop_uneven=False))
    assert kept == [b for b in every if len(b) == batch_size]
    assert len(every) - len(kept) <= len(set(groups))  # at most one short batch per group


@given(data=grouped_passes(), batch_size=batch_sizes, drop_uneven=flags)
def test_batches_follow_the_rule_written_out_by_hand(data, batch_size, drop_uneven):
    """Invariant: sampler order inside each group, batches ordered by their first element's position."""
    groups, indices = data
    idx_ours = list(GroupedBatchSampler(indices, groups, batch_size, drop_uneven))
    assert idx_ours == rule_by_hand(indices, groups, batch_size, drop_uneven)


@given(data=grouped_passes(), batch_size=batch_sizes, drop_uneven=flags)
def test_len_equals_the_number_of_batches_yielded(data, batch_size, drop_uneven):
    """Invariant: len() is the count the next iteration yields, with or without drop_uneven."""
    groups, indices = data
    sampler = GroupedBatchSampler(indices, groups, batch_size, drop_uneven)
    assert len(sampler) == len(list(sampler))


@given(
    n=dataset_lengths,
    args=sampler_args(),
    epochs_=st.tuples(epochs, epochs),
    batch_size=batch_sizes,
    data=st.data(),
)
def test_len_never_freezes_a_pass_so_set_epoch_after_len_gives_the_new_epochs_batches(
    n, args, epochs_, batch_size, data
):
    """Invariant: len() caches nothing; iter after set_epoch is the new epoch's pass.

    maskrcnn-benchmark's __len__ builds the batches and its next __iter__ reuses them, so
    len -> set_epoch -> iter replays the old epoch. Here both follow the sampler's current epoch.
    """
    groups = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n), label="groups")
    first, second = epochs_
    sampler = DistributedSampler(range(n), **args)
    grouped = GroupedBatchSampler(sampler, groups, batch_size)
    sampler.set_epoch(first)
    len(grouped)
    sampler.set_epoch(second)
    fresh = GroupedBatchSampler(list(sampler), groups, batch_size)  # the epoch's pass, by hand
    assert list(grouped) == list(fresh)
    assert len(grouped) == len(fresh)


@given(
    n=dataset_lengths, args=sampler_args(), epoch=epochs, batch_size=batch_sizes, drop_last=flags
)
def test_one_group_equals_torchs_batch_sampler(n, args, epoch, batch_size, drop_last):
    """Invariant: with a single group, grouping is plain batching: torch's BatchSampler, same len."""
    sampler = DistributedSampler(range(n), **args)
    sampler.set_epoch(epoch)
    grouped = GroupedBatchSampler(sampler, [7] * n, batch_size, drop_uneven=drop_last)
    idx_ours = list(grouped)
    idx_torch = list(tud.BatchSampler(sampler, batch_size, drop_last))
    assert idx_ours == idx_torch
    assert len(grouped) == len(tud.BatchSampler(sampler, batch_size, drop_last))


@given(data=grouped_passes(), batch_size=batch_sizes)
def test_group_ids_as_list_array_or_tensor_give_the_same_batches(data, batch_size):
    """Invariant: the container of group_ids does not matter."""
    groups, indices = data
    as_list = list(GroupedBatchSampler(indices, groups, batch_size))
    as_array = list(GroupedBatchSampler(indices, np.array(groups, dtype=np.int64), batch_size))
    as_tensor = list(
        GroupedBatchSampler(indices, torch.tensor(groups, dtype=torch.int64), batch_size)
    )
    assert as_list == as_array == as_tensor


def test_group_ids_past_a_float64s_precision_stay_distinct_groups():
    """Invariant: group ids are compared as the integers they are: 2**53 and 2**53 + 1 (equal as
    floats) are two groups, never batched together."""
    ids = [2**53, 2**53 + 1, 2**53, 2**53 + 1]
    assert list(GroupedBatchSampler(range(4), ids, batch_size=2)) == [[0, 2], [1, 3]]


def test_a_pass_with_replacement_keeps_both_copies_of_an_index():
    """Invariant: an index drawn twice is batched twice (a position map would lose one copy)."""
    batches = list(GroupedBatchSampler([3, 0, 3, 1], [1, 0, 0, 0], batch_size=2))
    assert batches == [[3, 3], [0], [1]]


def test_group_ids_of_another_length_than_the_dataset_are_rejected():
    """Invariant: a sampler that knows its dataset is checked against len(group_ids) at once."""
    message = r"^group_ids should have one entry per dataset item, but got len\(group_ids\)=3 "
    with pytest.raises(ValueError, match=message + r"for a sampler over len\(dataset\)=4$"):
        GroupedBatchSampler(tud.SequentialSampler(range(4)), [0, 1, 0], 2)
    with pytest.raises(ValueError, match=r"len\(group_ids\)=5 .* len\(dataset\)=4"):
        GroupedBatchSampler(DistributedSampler(range(4), 2, 0), [0] * 5, 2)


@pytest.mark.parametrize("index", [3, -1])
def test_an_index_outside_group_ids_is_reported_naming_it(index):
    """Invariant: an index with no group id raises IndexError naming it (no silent wrap-around)."""
    sampler = GroupedBatchSampler([0, index], [0, 1, 0], 2)
    message = rf"index={index}, but group_ids has len\(group_ids\)=3: pass one group id per "
    with pytest.raises(IndexError, match=message + "dataset item$"):
        list(sampler)
    with pytest.raises(IndexError, match=rf"index={index}"):
        len(sampler)


@pytest.mark.parametrize("yielded", [[0.5, 1.7], ["0", "1"], [[0, 1]], [None]])
def test_a_sampler_yielding_non_integers_is_rejected_like_the_wrapper_does(yielded):
    """Invariant: floats, strings or batches from the sampler are not truncated or parsed into
    indices: iter and len raise the TypeError DistributedSamplerWrapper raises, naming them."""
    from distsampling import DistributedSamplerWrapper

    with pytest.raises(TypeError, match="sampler should yield integer indices") as wrapper:
        list(DistributedSamplerWrapper(yielded, 1, 0))
    grouped = GroupedBatchSampler(yielded, [0, 1], 2)
    for use in (list, len):
        with pytest.raises(TypeError) as ours:
            use(grouped)
        assert str(ours.value) == str(wrapper.value)


def test_integers_of_any_kind_from_the_sampler_are_indices():
    """Invariant: numpy ints and integer tensors from the sampler batch as the same ints do."""
    expected = list(GroupedBatchSampler([3, 1, 0, 2], [0, 1, 0, 1], 2))
    for sampler in (np.array([3, 1, 0, 2]), torch.tensor([3, 1, 0, 2]), [np.int8(3), 1, 0, 2]):
        assert list(GroupedBatchSampler(sampler, [0, 1, 0, 1], 2)) == expected


@pytest.mark.parametrize("group_ids", [[0.5, 1.0], [[0, 1], [1, 0]], ["a", "b"]])
def test_group_ids_must_be_a_1d_sequence_of_integers(group_ids):
    """Invariant: float, text or 2-D group ids are rejected, naming the shape and dtype."""
    with pytest.raises(ValueError, match=r"1-D sequence of integers .* but got group_ids of shape"):
        GroupedBatchSampler(range(2), group_ids, 2)


@pytest.mark.parametrize(
    ("batch_size", "error", "message"),
    [
        (0, ValueError, "batch_size should be >= 1, but got batch_size=0"),
        (-2, ValueError, "batch_size should be >= 1, but got batch_size=-2"),
        (2.0, TypeError, "batch_size should be an integer, but got batch_size=2.0"),
        (True, TypeError, "batch_size should be an integer, but got batch_size=True"),
    ],
)
def test_a_non_positive_or_non_integer_batch_size_is_rejected(batch_size, error, message):
    """Invariant: batch_size must be a positive int; the error names the value."""
    with pytest.raises(error) as info:
        GroupedBatchSampler(range(2), [0, 1], batch_size)
    assert str(info.value).startswith(message)


def test_drop_uneven_must_be_a_bool():
    """Invariant: drop_uneven=1 is not silently taken as True."""
    with pytest.raises(
        TypeError, match="drop_uneven should be a boolean value, but got drop_uneven=1"
    ):
        GroupedBatchSampler(range(2), [0, 1], 2, drop_uneven=1)


@given(n=dataset_lengths, args=sampler_args(), epoch=epochs, batch_size=batch_sizes, data=st.data())
def test_our_distributed_sampler_gives_the_batches_of_its_indices_as_a_list(
    n, args, epoch, batch_size, data
):
    """Invariant: the tensor shortcut for our DistributedSampler changes nothing (batches, len)."""
    groups = data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n), label="groups")
    sampler = DistributedSampler(range(n), **args)
    sampler.set_epoch(epoch)
    torch_sampler = tud.DistributedSampler(range(n), **args)
    torch_sampler.set_epoch(epoch)
    ours = GroupedBatchSampler(sampler, groups, batch_size)
    as_list = GroupedBatchSampler(list(sampler), groups, batch_size)
    over_torch = GroupedBatchSampler(torch_sampler, groups, batch_size)
    assert list(ours) == list(as_list) == list(over_torch)
    assert len(ours) == len(as_list)


def test_a_subclass_that_overrides_iter_is_iterated_not_shortcut():
    """Invariant: only our exact DistributedSampler is read as a tensor; a subclass's __iter__ wins."""

    class Reversed(DistributedSampler):
        def __iter__(self):
            return reversed(list(super().__iter__()))

    sampler = Reversed(range(6), num_replicas=1, rank=0, shuffle=False)
    assert list(GroupedBatchSampler(sampler, [0, 1] * 3, 2)) == [[5, 3], [4, 2], [1], [0]]


def test_a_distributed_sampler_whose_dataset_changed_raises_its_own_error():
    """Invariant: the shortcut never hides the sampler's check that len(dataset) changed."""
    data = list(range(6))
    sampler = DistributedSampler(data, num_replicas=2, rank=0)
    grouped = GroupedBatchSampler(sampler, [0] * 6, 2)
    data.extend([6, 7])
    with pytest.raises(RuntimeError, match=r"len\(dataset\) changed since this sampler was built"):
        list(grouped)


@given(data=grouped_passes(), batch_size=batch_sizes)
def test_an_omitted_drop_uneven_keeps_the_short_batches(data, batch_size):
    """Invariant: leaving out drop_uneven is drop_uneven=False: the rule by hand, short batches kept."""
    groups, indices = data
    omitted = GroupedBatchSampler(indices, groups, batch_size)
    assert omitted.drop_uneven is False
    assert list(omitted) == rule_by_hand(indices, groups, batch_size, drop_uneven=False)
    assert len(omitted) == len(list(omitted))


def test_under_accelerates_prepared_loader_grouping_a_share_raises_and_grouping_all_never():
    """Invariant: grouped batches consumed by ``accelerator.prepare(loader)``'s wrapper
    (accelerate's own ``prepare_data_loader``, 2 processes) raise before the first batch where
    their sampler holds one rank's share (``num_replicas=2``: accelerate would split it again),
    and never where it has no ``num_replicas`` (a single process's sampler over the whole
    dataset: accelerate's split is then the right one)."""
    pytest.importorskip("accelerate")
    from accelerate.data_loader import prepare_data_loader

    groups = [i % 3 for i in range(13)]
    for sampler, refused in ((tud.SequentialSampler(range(13)), False),
                             (DistributedSampler(range(13), 2, 0, seed=5), True)):  # fmt: skip
        batches = GroupedBatchSampler(sampler, groups, batch_size=2)
        loader = tud.DataLoader(range(13), batch_sampler=batches)
        prepared = prepare_data_loader(loader, num_processes=2, process_index=0)
        if refused:
            with pytest.raises(
                RuntimeError, match=r"^GroupedBatchSampler already holds one rank's share"
            ):
                next(iter(prepared))
        else:  # accelerate's split of the batches: process 0 reads every other one (padded)
            got, every_other = [b.tolist() for b in prepared], list(batches)[0::2]
            assert [g[: len(w)] for g, w in zip(got, every_other)] == every_other
            assert len(got) == len(every_other)
