"""run_world's and run_nodes' own contract: results in rank order, errors surfaced, nothing left
behind, bad input rejected."""

from __future__ import annotations

import math
import os
import time
import uuid
from pathlib import Path

import pytest

from distsampling import run_nodes, run_world
from distsampling.tools import launch
from worlds import timed_out_waiting, waited_in

TESTS = str(Path(__file__).parent)


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


def _marked(mark: str) -> list[int]:
    """Processes (ours or not) whose environment holds ``LAUNCH_TEST_MARK=mark``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if f"LAUNCH_TEST_MARK={mark}".encode() in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:
            continue
    return found


@world
@pytest.mark.skipif(not os.path.isdir("/proc"), reason="finds processes through /proc")
def test_a_hung_multi_node_run_times_out_and_leaves_no_process_behind(monkeypatch, tmp_path):
    """Invariant: run_nodes past its timeout raises TimeoutError showing where each rank
    waited (its Python stack, in its node's log), and every agent, rank and process they
    started is gone."""
    mark = uuid.uuid4().hex
    monkeypatch.setenv("LAUNCH_TEST_MARK", mark)  # inherited by every process of the run
    monkeypatch.setenv("HANG_READY_DIR", str(tmp_path))
    # the first timeout (4, 8, ... s) that strikes once both ranks wait: agents, then ranks,
    # start and import torch in a few seconds, or many more on 2 cores busy with other tests
    error, timeout = timed_out_waiting(
        lambda t: run_nodes("worlds:hang_on_rank_1", 2, 1, timeout=t, pythonpath=[TESTS]),
        tmp_path,
        waiters=2,
    )
    assert str(error).startswith(
        "run_nodes('worlds:hang_on_rank_1', nnodes=2, nproc_per_node=1): "
        f"did not finish within timeout={timeout}s"
    ), str(error)
    # node 0's rank in its collective, node 1's asleep in the target (no Python frame below)
    node0, node1 = str(error).split("--- node ")[1:]
    assert waited_in(node0, "barrier", "hang_on_rank_1"), node0
    assert waited_in(node1, "hang_on_rank_1", innermost=True), node1
    deadline = time.monotonic() + 10  # SIGKILLed processes vanish once reaped by init
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _marked(mark) == []


@pytest.mark.parametrize(("nnodes", "nproc"), [(0, 1), (1, 0)])
def test_nodes_or_processes_below_one_are_rejected(nnodes, nproc):
    """Invariant: a run needs at least one node of one process; the error names the value."""
    name, value = ("nnodes", nnodes) if nnodes < 1 else ("nproc_per_node", nproc)
    with pytest.raises(ValueError, match=f"{name} should be >= 1, but got {name}={value}"):
        run_nodes("torch.distributed:get_rank", nnodes, nproc)


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


@world
def test_a_forked_rank_sees_the_callers_environment_and_directory_at_the_call(
    monkeypatch, tmp_path
):
    """Invariant: ranks forked from the zygote see what a fresh process started now would see:
    the environment and working directory of the call (a changed environment gets a new
    zygote), and a global numpy seed of their own."""
    assert run_world("os:getenv", 2, "DISTSAMPLING_PROBE") == [None, None]
    monkeypatch.setenv("DISTSAMPLING_PROBE", "set after the zygote started")
    monkeypatch.chdir(tmp_path)
    assert run_world("os:getenv", 2, "DISTSAMPLING_PROBE") == ["set after the zygote started"] * 2
    assert run_world("os:getcwd", 2) == [str(tmp_path)] * 2
    first, second = run_world("numpy.random:random", 2)
    assert first != second


@world
@pytest.mark.skipif(not launch._ZYGOTE_WORKS, reason="ranks fork from a zygote on Linux only")
def test_a_zygote_that_died_is_replaced_at_the_next_run():
    """Invariant: if the zygote that forks the ranks is killed between runs, the next run starts
    a new one and returns every rank's result."""
    assert run_world("torch.distributed:get_rank", 2) == [0, 1]
    launch._ZYGOTES[0].proc.kill()
    launch._ZYGOTES[0].proc.wait()
    assert run_world("torch.distributed:get_rank", 2) == [0, 1]
