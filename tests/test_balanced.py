"""Properties of BatchBalanceClassSampler and distinct_draws: P distinct classes times K
samples per batch, index-exact against a batch-by-batch definition built here from torch's
uniforms, reproducible per (seed, epoch), ranks disjoint by batch with equal counts, resume,
and every bad argument."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from itertools import combinations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from distsampling import BatchBalanceClassSampler, distinct_draws
from strategies import balanced_batch_args, epochs, ranks_for, seeds, world_sizes


def floyd(n: int, us: list[float]) -> list[int]:
    """Floyd's algorithm as printed: for j = n - k .. n - 1, draw t in [0, j]; take t, or j
    itself when t is taken already."""
    chosen: list[int] = []
    for step, u in enumerate(us):
        j = n - len(us) + step
        t = min(int(u * (j + 1)), j)
        chosen.append(j if t in chosen else t)
    return chosen


def batches_defined(labels, num_classes, num_samples, num_batches, W, rank, seed, epoch):
    """The definition, batch by batch: the global epoch's uniforms from one generator seeded
    by seed + epoch, then for each of this rank's batches P distinct classes (sorted labels'
    order) and K members of each: distinct ones (Floyd) if the class has K, else u * size."""
    g = torch.Generator()
    g.manual_seed(seed + epoch)
    B = num_batches * W
    u_classes = torch.rand(B, num_classes, generator=g, dtype=torch.float64).tolist()
    u_samples = torch.rand(B, num_classes, num_samples, generator=g, dtype=torch.float64).tolist()
    classes = sorted(set(labels))
    members = [[i for i, y in enumerate(labels) if y == c] for c in classes]
    out = []
    for b in range(rank, B, W):
        batch = []
        for c, us in zip(floyd(len(classes), u_classes[b]), u_samples[b]):
            n = len(members[c])
            picks = floyd(n, us) if n >= num_samples else [int(u * n) for u in us]
            batch += [members[c][p] for p in picks]
        out.append(batch)
    return out


@st.composite
def world_args(draw: st.DrawFn) -> dict:
    world = draw(world_sizes)
    return {"num_replicas": world, "rank": draw(ranks_for(world)), "seed": draw(seeds)}


@given(args=balanced_batch_args(), world=world_args(), epoch=epochs)
def test_index_exact_against_the_batch_by_batch_definition(args, world, epoch):
    """Invariant: the vectorised epoch equals the definition drawn one batch at a time."""
    s = BatchBalanceClassSampler(**args, **world)
    s.set_epoch(epoch)
    idx_ours = list(s)
    idx_defined = batches_defined(
        args["labels"],
        args["num_classes"],
        args["num_samples"],
        args["num_batches"],
        world["num_replicas"],
        world["rank"],
        world["seed"],
        epoch,
    )
    assert idx_ours == idx_defined


@given(args=balanced_batch_args(), world=world_args(), epoch=epochs)
def test_every_batch_holds_p_distinct_classes_times_k_samples_of_each(args, world, epoch):
    """Invariant: num_batches batches; each is P groups of K indices, one class per group, P
    distinct classes; inside a group distinct samples whenever the class has K of them."""
    labels, P, K = args["labels"], args["num_classes"], args["num_samples"]
    s = BatchBalanceClassSampler(**args, **world)
    s.set_epoch(epoch)
    batches = list(s)
    assert len(batches) == len(s) == args["num_batches"]
    sizes = Counter(labels)
    for batch in batches:
        assert len(batch) == s.batch_size == P * K
        groups = [batch[j * K : (j + 1) * K] for j in range(P)]
        group_labels = [{labels[i] for i in g} for g in groups]
        assert all(len(ls) == 1 for ls in group_labels)
        assert len({ls.pop() for ls in group_labels}) == P
        for g in groups:
            if sizes[labels[g[0]]] >= K:
                assert len(set(g)) == K


@given(args=balanced_batch_args(), world=world_args(), epoch=epochs)
def test_an_epoch_is_a_function_of_seed_and_epoch(args, world, epoch):
    """Invariant: two samplers built alike draw the same batches for the same epoch, whatever
    the global RNGs do in between and whichever epochs were read before."""
    a, b = BatchBalanceClassSampler(**args, **world), BatchBalanceClassSampler(**args, **world)
    list(a)
    a.set_epoch(epoch)
    torch.manual_seed(epoch)
    np.random.seed(epoch % 2**32)
    b.set_epoch(epoch)
    assert list(a) == list(b)


@given(args=balanced_batch_args(), world=world_sizes, seed=seeds, epoch=epochs)
def test_ranks_read_the_interleaved_batches_of_one_global_epoch(args, world, seed, epoch):
    """Invariant: rank r reads batches r, r + W, ... of the one-rank epoch of num_batches * W
    batches: every rank a different batch position, all the same count."""
    one_rank = BatchBalanceClassSampler(
        **{**args, "num_batches": args["num_batches"] * world}, num_replicas=1, rank=0, seed=seed
    )
    one_rank.set_epoch(epoch)
    global_epoch = list(one_rank)
    for r in range(world):
        s = BatchBalanceClassSampler(**args, num_replicas=world, rank=r, seed=seed)
        s.set_epoch(epoch)
        assert list(s) == global_epoch[r::world]


@given(args=balanced_batch_args(), world=world_args(), epoch=epochs, data=st.data())
def test_resume_from_a_saved_state_yields_the_rest_of_the_epoch(args, world, epoch, data):
    """Invariant: save after k batches (through JSON), load into a new sampler: every iter() of
    that epoch yields the rest of it exactly; set_epoch to another epoch reads a whole one."""
    s = BatchBalanceClassSampler(**args, **world)
    s.set_epoch(epoch)
    k = data.draw(st.integers(0, len(s)))
    it = iter(s)
    head = [next(it) for _ in range(k)]
    resumed = BatchBalanceClassSampler(**args, **world)
    resumed.load_state_dict(json.loads(json.dumps(s.state_dict())))
    whole = list(s)
    assert head + list(resumed) == whole
    assert list(resumed) == whole[k:]
    resumed.set_epoch(epoch + 1)
    s.set_epoch(epoch + 1)
    assert list(resumed) == list(s)


@given(args=balanced_batch_args(), world=world_args(), epoch=epochs, data=st.data())
def test_any_ranks_state_resumes_every_rank_of_its_world_exactly(args, world, epoch, data):
    """Invariant: after k batches in step, every rank saves the same state; any rank's state
    loaded on every rank of that world yields each rank the rest of its own epoch."""
    W = world["num_replicas"]
    ranks = [BatchBalanceClassSampler(**args, num_replicas=W, rank=r) for r in range(W)]
    k = data.draw(st.integers(0, len(ranks[0])), label="k")
    states = []
    for s in ranks:
        s.set_epoch(epoch)
        it = iter(s)
        [next(it) for _ in range(k)]
        states.append(json.loads(json.dumps(s.state_dict())))
    assert all(state == states[0] for state in states)
    saved = data.draw(st.sampled_from(states), label="saved")
    for r, s in enumerate(ranks):
        resumed = BatchBalanceClassSampler(**args, num_replicas=W, rank=r)
        resumed.load_state_dict(saved)
        assert list(resumed) == list(s)[k:]


def test_a_dataloader_with_the_batch_sampler_yields_balanced_batches():
    """Invariant: as a DataLoader's batch_sampler, every batch's labels are P classes x K each."""
    labels = torch.tensor([0] * 10 + [1] * 3 + [2] * 7 + [3] * 5)
    s = BatchBalanceClassSampler(labels, 3, 4, num_replicas=1, rank=0)
    loader = torch.utils.data.DataLoader(labels, batch_sampler=s)
    assert len(loader) == len(labels) // 12
    for batch in loader:
        counts = Counter(batch.tolist())
        assert len(counts) == 3 and set(counts.values()) == {4}


# distinct_draws (Floyd's algorithm)


@given(
    rows=st.lists(st.tuples(st.integers(1, 50), st.integers(0, 10**6)), min_size=1, max_size=20),
    k=st.integers(1, 8),
)
def test_distinct_draws_are_k_distinct_numbers_below_n(rows, k):
    """Invariant: every row holds k distinct numbers in [0, n), equal to Floyd's as printed."""
    rows = [(max(n, k), seed) for n, seed in rows]
    n = torch.tensor([r[0] for r in rows])
    u = torch.stack(
        [
            torch.rand(k, generator=torch.Generator().manual_seed(s), dtype=torch.float64)
            for _, s in rows
        ]
    )
    out = distinct_draws(n, u)
    for (size, _), got, us in zip(rows, out.tolist(), u.tolist()):
        assert len(set(got)) == k and all(0 <= x < size for x in got)
        assert got == floyd(size, us)


def test_distinct_draws_make_every_subset_equally_likely():
    """Invariant: over 30,000 draws of 2 of 5, each of the 10 subsets comes out 3,000 times,
    within 6 standard errors (a fixed generator: the same draws every run)."""
    u = torch.rand(30_000, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    subsets = Counter(
        tuple(sorted(r)) for r in distinct_draws(torch.full((30_000,), 5), u).tolist()
    )
    assert set(subsets) == set(combinations(range(5), 2))
    sd = (30_000 * 0.1 * 0.9) ** 0.5
    assert all(abs(c - 3_000) <= 6 * sd for c in subsets.values())


# bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        (
            {"num_classes": 4},
            ValueError,
            r"num_classes should be <= the number of distinct labels \(3\), but got num_classes=4$",
        ),
        ({"num_classes": 0}, ValueError, r"num_classes should be >= 1, but got num_classes=0$"),
        ({"num_samples": 0}, ValueError, r"num_samples should be >= 1, but got num_samples=0$"),
        (
            {"num_samples": 2.0},
            TypeError,
            r"num_samples should be an integer, but got num_samples=2.0",
        ),
        ({"num_batches": 0}, ValueError, r"num_batches should be >= 1, but got num_batches=0$"),
        (
            {"num_batches": None, "num_samples": 5},
            ValueError,
            r"num_batches defaults to .* = 0, but got num_batches=None",
        ),
        (
            {"labels": []},
            ValueError,
            r"labels should have at least one sample, but got labels=\[\]$",
        ),
        (
            {"labels": [[0, 1], [1, 0]]},
            ValueError,
            r"labels should be 1-D, one label per sample, but got shape \(2, 2\)$",
        ),
        ({"labels": [1, "a", None]}, TypeError, r"labels should be mutually sortable"),
        ({"labels": 7}, TypeError, r"labels should have __len__.*but got labels=7"),
        (
            {"seed": 2**64},
            ValueError,
            r"seed should be in the interval .* but got seed=18446744073709551616$",
        ),
        (
            {"rank": 2},
            ValueError,
            r"Invalid rank 2, rank should be in the interval \[0, 1\], but got rank=2 for num_replicas=",
        ),
    ],
)
def test_bad_arguments_are_rejected_naming_the_value(kwargs, error, message):
    """Invariant: more classes per batch than exist, num_samples or num_batches 0, a default
    num_batches of 0, empty, 2-D or unsortable labels, a bad seed or rank: a clear error."""
    args = {
        "labels": [0, 0, 1, 1, 2, 2],
        "num_classes": 2,
        "num_samples": 2,
        "num_batches": 3,
        "num_replicas": 2,
        "rank": 0,
        "seed": 0,
        **kwargs,
    }
    with pytest.raises(error, match=message):
        BatchBalanceClassSampler(**args)


def test_a_bad_epoch_is_rejected_naming_the_value():
    """Invariant: a non-integer epoch, or seed + epoch outside torch's seed range, fails."""
    s = BatchBalanceClassSampler([0, 1, 1], 2, 1, 1, 1, 0, seed=2**64 - 1)
    with pytest.raises(TypeError, match=r"epoch should be an integer, but got epoch=1.5"):
        s.set_epoch(1.5)
    s.set_epoch(1)
    with pytest.raises(
        ValueError,
        match=r"seed \+ epoch should be in .* but got seed=18446744073709551615, epoch=1$",
    ):
        list(s)


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"labels": "0" * 16}, ValueError, r"labels was '0{16}' when saved"),
        ({"num_classes": 3}, ValueError, r"num_classes was 3 when saved, but is 2 now"),
        ({"num_batches": 4}, ValueError, r"num_batches was 4 when saved, but is 3 now"),
        ({"seed": 1}, ValueError, r"seed was 1 when saved, but is 0 now"),
        (
            {"num_replicas": 3},
            ValueError,
            r"^state was saved on num_replicas=3 ranks, but this sampler has num_replicas=2: a "
            r"BatchBalanceClassSampler resumes on the saved number of ranks only \(its epoch's "
            r"batches are drawn for that world\); build it with that num_replicas, or start a "
            r"new epoch$",
        ),
        ({"version": 1}, ValueError, r"format version=1"),
        (
            {"position": 4},
            ValueError,
            r"position should be in the interval \[0, 3\], but got position=4$",
        ),
        ({"epoch": "1"}, TypeError, r"epoch should be an integer, but got epoch='1'"),
        (
            {"kind": "WeightedBalanceClassSampler"},
            ValueError,
            r"kind was 'WeightedBalanceClassSampler'",
        ),
    ],
)
def test_a_bad_state_is_rejected_naming_the_field(change, error, message):
    """Invariant: a state of other labels (digest), batch shape, seed, world, class or format,
    or a position past the epoch, is refused naming the field, and nothing is loaded."""
    s = BatchBalanceClassSampler([0, 0, 1, 1, 2, 2], 2, 2, 3, 2, 0, seed=0)
    before = list(s)
    state = {**s.state_dict(), **change}
    with pytest.raises(error, match=message):
        s.load_state_dict(state)
    assert list(s) == before


@pytest.mark.parametrize("field", ["num_replicas", "epoch", "position"])
def test_a_state_without_its_world_or_position_is_refused_naming_the_field(field):
    """Invariant: the world, the epoch and the position are required: a state without one is
    refused with a KeyError naming it, never read as a default."""
    s = BatchBalanceClassSampler([0, 0, 1, 1, 2, 2], 2, 2, 3, 2, 0, seed=0)
    state = s.state_dict()
    del state[field]
    with pytest.raises(KeyError, match=rf"state has no '{field}': it is not a BatchBalance"):
        s.load_state_dict(state)


@given(args=balanced_batch_args())
def test_an_omitted_seed_is_seed_0(args):
    """Invariant: without seed= and set_epoch the sampler draws seed 0's epoch 0."""
    omitted = BatchBalanceClassSampler(**args, num_replicas=1, rank=0)
    assert (omitted.seed, omitted.epoch) == (0, 0)
    P, K, B = args["num_classes"], args["num_samples"], args["num_batches"]
    assert list(omitted) == batches_defined(args["labels"], P, K, B, 1, 0, 0, 0)


@pytest.mark.parametrize("seed", [-(2**63), 2**64 - 1])
def test_seed_plus_epoch_at_the_generators_exact_bounds_is_drawn_one_past_is_refused(seed):
    """Invariant: seed + epoch may be any integer torch.Generator takes, its bounds included (the
    epoch is the definition's, drawn from that seed); one past a bound raises naming both."""
    args = {"labels": [0, 0, 1, 1, 2], "num_classes": 2, "num_samples": 1, "num_batches": 2}
    s = BatchBalanceClassSampler(**args, num_replicas=1, rank=0, seed=seed)
    assert list(s) == batches_defined(args["labels"], 2, 1, 2, 1, 0, seed, 0)
    s.set_epoch(1 if seed > 0 else -1)
    with pytest.raises(ValueError, match=rf"seed \+ epoch should be in .*but got seed={seed}, "):
        s.epoch_batches()


def test_the_state_names_its_class_and_format_version_2():
    """Invariant: a checkpoint says which sampler wrote it and in which format (kind
    'BatchBalanceClassSampler', version 2), so other samplers and later versions can refuse it."""
    s = BatchBalanceClassSampler([0, 1, 1, 0], 2, 1, num_replicas=1, rank=0)
    state = s.state_dict()
    assert (state["kind"], state["version"]) == ("BatchBalanceClassSampler", 2)


def test_float_labels_in_a_tensor_that_requires_grad_are_their_values():
    """Invariant: a float label tensor that requires grad (a model's output, say) is read as its
    values: it is detached, not refused."""
    labels = torch.tensor([0.5, 1.5, 0.5, 1.5], requires_grad=True)
    s = BatchBalanceClassSampler(labels, 2, 1, num_replicas=1, rank=0)
    assert s.classes == [0.5, 1.5]
    assert list(s) == list(BatchBalanceClassSampler([0.5, 1.5, 0.5, 1.5], 2, 1, 2, 1, 0))


@pytest.mark.parametrize(
    ("n", "u", "error", "message"),
    [
        (
            torch.tensor([[3, 3]]),
            torch.zeros(1, 2),
            TypeError,
            r"^n should be a 1-D integer tensor",
        ),
        (torch.tensor([3.0]), torch.zeros(1, 2), TypeError, r"but got n=tensor\(\[3\.\]\)$"),
        ([3], torch.zeros(1, 2), TypeError, r"^n should be a 1-D integer tensor, but got n=\[3\]$"),
        (torch.tensor([3]), torch.zeros(1), ValueError, r"^u should be a tensor of shape \(len"),
        (torch.tensor([3]), [[0.5]], ValueError, r"^u should be a tensor of shape \(len\(n\), k\)"),
        (torch.tensor([3]), torch.zeros(2, 1), ValueError, r"= \(1, k\), but got u=tensor"),
    ],
)
def test_distinct_draws_refuses_a_bad_range_or_uniforms_naming_them(n, u, error, message):
    """Invariant: n is a 1-D integer tensor and u a (len(n), k) tensor; the error names the value."""
    with pytest.raises(error, match=message):
        distinct_draws(n, u)


def test_a_state_of_other_labels_is_refused_and_the_digest_is_the_documented_one():
    """Invariant: the state names the labels by the first 16 hex digits of the SHA-256 of their
    class codes (int64) and the classes' repr, so labels of other values (the same class
    pattern) are refused."""
    numbers = BatchBalanceClassSampler([0, 1, 0, 1], 2, 1, num_replicas=1, rank=0)
    codes = np.array([0, 1, 0, 1], dtype=np.int64).tobytes()
    digest = hashlib.sha256(codes + repr([0, 1]).encode()).hexdigest()[:16]
    assert numbers.state_dict()["labels"] == digest
    names = BatchBalanceClassSampler(["a", "b", "a", "b"], 2, 1, num_replicas=1, rank=0)
    with pytest.raises(ValueError, match=r"labels was '[0-9a-f]{16}' when saved, but is"):
        names.load_state_dict(numbers.state_dict())


def test_consumed_counts_the_batches_the_loop_used_from_the_latest_iter():
    """Invariant: ``state_dict(consumed=k)`` is the state after ``k`` batches of the latest
    ``iter()`` (which starts at a loaded position), whatever more was handed out; loaded, the
    rest of the epoch's batches follow."""
    labels = [0, 1, 2] * 8
    make = lambda: BatchBalanceClassSampler(labels, 2, 2, num_batches=6, num_replicas=1, rank=0)  # noqa: E731
    whole = list(make())
    s = make()
    s.load_state_dict({**s.state_dict(), "position": 1})
    it = iter(s)
    next(it), next(it), next(it)  # batches 1, 2, 3 handed out
    state = s.state_dict(consumed=2)
    assert state["position"] == 3
    resumed = make()
    resumed.load_state_dict(state)
    assert list(resumed) == whole[3:]
    words = ("consumed should be <= 3 (batches handed out): the latest iter() handed out 3, but "
             "got consumed=4")  # fmt: skip
    with pytest.raises(ValueError, match=f"^{re.escape(words)}$"):
        s.state_dict(consumed=4)
