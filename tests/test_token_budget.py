"""TokenBudgetBatchSampler: batches within a token budget, equal counts and similar costs per step.

The properties are the spec (torch has no such class): every batch within budget, every sample
once per epoch beyond fewer than ``num_replicas`` padding batches, equal batch counts on every
rank, the step spread bound, one plan per (seed, epoch) whatever rank computes it, resume and
elastic resume, and clear errors.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from itertools import pairwise
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torchdata.stateful_dataloader import StatefulDataLoader

from distsampling import TokenBudgetBatchSampler, epoch_digest, run_nodes, run_world
from strategies import epochs, stop_points, token_budget_args

TESTS = str(Path(__file__).parent)


def ranks(args: dict, epoch: int = 0, **over) -> list[TokenBudgetBatchSampler]:
    """One sampler per rank of the world in ``args``, set to ``epoch``."""
    args = {**args, **over}
    out = [TokenBudgetBatchSampler(**args, rank=r) for r in range(args["num_replicas"])]
    for s in out:
        s.set_epoch(epoch)
    return out


def cost(batch: list[int], lengths: list[int], how: str) -> int:
    ls = [lengths[i] for i in batch]
    return max(ls) * len(ls) if how == "padded" else sum(ls)


def roundtrip(state: dict) -> dict:
    return json.loads(json.dumps(state))


@given(token_budget_args(), epochs)
def test_every_batch_costs_at_most_max_tokens_and_holds_at_most_max_batch_size(args, epoch):
    """Invariant: each batch is non-empty, costs <= max_tokens (padded: longest x size; sum:
    the sum of lengths) and holds <= max_batch_size samples."""
    for s in ranks(args, epoch):
        for batch in s:
            assert batch
            assert cost(batch, args["lengths"], args["cost"]) <= args["max_tokens"]
            assert args["max_batch_size"] is None or len(batch) <= args["max_batch_size"]


@given(token_budget_args(), epochs)
def test_every_rank_reads_the_same_number_of_batches_which_len_says(args, epoch):
    """Invariant: every rank yields len(sampler) batches, the same number on every rank."""
    counts = {(len(s), len(list(s))) for s in ranks(args, epoch)}
    assert len(counts) == 1 and len({*counts.pop()}) == 1


@given(token_budget_args(), epochs)
def test_every_sample_is_read_once_beyond_fewer_than_num_replicas_padding_batches(args, epoch):
    """Invariant: over the ranks, each step's batches read in step order: every sample once;
    the padding is fewer than num_replicas batches, each a batch of the plan's head, all in the
    last step; with drop_last no sample twice and the ones left out fill < num_replicas batches."""
    samplers, n, w = ranks(args, epoch), len(args["lengths"]), args["num_replicas"]
    per_rank = [list(s) for s in samplers]
    stream = [per_rank[r][k] for k in range(len(per_rank[0])) for r in range(w)]
    seen = Counter(i for batch in stream for i in batch)
    if not args["drop_last"]:
        real = next((p for p in range(len(stream) + 1) if sum(map(len, stream[:p])) == n), None)
        assert real is not None and len(stream) - real < w
        assert sorted(i for b in stream[:real] for i in b) == list(range(n))
        padding = stream[real:]
        assert padding == [stream[p % real] for p in range(len(padding))] if real else not padding
    else:
        assert all(c == 1 for c in seen.values())
        left_out = TokenBudgetBatchSampler(**{**args, "drop_last": False}, rank=0)
        left_out.set_epoch(epoch)
        assert len(left_out) - len(per_rank[0]) in (0, 1)  # one step fewer at most


@given(token_budget_args(), epochs)
def test_the_spreads_of_the_steps_add_up_to_at_most_the_cost_range(args, epoch):
    """Invariant (the step bound): the steps (a padded last step aside) are runs of neighbours
    in cost order, so sum over steps of (heaviest - lightest batch cost) <= the heaviest batch's
    cost - the lightest's <= max_tokens: at most k steps spread more than max_tokens / k."""
    samplers = ranks(args, epoch)
    per_rank = [list(s) for s in samplers]
    steps = [
        [cost(b[k], args["lengths"], args["cost"]) for b in per_rank]
        for k in range(len(per_rank[0]))
    ]
    n_real = sum(map(len, (b for r in per_rank for b in r)))
    if n_real > len(args["lengths"]):  # padded: the last step holds the head of the plan
        steps = steps[:-1]
    costs = [c for step in steps for c in step]
    spread = sum(max(step) - min(step) for step in steps)
    assert spread <= (max(costs) - min(costs) if costs else 0) <= args["max_tokens"]
    if steps:
        # and each step is a run: no batch of another step lies strictly inside its range
        ranges = sorted((min(s), max(s)) for s in steps)
        assert all(a[1] <= b[0] for a, b in pairwise(ranges))


@given(token_budget_args(), epochs)
def test_the_plan_is_the_same_whatever_rank_computes_it(args, epoch):
    """Invariant: every rank computes the same plan (order, batches, steps), and rank r's
    batches are the r-th of every step of it."""
    samplers = ranks(args, epoch)
    plans = {tuple(s.epoch_plan().tolist()) for s in samplers}
    assert len(plans) == 1
    assert all(s.epoch_plan().dtype == torch.int64 for s in samplers)  # one int64 tensor
    digests = [epoch_digest(s) for s in samplers]
    assert len({d["order"] for d in digests}) == 1 and len({d["len"] for d in digests}) == 1
    assert digests[0]["order"] is not None and digests[0]["position"] == {"position": 0}


@given(token_budget_args(), epochs)
def test_an_epoch_is_the_same_plan_every_time_it_is_computed(args, epoch):
    """Invariant: the plan is a function of (lengths, arguments, epoch): built again, or
    iterated twice, the same batches."""
    a, b = ranks(args, epoch)[0], ranks(args, epoch)[0]
    assert list(a) == list(a) == list(b)


@given(
    st.lists(st.integers(1, 50), min_size=30, max_size=80),
    st.sampled_from(["padded", "sum"]),
    epochs,
)
def test_another_epoch_is_another_plan(lengths, how, epoch):
    """Invariant: with shuffle, epochs e and e + 1 give different plans (30+ samples: the
    chance that two shuffles of them agree is nil)."""
    args = {"lengths": lengths, "max_tokens": 60, "cost": how, "num_replicas": 2}
    one, two = ranks(args, epoch)[0], ranks(args, epoch + 1)[0]
    assert not torch.equal(one.epoch_plan(), two.epoch_plan())


def test_without_shuffle_every_epoch_is_one_plan_of_increasing_cost():
    """Invariant: shuffle=False draws nothing: the same plan every epoch, its steps in
    increasing cost order, samples of a bucket in index order."""
    args = {"lengths": [3, 1, 2, 3, 1, 2, 3, 1], "max_tokens": 6, "num_replicas": 1,
            "shuffle": False}  # fmt: skip
    assert list(ranks(args, 0)[0]) == list(ranks(args, 7)[0]) == [[1, 4, 7], [6], [2, 5], [0, 3]]


@given(token_budget_args(), st.data())
def test_a_list_an_array_and_a_tensor_of_lengths_give_one_plan(args, data):
    """Invariant: lengths as a list, a numpy array (int32 or int64) or a tensor: the same batches."""
    ls = args["lengths"]
    forms = [
        ls,
        np.asarray(ls, np.int64),
        np.asarray(ls, np.int32),
        torch.tensor(ls, dtype=torch.long),
    ]
    plans = [list(ranks({**args, "lengths": f})[0]) for f in forms]
    assert all(p == plans[0] for p in plans)


@given(token_budget_args(), epochs, st.data())
def test_resume_after_k_steps_gives_the_rest_of_the_uninterrupted_epoch(args, epoch, data):
    """Invariant: the state after k batches (JSON round-tripped), loaded into a new sampler,
    yields the uninterrupted batches k..; every iter() of that epoch does; the next epoch
    is the uninterrupted next epoch."""
    rank = data.draw(st.integers(0, args["num_replicas"] - 1))
    make = lambda: TokenBudgetBatchSampler(**args, rank=rank)  # noqa: E731
    whole = make()
    whole.set_epoch(epoch)
    batches = list(whole)
    whole.set_epoch(epoch + 1)
    after = list(whole)
    k = data.draw(stop_points(len(batches)))
    s = make()
    s.set_epoch(epoch)
    it = iter(s)
    first = [next(it) for _ in range(k)]
    state = roundtrip(s.state_dict())
    resumed = make()
    resumed.load_state_dict(state)
    resumed.set_epoch(epoch)  # as a loop does at the top of the epoch: it keeps the position
    assert len(resumed) == len(batches)  # len() is the whole epoch's, before and after a resume
    assert first + list(resumed) == batches and first + list(resumed) == batches
    resumed.set_epoch(epoch + 1)
    assert list(resumed) == after


def _read(samplers: list[TokenBudgetBatchSampler], steps: int | None = None) -> list[list[int]]:
    """The batches the ranks read together, step by step (``steps`` of them, or all)."""
    per_rank = [list(s)[:steps] for s in samplers]
    return [per_rank[r][k] for k in range(len(per_rank[0])) for r in range(len(samplers))]


@given(token_budget_args(), epochs, st.lists(st.integers(1, 5), min_size=1, max_size=2), st.data())
def test_an_elastic_resume_reads_every_sample_of_the_epoch_once(args, epoch, worlds, data):
    """Invariant: W1 ranks read k steps and save; W2 ranks (then W3) load rank 0's state and read
    the rest, the same number of batches on every rank: the distinct batches read hold every
    sample exactly once (with drop_last: at most once), and the repeats (padding of the one
    plan read to its end) are fewer than the largest world's size."""
    n = len(args["lengths"])
    samplers, read = ranks(args, epoch), []
    for world in worlds:
        k = data.draw(st.integers(0, len(samplers[0].batches())))  # what iter() yields from here
        its = [iter(s) for s in samplers]
        per_rank = [[next(it) for _ in range(k)] for it in its]
        read += [per_rank[r][j] for j in range(k) for r in range(len(samplers))]
        state = roundtrip(samplers[0].state_dict())
        samplers = ranks(args, epoch, num_replicas=world)
        before = sum(k for _, k in state["resumed"]) + state["position"]  # read before the save
        for s in samplers:
            s.load_state_dict(state)
        # len() is the whole epoch's: what each rank read before the resume, then what it yields
        assert {len(s) for s in samplers} == {before + len(samplers[0].batches())}
    read += _read(samplers)
    distinct = set(map(tuple, read))
    samples = sorted(i for b in distinct for i in b)
    assert len(samples) == len(set(samples))  # no sample in two batches
    if not args["drop_last"]:
        assert samples == list(range(n))
    assert len(read) - len(distinct) < max(args["num_replicas"], *worlds)
    if args["drop_last"]:
        assert len(read) == len(distinct)


def test_an_elastic_resume_on_a_small_example_reads_the_rest_once():
    """Invariant: 2 ranks read 2 steps, 3 ranks read the rest: together every sample once."""
    lengths = [3, 9, 2, 8, 4, 10, 3, 9, 2, 4, 7, 7, 1, 5, 6, 6, 2, 8]
    args = {"lengths": lengths, "max_tokens": 20, "num_buckets": 4, "num_replicas": 2, "seed": 1}
    two = ranks(args, 3)
    done = _read(two, 2)
    state = two[0].state_dict() | {"position": 2}
    three = ranks(args, 3, num_replicas=3)
    for s in three:
        s.load_state_dict(state)
    rest = _read(three)
    assert len({len(list(s)) for s in three}) == 1
    distinct = set(map(tuple, done + rest))
    assert sorted(i for b in distinct for i in b) == list(range(len(lengths)))
    assert len(done + rest) - len(distinct) < 3  # the padding of the last step


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("k", [0, 1, 3])
def test_stateful_dataloader_resumes_with_exactly_the_remaining_batches(workers, k):
    """Invariant: StatefulDataLoader(batch_sampler=ours) stopped after k batches and saved,
    loaded into a new loader, gives the uninterrupted batches k.., then the next epoch."""
    lengths = [(7 * i) % 23 + 1 for i in range(60)]
    data = list(range(60))

    def loader(epoch: int) -> StatefulDataLoader:
        s = TokenBudgetBatchSampler(lengths, 48, num_buckets=4, num_replicas=2, rank=1, seed=3)
        s.set_epoch(epoch)
        return StatefulDataLoader(data, batch_sampler=s, num_workers=workers)

    def epoch_of(dl: StatefulDataLoader, epoch: int) -> list[list[int]]:
        dl.batch_sampler.set_epoch(epoch)
        return [b.tolist() for b in dl]

    whole, following = epoch_of(loader(2), 2), epoch_of(loader(3), 3)
    assert len(whole) > k + 2
    interrupted = loader(2)
    it = iter(interrupted)
    first = [next(it).tolist() for _ in range(k)]
    state = interrupted.state_dict()
    del it
    resumed = loader(0)  # a new run: its epoch comes from the state
    resumed.load_state_dict(state)
    assert first + [b.tolist() for b in resumed] == whole
    assert epoch_of(resumed, 3) == following


def checked_ranks(epochs: int) -> dict:
    """On every rank of a real group: each TOKEN_BUDGET sampler passes assert_rank_consistent
    and its epochs are gathered (``out[name][epoch][rank]``); a sampler seeded by the rank is
    caught (``mismatch``: the error's text). Rank 0 returns it all."""
    import torch.distributed as dist

    import worlds
    from distsampling import RankMismatchError, assert_rank_consistent

    out = worlds.gather_scenarios(list(worlds.TOKEN_BUDGET), epochs)
    rank, world = dist.get_rank(), dist.get_world_size()
    for factory in worlds.TOKEN_BUDGET.values():
        for epoch in range(epochs):
            sampler = factory(rank, world)
            sampler.set_epoch(epoch)
            assert_rank_consistent(sampler)
    try:  # a seed that differs per rank: another plan on every rank
        assert_rank_consistent(TokenBudgetBatchSampler([3, 1, 2], 4, num_replicas=world,
                                                       rank=rank, seed=rank))  # fmt: skip
        mismatch = "consistent"
    except RankMismatchError as err:
        mismatch = str(err)
    return {"gathered": out, "mismatch": mismatch} if rank == 0 else None


WORLDS = {
    "gloo, 2 ranks": (run_world, (2,)),
    "gloo, 3 ranks": (run_world, (3,)),
    "2 torchrun nodes": (run_nodes, (2, 1)),
}


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
@pytest.mark.timeout(300)
@pytest.mark.parametrize("how", list(WORLDS))
def test_real_ranks_read_equal_counts_within_budget_and_every_sample(how):
    """Invariant: on real process groups (gloo; two torchrun agents) with different global RNG
    states per rank, every rank passes the rank-consistency check and yields what one process
    computes for it, the same number of batches, each within budget, and together every sample
    of the epoch (with drop_last: no sample twice); a seed that differs per rank is named."""
    import worlds

    launch, shape = WORLDS[how]
    results = launch("test_token_budget:checked_ranks", *shape, 2, timeout=240, pythonpath=[TESTS])
    world = len(results)
    out, mismatch = results[0]["gathered"], results[0]["mismatch"]
    assert results[1:] == [None] * (world - 1)
    assert "seed: ranks [0] have 0" in mismatch and "likely cause: the seed differs" in mismatch
    for name in worlds.TOKEN_BUDGET:
        for epoch, per_rank in enumerate(out[name]):
            alone = [worlds.SCENARIOS[name](r, world) for r in range(world)]
            for s in alone:
                s.set_epoch(epoch)
            assert per_rank == [list(s) for s in alone]
            assert len({len(b) for b in per_rank}) == 1
            lengths = alone[0].lengths.tolist()
            for batch in (b for r in per_rank for b in r):
                assert cost(batch, lengths, alone[0].cost) <= alone[0].max_tokens
            read = [i for r in per_rank for b in r for i in b]
            if alone[0].drop_last:  # fewer than `world` batches left out, none read twice
                assert len(read) == len(set(read))
            else:
                assert set(read) == set(range(len(lengths)))


# --- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        (
            {"lengths": [1.5, 2.0]},
            TypeError,
            r"lengths should be a 1-D sequence of integers.*float64",
        ),
        ({"lengths": [[1, 2]]}, TypeError, r"shape \(1, 2\)"),
        ({"lengths": [3, 0, 2]}, ValueError, r"lengths\[1\]=0"),
        ({"lengths": [3, 11, 2]}, ValueError, r"max_tokens=10, but got lengths\[1\]=11"),
        ({"lengths": torch.tensor([3, 2, 12])}, ValueError, r"lengths\[2\]=12"),
        ({"max_tokens": 0}, ValueError, r"max_tokens should be >= 1, but got max_tokens=0"),
        ({"max_tokens": 10.0}, TypeError, r"max_tokens should be an integer"),
        ({"cost": "max"}, ValueError, r"cost should be \"padded\" or \"sum\", but got cost='max'"),
        ({"num_buckets": 0}, ValueError, r"num_buckets should be >= 1, but got num_buckets=0"),
        ({"max_batch_size": 0}, ValueError, r"max_batch_size=0"),
        ({"rank": 2}, ValueError, r"Invalid rank 2"),
        ({"shuffle": "yes"}, TypeError, r"shuffle should be a boolean value"),
        ({"drop_last": 1}, TypeError, r"drop_last should be a boolean value"),
        ({"seed": 2**64}, ValueError, r"seed should be in the interval"),
    ],
)
def test_bad_arguments_are_refused_naming_the_argument_and_value(kwargs, error, match):
    """Invariant: each bad argument raises at construction, naming it and the value it got."""
    args = {"lengths": [3, 5, 2], "max_tokens": 10, "num_replicas": 2, "rank": 0} | kwargs
    with pytest.raises(error, match=match):
        TokenBudgetBatchSampler(**args)


def test_no_process_group_and_no_world_is_a_clear_error():
    """Invariant: without num_replicas/rank and without a process group, the error says why."""
    with pytest.raises(ValueError, match="pass num_replicas= and rank= explicitly"):
        TokenBudgetBatchSampler([1, 2], 4)


def test_a_state_of_another_sampler_or_other_data_is_refused():
    """Invariant: a state of another kind, other lengths, another budget, or a position past
    the plan is refused naming the field; nothing changes."""
    s = TokenBudgetBatchSampler([3, 5, 2, 4], 10, num_replicas=2, rank=0)
    state = s.state_dict()
    with pytest.raises(ValueError, match="kind was 'DistributedSampler'"):
        s.load_state_dict(state | {"kind": "DistributedSampler"})
    other = TokenBudgetBatchSampler([3, 5, 2, 5], 10, num_replicas=2, rank=0)
    with pytest.raises(ValueError, match="lengths was"):
        other.load_state_dict(state)
    with pytest.raises(ValueError, match="max_tokens was 10 when saved, but is 12 now"):
        TokenBudgetBatchSampler([3, 5, 2, 4], 12, num_replicas=2, rank=0).load_state_dict(state)
    steps = len(s)
    with pytest.raises(ValueError, match=rf"position should be in the interval \[0, {steps}\]"):
        s.load_state_dict(state | {"position": steps + 1})
    with pytest.raises(ValueError, match="resumed should be a list of"):
        s.load_state_dict(state | {"resumed": [3]})
    with pytest.raises(KeyError, match="state has no 'position'"):
        s.load_state_dict({k: v for k, v in state.items() if k != "position"})
    assert s.state_dict() == state


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("epoch", "1", TypeError, r"^epoch should be an integer, but got epoch='1'"),
        (
            "epoch",
            2**64,
            ValueError,
            r"^seed \+ epoch should be in \[.*but got seed=7, epoch=18446",
        ),
        ("num_replicas", 0, ValueError, r"^num_replicas should be >= 1, but got num_replicas=0$"),
        (
            "num_replicas",
            "2",
            TypeError,
            r"^num_replicas should be an integer, but got num_replicas='2'",
        ),
        ("resumed", [[0, 1]], ValueError, r"^num_replicas should be >= 1, but got num_replicas=0$"),
        ("resumed", [[2, -1]], ValueError, r"^steps should be >= 0, but got steps=-1$"),
        (
            "resumed",
            [[2]],
            ValueError,
            r"^resumed should be a list of \[num_replicas, steps\] pairs",
        ),
        (
            "resumed",
            "[]",
            ValueError,
            r"^resumed should be a list of \[num_replicas, steps\] pairs",
        ),
        ("position", -1, ValueError, r"^position should be in the interval \[0, "),
    ],
)
def test_a_state_field_out_of_range_is_refused_naming_it(field, value, error, message):
    """Invariant: each field of a state is checked by name (type and range, the epoch with the
    seed as a generator takes it) before anything is loaded; the sampler is left as it was."""
    s = TokenBudgetBatchSampler([3, 5, 2, 4, 6], 10, num_replicas=2, rank=1, seed=7)
    state = s.state_dict()
    with pytest.raises(error, match=message):
        s.load_state_dict(state | {field: value})
    assert s.state_dict() == state


def test_a_states_position_is_bounded_by_the_saved_epochs_plan_not_the_current_one():
    """Invariant: load_state_dict checks the position against the plan of the epoch the state
    was saved in (plans of one length differ in steps from epoch to epoch with cost="sum"): the
    end of a longer epoch loads into a sampler that sits at a shorter one, and resumes empty."""
    lengths = [3, 2, 5, 2, 8, 8, 8, 7, 4, 2, 8, 1, 7, 7, 1, 8, 5, 4, 2, 6]
    lengths += [1, 1, 1, 9, 1, 7, 4, 7, 1, 9, 4, 8, 8, 9, 4, 6, 4, 4, 8, 5]
    args = {"cost": "sum", "num_buckets": 1, "num_replicas": 2, "rank": 0, "seed": 3}
    saved = TokenBudgetBatchSampler(lengths, 12, **args)  # epoch 0: 13 steps
    later = TokenBudgetBatchSampler(lengths, 12, **args)
    later.set_epoch(1)  # epoch 1: 11 steps
    assert len(saved) == 13 and len(later) == 11
    state = saved.state_dict() | {"position": 13}
    later.load_state_dict(state)
    assert later.epoch == 0 and list(later) == []


@pytest.mark.parametrize(
    "form", [list, lambda v: np.array(v, dtype=np.int32), lambda v: torch.tensor(v)]
)
def test_the_state_is_the_documented_json_naming_every_argument(form):
    """Invariant: a state is exactly this JSON: the kind, the format version, what the plan is
    computed from (the sample count, a digest of the lengths as int64, whatever their form,
    and every argument), the epoch, the world, the worlds resumed from and the steps done."""
    lengths = [3, 5, 2, 4, 6, 1]
    s = TokenBudgetBatchSampler(form(lengths), 10, num_buckets=3, num_replicas=2, rank=1, seed=4)
    s.set_epoch(2)
    digest = hashlib.sha1(np.array(lengths, dtype=np.int64).tobytes()).hexdigest()[:16]
    assert json.loads(json.dumps(s.state_dict())) == {
        "kind": "TokenBudgetBatchSampler",
        "version": 1,
        "num_samples": 6,
        "lengths": digest,
        "max_tokens": 10,
        "cost": "padded",
        "num_buckets": 3,
        "max_batch_size": None,
        "shuffle": True,
        "seed": 4,
        "drop_last": False,
        "epoch": 2,
        "num_replicas": 2,
        "resumed": [],
        "position": 0,
    }


def plan_reference(args: dict, epoch: int) -> tuple[list[int], list[list[int]], list[int]]:
    """The plan of the module docstring, one sample at a time: ``(order, batches, costs)``.

    Buckets: the distinct lengths, ascending, each in bucket ``tokens of all shorter lengths *
    num_buckets // all tokens``, the non-empty buckets numbered 0, 1, ...; the order: a
    ``randperm`` of ``seed + epoch`` (or 0..N-1), stably sorted by bucket; batches: ``padded``,
    a bucket of longest length ``h`` cut into ``max_tokens // h`` (at most ``max_batch_size``)
    with its leftover carried into the next bucket and the last leftover one batch; ``sum``,
    each batch as long as its lengths fit in the budget (and the cap)."""
    lengths, budget, k = [int(v) for v in args["lengths"]], args["max_tokens"], args["num_buckets"]
    n, total = len(lengths), sum(lengths)
    most = args["max_batch_size"] or n
    below, of_value, count = 0, {}, Counter(lengths)
    for v in sorted(count):
        of_value[v] = below * k // total
        below += v * count[v]
    renumber = {b: i for i, b in enumerate(sorted(set(of_value.values())))}
    bucket = [renumber[of_value[v]] for v in lengths]
    g = torch.Generator()
    g.manual_seed(args["seed"] + epoch)
    order = torch.randperm(n, generator=g).tolist() if args["shuffle"] else list(range(n))
    order = sorted(order, key=lambda i: bucket[i])  # Python's sort is stable
    batches = []
    if args["cost"] == "padded":
        p, end, size, longest = 0, 0, Counter(bucket), {}
        for v, b in zip(lengths, bucket):
            longest[b] = max(longest.get(b, 0), v)
        for b in range(len(renumber)):
            end += size[b]
            per = min(budget // longest[b], most)
            while end - p >= per:
                batches.append(order[p : p + per])
                p += per
        if p < n:
            batches.append(order[p:])
        costs = [max(lengths[i] for i in b) * len(b) for b in batches]
    else:
        i = 0
        while i < n:
            j, used = i, 0
            while j < n and j - i < most and used + lengths[order[j]] <= budget:
                used += lengths[order[j]]
                j += 1
            batches.append(order[i:j])
            i = j
        costs = [sum(lengths[i] for i in b) for b in batches]
    return order, batches, costs


@given(token_budget_args(), epochs, st.sampled_from([1, 2**20, 2**27]))
def test_the_plan_is_the_documented_one(args, epoch, scale):
    """Invariant: the order, the batches and their costs are those of the documented plan
    (plan_reference), for lengths below 2**24 and past it (scaled by 2**20: other code paths),
    and past 2**31 (scaled by 2**27: 64-bit lengths)."""
    args = args | {"lengths": [v * scale for v in args["lengths"]]}
    args["max_tokens"] *= scale
    s = TokenBudgetBatchSampler(**args, rank=0)
    g = torch.Generator()
    g.manual_seed(args["seed"] + epoch)
    order, bounds, cost = s._batches(g)
    expected_order, expected_batches, expected_costs = plan_reference(args, epoch)
    assert order.tolist() == expected_order
    assert [order[a:b].tolist() for a, b in pairwise(bounds.tolist())] == expected_batches
    assert cost.tolist() == expected_costs
    assert order.dtype == bounds.dtype == cost.dtype == np.int64
    # steps: the batches by cost (ties in plan order), the lightest B % W apart, the rest cut
    # into runs of W (shuffled as runs); the lightest ones lead the padded last step
    s.set_epoch(epoch)
    planned_order, planned_bounds, planned_steps = s._plan()  # as iter() computes it
    assert planned_order.tolist() == expected_order and planned_bounds.tolist() == bounds.tolist()
    steps = [tuple(step) for step in planned_steps.tolist()]
    world, by_cost = (
        args["num_replicas"],
        sorted(range(len(expected_costs)), key=expected_costs.__getitem__),
    )
    left = len(by_cost) % world
    runs = [tuple(by_cost[a : a + world]) for a in range(left, len(by_cost), world)]
    assert sorted(steps[: len(runs)]) == sorted(runs)
    padded = left > 0 and not args["drop_last"]
    assert len(steps) == len(runs) + padded
    assert not padded or steps[-1][:left] == tuple(by_cost[:left])


def test_tens_of_thousands_of_buckets_keep_their_order():
    """Invariant: with more than 2**15 non-empty buckets (bucket numbers past 16 bits) the plan
    is still the documented one."""
    lengths = list(range(100_000, 140_000))  # 40,000 lengths of about equal tokens
    args = {"lengths": lengths, "max_tokens": 140_000, "cost": "padded", "num_buckets": 40_000}
    args |= {"max_batch_size": None, "num_replicas": 2, "shuffle": True, "seed": 3}
    s = TokenBudgetBatchSampler(**args, rank=0)
    g = torch.Generator()
    g.manual_seed(3)
    order, bounds, _ = s._batches(g)
    expected_order, expected_batches, _ = plan_reference(args, 0)
    assert len(set(_bucket_numbers(args))) > 2**15
    assert order.tolist() == expected_order
    assert [order[a:b].tolist() for a, b in pairwise(bounds.tolist())] == expected_batches


def _bucket_numbers(args: dict) -> list[int]:
    lengths, k = args["lengths"], args["num_buckets"]
    total, below, out, count = sum(lengths), 0, [], Counter(lengths)
    for v in sorted(count):
        out.append(below * k // total)
        below += v * count[v]
    return out


@pytest.mark.parametrize(
    ("epoch", "error", "message"),
    [
        ("1", TypeError, r"^epoch should be an integer, but got epoch='1'"),
        (2**64, ValueError, r"^seed \+ epoch should be in \[.*but got seed=7, epoch=18446"),
    ],
)
def test_a_bad_epoch_is_refused_naming_it(epoch, error, message):
    """Invariant: set_epoch checks the epoch by name, and with the seed as a generator takes it."""
    s = TokenBudgetBatchSampler([3, 5, 2], 10, num_replicas=2, rank=0, seed=7)
    with pytest.raises(error, match=message):
        s.set_epoch(epoch)
    assert s.epoch == 0


@pytest.mark.parametrize("max_tokens", [2**31 - 1, 2**31, 2**32 - 1, 2**32])
def test_lengths_at_the_32_bit_limits_are_kept_exactly(max_tokens):
    """Invariant: a length of max_tokens itself, near and past 2**31, is held without overflow:
    the plan's costs are the lengths' own."""
    lengths = [max_tokens, 5, max_tokens - 1, 1]
    args = {"lengths": lengths, "max_tokens": max_tokens, "cost": "sum", "num_buckets": 2}
    args |= {"max_batch_size": None, "num_replicas": 2, "shuffle": False, "seed": 0}
    s = TokenBudgetBatchSampler(**args, rank=0)
    _, _, cost = s._batches(torch.Generator())
    assert cost.tolist() == plan_reference(args | {"drop_last": False}, 0)[2]
    assert max(cost.tolist()) == max_tokens  # the longest sample, alone in its batch


def test_the_defaults_are_the_documented_ones():
    """Invariant: a sampler built with only lengths, budget and world has the documented
    defaults (padded cost, 128 buckets, no batch cap, shuffled, seed 0, padded last step) and
    is at epoch 0, the plan of set_epoch(0)."""
    s = TokenBudgetBatchSampler([3, 5, 2, 4, 6, 1, 7], 10, num_replicas=2, rank=0)
    assert (s.cost, s.num_buckets, s.max_batch_size) == ("padded", 128, None)
    assert (s.shuffle, s.seed, s.drop_last, s.epoch) == (True, 0, False, 0)
    again = TokenBudgetBatchSampler([3, 5, 2, 4, 6, 1, 7], 10, num_replicas=2, rank=0)
    again.set_epoch(0)
    assert list(s) == list(again)


@pytest.mark.parametrize(
    ("lengths", "error", "message"),
    [
        (
            [[1, 2]],
            TypeError,
            r"^lengths should be a 1-D sequence of integers \(one length per "
            r"sample\), but got lengths of shape \(1, 2\) and dtype int64$",
        ),
        (
            [1.5, 2.0],
            TypeError,
            r"^lengths should be a 1-D sequence of integers \(one length per "
            r"sample\), but got lengths of shape \(2,\) and dtype float64$",
        ),
        (
            [3, 0, 2],
            ValueError,
            r"^lengths should be >= 1, but got lengths\[1\]=0: a sample of no "
            r"tokens costs nothing, so a batch of them would have no bound$",
        ),
    ],
)
def test_bad_lengths_are_refused_naming_them(lengths, error, message):
    """Invariant: lengths that are not a 1-D integer sequence, or hold a length below 1, are
    refused with the documented message."""
    with pytest.raises(error, match=message):
        TokenBudgetBatchSampler(lengths, 10, num_replicas=2, rank=0)


def test_without_shuffle_each_bucket_keeps_the_dataset_order():
    """Invariant: shuffle=False orders the samples by bucket and, within a bucket, by index (a
    stable sort, also where numpy's default sort would not be stable: thousands of ties)."""
    lengths = [(i * 7) % 5 + 1 for i in range(3000)]
    args = {"lengths": lengths, "max_tokens": 40, "cost": "padded", "num_buckets": 3}
    args |= {"max_batch_size": None, "num_replicas": 2, "shuffle": False, "seed": 0}
    s = TokenBudgetBatchSampler(**args, rank=0)
    order, _, _ = s._batches(torch.Generator())
    assert order.tolist() == plan_reference(args | {"drop_last": False}, 0)[0]


@given(token_budget_args(), st.data())
def test_a_loaded_state_is_saved_again_unchanged(args, data):
    """Invariant: load_state_dict then state_dict, before any iter(), gives back the state:
    the epoch, the worlds resumed from and the steps done."""
    saver = TokenBudgetBatchSampler(**args, rank=0)
    saver.set_epoch(data.draw(epochs, label="epoch"))
    take = data.draw(st.integers(0, len(saver)), label="take")
    it = iter(saver)
    for _ in range(take):
        next(it)
    state = json.loads(json.dumps(saver.state_dict()))
    loader = TokenBudgetBatchSampler(**args, rank=args["num_replicas"] - 1)
    loader.load_state_dict(state)
    assert loader.state_dict() == state


def test_an_empty_dataset_gives_no_batches():
    """Invariant: no samples, no steps, on every rank."""
    assert [list(s) for s in ranks({"lengths": [], "max_tokens": 4, "num_replicas": 3})] == [[]] * 3


def test_the_rank_check_names_a_forgotten_set_epoch_and_another_checkpoint():
    """Invariant: epoch_digest hashes the plan: ranks built alike agree; a rank that missed
    set_epoch, or loaded another checkpoint, is named with the likely cause."""
    from distsampling.tools.checks import _CAUSES, RankMismatchError, _raise_if_ranks_differ

    args = {"lengths": [(5 * i) % 13 + 1 for i in range(30)], "max_tokens": 20, "num_replicas": 2}
    good = ranks(args, 4)
    digests = [epoch_digest(s) for s in good]
    assert _raise_if_ranks_differ(digests, digests[0]) is None
    late = [good[0], TokenBudgetBatchSampler(**args, rank=1)]  # rank 1: still epoch 0
    resumed = ranks(args, 4)
    state = resumed[1].state_dict() | {"position": 1}
    resumed[1].load_state_dict(state)
    for samplers, field in ((late, "epoch"), (resumed, "position")):
        digests = [epoch_digest(s) for s in samplers]
        with pytest.raises(RankMismatchError, match=re.escape(f"likely cause: {_CAUSES[field]}")):
            _raise_if_ranks_differ(digests, digests[0])


@given(token_budget_args())
def test_a_sum_batch_closes_only_when_the_next_sample_would_not_fit(args):
    """Invariant: with cost="sum", batches are filled greedily along the plan's order: each but
    the last closes because the next sample would exceed the budget, or it holds max_batch_size."""
    s = TokenBudgetBatchSampler(**{**args, "cost": "sum"}, rank=0)
    order, bounds, _ = s._plan()
    lengths, most = args["lengths"], args["max_batch_size"]
    for start, end in pairwise(bounds.tolist()):
        if end == len(order):
            break
        total = sum(lengths[i] for i in order[start:end])
        assert total + lengths[order[end]] > args["max_tokens"] or end - start == most


@given(token_budget_args())
def test_a_padded_batch_holds_at_least_the_fixed_batch_size_that_fits_the_longest(args):
    """Invariant: with cost="padded", every batch but the plan's last holds at least
    max_tokens // max(lengths) samples (or max_batch_size): never fewer than a fixed batch size."""
    s = TokenBudgetBatchSampler(**{**args, "cost": "padded"}, rank=0)
    _, bounds, _ = s._plan()
    fixed = args["max_tokens"] // max(args["lengths"], default=1)
    if args["max_batch_size"] is not None:
        fixed = min(fixed, args["max_batch_size"])
    assert all(size >= fixed for size in np.diff(bounds)[:-1].tolist())


def test_the_steps_are_shuffled_unless_shuffle_is_false():
    """Invariant: with shuffle the steps come in a random order of cost; without, increasing."""
    lengths = [(7 * i) % 31 + 1 for i in range(300)]

    def step_costs(shuffle: bool) -> list[int]:
        s = TokenBudgetBatchSampler(lengths, 64, num_replicas=1, rank=0, shuffle=shuffle)
        return [cost(b, lengths, "padded") for b in s]

    assert step_costs(False) == sorted(step_costs(False))
    assert step_costs(True) != sorted(step_costs(True))
    assert sorted(step_costs(True)) != step_costs(True)[::-1]


def test_consumed_counts_batches_and_lightnings_epoch_call_reaches_the_plan():
    """Invariant: ``state_dict(consumed=k)`` is the state after ``k`` batches of the latest
    ``iter()`` whatever more was handed out (a plain DataLoader's workers), at most those;
    ``sampler.set_epoch`` (where Lightning calls it) sets this sampler's epoch."""
    lengths = [1 + i % 7 for i in range(40)]
    make = lambda: TokenBudgetBatchSampler(lengths, 10, num_buckets=3, num_replicas=2, rank=1)  # noqa: E731
    whole = list(make())
    s = make()
    it = iter(s)
    next(it), next(it), next(it)
    state = s.state_dict(consumed=1)
    assert state["position"] == 1
    resumed = make()
    resumed.load_state_dict(state)
    assert list(resumed) == whole[1:]
    with pytest.raises(ValueError, match=r"consumed should be <= 3 .*consumed=4"):
        s.state_dict(consumed=4)
    s.sampler.set_epoch(5)
    assert s.epoch == 5 and repr(s.sampler) == "EpochHandle(TokenBudgetBatchSampler)"


def test_consumed_after_a_resume_counts_from_the_loaded_position_and_says_so():
    """Invariant: after a load at step 1 and 2 batches handed out, ``consumed`` counts from the
    loaded step: ``consumed=3`` is refused with the exact count the latest ``iter()`` handed
    out, ``consumed=1`` saves step 2."""
    lengths = [1 + i % 7 for i in range(40)]
    make = lambda: TokenBudgetBatchSampler(lengths, 10, num_buckets=3, num_replicas=2, rank=1)  # noqa: E731
    s = make()
    s.load_state_dict({**s.state_dict(), "position": 1})
    it = iter(s)
    next(it), next(it)
    message = (
        r"^consumed should be <= 2 \(batches handed out\): the latest iter\(\) handed out 2, "
        r"but got consumed=3$"
    )
    with pytest.raises(ValueError, match=message):
        s.state_dict(consumed=3)
    assert s.state_dict(consumed=1)["position"] == 2


@pytest.mark.parametrize(
    "lengths",
    [
        [2**61, 2**61, 2**61 + 1],  # the cut's product 2**63 past int64: Python ints
        [2**61, 2**61 + 1],  # past int64, and a float would round 2**62 // (2**62 + 1) up
        [2**61, 2**61 + 1] * 3,  # all tokens past int64 (2**63 + 3 * 2**61 + 3)
        [2**52, 2**52 + 1] * 2,  # within int64, where a float division would round up
    ],
)
def test_bucket_cuts_are_exact_for_lengths_near_the_limits_of_int64_and_floats(lengths):
    """Invariant: the bucket of a length is ``tokens of shorter lengths * num_buckets // all
    tokens`` in exact integers, as the reference computes it, where int64 products overflow
    and where a float quotient just below an integer rounds up to it: the plan, whose order
    sorts by bucket, is the reference's for every seed."""
    for seed in range(6):
        args = {"lengths": lengths, "max_tokens": 2**62, "cost": "padded", "num_buckets": 2,
                "max_batch_size": None, "shuffle": True, "seed": seed}  # fmt: skip
        s = TokenBudgetBatchSampler(
            lengths, 2**62, num_buckets=2, num_replicas=1, rank=0, seed=seed
        )
        g = torch.Generator()
        g.manual_seed(seed)
        order, bounds, _ = s._batches(g)  # the plan's order and batches, before the steps
        expected_order, expected_batches, _ = plan_reference(args, 0)
        assert order.tolist() == expected_order
        assert [order[a:b].tolist() for a, b in pairwise(bounds.tolist())] == expected_batches


def test_lengths_given_as_python_ints_past_int64_or_numpy_unsigned_ints_are_read_exactly():
    """Invariant: a list of ints that numpy reads as floats (a numpy ``uint64`` among ints) or
    as objects (an int past int64) is read as the integers it holds: the same plan as plain
    ints, and the refusals name the exact integer, never a float."""
    mixed = TokenBudgetBatchSampler([np.uint64(3), 2, 4, 1], 10, num_replicas=1, rank=0, seed=1)
    plain = TokenBudgetBatchSampler([3, 2, 4, 1], 10, num_replicas=1, rank=0, seed=1)
    assert list(mixed) == list(plain)
    refusals = [
        ([1, 2**70], "every sample should fit in max_tokens=10, but got lengths[1]="
         "1180591620717411303424: raise max_tokens, or cut or drop the samples longer than it"),
        ([np.uint64(2**64 - 1), -1], "lengths should be >= 1, but got lengths[1]=-1: a sample of "
         "no tokens costs nothing, so a batch of them would have no bound"),
    ]  # fmt: skip
    for lengths, message in refusals:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            TokenBudgetBatchSampler(lengths, 10, num_replicas=1, rank=0)
