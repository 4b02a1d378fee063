"""run_world's own contract: results in rank order, errors surfaced, bad input rejected."""

from __future__ import annotations

import math

import pytest

from distsampling import run_world


def world(test):
    """Mark a test that starts a real process group."""
    return pytest.mark.multiprocess(pytest.mark.xdist_group("worlds")(test))


@world
def test_a_failing_rank_is_reported_with_its_output():
    """Invariant: an exception on a rank ends the world with RuntimeError naming the rank and showing its error."""
    with pytest.raises(RuntimeError, match=r"(?s)rank \d failed.*math domain error"):
        run_world("math:sqrt", 2, -1.0, timeout=60)


@world
@pytest.mark.parametrize("world_size", [0, -1])
def test_world_size_below_one_is_rejected(world_size):
    """Invariant: a world needs at least one process; the error names the value."""
    with pytest.raises(
        ValueError, match=f"world_size should be >= 1, but got world_size={world_size}"
    ):
        run_world("torch.distributed:get_rank", world_size)


@pytest.mark.parametrize(
    ("timeout", "error"),
    [(-1, ValueError), (0, ValueError), (math.nan, ValueError), (math.inf, ValueError)]
    + [("10", TypeError), (True, TypeError), (None, TypeError)],
)
def test_a_timeout_that_is_not_a_positive_finite_number_is_rejected_before_any_rank_starts(
    timeout, error
):
    """Invariant: ``timeout=-1``, ``nan`` or ``inf`` is refused naming the value, in the parent,
    before any rank starts (a started rank would fail as ``RuntimeError: rank 0 failed``, or
    ``TimeoutError``, or never time out)."""
    with pytest.raises(error) as info:
        run_world("torch.distributed:get_rank", 2, timeout=timeout)
    assert str(info.value) == (
        f"timeout should be a finite number of seconds > 0, but got timeout={timeout!r}"
    )


@pytest.mark.parametrize("target", ["math.sqrt", "math:", ":sqrt", "math:sqrt:x", "math: sqrt"])
def test_a_target_that_is_not_module_colon_function_is_rejected_before_any_rank_starts(target):
    """Invariant: the target must name ``"module:function"``; anything else is refused in the
    parent, naming it, instead of every rank failing to unpack or import it."""
    with pytest.raises(ValueError) as info:
        run_world(target, 2, 4.0, timeout=60)
    assert str(info.value) == (
        "target should be 'module:function' (a dotted module path, a colon, a function name), "
        f"but got target={target!r}"
    )


def test_a_target_that_is_not_a_string_is_rejected():
    """Invariant: a function object is not pickled to the ranks: it must be named by path."""
    with pytest.raises(TypeError, match=r"target should be 'module:function'.*but got target=<"):
        run_world(math.sqrt, 2, 4.0, timeout=60)
