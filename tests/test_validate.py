"""Properties of distsampling._validate: the argument checks that every sampler copies along.

Each check is specified here on its own, not through a sampler: what it takes (and returns), what
it refuses, and the exact words of each refusal, since "the error names the argument and the
value" is the promise every sampler's bad-input tests rely on.
"""

from __future__ import annotations

import operator
import sys

import numpy as np
import pytest
import torch
import torch.distributed as dist
from hypothesis import given
from hypothesis import strategies as st

from distsampling._validate import (
    _index_dtype,
    check_bool,
    check_int,
    check_len,
    check_rank,
    check_state,
    index_tensor,
    resolve_world,
)
from strategies import integer_bounds, tagged_bools, tagged_integers, world_sizes

NAMES = st.sampled_from(["num_replicas", "batch_size", "epoch", "x"])


@given(tagged=tagged_integers, name=NAMES)
def test_an_integer_in_any_form_is_taken_as_that_int_and_anything_else_is_named(tagged, name):
    """Invariant: ints of Python, numpy and one-element integer tensors come back as that exact
    Python int; bools of every kind, floats, strings, lists and larger tensors are refused with
    the argument's name, the value's repr and its type."""
    value, as_int = tagged
    if as_int is None:
        with pytest.raises(TypeError) as err:
            check_int(name, value)
        assert str(err.value) == (
            f"{name} should be an integer, but got {name}={value!r} of type {type(value).__name__}"
        )
        assert err.value.__cause__ is None and err.value.__suppress_context__
    else:
        got = check_int(name, value)
        assert type(got) is int and got == as_int


@given(data=st.data(), bounds=integer_bounds, name=NAMES)
def test_an_integer_outside_its_bounds_is_refused_naming_the_bounds_and_the_value(
    data, bounds, name
):
    """Invariant: with ``low`` and/or ``high``, exactly the integers in ``[low, high]`` pass
    (both bounds inclusive); outside, the message states the interval (or the one bound given)
    and the value. Values at and next to each bound are drawn, where an off-by-one shows."""
    low, high = bounds
    near = [b + d for b in (low, high) if b is not None for d in (-1, 0, 1)]
    value = data.draw(st.one_of(st.integers(-(2**65), 2**65), *map(st.just, near or [0])))
    if low is not None and high is not None and not low <= value <= high:
        message = f"{name} should be in the interval [{low}, {high}], but got {name}={value}"
    elif low is not None and value < low:
        message = f"{name} should be >= {low}, but got {name}={value}"
    elif high is not None and value > high:
        message = f"{name} should be <= {high}, but got {name}={value}"
    else:
        assert check_int(name, value, low=low, high=high) == value
        return
    with pytest.raises(ValueError) as err:
        check_int(name, value, low=low, high=high)
    assert str(err.value) == message


@given(tagged=tagged_bools, name=st.sampled_from(["shuffle", "drop_last"]))
def test_a_boolean_in_any_form_is_taken_and_a_truthy_value_is_not(tagged, name):
    """Invariant: Python's and numpy's bools and one-element bool tensors come back as a Python
    bool; 0, 1, strings, None, floats and other tensors are refused, naming the value."""
    value, as_bool = tagged
    if as_bool is None:
        with pytest.raises(TypeError) as err:
            check_bool(name, value)
        assert str(err.value) == f"{name} should be a boolean value, but got {name}={value!r}"
    else:
        got = check_bool(name, value)
        assert type(got) is bool and got is as_bool


class _Endless:
    """An iterable-style dataset: it can be iterated, it has no length."""

    def __iter__(self):
        return iter(range(3))


@given(n=st.integers(0, 10**6), name=st.sampled_from(["dataset", "sampler"]))
def test_a_sized_object_gives_its_length_and_an_unsized_one_is_refused(n, name):
    """Invariant: ``check_len`` is ``len`` for any sized object; an object without ``__len__``
    is refused naming the argument, the object and its type."""
    assert check_len(name, range(n)) == n
    assert check_len(name, [0] * min(n, 50)) == min(n, 50)
    for unsized in (_Endless(), iter(range(n)), (i for i in range(n))):
        with pytest.raises(TypeError) as err:
            check_len(name, unsized)
        assert str(err.value) == (
            f"{name} should have __len__ (a map-style dataset or a sized sampler), "
            f"but got {name}={unsized!r} of type {type(unsized).__name__}"
        )


@given(extra=st.integers(0, 2**80))
def test_a_length_past_what_len_can_count_is_refused_naming_the_limit(extra):
    """Invariant: ``range(sys.maxsize + 1 + k)`` has a length Python's ``len`` cannot return:
    refused as a ValueError naming ``sys.maxsize``; ``range(sys.maxsize)`` itself is fine."""
    assert check_len("dataset", range(sys.maxsize)) == sys.maxsize
    big = range(sys.maxsize + 1 + extra)
    with pytest.raises(ValueError) as err:
        check_len("dataset", big)
    assert (
        str(err.value) == f"dataset should have a length <= {sys.maxsize}, but got dataset={big!r}"
    )
    assert err.value.__cause__ is None and err.value.__suppress_context__


@given(ints=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40), form=st.integers(0, 2))
def test_a_pass_of_integer_indices_becomes_an_int64_tensor_of_the_same_values(ints, form):
    """Invariant: ``index_tensor`` of a sampler yielding Python, numpy or tensor ints is the
    ``(m,)`` int64 tensor of those values, in order, at int64's limits too."""
    as_form = [lambda v: v, np.int64, torch.tensor][form]
    out = index_tensor([as_form(v) for v in ints])
    assert out.dtype == torch.int64 and out.shape == (len(ints),)
    assert out.tolist() == ints


@given(
    good=st.lists(st.integers(0, 9), max_size=5),
    bad=st.sampled_from([1.5, 2.0, "1", [0, 1], None, 2**63, -(2**63) - 1]),
)
def test_a_pass_that_yields_anything_but_integers_is_refused_not_truncated(good, bad):
    """Invariant: a float (1.5 or 2.0), a string, a batch, None or an integer beyond int64
    anywhere in the pass is a TypeError naming the sampler and the underlying error: never
    truncated, parsed or wrapped into an index."""
    sampler = [*good, bad]
    with pytest.raises(TypeError) as err:
        index_tensor(sampler)
    cause = err.value.__cause__
    assert str(err.value) == (
        f"sampler should yield integer indices, but got sampler={sampler!r} ({cause})"
    )
    assert isinstance(err.value.__cause__, TypeError | ValueError | OverflowError)


def _is_index_error(cause: BaseException, bad: object) -> bool:
    """What ``operator.index`` (or int64 conversion) raises for ``bad`` is the chained cause."""
    try:
        np.fromiter([operator.index(bad)], dtype=np.int64)
    except (TypeError, ValueError, OverflowError) as expected:
        return type(cause) is type(expected) and str(cause) == str(expected)
    return False


@pytest.mark.parametrize("bad", [1.5, "1", [0, 1], None, 2**63])
def test_the_refused_index_carries_the_conversions_own_error(bad):
    """Invariant: the TypeError's cause is exactly what converting that one value raised."""
    with pytest.raises(TypeError) as err:
        index_tensor([0, bad])
    assert _is_index_error(err.value.__cause__, bad)


@given(data=st.data(), world=world_sizes)
def test_a_rank_in_the_world_is_taken_and_any_other_is_refused_in_torchs_words(data, world):
    """Invariant: exactly ``0 <= rank < num_replicas`` passes; any other rank is refused with
    torch's "Invalid rank ..." sentence first, then the argument and the world it was given."""
    rank = data.draw(st.one_of(st.integers(-3, world + 3), st.sampled_from([-1, world])))
    if 0 <= rank < world:
        assert check_rank(rank, world) == rank
        assert check_rank(np.int64(rank), world) == rank
        return
    with pytest.raises(ValueError) as err:
        check_rank(rank, world)
    assert str(err.value) == (
        f"Invalid rank {rank}, rank should be in the interval [0, {world - 1}], "
        f"but got rank={rank} for num_replicas={world}"
    )


def test_a_rank_that_is_not_an_integer_is_refused_as_one():
    """Invariant: the rank is an integer first (a bool or a float is a TypeError naming rank)."""
    for bad in (True, 0.0, "0"):
        with pytest.raises(TypeError, match=rf"^rank should be an integer, but got rank={bad!r}"):
            check_rank(bad, 2)


def _how(num_replicas: object, rank: object) -> str:
    return (
        "num_replicas and rank default to the world size and rank of the default process "
        f"group, but got num_replicas={num_replicas}, rank={rank} and no process group. Call "
        "torch.distributed.init_process_group(...) first (torchrun sets the environment "
        "for it), or pass num_replicas= and rank= explicitly."
    )


@given(data=st.data(), world=world_sizes)
def test_an_explicit_world_needs_no_process_group(data, world):
    """Invariant: with both given, ``resolve_world`` checks them (num_replicas >= 1, the rank in
    the world) and never asks torch.distributed."""
    assert not dist.is_initialized()
    rank = data.draw(st.integers(0, world - 1))
    assert resolve_world(world, rank) == (world, rank)
    assert resolve_world(np.int64(world), torch.tensor(rank)) == (world, rank)
    with pytest.raises(ValueError, match=r"^num_replicas should be >= 1, but got num_replicas=0$"):
        resolve_world(0, 0)
    with pytest.raises(ValueError, match=rf"^Invalid rank {world}, "):
        resolve_world(world, world)


@pytest.mark.parametrize(("num_replicas", "rank"), [(None, None), (2, None), (None, 1)])
def test_a_missing_world_without_a_process_group_is_torchs_error_then_how_to_fix_it(
    num_replicas, rank
):
    """Invariant: either argument left out without a process group is torch's ValueError
    ("Default process group has not been initialized ...") followed by what was passed and the
    two ways out."""
    assert not dist.is_initialized()
    with pytest.raises(ValueError) as err:
        resolve_world(num_replicas, rank)
    assert str(err.value) == (
        "Default process group has not been initialized, please make sure to call "
        f"init_process_group: {_how(num_replicas, rank)}"
    )


def test_a_missing_world_where_torch_has_no_distributed_package_says_so(monkeypatch):
    """Invariant: on a torch built without torch.distributed (some macOS and Windows wheels),
    the error is torch's RuntimeError words, then the same explanation. (This machine's torch
    has the package, so its absence is the one thing stood in for here.)"""
    monkeypatch.setattr(dist, "is_available", lambda: False)
    with pytest.raises(RuntimeError) as err:
        resolve_world(None, 0)
    assert str(err.value) == f"Requires distributed package to be available: {_how(None, 0)}"


def test_a_missing_world_is_filled_from_the_default_process_group():
    """Invariant: in a one-process gloo group, a missing num_replicas is its world size (1) and
    a missing rank its rank (0); what is given is kept and still checked against the world."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    try:
        assert resolve_world(None, None) == (1, 0)
        assert resolve_world(None, 0) == (1, 0)
        assert resolve_world(3, None) == (3, 0)
        assert resolve_world(4, 2) == (4, 2)
        with pytest.raises(ValueError, match=r"^Invalid rank 1, .* for num_replicas=1$"):
            resolve_world(None, 1)
    finally:
        dist.destroy_process_group()


# --- check_state: a saved state_dict() is refused unless it is this sampler's -------------------

FIELDS = st.dictionaries(st.sampled_from(["seed", "size", "shuffle", "epoch"]), st.integers(0, 3))


@given(
    data=st.data(),
    must_match=FIELDS,
    required=st.lists(st.sampled_from(["position", "epoch", "seed"]), unique=True, max_size=2),
)
def test_a_state_is_taken_only_whole_of_this_kind_and_version_and_matching(
    data, must_match, required
):
    """Invariant: ``check_state`` returns the very dict when it is of this kind and version,
    holds every must-match and required field, and each must-match field is equal. Otherwise
    the first failure in that order is raised, naming the field and both values."""
    saved = {
        "kind": data.draw(st.sampled_from(["S", "T"])),
        "version": data.draw(st.integers(1, 2)),
    }
    saved |= data.draw(FIELDS)
    saved |= data.draw(st.dictionaries(st.sampled_from(["position", "other"]), st.integers(0, 2)))
    for key in data.draw(st.lists(st.sampled_from(["kind", "version"]), unique=True)):
        del saved[key]

    def missing(key: str) -> str:
        return f"state has no {key!r}: it is not a S state_dict() (got {saved!r})"

    expected: tuple[type, str] | None = None
    for key in ("kind", "version"):
        if key not in saved:
            expected = (KeyError, missing(key))
            break
    else:
        if saved["kind"] != "S":
            text = f"state comes from another sampler: kind was {saved['kind']!r} when saved, but this is a S"
            expected = (ValueError, text)
        elif saved["version"] != 1:
            expected = (
                ValueError,
                f"state has format version={saved['version']!r}, but this S reads version=1",
            )
        elif absent := [k for k in [*must_match, *required] if k not in saved]:
            expected = (KeyError, missing(absent[0]))
        elif unequal := [k for k, v in must_match.items() if saved[k] != v]:
            k = unequal[0]
            expected = (
                ValueError,
                f"state does not match this sampler: {k} was {saved[k]!r} when saved, "
                f"but is {must_match[k]!r} now",
            )
    if expected is None:
        assert check_state(saved, "S", 1, must_match, required=required) is saved
        if not required:  # ``required`` may be left out: no further field is asked for
            assert check_state(saved, "S", 1, must_match) is saved
        return
    with pytest.raises(expected[0]) as err:
        check_state(saved, "S", 1, must_match, required=required)
    assert err.value.args == (expected[1],)


@pytest.mark.parametrize("state", [None, [("kind", "S")], "{}", 3])
def test_a_state_that_is_not_a_dict_is_refused_naming_its_type(state):
    """Invariant: anything but a dict (a list of pairs, a JSON string not yet parsed) is a
    TypeError naming the value and its type."""
    with pytest.raises(TypeError) as err:
        check_state(state, "S", 1, {})
    assert str(err.value) == (
        f"state should be a dict from state_dict(), but got state={state!r} "
        f"of type {type(state).__name__}"
    )


def test_the_first_failing_state_field_is_the_one_named():
    """Invariant: kind before version before the other fields, and fields in the caller's order:
    the message explains the first gap, not a later symptom of it."""
    with pytest.raises(KeyError) as err:
        check_state({"seed": 0}, "S", 1, {"seed": 0})
    assert err.value.args[0].startswith("state has no 'kind': ")
    with pytest.raises(ValueError, match=r"^state comes from another sampler"):
        check_state({"kind": "T", "version": 9}, "S", 1, {})
    with pytest.raises(ValueError, match=r"^state does not match this sampler: a was 1"):
        check_state({"kind": "S", "version": 1, "a": 1, "b": 1}, "S", 1, {"a": 0, "b": 0})


@given(size=st.integers(0, 2**40) | st.sampled_from([2**31 - 1, 2**31, 2**31 + 1, 2**32]))
def test_indices_are_int32_exactly_while_every_index_fits(size):
    """Invariant: an order of ``size`` positions is held as int32 iff size < 2**31, else int64
    (the samplers' memory figures and their parity with torch both rest on this line)."""
    assert _index_dtype(size) == (torch.int32 if size < 2**31 else torch.int64)
