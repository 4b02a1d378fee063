"""Properties of MixtureSampler: the stream equals a reference written from the module docstring
(a Huffman tree of divisor merges, in Fractions, one position at a time); every prefix and
window keeps each source within the proven bound; each pass of a source is a permutation; ranks
split every step; schedules lose and repeat nothing; resume, elastic too, reads every position
once; batch_at, iteration and when_read agree; bad input is named."""

from __future__ import annotations

import heapq
import json
import math
import re
from fractions import Fraction
from itertools import islice

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from distsampling.index_shuffle import epoch_key, index_shuffle
from distsampling.mixture import MixtureSampler, Read
from strategies import (
    elastic_world_sizes,
    mixture_batch_sizes,
    mixture_schedules,
    mixture_sources,
    seeds,
)

# --- the reference: the divisor merge by time, in Fractions, from the module docstring --------


def exact(w: object) -> Fraction:
    return Fraction(repr(float(w))) if isinstance(w, float) else Fraction(w)


def reference_tree(weights: list[object]) -> object:
    """The Huffman tree of the positive weights: (weight, id, leaf k or (left, right))."""
    heap = [(exact(w), k, k) for k, w in enumerate(weights) if exact(w) > 0]
    heapq.heapify(heap)
    made = len(weights)
    while len(heap) > 1:
        a, b = heapq.heappop(heap), heapq.heappop(heap)
        heapq.heappush(heap, (a[0] + b[0], made, (a, b)))
        made += 1
    return heap[0]


def reference_sources(node: tuple, n: int) -> list[int]:
    """The first n sources of a node's stream: its left child's j-th item at time
    (j + 1/2) / w_left, its right's i-th at (i + 1/2) / w_right, merged by time, ties left."""
    _, _, tree = node
    if not isinstance(tree, tuple):
        return [tree] * n
    left, right = tree
    times = [(Fraction(2 * j + 1, 2) / left[0], 0) for j in range(n)]
    times += [(Fraction(2 * i + 1, 2) / right[0], 1) for i in range(n)]
    sides = [side for _, side in sorted(times)[:n]]
    lefts = iter(reference_sources(left, sides.count(0)))
    rights = iter(reference_sources(right, sides.count(1)))
    return [next(lefts) if side == 0 else next(rights) for side in sides]


def reference_betas(node: tuple, path: tuple[Fraction, ...] = ()) -> dict[int, Fraction]:
    """β_k = Σ w_k / w_v over the nodes from k's leaf up to (not including) the root."""
    weight, _, tree = node
    if not isinstance(tree, tuple):
        return {tree: sum((weight / w for w in path), Fraction(0))}
    return {**reference_betas(tree[0], (*path, tree[0][0])),
            **reference_betas(tree[1], (*path, tree[1][0]))}  # fmt: skip


def stream(s: MixtureSampler, n: int) -> tuple[list[int], list[int]]:
    """Sources and item numbers of the first n global positions."""
    ks, js = s._sources(np.arange(n, dtype=np.int64))
    return ks.tolist(), js.tolist()


def source_of(s: MixtureSampler, index: int) -> tuple[int, int]:
    k = max(k for k, offset in enumerate(s.offsets) if offset <= index and s.sizes[k])
    return k, index - s.offsets[k]


def roundtrip(state: dict) -> dict:
    return json.loads(json.dumps(state))


# --- the stream and its bounds ------------------------------------------------------------------


@given(sources=mixture_sources())
@example(sources=([9, 9, 9, 9], [1, 1, 2, 2]))  # merged and unmerged nodes of equal weight
@example(sources=([9] * 6, [3, 3, 3, 3, 3, 3]))  # ties among merged nodes
def test_the_stream_is_the_divisor_merge_of_the_docstring_at_every_node(sources):
    """Invariant: the closed form ⌊n·a/(a+b) + 1/2⌋ at every node gives, position for position,
    the merge by time of the reference; each source's items come numbered 0, 1, 2, ..."""
    sizes, weights = sources
    s = MixtureSampler(sizes, weights, 1, 1, 0)
    ks, js = stream(s, 120)
    assert ks == reference_sources(reference_tree(weights), 120)
    for k in set(ks):
        assert [j for kk, j in zip(ks, js) if kk == k] == list(range(ks.count(k)))


@given(sources=mixture_sources(most=12), window=st.integers(1, 64))
def test_every_prefix_and_window_keeps_each_source_within_the_proven_bound(sources, window):
    """Invariant: |c_k(n) - w_k n| <= β_k / 2 <= bound() < 2 on every prefix and < β_k on every
    window; with up to 3 sources every prefix is within 1, with 2 every window too."""
    sizes, weights = sources
    s = MixtureSampler(sizes, weights, 1, 1, 0)
    total = sum(exact(w) for w in weights)
    betas = reference_betas(reference_tree(weights))
    assert s.bound() == max(betas.values()) / 2 < 2 and isinstance(s.bound(), Fraction)
    ks, _ = stream(s, 400)
    counts = np.zeros((401, len(weights)), dtype=np.int64)  # (n + 1, K) counts of each prefix
    counts[1:][np.arange(400), ks] = 1
    counts = counts.cumsum(axis=0)
    positive = len(betas)
    for k, beta in betas.items():
        share = exact(weights[k]) / total
        dev = [c - share * n for n, c in enumerate(counts[:, k].tolist())]
        assert max(map(abs, dev)) <= beta / 2
        windows = [dev[n + window] - dev[n] for n in range(len(dev) - window)]
        assert max(map(abs, windows)) < max(beta, Fraction(1, 10**9))
        if positive <= 3:
            assert max(map(abs, dev)) < 1
        if positive == 2:
            assert max(map(abs, windows)) < 1


def test_the_issues_task_is_mixed_within_one_sample_on_every_prefix_batch_and_rank():
    """Example: 60,000 / 6,000 / 600 samples at 0.5 / 0.3 / 0.2 on 8 ranks of micro-batch 8,
    60,000 positions: prefix 0.7, batch 0.8, rank 1.2 (Megatron's greedy: 0.6, 0.8, 1.2)."""
    s = MixtureSampler([60000, 6000, 600], [0.5, 0.3, 0.2], 8, 8, 0)
    ks = np.array(stream(s, 60000)[0])
    share = np.array([0.5, 0.3, 0.2])
    onehot = np.eye(3)[ks]  # (N, 3)
    prefix = np.abs(onehot.cumsum(0) - np.outer(np.arange(1, 60001), share)).max()
    batch = np.abs(onehot[:59968].reshape(-1, 64, 3).sum(1) - 64 * share).max()
    ranks = onehot[:59968].reshape(-1, 8, 8, 3).sum((0, 2))  # (8, 3)
    rank = np.abs(ranks - ranks.sum(1, keepdims=True) * share).max()
    assert (round(prefix, 6), round(batch, 6), round(rank, 6)) == (0.7, 0.8, 1.2)
    assert s.bound() == Fraction(4, 5)


@given(sources=mixture_sources(), seed=seeds, shuffle=st.booleans())
def test_each_pass_of_a_source_is_a_permutation_and_without_shuffle_the_samples_in_order(
    sources, seed, shuffle
):
    """Invariant: a source's samples are all read once per pass before any twice; its pass p is
    index_shuffle keyed by (seed, k, p), or 0, 1, ..., size - 1 without shuffle."""
    sizes, weights = sources
    s = MixtureSampler(sizes, weights, 1, 1, 0, seed=seed, shuffle=shuffle)
    read = [source_of(s, i) for i in s._indices(*s._sources(np.arange(150))).tolist()]
    for k, size in enumerate(sizes):
        if size == 0:
            continue
        mine = [i for kk, i in read if kk == k]
        for p in range(len(mine) // size):
            one = mine[p * size : (p + 1) * size]
            key = epoch_key(epoch_key(seed, k), p)
            expected = (
                index_shuffle(range(size), size, key).tolist() if shuffle else list(range(size))
            )
            assert one == expected


# --- ranks, steps, iteration, the inverse ----------------------------------------------------


@given(sources=mixture_sources(), world=elastic_world_sizes, b=mixture_batch_sizes, seed=seeds)
def test_ranks_split_every_step_and_iteration_yields_what_batch_at_says(sources, world, b, seed):
    """Invariant: at each step rank r reads positions [sB + rb, sB + (r+1)b) of the one stream:
    the ranks' batch_at micro-batches laid end to end are the stream; each rank's iter() is its
    micro-batches of the epoch's steps, len() of them."""
    sizes, weights = sources
    ranks = [MixtureSampler(sizes, weights, b, world, r, seed=seed, epoch_length=37)
             for r in range(world)]  # fmt: skip
    steps = -(-37 // (b * world))
    whole = MixtureSampler(sizes, weights, 1, 1, 0, seed=seed)
    flat = [i for s in range(steps) for batch in ranks[0].batch_at(s) for i in batch]
    assert flat == [whole.batch_at(p)[0][0] for p in range(steps * b * world)]
    for r, sampler in enumerate(ranks):
        assert len(sampler) == steps * b
        assert list(sampler) == [i for s in range(steps) for i in sampler.batch_at(s)[r]]


@given(sources=mixture_sources(), world=elastic_world_sizes, b=mixture_batch_sizes, seed=seeds)
def test_positions_and_sources_name_the_source_and_item_each_rank_reads_at_each_step(
    sources, world, b, seed
):
    """Invariant: ``sources(positions(s, r))`` is what rank r reads at step s, decoded: without
    shuffle, item j of source k is sample ``j % sizes[k]`` of it, the index batch_at gives."""
    sizes, weights = sources
    sampler = MixtureSampler(sizes, weights, b, world, 0, seed=seed, shuffle=False)
    for s in range(3):
        for r in range(world):
            ks, js = sampler.sources(sampler.positions(s, r))
            got = [sampler.offsets[k] + j % sizes[k] for k, j in zip(ks.tolist(), js.tolist())]
            assert got == sampler.batch_at(s)[r]


@given(sources=mixture_sources(), world=elastic_world_sizes, b=mixture_batch_sizes, seed=seeds,
       shuffle=st.booleans(), position=st.integers(0, 200))  # fmt: skip
def test_when_read_finds_the_position_that_reads_a_sample(
    sources, world, b, seed, shuffle, position
):
    """Invariant: when_read(k, i, p) of the sample read at a position is that position, with
    its step, rank and slot; a source of weight 0 is never read (None)."""
    sizes, weights = sources
    s = MixtureSampler(sizes, weights, b, world, 0, seed=seed, shuffle=shuffle)
    B = b * world
    step, at = divmod(position, B)
    index = s.batch_at(step)[at // b][at % b]
    k, i = source_of(s, index)
    j = stream(s, position + 1)[1][position]
    assert s.when_read(k, i, j // sizes[k]) == Read(position, step, at // b, at % b)
    for k, w in enumerate(weights):
        if w == 0 and sizes[k]:
            assert s.when_read(k, 0) is None


# --- schedules ---------------------------------------------------------------------------------


@given(schedule=mixture_schedules(), seed=seeds)
def test_a_schedule_loses_and_repeats_nothing_and_each_segment_keeps_its_bound(schedule, seed):
    """Invariant: across weight changes each source goes on from its count (items 0, 1, 2, ...,
    so each pass is still a permutation); within each segment every prefix keeps the segment's
    bound; a source that joins later starts at its sample of pass 0."""
    sizes, plan = schedule
    s = MixtureSampler(sizes, plan, 1, 1, 0, seed=seed)
    ks, js = stream(s, 200)
    for k in set(ks):
        assert [j for kk, j in zip(ks, js) if kk == k] == list(range(ks.count(k)))
    starts = [start for start, _ in plan] + [200]
    for (start, weights), end in zip(plan, starts[1:]):
        if start >= 200:
            break
        seg = MixtureSampler(sizes, weights, 1, 1, 0)
        assert ks[start:end] == stream(seg, end - start)[0]


@given(schedule=mixture_schedules(), world=elastic_world_sizes, b=mixture_batch_sizes)
def test_when_read_and_bound_follow_a_schedule(schedule, world, b):
    """Invariant: under a schedule, when_read of the sample read at each position is that
    position (or None for a source whose weight ends at 0 after its last read), and bound() is
    the largest of the segments' bounds."""
    sizes, plan = schedule
    s = MixtureSampler(sizes, plan, b, world, 0, shuffle=False)
    ks, js = stream(s, 150)
    for p, (k, j) in enumerate(zip(ks, js)):
        read = s.when_read(k, j % sizes[k], j // sizes[k])
        assert read == Read(p, p // (b * world), p % (b * world) // b, p % b)
    last = plan[-1][1]
    for k, w in enumerate(last):
        if w == 0:  # its first item not read before its weight fell to 0, and any later one
            j = s._bases[-1][k]
            assert s.when_read(k, j % sizes[k], j // sizes[k]) is None
            assert s.when_read(k, sizes[k] - 1, 10**6) is None
    bounds = [MixtureSampler(sizes, weights, 1, 1, 0).bound() for _, weights in plan]
    assert s.bound() == max(bounds)


def test_a_dataset_added_mid_training_joins_at_its_weight_from_its_first_sample():
    """Example: source 1 (weight 0) joins at step 3 (position 6, a global batch of 2) at half
    the stream."""
    s = MixtureSampler([10, 4], [(0, [1, 0]), (3, [1, 1])], 2, 1, 0, shuffle=False)
    assert [i for step in range(5) for i in s.batch_at(step)[0]] == [0, 1, 2, 3, 4, 5, 6, 10, 7, 11]


# --- epochs, resume, elastic -----------------------------------------------------------------


def test_set_epoch_after_iter_leaves_the_running_iterator_on_its_epoch():
    """Invariant: iter() reads its epoch when called: a later set_epoch changes the next one."""
    s = MixtureSampler([5, 7], [1, 2], 2, 2, 1, epoch_length=12)
    epoch0, epoch1 = list(s), (s.set_epoch(1), list(s))[1]
    s.set_epoch(0)
    it = iter(s)
    s.set_epoch(1)
    assert list(it) == epoch0 and list(s) == epoch1 and len(s) == len(epoch1)


@given(sources=mixture_sources(), world=elastic_world_sizes, b=mixture_batch_sizes,
       seed=seeds, stop=st.integers(0, 30), epoch=st.integers(0, 2))  # fmt: skip
def test_a_resumed_rank_reads_what_the_uninterrupted_one_reads(
    sources, world, b, seed, stop, epoch
):
    """Invariant: state_dict after k indices (mid-micro-batch too), loaded on the same grid,
    yields the rest of the epoch and then the next epoch, as the uninterrupted run."""
    sizes, weights = sources
    rank = world - 1

    def make() -> MixtureSampler:
        return MixtureSampler(sizes, weights, b, world, rank, seed=seed, epoch_length=23)

    whole = make()
    whole.set_epoch(epoch)
    expected = list(whole)
    whole.set_epoch(epoch + 1)
    following = list(whole)
    first = make()
    first.set_epoch(epoch)
    head = list(islice(iter(first), min(stop, len(expected))))
    resumed = make()
    resumed.load_state_dict(roundtrip(first.state_dict()))
    assert len(resumed) == len(expected)  # len() is the whole epoch's, before and after a resume
    assert head + list(resumed) + list(resumed) == expected + expected[len(head) :]
    resumed.set_epoch(epoch + 1)
    assert list(resumed) == following


@given(schedule=mixture_schedules(gap=4), w1=elastic_world_sizes, w2=elastic_world_sizes,
       b1=mixture_batch_sizes, b2=mixture_batch_sizes, seed=seeds, steps=st.integers(0, 6))  # fmt: skip
def test_an_elastic_resume_reads_every_position_of_the_stream_once(
    schedule, w1, w2, b1, b2, seed, steps
):
    """Invariant: W1 ranks of micro-batch b1 read some steps; their state loaded on W2 ranks of
    micro-batch b2, the new steps continue the one-rank stream: every position read once. The
    schedule's changes before the resume stay at their positions (step * W1 * b1); the later
    ones fall at their training step on the new grid."""
    sizes, weights = schedule
    length = 50
    old = [MixtureSampler(sizes, weights, b1, w1, r, seed=seed, epoch_length=length)
           for r in range(w1)]  # fmt: skip
    steps = min(steps, len(old[0]) // b1)
    reads = [list(islice(iter(s), steps * b1)) for s in old]
    state = roundtrip(old[0].state_dict())
    new = [MixtureSampler(sizes, weights, b2, w2, r, seed=seed, epoch_length=length)
           for r in range(w2)]  # fmt: skip
    for s in new:
        s.load_state_dict(state)
    rest = [list(s) for s in new]
    laid = [reads[r][t * b1 : (t + 1) * b1] for t in range(steps) for r in range(w1)]
    more = len(rest[0]) // b2
    laid += [rest[r][t * b2 : (t + 1) * b2] for t in range(more) for r in range(w2)]
    flat = [i for batch in laid for i in batch]
    at = [t * w1 * b1 if t <= steps else steps * w1 * b1 + (t - steps) * w2 * b2
          for t, _ in weights]  # fmt: skip
    whole = MixtureSampler(sizes, [(p, w) for p, (_, w) in zip(at, weights)], 1, 1, 0, seed=seed)
    assert flat == [whole.batch_at(p)[0][0] for p in range(len(flat))]
    assert len(flat) >= length  # the epoch read to its end: the last step starts before it


def test_an_elastic_resume_mid_micro_batch_is_refused_with_the_position():
    s = MixtureSampler([9, 9], [1, 1], 4, 2, 0)
    next(iter(s))
    message = ("position should be at a step boundary (a multiple of batch_size=4) to resume on "
               "another grid, but got position=1")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MixtureSampler([9, 9], [1, 1], 4, 3, 0).load_state_dict(s.state_dict())


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stateful_dataloader_resumes_with_exactly_the_remaining_batches(workers):
    """Invariant: torchdata's StatefulDataLoader saves the sampler's state with each batch
    (workers prefetch ahead): a new loader loaded with it yields the batches left, then the
    next epoch."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader() -> StatefulDataLoader:
        sampler = MixtureSampler([40, 12, 5], [0.5, 0.3, 0.2], 3, 2, 1, seed=3, epoch_length=60)
        return StatefulDataLoader(range(57), batch_size=3, sampler=sampler, num_workers=workers)

    whole = loader()
    expected = [b.tolist() for b in whole]
    whole.sampler.set_epoch(1)
    following = [b.tolist() for b in whole]
    first = loader()
    it = iter(first)
    head = [next(it).tolist() for _ in range(4)]
    state = first.state_dict()
    del it
    resumed = loader()
    resumed.load_state_dict(state)
    assert head + [b.tolist() for b in resumed] == expected
    resumed.sampler.set_epoch(1)
    assert [b.tolist() for b in resumed] == following


def test_the_plain_dataloader_resumes_at_the_loops_batch_with_consumed():
    """Invariant: a plain DataLoader with 2 workers reads ahead; state_dict(consumed=...) saves
    where the loop is, not where the workers are."""
    from torch.utils.data import DataLoader

    def sampler() -> MixtureSampler:
        return MixtureSampler([40, 12], [2, 1], 4, 2, 0, epoch_length=48)

    s = sampler()
    expected = [b.tolist() for b in DataLoader(range(52), batch_size=4, sampler=s, num_workers=2)]
    head = []
    for batch in DataLoader(range(52), batch_size=4, sampler=s, num_workers=2):
        head.append(batch.tolist())
        if len(head) == 2:
            state = s.state_dict(consumed=8)
            break
    resumed = sampler()
    resumed.load_state_dict(roundtrip(state))
    loader = DataLoader(range(52), batch_size=4, sampler=resumed, num_workers=2)
    assert head + [b.tolist() for b in loader] == expected


def test_a_state_of_another_configuration_is_refused_naming_the_field():
    """Invariant: a state of other sizes, weights, seed, shuffle or epoch length is refused,
    naming the field; a field out of range too. The weights are fingerprinted by their exact
    fractions: 0.5 and 1/2 are one mix."""
    state = MixtureSampler([9, 9], [1, 1], 2, 1, 0).state_dict()
    assert state == {"kind": "MixtureSampler", "version": 2, "sizes": [9, 9],
                     "weights": "0bbe5618755d6fb0", "seed": 0, "shuffle": True, "epoch_length": 18,
                     "epoch": 0, "num_replicas": 1, "batch_size": 2, "origin": 0, "step": 0,
                     "changes": [0], "position": 0, "before": 0}  # fmt: skip
    MixtureSampler([9, 9], [0.5, Fraction(1, 2)], 2, 1, 0).load_state_dict(state)
    refused = [
        ({}, [9, 9], [1, 2], {}, "state does not match this sampler: weights was "
         "'0bbe5618755d6fb0' when saved, but is 'bc830a22ad54c816' now"),
        ({}, [9, 8], [1, 1], {}, "state does not match this sampler: sizes was [9, 9] when saved, "
         "but is [9, 8] now"),
        ({}, [9, 9], [1, 1], {"seed": 1}, "state does not match this sampler: seed was 0 when "
         "saved, but is 1 now"),
        ({}, [9, 9], [1, 1], {"shuffle": False}, "state does not match this sampler: shuffle was "
         "True when saved, but is False now"),
        ({}, [9, 9], [1, 1], {"epoch_length": 17}, "state does not match this sampler: "
         "epoch_length was 18 when saved, but is 17 now"),
        ({"position": 99}, [9, 9], [1, 1], {}, "position should be in the interval [0, 18], but "
         "got position=99"),
        ({"origin": -1}, [9, 9], [1, 1], {}, "origin should be >= 0, but got origin=-1"),
        ({"epoch": -1}, [9, 9], [1, 1], {}, "epoch should be >= 0, but got epoch=-1"),
        ({"num_replicas": 0}, [9, 9], [1, 1], {}, "num_replicas should be >= 1, but got "
         "num_replicas=0"),
        ({"batch_size": 0}, [9, 9], [1, 1], {}, "batch_size should be >= 1, but got batch_size=0"),
        ({"step": -1}, [9, 9], [1, 1], {}, "step should be >= 0, but got step=-1"),
        ({"changes": [0, 4]}, [9, 9], [1, 1], {}, "changes should be a list of 1 positions, one "
         "per entry of the schedule, but got changes=[0, 4]"),
        ({"changes": 0}, [9, 9], [1, 1], {}, "changes should be a list of 1 positions, one "
         "per entry of the schedule, but got changes=0"),
        ({"changes": [-1]}, [9, 9], [1, 1], {}, "changes[0] should be >= 0, but got changes[0]=-1"),
        ({"changes": [3], "step": 5}, [9, 9], [1, 1], {}, "changes should be positions "
         "increasing from 0 that a sampler of this schedule saved, but got changes=[3] at step=5"),
        ({"before": -1}, [9, 9], [1, 1], {}, "before should be >= 0, but got before=-1"),
    ]  # fmt: skip
    for change, sizes, weights, kwargs, message in refused:
        sampler = MixtureSampler(sizes, weights, 2, 1, 0, **kwargs)
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            sampler.load_state_dict({**state, **change})
    plan = [(0, [1, 1]), (2, [1, 2]), (4, [2, 1])]  # changes at positions 0, 4, 8 on this grid
    saved = MixtureSampler([9, 9], plan, 2, 1, 0).state_dict()
    assert saved["changes"] == [0, 4, 8]
    message = ("changes should be positions increasing from 0 that a sampler of this schedule "
               "saved, but got changes=[0, 8, 8] at step=5")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        MixtureSampler([9, 9], plan, 2, 1, 0).load_state_dict(
            {**saved, "changes": [0, 8, 8], "step": 5, "origin": 10}
        )
    resumed = MixtureSampler([9, 9], plan, 4, 1, 0)  # another grid: step 5 at position 10
    resumed.load_state_dict({**saved, "step": 5, "origin": 10})
    assert resumed.state_dict()["changes"] == [0, 4, 8]  # both passed: where they were read


# --- bad input ---------------------------------------------------------------------------------


BAD_INPUT = [
    ([3, 3], [0, 0], ValueError, "weights should have a positive sum, but got weights=[0, 0]"),
    ([3, 3], [1, -1], ValueError, "weights[1] should be finite and >= 0, but got weights[1]=-1"),
    ([3, 3], [1, math.nan], ValueError, "weights[1] should be finite and >= 0, but got weights[1]=nan"),
    ([3, 3], [1, math.inf], ValueError, "weights[1] should be finite and >= 0, but got weights[1]=inf"),
    ([3, 3], [1, True], TypeError, "weights[1] should be a real number, but got weights[1]=True"),
    ([3, 3], [1], ValueError, "weights should hold one weight per source (2), but got weights=[1]"),
    ([3, 3], "11", TypeError, "weights should be a sequence of 2 numbers, but got weights='11'"),
    ([3, 3], 5, TypeError, "weights should be a sequence of 2 numbers, but got weights=5"),
    ([3, 0], [1, 0.5], ValueError, "weights[1]=0.5 should be 0 for a source of length 0: sizes[1]=0"),
    ([3, -1], [1, 1], ValueError, "sizes[1] should be >= 0, but got sizes[1]=-1"),
    ([], [], TypeError, "sizes should be a non-empty sequence of lengths, but got sizes=[]"),
    ("ab", [1], TypeError, "sizes should be a non-empty sequence of lengths, but got sizes='ab'"),
    ([3, 3], [(1, [1, 1])], ValueError,
     "weights[0][0] should be 0 (a schedule starts at 0), but got weights[0][0]=1"),
    ([3, 3], [(0, [1, 1]), (5, [1, 0]), (5, [0, 1])], ValueError,
     "weights[2][0] should be > 5 (in increasing order), but got weights[2][0]=5"),
    ([3, 3], [(0, [1, 1]), (4, [0, 0])], ValueError,
     "weights[1][1] should have a positive sum, but got weights[1][1]=[0, 0]"),
    ([3, 3], [(0, [1, 1]), [4]], TypeError,
     "weights[1] should be a (step, weights) pair, but got weights[1]=[4]"),
    ([3, 3], [(0, [1, 1]), (4, 5)], TypeError,
     "weights[1][1] should be a sequence of 2 numbers, but got weights[1][1]=5"),
    ([3, 3], [(0, [1, 1]), (-4, [1, 1])], ValueError,
     "weights[1][0] should be >= 0, but got weights[1][0]=-4"),
]  # fmt: skip


@pytest.mark.parametrize(("sizes", "weights", "error", "message"), BAD_INPUT)
def test_bad_input_is_refused_naming_the_argument_and_value(sizes, weights, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        MixtureSampler(sizes, weights, 2, 1, 0)


def test_bad_arguments_of_the_methods_are_named():
    s = MixtureSampler([3, 3], [1, 1], 2, 1, 0)
    calls = [
        (lambda: MixtureSampler([3, 3], [1, 1], 0, 1, 0), "batch_size should be >= 1, but got batch_size=0"),
        (lambda: MixtureSampler([3, 3], [1, 1], 1, 1, 0, epoch_length=0),
         "epoch_length should be >= 1, but got epoch_length=0"),
        (lambda: s.when_read(2, 0), "source should be in the interval [0, 1], but got source=2"),
        (lambda: s.when_read(0, 3), "sample should be in the interval [0, 2], but got sample=3"),
        (lambda: s.when_read(0, 0, -1), "pass_ should be >= 0, but got pass_=-1"),
        (lambda: s.batch_at(-1), "step should be >= 0, but got step=-1"),
        (lambda: s.set_epoch(-1), "epoch should be >= 0, but got epoch=-1"),
        (lambda: s.state_dict(consumed=1), "consumed should be <= 0 (samples handed out): the "
         "latest iter() handed out 0, but got consumed=1"),
    ]  # fmt: skip
    for call, message in calls:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            call()


def test_weights_as_a_tensor_an_array_or_fractions_give_the_same_mixture():
    """Invariant: a float is read as the decimal it prints (0.1 is 1/10, not its binary value);
    a Fraction is exact; a schedule may be a tuple of tuples; the default epoch is sum(sizes)."""
    import torch

    expected = MixtureSampler([5, 5], [0.25, 0.75], 2, 1, 0).batch_at(3)
    for weights in (torch.tensor([0.25, 0.75]), np.array([1, 3]), [Fraction(1, 4), Fraction(3, 4)]):
        assert MixtureSampler([5, 5], weights, 2, 1, 0).batch_at(3) == expected
    thirds = MixtureSampler([9, 9], [Fraction(1, 3), Fraction(2, 3)], 1, 1, 0)
    assert thirds.bound() == MixtureSampler([9, 9], [1, 2], 1, 1, 0).bound() == Fraction(1, 2)
    assert stream(thirds, 30) == stream(MixtureSampler([9, 9], [1, 2], 1, 1, 0), 30)
    assert MixtureSampler([9, 9], [Fraction(1, 3), Fraction(1, 2)], 1, 1, 0).bound() == (
        MixtureSampler([9, 9], [2, 3], 1, 1, 0).bound()
    )
    sixths = [Fraction(1, 3), Fraction(1, 2), Fraction(1, 6)]  # not the floats 0.333..., 0.1666...
    assert MixtureSampler([9] * 3, sixths, 1, 1, 0).bound() == (
        MixtureSampler([9] * 3, [2, 3, 1], 1, 1, 0).bound()
    )
    tenths = MixtureSampler([9, 9, 9], [0.1, 0.2, 0.7], 1, 1, 0)
    assert stream(tenths, 40) == stream(MixtureSampler([9, 9, 9], [1, 2, 7], 1, 1, 0), 40)
    as_tuples = MixtureSampler([9, 9], ((0, (1, 0)), (3, (1, 1))), 1, 1, 0)
    assert stream(as_tuples, 20) == stream(
        MixtureSampler([9, 9], [(0, [1, 0]), (3, [1, 1])], 1, 1, 0), 20
    )
    assert len(MixtureSampler([6, 4], [1, 1], 2, 2, 0)) == 6  # 10 positions: steps at 0, 4, 8
    with pytest.raises(
        TypeError, match=r"^shuffle should be a boolean value, but got shuffle='no'$"
    ):
        MixtureSampler([9, 9], [1, 1], 1, 1, 0, shuffle="no")
    with pytest.raises(
        ValueError, match=r"^seed should be in the interval \[-9223372036854775808, "
    ):
        MixtureSampler([9, 9], [1, 1], 1, 1, 0, seed=2**64)


def test_positions_past_int64_products_are_routed_with_exact_python_ints():
    """Invariant: weights of 16 digits (1/3 as a float) at positions near 10**12: the products
    pass 2**63, so the routing runs on Python ints, and agrees with the inverse."""
    s = MixtureSampler([10**9] * 3, [1 / 3, 1 / 3, 1 / 3], 4, 2, 1)
    step = 10**11
    batches = s.batch_at(step)
    index = batches[1][2]
    k, i = source_of(s, index)
    position = step * 8 + 6
    j = s._sources(np.array([position], dtype=np.int64))[1][0]
    assert s.when_read(k, i, int(j) // 10**9) == Read(position, step, 1, 2)


def test_epochs_are_consecutive_stretches_of_one_stream():
    """Invariant: epoch e reads the steps that start in [e*L, (e+1)*L): a rank's epochs laid end
    to end are its micro-batches of every step, and each epoch's len() is its steps."""
    s = MixtureSampler([7, 5], [2, 1], 3, 2, 1, epoch_length=10)  # steps of 6: 0, 6 | 12, 18 | 24
    epochs = []
    for e in range(4):
        s.set_epoch(e)
        epochs.append(list(s))
        assert len(s) == len(epochs[-1])
    assert [len(x) // 3 for x in epochs] == [2, 2, 1, 2]  # ... | 30, 36
    assert [i for x in epochs for i in x] == [i for t in range(7) for i in s.batch_at(t)[1]]


def test_positions_near_2_to_the_60_are_exact_through_batch_at_and_iteration():
    """Invariant: past 2**53 nothing goes through a float: with weights 1:1 position n is source
    n % 2's item n // 2 (no shuffle), in batch_at and in an epoch that starts there."""
    size, b, W = 2**61, 3, 2
    s = MixtureSampler([size, size], [1, 1], b, W, 1, shuffle=False, epoch_length=2**60)
    step = 2**60 // (b * W)
    expected = [[(n % 2) * size + n // 2 for n in range(p, p + b)]
                for p in range(step * b * W, (step + 1) * b * W, b)]  # fmt: skip
    assert s.batch_at(step) == expected
    s.set_epoch(1)  # starts at step ceil(2**60 / 6)
    first = -(-(2**60) // (b * W))
    mine = list(islice(iter(s), 10 * b))
    assert mine == [i for t in range(first, first + 10) for i in s.batch_at(t)[1]]
    assert all((n % 2) * size + n // 2 == i for n, i in zip(
        (first * b * W + b + t * b * W + j for t in range(10) for j in range(b)), mine))  # fmt: skip


def test_when_read_defaults_to_the_first_pass_and_counts_steps_on_the_resumed_grid():
    """Invariant: when_read(k, i) is pass 0; after an elastic resume at step 3 (position 12) the
    training steps go on from 3, each of the new grid's global batch; a step or a read before the
    new grid is refused, naming the first step the sampler can answer for."""
    s = MixtureSampler([5, 5], [1, 1], 1, 1, 0, shuffle=False)
    assert s.when_read(1, 2) == s.when_read(1, 2, 0) == Read(5, 5, 0, 0)
    old = MixtureSampler([50, 50], [1, 3], 2, 2, 0, epoch_length=40)
    list(islice(iter(old), 6))  # 3 steps of 4: position 12 next
    new = MixtureSampler([50, 50], [1, 3], 3, 1, 0, epoch_length=40)
    new.load_state_dict(old.state_dict())
    k, j = stream(MixtureSampler([50, 50], [1, 3], 1, 1, 0), 14)[0][13], stream(
        MixtureSampler([50, 50], [1, 3], 1, 1, 0), 14)[1][13]  # fmt: skip
    i = index_unshuffle_of(new, k, j)
    assert new.when_read(k, i, j // 50) == Read(13, 3, 0, 1)
    assert new.batch_at(4)[0] == [stream_index(new, p) for p in (15, 16, 17)]
    message = ("step should be >= 3, the first step of this grid (num_replicas=1, batch_size=3); "
               "the earlier ones were read on another grid, but got step=2")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        new.batch_at(2)
    k, j = (x[0] for x in stream(MixtureSampler([50, 50], [1, 3], 1, 1, 0), 1))
    i = index_unshuffle_of(new, k, j)
    message = (
        f"sample {i} of source {k} in its pass 0 was read at position 0, before step 3 "
        "(position 12), the first of this grid: ask a sampler of the grid it was read on"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        new.when_read(k, i)


def stream_index(s: MixtureSampler, position: int) -> int:
    """The index a mixture reads at a global position, from its routing and its passes."""
    return int(s._indices(*s._sources(np.array([position], dtype=np.int64)))[0])


def index_unshuffle_of(s: MixtureSampler, k: int, j: int) -> int:
    """The sample of source k's j-th item overall."""
    size = s.sizes[k]
    return index_shuffle([j % size], size, epoch_key(epoch_key(s.seed, k), j // size)).item()


def test_a_state_without_a_field_is_refused_naming_it():
    state = MixtureSampler([9, 9], [1, 1], 2, 1, 0).state_dict()
    del state["origin"]
    with pytest.raises(KeyError, match="state has no 'origin': it is not a MixtureSampler"):
        MixtureSampler([9, 9], [1, 1], 2, 1, 0).load_state_dict(state)


@given(schedule=mixture_schedules(gap=6), worlds=st.lists(st.tuples(elastic_world_sizes,
       mixture_batch_sizes, st.integers(0, 3)), min_size=2, max_size=3), seed=seeds)  # fmt: skip
def test_resumes_chained_over_several_grids_in_a_later_epoch_read_every_position_once(
    schedule, worlds, seed
):
    """Invariant: in epoch 1, runs on grids (W, b) one after another, each loading the last
    one's state after some steps, read the stream's positions of the epoch once each, and the
    epoch ends with the first step that starts at or after its end. Each change of the
    schedule falls at its training step on the grid that reached it."""
    sizes, weights = schedule
    length = 40
    laid, state, last_step = [], None, 0
    grids = []  # (first position, first step, global batch) of each grid, in order
    for k, (world, b, steps) in enumerate(worlds):
        ranks = [MixtureSampler(sizes, weights, b, world, r, seed=seed, epoch_length=length)
                 for r in range(world)]  # fmt: skip
        for s in ranks:
            s.set_epoch(1)
            if state is not None:
                s.load_state_dict(state)
        grids.append((ranks[0]._origin, ranks[0]._step0, world * b))
        left = len(ranks[0]) - ranks[0]._before  # len() counts the epoch's earlier grids too
        steps = left // b if k == len(worlds) - 1 else min(steps, left // b)
        reads = [list(islice(iter(s), steps * b)) for s in ranks]
        laid += [
            i for t in range(steps) for r in range(world) for i in reads[r][t * b : (t + 1) * b]
        ]
        state = json.loads(json.dumps(ranks[0].state_dict()))
        last_step = world * b if steps else last_step

    def position(step: int) -> int:  # where the trainer's step began: on the grid that ran it
        origin, step0, B = next(g for g in reversed(grids) if g[1] <= step)
        return origin + (step - step0) * B

    at = [(position(step), w) for step, w in weights]
    whole = MixtureSampler(sizes, at, 1, 1, 0, seed=seed)
    first = -(-length // (worlds[0][0] * worlds[0][1])) * worlds[0][0] * worlds[0][1]  # epoch 1
    assert grids[0][:2] == (0, 0) and state["changes"] == [p for p, _ in at]
    assert laid == [whole.batch_at(p)[0][0] for p in range(first, first + len(laid))]
    assert first + len(laid) >= 2 * length > first + len(laid) - last_step


def test_a_long_epoch_is_read_whole_in_growing_blocks():
    """Invariant: past the largest block (2**14 indices) the blocks stay whole steps: one source
    without shuffle yields the positions themselves, 0, 1, 2, ... to the epoch's end."""
    s = MixtureSampler([10**9], [1], 3, 1, 0, shuffle=False, epoch_length=3 * 20000)
    assert list(s) == list(range(60000))


@pytest.mark.parametrize("skip", [0, 3, 16, 20, 39, 40, 41])
def test_a_micro_batch_longer_than_the_first_few_reads_its_head_then_arrays_seamlessly(skip):
    """Invariant: the first 16 indices come from Python ints, the rest of the step and the
    steps after from arrays: with a micro-batch of 40, resumed at any point of it, iteration
    is batch_at's micro-batches laid end to end, nothing repeated or skipped at the seam."""
    make = lambda: MixtureSampler([300, 90, 30], [5, 3, 2], 40, 3, 1, seed=7)  # noqa: E731
    whole = [i for t in range(len(make()) // 40) for i in make().batch_at(t)[1]]
    first = make()
    list(islice(iter(first), skip))
    resumed = make()
    resumed.load_state_dict(first.state_dict())
    assert list(resumed) == whole[skip:]
    assert list(make()) == whole


def test_a_mixture_is_one_ranks_share_that_lightnings_check_leaves_alone():
    """Invariant: a MixtureSampler is a torch ``DistributedSampler`` (one rank's share), so
    Lightning's own check in a distributed Trainer with its default setting does not wrap it,
    and Lightning's epoch call reaches it: epoch 1's indices after the call."""
    from types import SimpleNamespace

    import torch.utils.data
    from lightning_fabric.utilities.data import _set_sampler_epoch
    from pytorch_lightning.trainer.connectors.data_connector import _DataConnector

    sampler = MixtureSampler([5, 5, 3], [0.5, 0.3, 0.2], 2, num_replicas=2, rank=1, seed=5)
    assert isinstance(sampler, torch.utils.data.DistributedSampler)
    loader = torch.utils.data.DataLoader(range(13), batch_size=2, sampler=sampler)
    settings = SimpleNamespace(use_distributed_sampler=True, is_distributed=True)
    connector = _DataConnector(SimpleNamespace(_accelerator_connector=settings))
    assert not connector._requires_distributed_sampler(loader)
    _set_sampler_epoch(loader, 1)
    again = MixtureSampler([5, 5, 3], [0.5, 0.3, 0.2], 2, num_replicas=2, rank=1, seed=5)
    again.set_epoch(1)
    assert (sampler.epoch, list(sampler)) == (1, list(again))
