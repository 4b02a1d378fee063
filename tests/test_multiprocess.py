"""Real distribution: every sampler runs in a real torch.distributed group (gloo, 2 and 3 ranks).

One world per world size runs all scenarios (starting processes is the slow part); each test
then asserts one property on what rank 0 gathered with ``all_gather_object``. Every world is
bounded by a timeout, and ``run_world`` kills all ranks on failure.
"""

from __future__ import annotations

from collections import Counter
from itertools import islice
from pathlib import Path

import numpy as np
import pytest

import worlds
from distsampling import BatchBalanceClassSampler, InfiniteSampler, RepeatFactorSampler, run_world
from worlds import (
    EXACT_COVERS,
    FIXED_ITERATIONS,
    GROUPED,
    NUM_ITERS,
    PARTITIONS,
    PROVOKED,
    RATIOS,
    SCENARIOS,
    WINDOWS,
    WRAPPED,
    epoch_indices,
    flat,
)

pytestmark = [pytest.mark.multiprocess, pytest.mark.xdist_group("worlds")]
TESTS = str(Path(__file__).parent)
EPOCHS = 2


@pytest.fixture(scope="module", params=[2, 3], ids=["world2", "world3"])
def gathered(request):
    """``(world, out)``: ``out[name][epoch][rank]`` as gathered on rank 0 of a real group."""
    world = request.param
    results = run_world(
        "worlds:gather_scenarios", world, list(SCENARIOS), EPOCHS, timeout=180, pythonpath=[TESTS]
    )
    assert results[1:] == [None] * (world - 1)  # only rank 0 returns what it gathered
    return world, results[0]


def single_process(name: str, world: int, epoch: int) -> list[list]:
    """Every rank's yield in ``epoch``, computed in this one process: what real ranks must match.

    Each rank's sampler runs epochs ``0..epoch`` in order, as in training: a sampler may carry
    state from one epoch to the next (a seeded ``RandomSampler``'s generator does).
    """
    per_rank = []
    for rank in range(world):
        sampler = SCENARIOS[name](rank, world)
        per_rank.append([epoch_indices(sampler, e) for e in range(epoch + 1)][-1])
    return per_rank


def dataset_len(sampler) -> int:
    """The length of the dataset under a sampler (looking through batch samplers)."""
    while not hasattr(sampler, "dataset"):
        sampler = sampler.sampler
    return len(sampler.dataset)


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_real_ranks_yield_exactly_the_single_process_computation(gathered, name):
    """Invariant: despite different global RNG states, each real rank yields what one process computes."""
    world, out = gathered
    for epoch in range(EPOCHS):
        assert out[name][epoch] == single_process(name, world, epoch)


@pytest.mark.parametrize("name", list(PARTITIONS))
def test_real_ranks_are_disjoint_equal_length_and_cover_the_padded_epoch(gathered, name):
    """Invariant: equal lengths; position p of the padded epoch is read by rank p % W only; the
    first N positions are the epoch once, the rest repeat its head."""
    world, out = gathered
    n = dataset_len(SCENARIOS[name](0, world))
    for per_rank in out[name]:
        per_rank = [flat(r) for r in per_rank]  # a batch sampler's batches, read in order
        lengths = {len(r) for r in per_rank}
        assert len(lengths) == 1
        padded = [per_rank[p % world][p // world] for p in range(lengths.pop() * world)]
        cut = min(n, len(padded))  # drop_last cuts the epoch below n
        assert len(set(padded[:cut])) == cut and set(padded[:cut]) <= set(range(n))
        assert padded[cut:] == [padded[j % cut] for j in range(len(padded) - cut)]


@pytest.mark.parametrize("name", list(EXACT_COVERS))
def test_real_ranks_cover_the_epoch_exactly_once_with_lengths_within_one(gathered, name):
    """Invariant: without padding, every index is read by exactly one rank, once; lengths differ by <= 1."""
    world, out = gathered
    for per_rank in out[name]:
        flat = sorted(i for r in per_rank for i in r)
        assert flat == list(range(dataset_len(SCENARIOS[name](0, world))))
        assert max(map(len, per_rank)) - min(map(len, per_rank)) <= 1


def padded_epoch(per_rank: list[list]) -> list:
    """Position ``p`` of the padded epoch, read by rank ``p % W`` as its ``p // W``-th item."""
    world = len(per_rank)
    return [per_rank[p % world][p // world] for p in range(len(per_rank[0]) * world)]


@pytest.mark.parametrize("name", list(WINDOWS))
def test_real_ranks_read_windows_spaced_by_the_window_that_cover_every_sample(gathered, name):
    """Invariant: the windows the real ranks read (padding aside) start ``window`` apart (mod
    size) from one offset, so they cover every sample: exactly once when ``window`` divides the
    size, else ``window - size % window`` samples twice (the wrap)."""
    _, out = gathered
    _, size, window = WINDOWS[name]
    n_windows = -(-size // window)
    for per_rank in out[name]:
        starts = padded_epoch(per_rank)[:n_windows]  # each window of the epoch once
        assert any(
            sorted(starts) == sorted((o + i * window) % size for i in range(n_windows))
            for o in starts
        )
        cover = Counter((s + j) % size for s in starts for j in range(window))
        assert set(cover) == set(range(size))
        assert sum(c - 1 for c in cover.values()) == (window - size % window) % window


@pytest.mark.parametrize("name", list(WRAPPED))
def test_real_ranks_together_read_the_inner_epoch_once_plus_its_head(gathered, name):
    """Invariant: the wrapped ranks' padded epoch is the inner sampler's epoch (as drawn in one
    process) once, in its order without shuffle, then its head again as padding."""
    world, out = gathered
    wrapper = SCENARIOS[name](0, world)
    inner = wrapper.sampler  # a fresh inner sampler here: its epochs are drawn in order
    for epoch, per_rank in enumerate(out[name]):
        padded = padded_epoch(per_rank)
        expected = epoch_indices(inner, epoch)
        n = len(expected)
        assert sorted(padded[:n]) == sorted(expected)
        if not wrapper.shuffle:
            assert padded[:n] == expected
        assert padded[n:] == [padded[j % n] for j in range(len(padded) - n)]


@pytest.mark.parametrize("name", list(GROUPED))
def test_real_ranks_batch_one_group_at_a_time_and_read_the_whole_padded_epoch(gathered, name):
    """Invariant: every batch holds one aspect group; together the ranks read every image, and
    exactly as many as the padded epoch holds (nothing dropped)."""
    world, out = gathered
    for per_rank in out[name]:
        assert all(len({RATIOS[i] for i in b}) == 1 for batches in per_rank for b in batches)
        read = [i for batches in per_rank for b in batches for i in b]
        assert set(read) == set(range(len(RATIOS)))
        assert len(read) == -(-len(RATIOS) // world) * world
    # and the ranks' batch counts differ (RATIOS is chosen so): the hang fixed iterations prevent
    assert any(len({len(batches) for batches in per_rank}) > 1 for per_rank in out[name])


@pytest.mark.parametrize("name", list(FIXED_ITERATIONS))
def test_real_ranks_yield_the_same_number_of_batches_with_fixed_iterations(gathered, name):
    """Invariant: with ``num_iters`` set every rank yields exactly ``num_iters`` batches, so no
    rank waits in a collective the others never join (the grouped pipeline's DDP hang)."""
    world, out = gathered
    for per_rank in out[name]:
        assert [len(batches) for batches in per_rank] == [NUM_ITERS] * world


@pytest.mark.parametrize("world", [2, 3])
def test_rank_consistency_check_names_each_provoked_cause(world):
    """Invariant: assert_rank_consistent passes a consistent group and names the cause of each mismatch."""
    results = run_world(
        "worlds:provoke_mismatches", world, list(PROVOKED), timeout=180, pythonpath=[TESTS]
    )
    assert all(r == results[0] for r in results)  # every rank reaches the same verdict
    outcome = results[0]
    assert outcome["consistent"] == "consistent"
    assert outcome["consistent unpadded"] == "consistent"  # uneven lengths are by design
    assert "epoch: ranks [0] have 1; ranks [1" in outcome["forgotten set_epoch"]
    assert (
        "likely cause: set_epoch(epoch) was not called on every rank"
        in outcome["forgotten set_epoch"]
    )
    assert "likely cause: the dataset has a different length" in outcome["different dataset length"]
    assert "likely cause: the seed differs per rank" in outcome["different seed"]
    assert (
        "likely cause: the epoch order differs although length, seed and epoch agree"
        in outcome["unseeded inner sampler"]
    )
    resumed = outcome["resumed from another checkpoint"]
    assert "position: ranks [0] have {'start': 0, 'position': 2}; ranks [1" in resumed
    assert "likely cause: ranks resumed from different checkpoints" in resumed


def test_the_harness_kills_a_hung_world_and_reports_where_each_rank_waits(monkeypatch, tmp_path):
    """Invariant: a rank stuck in a collective does not hang the suite: the world is killed at
    the timeout, and the error shows each rank's Python stack as it was when the time ran out
    (rank 0 in its barrier, rank 1 asleep in the target)."""
    monkeypatch.setenv("HANG_READY_DIR", str(tmp_path))  # a timeout that strikes once both wait
    error, timeout = worlds.timed_out_waiting(
        lambda t: run_world("worlds:hang_on_rank_1", 2, timeout=t, pythonpath=[TESTS]),
        tmp_path,
        waiters=2,
    )
    assert f"did not finish within timeout={timeout}s" in str(error)
    # rank 0 in its collective, rank 1 asleep in the target (time.sleep has no Python frame)
    rank0, rank1 = str(error).split("--- rank 1 ")
    assert worlds.waited_in(rank0, "barrier", "hang_on_rank_1"), rank0
    assert worlds.waited_in(rank1, "hang_on_rank_1", innermost=True), rank1


def test_a_world_hung_on_a_loader_worker_shows_the_workers_stack_too(monkeypatch, tmp_path):
    """Invariant: where a rank waits for its DataLoader worker, the timeout's error shows the
    worker's stack (forked from the rank, it answers the same request) beside the rank's."""
    monkeypatch.setenv("HANG_READY_DIR", str(tmp_path))  # both ranks and rank 1's worker
    error, timeout = worlds.timed_out_waiting(
        lambda t: run_world("worlds:hang_in_a_loader_worker", 2, timeout=t, pythonpath=[TESTS]),
        tmp_path,
        waiters=3,
    )
    assert f"did not finish within timeout={timeout}s" in str(error)
    rank1 = str(error).split("--- rank 1 ")[1]
    assert worlds.waited_in(rank1, "_try_get_data", "hang_in_a_loader_worker"), rank1
    assert worlds.waited_in(rank1, "__getitem__"), rank1  # its worker, in the item


def test_worlds_module_lists_every_public_sampler():
    """Invariant: every sampler class the package exports runs through the harness."""
    import distsampling

    samplers = {n for n in distsampling.__all__ if n.endswith("Sampler") or n.endswith("Wrapper")}
    samplers |= {"SequentialWindowedDataset"}
    covered: set[str] = set()
    todo = [f(0, 1) for f in SCENARIOS.values()]
    while todo:  # each scenario and everything it is built of
        obj = todo.pop()
        covered.add(type(obj).__name__)
        todo += [
            getattr(obj, a) for a in ("sampler", "batch_sampler", "dataset") if hasattr(obj, a)
        ]
    assert samplers <= covered, f"not run through the harness: {samplers - covered}"
    assert worlds.SCENARIOS is SCENARIOS


# samplers of detection and metric-learning codebases


@pytest.mark.parametrize("name", list(worlds.STREAMS))
def test_real_ranks_read_the_one_rank_stream_strided_in_equal_counts(gathered, name):
    """Invariant: endless streams: every rank reads the same count, and interleaving the real
    ranks' reads (rank p % W holds global position p) gives the one-rank stream, unpadded."""
    world, out = gathered
    per_rank = [[i for piece in pieces for i in piece] for pieces in zip(*out[name])]
    assert [len(r) for r in per_rank] == [worlds.STREAM_READS * EPOCHS] * world
    interleaved = [per_rank[p % world][p // world] for p in range(len(per_rank[0]) * world)]
    _, one_rank = worlds.STREAMS[name]
    assert interleaved == list(islice(one_rank(), len(interleaved)))


@pytest.mark.parametrize("name", list(worlds.CONTIGUOUS))
def test_real_ranks_read_contiguous_blocks_that_concatenate_to_the_dataset(gathered, name):
    """Invariant: gathered in rank order, the contiguous blocks are the dataset in order."""
    world, out = gathered
    for per_rank in out[name]:
        n = dataset_len(SCENARIOS[name](0, world))
        assert [i for r in per_rank for i in r] == list(range(n))


@pytest.mark.parametrize("name", list(worlds.BALANCED))
def test_real_ranks_read_different_balanced_batches_in_equal_counts(gathered, name):
    """Invariant: every rank the same number of batches; each batch 2 classes x 3 samples; the
    real ranks' batches interleaved are the one-rank epoch of W times as many batches."""
    world, out = gathered
    labels = worlds.BALANCED_LABELS
    for epoch, per_rank in enumerate(out[name]):
        assert len({len(batches) for batches in per_rank}) == 1
        for batch in (b for batches in per_rank for b in batches):
            assert sorted(Counter(labels[i] for i in batch).values()) == [3, 3]
        one_rank = BatchBalanceClassSampler(labels, 2, 3, 4 * world, 1, 0, seed=8)
        one_rank.set_epoch(epoch)
        assert padded_epoch(per_rank) == list(one_rank)


def test_seed_none_gives_every_real_rank_rank_0s_seed():
    """Invariant: with seed=None the endless samplers on real ranks with different global RNG
    states all take the seed rank 0 drew from numpy's global RNG, broadcast over the group, so
    they read one stream together."""
    world, reads = 3, 8
    results = run_world("worlds:shared_seed_streams", world, reads, timeout=180, pythonpath=[TESTS])
    rank_0 = np.random.RandomState(2000)  # rank 0's numpy state (disturb_global_rngs)
    for name in ("InfiniteSampler", "RepeatFactorSampler"):  # built in this order: two draws
        drawn = rank_0.randint(2**31)
        assert [r[name][0] for r in results] == [drawn] * world
        per_rank = [r[name][1] for r in results]
        interleaved = [per_rank[p % world][p // world] for p in range(reads * world)]
        one_rank = (
            InfiniteSampler(range(11), 1, 0, seed=drawn)
            if name == "InfiniteSampler"
            else RepeatFactorSampler(worlds.REPEAT_FACTORS, 1, 0, seed=drawn)
        )
        assert interleaved == list(islice(one_rank, reads * world))


@pytest.mark.parametrize("name", list(worlds.MIXTURE))
def test_real_ranks_read_their_micro_batch_of_every_step_of_one_mixture_stream(gathered, name):
    """Invariant: laid out step by step (rank r's micro-batch after rank r - 1's), the real
    ranks' reads of both epochs are the steps of one global stream, as batch_at computes them
    (the batch-sampler form: each batch one step's micro-batch)."""
    world, out = gathered
    made = worlds.MIXTURE[name](0, world)
    sampler = getattr(made, "sampler", made)  # MixtureBatchSampler: its MixtureSampler
    b = sampler.batch_size
    laid = []
    for epoch in out[name]:  # the epochs in order: each goes on with the stream
        if sampler is not made:
            assert all(len(batch) == b for reads in epoch for batch in reads)
        per_rank = [worlds.flat(reads) for reads in epoch]
        assert len({len(reads) for reads in per_rank}) == 1
        steps = len(per_rank[0]) // b
        laid += [
            i for t in range(steps) for r in range(world) for i in per_rank[r][t * b : (t + 1) * b]
        ]
    steps = len(laid) // (b * world)
    assert laid == [i for t in range(steps) for batch in sampler.batch_at(t) for i in batch]
