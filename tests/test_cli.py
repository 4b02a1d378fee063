"""The command line: the split table, its errors, and the live demo."""

from __future__ import annotations

import subprocess
import sys

import pytest

from distsampling.cli import main, plan_split
from distsampling.demo import EXAMPLES, plan


def test_split_plan_is_every_ranks_sampler():
    """Invariant: the plan printed by split is what each rank's DistributedSampler yields."""
    from distsampling import DistributedSampler

    for epoch, ranks in enumerate(plan_split(11, 3, 2, seed=4)):
        for rank, indices in enumerate(ranks):
            s = DistributedSampler(range(11), 3, rank, seed=4)
            s.set_epoch(epoch)
            assert indices == list(s)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["split", "--size", "10", "--replicas", "0"],
            "num_replicas should be >= 1, but got num_replicas=0",
        ),
        (
            ["split", "--size", "10", "--replicas", "2", "--epochs", "0"],
            "epochs should be >= 1, but got epochs=0",
        ),
        (["split", "--size", "10", "--replicas", "2", "--batch-size", "0"], "batch_size=0"),
    ],
)
def test_bad_arguments_exit_with_the_error_naming_the_value(argv, message, capsys):
    """Invariant: the CLI turns a bad argument into a usage error naming it, never a traceback."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_every_demo_example_has_a_plan():
    """Invariant: every example of the tour builds a plan with the right number of epochs and ranks."""
    for _, kind, kwargs in EXAMPLES:
        p = plan(kind, kwargs["replicas"], **{k: v for k, v in kwargs.items() if k != "replicas"})
        assert len(p) == kwargs["epochs"] and all(len(ranks) == kwargs["replicas"] for ranks in p)


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
def test_the_demo_runs_live_and_agrees_with_its_plan():
    """Invariant: make demo's live 2-process group yields exactly the printed plan."""
    proc = subprocess.run(
        [sys.executable, "-m", "distsampling", "demo"], capture_output=True, text=True, timeout=180
    )
    assert proc.returncode == 0, proc.stderr
    assert "every rank of the live group yielded exactly the plan" in proc.stdout
    assert "DIFFERS" not in proc.stdout
