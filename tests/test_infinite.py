"""Properties of InfiniteSampler: index-exact against the stream of passes built here from torch
calls (detectron2's TrainingSampler, mmengine's InfiniteSampler), exact resume at the cost of
one pass, the seed shared by seed=None, and every bad input."""

from __future__ import annotations

import json
import re
from itertools import islice

import numpy as np
import pytest
import torch
import torch.distributed as dist
from hypothesis import given
from hypothesis import strategies as st

from distsampling import InfiniteSampler, shared_random_seed
from strategies import elastic_worlds, stream_lengths, stream_reads, stream_sampler_args


def stream_torch(n: int, shuffle: bool, seed: int, length: int) -> list[int]:
    """The global stream as both originals define it: one generator seeded once, then
    ``randperm(n)`` after ``randperm(n)`` (``arange(n)`` over and over without shuffle)."""
    g = torch.Generator()
    g.manual_seed(seed)
    out: list[int] = []
    while len(out) < length:
        out += torch.randperm(n, generator=g).tolist() if shuffle else torch.arange(n).tolist()
    return out[:length]


@given(n=stream_lengths, args=stream_sampler_args, k=stream_reads)
def test_each_rank_reads_its_strided_positions_of_the_stream_of_passes(n, args, k):
    """Invariant: rank r's first k indices are positions r, r + W, ... of the global stream."""
    W, r = args["num_replicas"], args["rank"]
    idx_ours = list(islice(InfiniteSampler(range(n), **args), k))
    idx_torch = stream_torch(n, args["shuffle"], args["seed"], r + k * W)[r::W]
    assert idx_ours == idx_torch


@given(n=stream_lengths, args=stream_sampler_args, k=stream_reads)
def test_the_ranks_together_read_the_one_rank_stream_each_pass_a_permutation(n, args, k):
    """Invariant: interleaving the W ranks' first k indices gives the one-rank stream's first
    k * W, whose every aligned pass of n is a permutation of range(n) (no padding, no gap)."""
    W = args["num_replicas"]
    per_rank = [
        list(islice(InfiniteSampler(range(n), W, r, args["shuffle"], args["seed"]), k))
        for r in range(W)
    ]
    interleaved = [per_rank[p % W][p // W] for p in range(k * W)]
    assert interleaved == list(
        islice(InfiniteSampler(range(n), 1, 0, args["shuffle"], args["seed"]), k * W)
    )
    for start in range(0, len(interleaved) - n + 1, n):
        assert sorted(interleaved[start : start + n]) == list(range(n))


@given(n=stream_lengths, args=stream_sampler_args, reads=st.lists(st.integers(0, 30), max_size=5))
def test_every_iter_starts_the_stream_at_the_loaded_point_and_iterators_are_independent(
    n, args, reads
):
    """Invariant: as detectron2's samplers, every iter() starts the same stream (from its start,
    or from a loaded position), and live iterators read in turn do not disturb each other."""
    s = InfiniteSampler(range(n), **args)
    whole = list(islice(InfiniteSampler(range(n), **args), 2 * sum(reads) + 1))
    iterators = [iter(s) for _ in reads]
    for a, it in zip(reads, iterators):  # each reads a, in turn, then all read one more
        assert list(islice(it, a)) == whole[:a]
    assert [next(it) for it in iterators] == [whole[a] for a in reads]
    k = sum(reads)
    head = iter(s)
    list(islice(head, k))
    assert s.position == k  # the latest iter()'s count
    s.load_state_dict(s.state_dict())
    assert [list(islice(s, k + 1)) for _ in range(2)] == [whole[k : 2 * k + 1]] * 2


@given(n=stream_lengths, args=stream_sampler_args, k=stream_reads, more=st.integers(0, 60))
def test_resume_from_a_saved_state_equals_the_uninterrupted_stream(n, args, k, more):
    """Invariant: save after k indices (through JSON), load into a new sampler: the next indices
    are exactly those the uninterrupted sampler reads next."""
    s = InfiniteSampler(range(n), **args)
    head = list(islice(s, k))
    state = json.loads(json.dumps(s.state_dict()))
    resumed = InfiniteSampler(range(n), **args)
    resumed.load_state_dict(state)
    uninterrupted = list(islice(InfiniteSampler(range(n), **args), k + more))
    assert head + list(islice(resumed, more)) == uninterrupted


class CountingPasses(InfiniteSampler):
    """The real sampler, counting the passes it draws (a resume must not replay them all)."""

    drawn = 0

    def _draw_pass(self, g):
        self.drawn += 1
        return super()._draw_pass(g)


@given(n=st.integers(1, 5), args=stream_sampler_args, passes=st.integers(50, 200))
def test_resume_draws_only_the_passes_from_the_last_one_read_to_the_next_index(n, args, passes):
    """Invariant: resuming many passes in draws at most (W + rank) // n + 2 passes before its
    first index (from the pass of rank 0's latest read, which every rank's state names, to the
    pass of this rank's next index), never a replay."""
    s = InfiniteSampler(range(n), **args)
    W = args["num_replicas"]
    k = passes * n // W
    it = iter(s)
    list(islice(it, k))
    resumed = CountingPasses(range(n), **args)
    resumed.load_state_dict(s.state_dict())
    assert next(iter(resumed)) == next(it)
    assert resumed.drawn <= (W + args["rank"]) // n + 2 < passes


def test_seed_none_without_a_group_draws_from_numpys_global_rng():
    """Invariant: as both originals do, seed=None draws np.random.randint(2**31) (here, with no
    process group, this process's own draw); a globally seeded run is reproducible."""
    np.random.seed(7)
    s = InfiniteSampler(range(10), num_replicas=1, rank=0, seed=None)
    assert s.seed == np.random.RandomState(7).randint(2**31)
    np.random.seed(7)
    assert shared_random_seed() == s.seed


def test_seed_none_in_a_process_group_is_rank_0s_draw_below_2_31(tmp_path):
    """Invariant: in a process group, seed=None is rank 0's np.random.randint(2**31) broadcast to
    every rank (here a group of one, so the broadcast runs); a draw is always below 2**31."""
    store = dist.FileStore(str(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        for k in range(20):
            np.random.seed(k)
            assert shared_random_seed() == np.random.RandomState(k).randint(2**31)
    finally:
        dist.destroy_process_group()


def test_seed_none_in_a_group_of_num_replicas_ranks_is_drawn_and_shared(monkeypatch):
    """Invariant: with a process group of exactly num_replicas ranks, seed=None is accepted and
    shared (the group is faked here: one process cannot hold a group of two)."""
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda group=None: 2)
    monkeypatch.setattr(dist, "broadcast_object_list", lambda box, src=0: None)  # rank 0 here
    np.random.seed(5)
    s = InfiniteSampler(range(4), num_replicas=2, rank=1, seed=None)
    assert s.seed == np.random.RandomState(5).randint(2**31)


def test_seed_none_without_shuffle_draws_nothing_and_loads_any_seed():
    """Invariant: an unshuffled stream needs no seed: seed=None takes nothing from numpy's global
    RNG (its state is 0, unchanged), and it loads a state saved with any seed."""
    np.random.seed(11)
    before = np.random.get_state()[1].copy()
    s = InfiniteSampler(range(5), 1, 0, shuffle=False, seed=None)
    assert np.array_equal(np.random.get_state()[1], before)
    assert s.state_dict()["seed"] == 0
    other = InfiniteSampler(range(5), 1, 0, shuffle=False, seed=5)
    list(islice(other, 7))
    s.load_state_dict(other.state_dict())
    assert list(islice(s, 4)) == [2, 3, 4, 0]


def test_a_sampler_built_with_seed_none_resumes_with_the_saved_seed():
    """Invariant: seed=None was random anyway: loading a state takes its seed, and the stream."""
    s = InfiniteSampler(range(9), num_replicas=1, rank=0, seed=None)
    head = list(islice(s, 13))
    np.random.seed(123)  # another random seed would be drawn now
    resumed = InfiniteSampler(range(9), num_replicas=1, rank=0, seed=None)
    resumed.load_state_dict(s.state_dict())
    assert resumed.seed == s.seed
    assert head + list(islice(resumed, 20)) == stream_torch(9, True, s.seed, 33)


def test_a_dataloader_reads_batches_of_the_stream():
    """Invariant: a DataLoader over the endless sampler yields the stream in batches, forever."""
    loader = torch.utils.data.DataLoader(
        range(5), batch_size=3, sampler=InfiniteSampler(range(5), 2, 1, seed=4)
    )
    batches = [b.tolist() for b in islice(loader, 4)]
    assert [i for b in batches for i in b] == stream_torch(5, True, 4, 24)[1::2]


def test_index_exact_against_mmengines_infinite_sampler():
    """Invariant: the same indices as mmengine's InfiniteSampler (the optional mmengine extra),
    for every rank of 3, with and without shuffle."""
    mm = pytest.importorskip(
        "mmengine.dataset", reason="mmengine is not installed (pip install -e '.[mmengine]')"
    )
    for shuffle in (True, False):
        for rank in range(3):
            theirs = mm.InfiniteSampler(range(7), shuffle=shuffle, seed=11)
            # mmengine reads rank and world size from the process group: set them as it would
            theirs.rank, theirs.world_size = rank, 3
            theirs.indices = theirs._indices_of_rank()
            idx_torch = list(islice(theirs, 40))
            idx_ours = list(islice(InfiniteSampler(range(7), 3, rank, shuffle, seed=11), 40))
            assert idx_ours == idx_torch


# bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"dataset": []}, ValueError, r"at least one sample .* but got len\(dataset\)=0"),
        ({"dataset": 5}, TypeError, r"dataset should have __len__.*but got dataset=5"),
        ({"shuffle": 1}, TypeError, r"shuffle should be a boolean value, but got shuffle=1$"),
        (
            {"seed": 2**64},
            ValueError,
            r"seed should be in the interval .* but got seed=18446744073709551616$",
        ),
        ({"seed": 1.5}, TypeError, r"seed should be an integer, but got seed=1.5"),
        (
            {"rank": 2},
            ValueError,
            r"Invalid rank 2, rank should be in the interval \[0, 1\], but got rank=2 for num_replicas=",
        ),
        ({"num_replicas": 0}, ValueError, r"num_replicas should be >= 1, but got num_replicas=0$"),
        (
            {"seed": None},
            ValueError,
            r"seed=None draws one seed on rank 0 .* num_replicas=2 without a process group of "
            r"that size: pass the same seed=<int> on every rank, or initialise the process group "
            r"first$",
        ),
    ],
)
def test_bad_arguments_are_rejected_naming_the_value(kwargs, error, message):
    """Invariant: an empty or unsized dataset, a bad flag, seed, rank or world, or seed=None
    with no group to share it over, fails at construction naming the argument and value."""
    args = {"dataset": range(4), "num_replicas": 2, "rank": 0, "seed": 0, **kwargs}
    with pytest.raises(error, match=message):
        InfiniteSampler(**args)


def _saved(**change):
    s = InfiniteSampler(range(6), 2, 1, seed=3)
    list(islice(s, 8))
    return {**s.state_dict(), **change}


def _generator_text(length: int) -> str:
    """Valid base64 of ``length`` characters (a multiple of 4): never a generator state."""
    return "QUJD" * (length // 4)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"seed": 2**64}, ValueError, r"^seed should be in the interval \[-9223372036854775808, "),
        ({"seed": -(2**63) - 1}, ValueError, r"^seed should be in the interval \[-92233720368"),
        ({"seed": "3"}, TypeError, r"^seed should be an integer, but got seed='3'"),
        ({"pass": -1}, ValueError, r"^pass should be >= 0, but got pass=-1$"),
        ({"pass": "1"}, TypeError, r"^pass should be an integer, but got pass='1'"),
        ({"pass_start": -1}, ValueError, r"^pass_start should be >= 0, but got pass_start=-1$"),
        ({"pass_start": 1.0}, TypeError, r"^pass_start should be an integer, but got pass_start="),
        ({"generator": _generator_text(40)}, ValueError, r"but got generator='(QUJD){10}'$"),
        ({"generator": _generator_text(44)}, ValueError, r"but got generator='(QUJD){10}\.\.\.'$"),
        ({"generator": _generator_text(40) + "Q"}, ValueError, r"generator='(QUJD){10}\.\.\.'$"),
    ],
)
def test_a_bad_seed_pass_or_generator_is_rejected_naming_it(change, error, message):
    """Invariant: a sampler built with seed=None takes the saved seed, but only one in
    torch.Generator's range; pass and pass_start are integers >= 0; a generator that is no
    state is shown in full up to 40 characters, cut with '...' beyond."""
    s = InfiniteSampler(range(6), 1, 0, seed=None)
    with pytest.raises(error, match=message):
        s.load_state_dict({**s.state_dict(), **change})


@pytest.mark.parametrize(
    "field", ["num_replicas", "start", "position", "pass", "pass_start", "generator"]
)
def test_a_state_without_a_position_field_is_refused_naming_it(field):
    """Invariant: every field of the point is required: a state without one is refused with
    a KeyError naming it, never read as a default."""
    state = _saved()
    del state[field]
    with pytest.raises(KeyError, match=rf"state has no '{field}': it is not a InfiniteSampler"):
        InfiniteSampler(range(6), 2, 1, seed=3).load_state_dict(state)


def test_set_epoch_changes_nothing_and_refuses_a_non_integer_naming_it():
    """Invariant: the stream has no epochs: set_epoch leaves every index as it was, and an epoch
    that is not an integer is refused naming the argument (mmengine's Runner calls it)."""
    s = InfiniteSampler(range(6), 2, 1, seed=3)
    s.set_epoch(5)
    assert list(islice(s, 9)) == list(islice(InfiniteSampler(range(6), 2, 1, seed=3), 9))
    with pytest.raises(TypeError, match=r"^epoch should be an integer, but got epoch='1'"):
        s.set_epoch("1")


def test_a_generator_state_with_a_character_outside_base64_is_refused():
    """Invariant: the generator text is strict base64: a stray character is an error, not skipped
    (skipping it would silently load whatever bytes remain)."""
    state = _saved()
    text = state["generator"]
    with pytest.raises(ValueError, match=r"generator should be the base64 text of a \d+-byte"):
        InfiniteSampler(range(6), 2, 1, seed=3).load_state_dict(
            {**state, "generator": text[:8] + "!" + text[8:]}
        )


@pytest.mark.parametrize(
    ("state", "error", "message"),
    [
        (
            _saved(kind="DistributedSampler"),
            ValueError,
            r"kind was 'DistributedSampler' when saved",
        ),
        (_saved(version=1), ValueError, r"format version=1"),
        (_saved(size=7), ValueError, r"size was 7 when saved, but is 6 now"),
        (_saved(seed=4), ValueError, r"seed was 4 when saved, but is 3 now"),
        (_saved(shuffle=False), ValueError, r"shuffle was False when saved, but is True now"),
        (_saved(num_replicas=0), ValueError, r"num_replicas should be >= 1, but got num_rep"),
        (_saved(start=-1), ValueError, r"start should be >= 0, but got start=-1$"),
        (_saved(position=-1), ValueError, r"position should be >= 0, but got position=-1$"),
        (_saved(position="8"), TypeError, r"position should be an integer, but got position='8'"),
        (
            _saved(pass_start=18, **{"pass": 3}),
            ValueError,
            r"pass_start should be <= .* = 16\), but got pass_start=18$",
        ),
        (
            _saved(pass_start=7),
            ValueError,
            r"pass_start should be pass \* 6 = 12 .* but got pass_start=7$",
        ),
        (
            _saved(generator="abc"),
            ValueError,
            r"generator should be the base64 text of a \d+-byte .* but got generator='abc'$",
        ),
        ({"kind": "InfiniteSampler"}, KeyError, r"state has no 'version'"),
        ([1], TypeError, r"state should be a dict from state_dict\(\)"),
    ],
)
def test_a_bad_state_is_rejected_naming_the_field(state, error, message):
    """Invariant: a state from another sampler, format, dataset or seed, or with a world,
    position, pass or generator out of range, is refused naming the field, and nothing is
    loaded."""
    s = InfiniteSampler(range(6), 2, 1, seed=3)
    before = s.state_dict()
    with pytest.raises(error, match=message):
        s.load_state_dict(state)
    assert s.state_dict() == before


@pytest.mark.parametrize("workers", [0, 2])
def test_a_stateful_dataloader_resumes_the_stream_exactly(workers):
    """Invariant: torchdata's StatefulDataLoader saves and loads the sampler's state: the resumed
    loader yields exactly the batches the uninterrupted one yields next, with or without workers
    (which read ahead of the training loop)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    def loader():
        sampler = InfiniteSampler(range(10), 2, 1, seed=1)
        return StatefulDataLoader(range(10), batch_size=3, sampler=sampler, num_workers=workers)

    first = loader()
    batches = iter(first)
    for _ in range(5):
        next(batches)
    state = first.state_dict()
    expected = [next(batches).tolist() for _ in range(4)]
    resumed = loader()
    resumed.load_state_dict(state)
    assert [b.tolist() for _, b in zip(range(4), resumed)] == expected
    assert expected == [stream_torch(10, True, 1, 72)[1::2][i : i + 3] for i in range(15, 27, 3)]


@given(n=stream_lengths, args=stream_sampler_args, k=stream_reads, worlds=elastic_worlds)
def test_any_ranks_state_resumes_every_rank_of_any_world_reading_each_position_once(
    n, args, k, worlds
):
    """Invariant: after W1 ranks each read k indices, their states are all equal; loaded on W2
    ranks (W2 == W1 too), each reading m more, the old and new reads laid out at their global
    positions are the one-rank stream's first k * W1 + m * W2: every position read once."""
    (W1, W2, m), shuffle, seed = worlds, args["shuffle"], args["seed"]
    states, head = [], []
    for r in range(W1):
        s = InfiniteSampler(range(n), W1, r, shuffle, seed)
        head.append(list(islice(s, k)))
        states.append(json.loads(json.dumps(s.state_dict())))
    assert all(state == states[0] for state in states)
    tail = []
    for r in range(W2):
        s = InfiniteSampler(range(n), W2, r, shuffle, seed)
        s.load_state_dict(states[-1])  # the last rank's: any rank's would do
        tail.append(list(islice(s, m)))
    laid_out = [head[p % W1][p // W1] for p in range(k * W1)]
    laid_out += [tail[p % W2][p // W2] for p in range(m * W2)]
    assert laid_out == stream_torch(n, shuffle, seed, len(laid_out))


def test_an_elastic_state_resumes_again_on_a_third_world():
    """Invariant: 3 ranks read 5 each, 2 ranks resume and read 4 each, 4 ranks resume from that:
    the three worlds together read the stream's first 15 + 8 + 4 * 3 positions once each."""
    reads = []
    state = None
    for W, k in ((3, 5), (2, 4), (4, 3)):
        ranks = [InfiniteSampler(range(7), W, r, seed=5) for r in range(W)]
        for s in ranks:
            if state is not None:
                s.load_state_dict(state)
        per_rank = [list(islice(s, k)) for s in ranks]
        reads += [per_rank[p % W][p // W] for p in range(k * W)]
        state = json.loads(json.dumps(ranks[0].state_dict()))
    assert reads == stream_torch(7, True, 5, 35)


@given(n=stream_lengths, args=stream_sampler_args, k=stream_reads, more=st.integers(0, 40))
def test_a_state_is_saved_back_unchanged_and_a_resumed_stream_resumes_again(n, args, k, more):
    """Invariant: a fresh sampler saves position 0; a loaded state is what state_dict() returns
    before any read; and a state saved after reading on from a resume resumes too (its pass
    and pass start stay consistent): two preemptions read the uninterrupted stream."""
    assert InfiniteSampler(range(n), **args).state_dict()["position"] == 0
    whole = list(islice(InfiniteSampler(range(n), **args), k + 2 * more))
    first = InfiniteSampler(range(n), **args)
    head = list(islice(first, k))
    state = json.loads(json.dumps(first.state_dict()))
    second = InfiniteSampler(range(n), **args)
    second.load_state_dict(state)
    assert json.loads(json.dumps(second.state_dict())) == state
    middle = list(islice(second, more))
    third = InfiniteSampler(range(n), **args)
    third.load_state_dict(json.loads(json.dumps(second.state_dict())))
    assert head + middle + list(islice(third, more)) == whole


@given(n=stream_lengths, args=stream_sampler_args, data=st.data())
def test_consumed_saves_the_stream_where_the_loop_stopped_not_where_workers_drew(n, args, data):
    """Invariant: after ``h`` indices handed out and ``k <= h`` used by the loop,
    ``state_dict(consumed=k)`` equals the state of a sampler that handed out exactly ``k``
    (from where every ``iter()`` starts), and the sampler itself is not moved."""
    s = InfiniteSampler(range(n), **args)
    h = data.draw(st.integers(0, 3 * n))
    k = data.draw(st.integers(0, h))
    it = iter(s)
    for _ in range(h):
        next(it)
    exact = InfiniteSampler(range(n), **args)
    it2 = iter(exact)
    for _ in range(k):
        next(it2)
    before = s.state_dict()
    assert s.state_dict(consumed=k) == exact.state_dict()
    assert s.state_dict() == before
    with pytest.raises(ValueError, match=rf"consumed should be <= {h} .*consumed={h + 1}"):
        s.state_dict(consumed=h + 1)


def test_consumed_after_a_resume_counts_from_the_loaded_position_and_names_it():
    """Invariant: after a state at position 5 is loaded, the latest ``iter()`` hands out from
    there: 3 handed out bound ``consumed`` at 3, in words that name the count, and
    ``consumed=2`` is the stream at position 7. A world past int64 is refused, naming it."""
    first = InfiniteSampler(range(4), num_replicas=2, rank=1, seed=3)
    list(islice(iter(first), 5))
    s = InfiniteSampler(range(4), num_replicas=2, rank=1, seed=3)
    s.load_state_dict(first.state_dict())
    it = iter(s)
    next(it), next(it), next(it)
    words = ("consumed should be <= 3 (samples handed out): the latest iter() handed out 3, but "
             "got consumed=4")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        s.state_dict(consumed=4)
    exact = InfiniteSampler(range(4), num_replicas=2, rank=1, seed=3)
    list(islice(iter(exact), 7))
    assert s.state_dict(consumed=2) == exact.state_dict()
    words = (
        "num_replicas should be < 2**63 (stored as int64), but got num_replicas=9223372036854775808"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        InfiniteSampler(range(4), num_replicas=2**63, rank=0)
