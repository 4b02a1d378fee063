"""Real distribution: every sampler runs in a real torch.distributed group (gloo, 2 and 3 ranks).

One world per world size runs all scenarios (starting processes is the slow part); each test
then asserts one property on what rank 0 gathered with ``all_gather_object``. Every world is
bounded by a timeout, and ``run_world`` kills all ranks on failure.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import worlds
from distsampling import run_world
from worlds import EXACT_COVERS, PARTITIONS, PROVOKED, SCENARIOS, epoch_indices

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


def single_process(name: str, world: int, epoch: int) -> list[list[int]]:
    """Every rank's indices computed in this one process: what the real ranks must reproduce."""
    return [epoch_indices(SCENARIOS[name](rank, world), epoch) for rank in range(world)]


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


@pytest.mark.parametrize("world", [2, 3])
def test_rank_consistency_check_names_each_provoked_cause(world):
    """Invariant: assert_rank_consistent passes a consistent group and names the cause of each mismatch."""
    results = run_world(
        "worlds:provoke_mismatches", world, list(PROVOKED), timeout=180, pythonpath=[TESTS]
    )
    assert all(r == results[0] for r in results)  # every rank reaches the same verdict
    outcome = results[0]
    assert outcome["consistent"] == "consistent"
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


def test_the_harness_kills_a_hung_world_and_reports_it():
    """Invariant: a rank stuck in a collective does not hang the suite: the world is killed at the timeout."""
    with pytest.raises(TimeoutError, match="did not finish within timeout=8"):
        run_world("worlds:hang_on_rank_1", 2, timeout=8, pythonpath=[TESTS])


def test_worlds_module_lists_every_public_sampler():
    """Invariant: every sampler class the package exports runs through the harness."""
    import distsampling

    samplers = {n for n in distsampling.__all__ if n.endswith("Sampler") or n.endswith("Wrapper")}
    covered = {type(f(0, 1)).__name__ for f in SCENARIOS.values()}
    covered |= {type(getattr(f(0, 1), "sampler", None)).__name__ for f in SCENARIOS.values()}
    assert samplers <= covered, f"not run through the harness: {samplers - covered}"
    assert worlds.SCENARIOS is SCENARIOS
