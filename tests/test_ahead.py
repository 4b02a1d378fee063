"""Properties of OrderAhead: the wrapped sampler's indices exactly, only drawn an epoch early.

Against torch's DistributedSampler and against the wrapped sampler itself, for any sequence of
set_epoch calls (repeats, skips, going back), partial reads, state_dict/load_state_dict and
indices; the order after set_epoch(e + 1) really is the one drawn in the background; at
most one thread, which the interpreter waits for at exit; DataLoader with and without workers; errors that name the sampler.
"""

from __future__ import annotations

import copy
import gc
import subprocess
import sys
import threading
from itertools import islice
from typing import Any

import pytest
import torch
import torch.utils.data as tud
from hypothesis import given
from hypothesis import strategies as st

from distsampling import (
    DistributedSampler,
    DistributedSamplerWrapper,
    OrderAhead,
    ResumableDistributedSampler,
    ResumableDistributedSamplerWrapper,
    ResumableUnpaddedDistributedSampler,
    ResumableWeightedBalanceClassSampler,
    WeightedBalanceClassSampler,
)
from strategies import flags, sampler_args, seeds, world_sizes

LABELS = [0] * 7 + [1] * 3 + [2] * 2  # 12 samples in 3 classes, for the weighted sampler

#: epoch sequences a loop may call set_epoch with: repeats, skips and going back included
epoch_sequences = st.lists(st.integers(min_value=0, max_value=5), min_size=1, max_size=8)
#: the kinds of sampler OrderAhead takes, each built alike by ``build``
ahead_kinds = st.sampled_from(
    [
        "ResumableDistributedSampler",
        "ResumableUnpaddedDistributedSampler",
        "ResumableDistributedSamplerWrapper(ResumableWeightedBalanceClassSampler)",
        "ResumableDistributedSamplerWrapper(list)",
        "ResumableWeightedBalanceClassSampler",
    ]
)
#: the epoch a loop sets before reading: the next one (None, the usual loop) or any one
epoch_choices = st.one_of(st.none(), st.integers(min_value=0, max_value=5))
#: what a loop does after reading part of an epoch: (what, its number)
after_reads = st.one_of(
    st.tuples(st.just("more"), st.integers(min_value=0, max_value=45)),  # read on
    st.tuples(st.just("state"), st.none()),
    st.tuples(st.just("consumed"), st.integers(min_value=0, max_value=45)),
    st.tuples(st.just("indices"), st.none()),
    st.tuples(st.just("len"), st.none()),
    st.tuples(st.just("load"), st.integers(min_value=0, max_value=9)),  # a state saved before
    st.tuples(st.just("set_epoch"), st.integers(min_value=0, max_value=5)),
)
#: one round of a training loop: set an epoch, iter() and read k indices, then more steps
loop_rounds = st.tuples(
    epoch_choices, st.integers(min_value=0, max_value=45), st.lists(after_reads, max_size=3)
)
#: what a training loop does, round after round
loops = st.lists(loop_rounds, min_size=1, max_size=6)


def build(kind: str, n: int, world: int, rank: int, shuffle: bool, seed: int, drop_last: bool):
    """A sampler of ``kind``, built alike on every call."""
    if kind == "ResumableDistributedSampler":
        return ResumableDistributedSampler(range(n), world, rank, shuffle, seed, drop_last)
    if kind == "ResumableUnpaddedDistributedSampler":
        return ResumableUnpaddedDistributedSampler(range(n), world, rank, shuffle, seed)
    if kind == "ResumableDistributedSamplerWrapper(ResumableWeightedBalanceClassSampler)":
        inner = ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], length=n, seed=seed)
        return ResumableDistributedSamplerWrapper(inner, world, rank, shuffle, seed, drop_last)
    if kind == "ResumableDistributedSamplerWrapper(list)":
        inner = [(7 * i) % 11 for i in range(n)]  # a fixed inner epoch, repeats included
        return ResumableDistributedSamplerWrapper(inner, world, rank, shuffle, seed, drop_last)
    if kind == "ResumableWeightedBalanceClassSampler":
        return ResumableWeightedBalanceClassSampler(LABELS, [1, 2, 3], length=n, seed=seed)
    raise AssertionError(kind)


def outcome(call) -> tuple:
    """What a call answered: its value (a tensor as a list), or the error it raised."""
    try:
        value = call()
    except (TypeError, ValueError, RuntimeError) as err:
        return ("raised", type(err), str(err))
    return ("value", value.tolist() if isinstance(value, torch.Tensor) else value)


def ahead_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("OrderAhead")]


def wait_for_draws() -> None:
    """Let draws left by earlier tests end, so that a count of threads is this test's own."""
    for t in ahead_threads():
        t.join(timeout=60)


def step(what: str, j: int, plain, ahead, its: dict, saved: list, kind: str) -> tuple | None:
    """Do ``what`` to both samplers; None if they answered alike, else both answers."""
    if what == "more":
        got = [list(islice(its[name], j)) for name in ("plain", "ahead")]
    elif what == "state":
        got = [plain.state_dict(), ahead.state_dict()]
        saved.append(got[0])
    elif what == "consumed":  # every Resumable* sampler takes it: accepted or refused alike
        got = [outcome(lambda s=s: s.state_dict(consumed=j)) for s in (plain, ahead)]
    elif what == "indices":
        got = [outcome(s.indices) for s in (plain, ahead)]
    elif what == "len":
        got = [len(plain), len(ahead)]
    elif what == "set_epoch":
        got = [outcome(lambda s=s: s.set_epoch(j)) for s in (plain, ahead)]
    else:  # load a state saved earlier in the loop
        state = saved[j % len(saved)]
        got = [outcome(lambda s=s: s.load_state_dict(state)) for s in (plain, ahead)]
    return None if got[0] == got[1] else tuple(got)


@given(
    n=st.integers(min_value=0, max_value=60),
    args=sampler_args(),
    epochs=epoch_sequences,
    resumable=st.booleans(),
)
def test_yields_torchs_distributed_sampler_epochs_for_any_sequence_of_set_epoch(
    n, args, epochs, resumable
):
    """Invariant: for any sequence of set_epoch calls, each epoch of OrderAhead over our
    DistributedSampler, plain or resumable, is index for index torch's DistributedSampler's
    epoch, and len is torch's."""
    cls = ResumableDistributedSampler if resumable else DistributedSampler
    ours = OrderAhead(cls(range(n), **args))
    torchs = tud.DistributedSampler(range(n), **args)
    for epoch in epochs:
        ours.set_epoch(epoch)
        torchs.set_epoch(epoch)
        assert list(ours) == list(torchs)
        assert len(ours) == len(torchs)


@given(
    kind=ahead_kinds,
    n=st.integers(min_value=0, max_value=40),
    world=world_sizes,
    shuffle=flags,
    seed=seeds,
    drop_last=flags,
    rounds=loops,
    data=st.data(),
)
def test_every_step_of_a_loop_answers_as_the_wrapped_sampler_does(
    kind, n, world, shuffle, seed, drop_last, rounds, data
):
    """Invariant: whatever a loop does (set_epoch to any epoch, partial reads, reading on, state
    and consumed, indices, len, loading an earlier state), OrderAhead answers each step
    exactly as the sampler it wraps would, errors included."""
    rank = data.draw(st.integers(min_value=0, max_value=world - 1), label="rank")
    plain = build(kind, n, world, rank, shuffle, seed, drop_last)
    ahead = OrderAhead(build(kind, n, world, rank, shuffle, seed, drop_last))
    saved = [plain.state_dict()]
    for epoch, k, steps in rounds:
        epoch = plain.epoch + 1 if epoch is None else epoch
        plain.set_epoch(epoch)
        ahead.set_epoch(epoch)
        its = {"plain": iter(plain), "ahead": iter(ahead)}
        assert list(islice(its["plain"], k)) == list(islice(its["ahead"], k))
        for what, j in steps:
            assert step(what, j, plain, ahead, its, saved, kind) is None, (what, j)
    # and the rest of the last iter(), then the state after it
    assert list(its["plain"]) == list(its["ahead"])
    assert plain.state_dict() == ahead.state_dict()


class Spy(ResumableDistributedSampler):
    """A ResumableDistributedSampler that notes which thread draws each epoch (indices()), and
    where iter() runs (its own iter() draws through indices() too, on the loop's thread)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, int, str]] = []  # shared with copies: every call is noted

    def indices(self) -> torch.Tensor:
        self.calls.append(("indices", self.epoch, threading.current_thread().name))
        return super().indices()

    def __iter__(self):
        self.calls.append(("iter", self.epoch, threading.current_thread().name))
        return super().__iter__()


@given(n=st.integers(min_value=1, max_value=60), args=sampler_args(), epochs=epoch_sequences)
def test_after_set_epoch_e_plus_1_the_order_drawn_in_the_background_is_handed_out(n, args, epochs):
    """Invariant: an epoch that follows the one read before it (set_epoch(e + 1) after reading
    e) is drawn by indices() on a background thread and never by the sampler's own iter() (no
    call at all on the loop's thread); any other epoch (first, repeated, skipped, earlier) is
    read by the sampler's own iter(), which draws it by indices() on the loop's thread."""
    spy = Spy(range(n), **args)
    ahead, last = OrderAhead(spy), None
    main = threading.current_thread().name
    for epoch in epochs:
        ahead.set_epoch(epoch)
        start = len(spy.calls)
        list(ahead)
        own = [c for c in spy.calls[start:] if c[2] == main]
        if last is not None and epoch == last + 1:  # predicted: drawn ahead, not read again
            assert own == []
        else:
            assert own == [("iter", epoch, main), ("indices", epoch, main)]
        last = epoch
    wait_for_draws()  # the last epoch's draw of the one after it, too
    draws = [c for c in spy.calls if c[2] != main]
    assert draws and all(
        (what, name) == ("indices", f"OrderAhead epoch {e}") for what, e, name in draws
    )


@given(n=st.integers(min_value=1, max_value=60), args=sampler_args(), epochs=epoch_sequences)
def test_at_most_one_drawing_thread_runs_and_none_outlives_its_draw(n, args, epochs):
    """Invariant: at every step at most one OrderAhead thread is alive, and once its draw is
    done it ends: none is left behind when the sampler is dropped."""
    wait_for_draws()
    # what existed before this example is not its garbage: the gc below scans only the new
    # objects (0.4 s a full collection of torch's and Hypothesis's heap, 30 times, otherwise).
    # Collecting less can only leave more alive, so the final assert is no weaker.
    gc.freeze()
    try:
        ahead = OrderAhead(ResumableDistributedSampler(range(n), **args))
        for epoch in epochs:
            ahead.set_epoch(epoch)
            it = iter(ahead)
            for _ in it:  # a draw starts after the first index: count while the epoch is read
                assert len(ahead_threads()) <= 1
        del ahead, it
        gc.collect()
    finally:
        gc.unfreeze()
    wait_for_draws()
    assert ahead_threads() == []


@pytest.mark.timeout(120)
def test_a_program_that_ends_while_a_draw_runs_exits_cleanly():
    """Invariant: a script whose loop ends while the next epoch is being drawn exits with
    status 0 and nothing on stderr: the interpreter waits for the draw (a thread killed inside
    torch's randperm at exit would abort the process)."""
    script = (
        "from distsampling import OrderAhead, ResumableDistributedSampler\n"
        "s = OrderAhead(ResumableDistributedSampler(range(2_000_000), num_replicas=1, rank=0))\n"
        "it = iter(s); next(it); next(it)\n"  # epoch 1 is being drawn: end the program now
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=100
    )
    assert (proc.returncode, proc.stderr) == (0, "")


@pytest.mark.timeout(180)
@pytest.mark.parametrize("workers", [0, 2])
def test_a_dataloader_reads_the_wrapped_samplers_batches_with_any_number_of_workers(workers):
    """Invariant: a DataLoader over OrderAhead(sampler), with or without worker processes,
    yields the batches of a DataLoader over the sampler alone, epoch after epoch (the sampler
    lives in the main process: workers only fetch)."""
    data = list(range(103))
    epochs = [0, 1, 2, 2, 5, 4, 5, 6]

    def batches(sampler) -> list[list[list[int]]]:
        loader = tud.DataLoader(data, batch_size=8, sampler=sampler, num_workers=workers)
        out = []
        for epoch in epochs:
            sampler.set_epoch(epoch)
            out.append([b.tolist() for b in loader])
        return out

    args = {"num_replicas": 3, "rank": 1, "seed": 7}
    plain = batches(tud.DistributedSampler(data, **args))  # torch's, the reference
    assert batches(OrderAhead(ResumableDistributedSampler(data, **args))) == plain


def test_a_copy_taken_while_a_draw_runs_reads_the_same_epochs():
    """Invariant: copy.deepcopy (what a framework may do to a sampler) works while a thread is
    drawing, and the copy reads the same epochs as the original."""
    ahead = OrderAhead(ResumableDistributedSampler(range(1000), num_replicas=2, rank=1, seed=3))
    first = list(ahead)  # epoch 1 is being drawn now
    twin = copy.deepcopy(ahead)
    for s in (ahead, twin):
        s.set_epoch(1)
    assert list(twin) == list(ahead) != first


def test_a_draw_that_fails_raises_the_samplers_own_error_in_the_loop():
    """Invariant: when the next epoch cannot be drawn (seed + epoch beyond torch.Generator's
    range), the background draw raises nothing; reading the epoch raises the sampler's own
    error, where the loop reads it (at the first next(), as the sampler's own iter())."""
    seed = 2**64 - 1  # epoch 0 is the last epoch this seed can draw
    ahead = OrderAhead(ResumableDistributedSampler(range(10), num_replicas=1, rank=0, seed=seed))
    assert sorted(ahead) == list(range(10))  # epoch 1's draw fails meanwhile
    ahead.set_epoch(1)
    plain = ResumableDistributedSampler(range(10), num_replicas=1, rank=0, seed=seed)
    plain.set_epoch(1)
    with pytest.raises(ValueError, match="seed \\+ epoch should be in") as ours:
        next(iter(ahead))
    with pytest.raises(ValueError) as theirs:
        next(iter(plain))
    assert str(ours.value) == str(theirs.value)


class OwnIter(DistributedSampler):
    """Overrides __iter__ only: its indices() no longer say what it yields."""

    def __iter__(self):
        return iter(reversed(list(super().__iter__())))


@pytest.mark.parametrize(
    ("make", "match"),
    [
        (lambda: [3, 1, 2], r"sampler=\[3, 1, 2\] of type list, which lacks set_epoch\(\), indices\(\)"),
        (lambda: tud.RandomSampler(range(4)), r"of type RandomSampler, which lacks set_epoch\(\)"),
        (lambda: tud.DistributedSampler(range(4), 1, 0), r"of type DistributedSampler, which lacks indices\(\)$"),
        (lambda: DistributedSamplerWrapper(tud.DistributedSampler(range(4), 1, 0), 1, 0),
         r"sampler.sampler should have set_epoch\(\).* which lacks indices\(\)$"),
        (lambda: DistributedSamplerWrapper(tud.RandomSampler(range(4)), 1, 0),
         r"^sampler.sampler should draw its epoch from set_epoch .* but got sampler.sampler=<torch"),
        (lambda: ResumableDistributedSamplerWrapper(WeightedBalanceClassSampler([0, 1], [1, 1], 2), 1, 0),
         r"sampler.state_dict\(\) of sampler=.* raised: DistributedSamplerWrapper can save"),
        (lambda: OwnIter(range(4), 1, 0), r"OwnIter overrides __iter__ without indices\(\)"),
    ],
    ids=["list", "RandomSampler", "torch DistributedSampler", "inner without indices",
         "inner RandomSampler", "resumable over a plain inner", "own __iter__"],
)  # fmt: skip
def test_a_sampler_it_cannot_draw_ahead_is_refused_naming_it(make, match):
    """Invariant: a sampler without set_epoch/indices/epoch, whose indices are not what it
    yields, whose inner sampler draws from a generator of its own, or whose state_dict() cannot
    describe its epoch, is refused at construction, with the sampler and what it lacks named."""
    with pytest.raises(TypeError, match=match):
        OrderAhead(make())


def test_writing_into_indices_changes_nothing_iter_yields():
    """Invariant: indices() hands out a tensor of its own, also when the next epoch was
    drawn ahead: a caller writing into it changes nothing that iter() yields."""
    ahead = OrderAhead(ResumableDistributedSampler(range(20), num_replicas=2, rank=0))
    plain = ResumableDistributedSampler(range(20), num_replicas=2, rank=0)
    list(ahead)  # epoch 1 is drawn meanwhile
    for s in (ahead, plain):
        s.set_epoch(1)
    ahead.indices().fill_(-1)
    assert list(ahead) == list(plain)


def test_consumed_beyond_what_a_drawn_order_handed_out_is_refused():
    """Invariant: state_dict(consumed=...) while a drawn order is read takes 0..handed out,
    as the sampler does, and refuses more in the sampler's own words (the value named)."""
    ahead = OrderAhead(ResumableDistributedSampler(range(20), num_replicas=2, rank=0))
    plain = ResumableDistributedSampler(range(20), num_replicas=2, rank=0)
    for s in (ahead, plain):
        list(s)  # ahead: epoch 1 is drawn meanwhile
        s.set_epoch(1)
        it = iter(s)
        next(it), next(it)
        assert s.state_dict(consumed=1)["position"] == 1
    with pytest.raises(ValueError) as theirs:
        plain.state_dict(consumed=3)
    with pytest.raises(ValueError, match=r"but got consumed=3$") as ours:
        ahead.state_dict(consumed=3)
    assert str(ours.value) == str(theirs.value)


@given(n=st.integers(min_value=20, max_value=60), args=sampler_args(), epoch=st.integers(0, 5))
def test_the_next_epoch_is_drawn_as_soon_as_the_first_index_is_out(n, args, epoch):
    """Invariant: once the first index of epoch e is out and the loop asks for the second (every
    rank has at least two here), the draw of epoch e + 1 has started on its own thread: not
    after a later index, not at the end of the epoch."""
    wait_for_draws()
    spy = Spy(range(n), **args)
    ahead = OrderAhead(spy)
    ahead.set_epoch(epoch)
    it = iter(ahead)
    next(it), next(it)
    wait_for_draws()
    assert ("indices", epoch + 1, f"OrderAhead epoch {epoch + 1}") in spy.calls


@given(n=st.integers(min_value=1, max_value=60), args=sampler_args())
def test_indices_after_the_draw_hand_out_the_drawn_order_without_drawing_again(n, args):
    """Invariant: after set_epoch(e + 1), indices() is the order drawn in the background:
    the sampler's indices() is not called again on the loop's thread, and the value is the
    sampler's own."""
    spy = Spy(range(n), **args)
    ahead = OrderAhead(spy)
    list(ahead)
    ahead.set_epoch(1)
    main = threading.current_thread().name
    before = [c for c in spy.calls if c[2] == main]
    order = ahead.indices()
    assert [c for c in spy.calls if c[2] == main] == before
    plain = ResumableDistributedSampler(range(n), **args)
    plain.set_epoch(1)
    assert order.tolist() == plain.indices().tolist()


def test_indices_of_an_epoch_that_could_not_be_drawn_raise_the_samplers_error():
    """Invariant: when the background draw failed, indices() raises what the sampler's own
    indices() raises for that epoch, word for word."""
    seed = 2**64 - 1  # epoch 0 is the last epoch this seed can draw
    ahead = OrderAhead(ResumableDistributedSampler(range(10), num_replicas=1, rank=0, seed=seed))
    list(ahead)  # epoch 1's draw fails meanwhile
    ahead.set_epoch(1)
    plain = ResumableDistributedSampler(range(10), num_replicas=1, rank=0, seed=seed)
    plain.set_epoch(1)
    with pytest.raises(ValueError) as theirs:
        plain.indices()
    with pytest.raises(ValueError) as ours:
        ahead.indices()
    assert str(ours.value) == str(theirs.value)


@given(n=st.integers(min_value=4, max_value=60), args=sampler_args(), k=st.integers(0, 3))
def test_set_epoch_to_the_epoch_being_read_keeps_the_position_as_the_sampler_does(n, args, k):
    """Invariant: while a drawn order is read, set_epoch(the same epoch) changes nothing: the
    state and the rest of the epoch are what the plain sampler says after the same calls."""
    plain = ResumableDistributedSampler(range(n), **args)
    ahead = OrderAhead(ResumableDistributedSampler(range(n), **args))
    for s in (plain, ahead):
        list(s)
        s.set_epoch(1)  # ahead: the drawn order
    its = [iter(plain), iter(ahead)]
    got = [list(islice(it, k)) for it in its]
    assert got[0] == got[1]
    for s in (plain, ahead):
        s.set_epoch(1)
    assert ahead.state_dict() == plain.state_dict()
    assert list(its[1]) == list(its[0])


def test_a_fresh_wrapper_has_the_samplers_state():
    """Invariant: before any iter(), OrderAhead's state_dict() is the sampler's."""
    plain = ResumableDistributedSampler(range(10), num_replicas=2, rank=1, seed=5)
    assert (
        OrderAhead(ResumableDistributedSampler(range(10), 2, 1, seed=5)).state_dict()
        == plain.state_dict()
    )


class NoConsumed(ResumableDistributedSampler):
    """A resumable sampler whose state_dict() takes no ``consumed`` argument."""

    def state_dict(self) -> dict[str, Any]:  # type: ignore[override]
        return super().state_dict()


def test_a_plain_sampler_has_no_position_to_save_through_order_ahead():
    """Invariant: OrderAhead over a plain sampler (no state_dict) draws ahead but refuses
    state_dict(), naming the sampler and its resumable form, rather than saving nothing."""
    inner = DistributedSampler(range(10), num_replicas=2, rank=0)
    ahead = OrderAhead(inner)
    list(ahead)
    for consumed in (None, 0):
        with pytest.raises(TypeError) as err:
            ahead.state_dict(consumed)
        assert str(err.value) == (
            "OrderAhead saves its position through its sampler's state_dict(), but got "
            f"sampler={inner!r}, a plain sampler without one: wrap its resumable form "
            "(distsampling.resume.resumable)"
        )


def test_consumed_for_a_sampler_without_that_argument_is_refused_naming_both():
    """Invariant: state_dict(consumed=...) over a sampler whose state_dict takes no ``consumed``
    is a TypeError naming the argument, the sampler and the value."""
    inner = NoConsumed(range(5), 1, 0)
    with pytest.raises(TypeError) as err:
        OrderAhead(inner).state_dict(consumed=2)
    assert str(err.value) == (
        f"consumed is DistributedSampler.state_dict's argument, but sampler={inner!r} has a "
        "state_dict() without it; got consumed=2"
    )


def test_the_drawing_thread_is_not_a_daemon():
    """Invariant: the draw runs on a non-daemon thread, so the interpreter waits for it at exit
    instead of killing it inside torch's randperm (which aborts the process)."""
    wait_for_draws()
    ahead = OrderAhead(ResumableDistributedSampler(range(3_000_000), num_replicas=1, rank=0))
    it = iter(ahead)
    next(it), next(it)  # epoch 1 is being drawn
    threads = ahead_threads()
    assert [t.daemon for t in threads] == [False]
    wait_for_draws()


class _Parts:
    """set_epoch, indices and state_dict, as OrderAhead calls them; no __iter__, no epoch."""

    def set_epoch(self, epoch):
        pass

    def indices(self):
        return torch.arange(3)

    def state_dict(self):
        return {}

    def __repr__(self):
        return f"{type(self).__name__}()"


class NoEpoch(_Parts):
    """Everything OrderAhead calls, but no ``epoch`` attribute."""

    def __iter__(self):
        return iter(self.indices().tolist())


class NoIter(_Parts):
    """Everything OrderAhead calls but ``__iter__`` (none inherited either)."""

    epoch = 0


def test_the_refusals_name_the_samplers_it_takes_and_what_is_missing_word_for_word():
    """Invariant: a sampler without an epoch attribute, or with no __iter__ at all, is refused
    in full sentences: which samplers qualify, the sampler given, and what it lacks."""
    with pytest.raises(TypeError) as err:
        OrderAhead(NoEpoch())
    assert str(err.value) == (
        "sampler should have set_epoch(), indices() and an epoch attribute (this package's "
        "samplers), but got sampler=NoEpoch() of type NoEpoch, which lacks an epoch attribute"
    )
    with pytest.raises(TypeError) as err:
        OrderAhead(NoIter())
    assert str(err.value) == (
        "sampler should yield its indices(), but got sampler=NoIter(): it has no __iter__ "
        "without indices()"
    )


class _NoConsumed(DistributedSampler):
    """A sampler whose state_dict() takes no argument (a user's own, say)."""

    def state_dict(self) -> dict:
        return {"epoch": self.epoch}

    def load_state_dict(self, state: dict) -> None:
        self.set_epoch(state["epoch"])


def test_a_sampler_whose_state_dict_takes_no_argument_saves_through_order_ahead():
    """Invariant: without consumed, OrderAhead calls the sampler's state_dict() with no
    argument, so a sampler whose state_dict() takes none saves its state through it."""
    ahead = OrderAhead(_NoConsumed(range(6), 2, 0))
    ahead.set_epoch(3)
    assert ahead.state_dict() == {"epoch": 3}


def test_over_one_ranks_share_the_wrapper_is_a_share_too_and_over_anything_else_it_is_not():
    """Invariant: OrderAhead over a torch ``DistributedSampler`` (one rank's share) is one too,
    with the share's world and rank, so a framework that leaves shares alone leaves it alone
    (Lightning's default: its own check, in this process); a copy and a pickle keep that; over a
    sampler whose epoch is the same on every rank it is none (Lightning must split that one)."""
    import copy
    import pickle
    from types import SimpleNamespace

    import torch.utils.data
    from pytorch_lightning.trainer.connectors.data_connector import _DataConnector

    from distsampling import WeightedBalanceClassSampler

    settings = SimpleNamespace(use_distributed_sampler=True, is_distributed=True)
    connector = _DataConnector(SimpleNamespace(_accelerator_connector=settings))
    share = OrderAhead(DistributedSampler(range(13), num_replicas=2, rank=1, seed=5))
    for s in (share, copy.copy(share), pickle.loads(pickle.dumps(share))):
        assert isinstance(s, torch.utils.data.DistributedSampler) and isinstance(s, OrderAhead)
        assert (s.num_replicas, s.rank) == (2, 1)
        assert list(s) == list(DistributedSampler(range(13), num_replicas=2, rank=1, seed=5))
        loader = torch.utils.data.DataLoader(range(13), sampler=s)
        assert not connector._requires_distributed_sampler(loader)
    same = OrderAhead(WeightedBalanceClassSampler([0, 1] * 5, [1, 1], 10, seed=3))
    assert not isinstance(same, torch.utils.data.DistributedSampler)
    loader = torch.utils.data.DataLoader(range(10), sampler=same)
    assert connector._requires_distributed_sampler(loader)
