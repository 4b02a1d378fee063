"""The command line: the split table, its errors, and the live demo."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distsampling import BatchSampler, DistributedSampler, SequentialWindowedDataset
from distsampling.cli import main
from distsampling.demo import EXAMPLES, plan
from distsampling.render import plan_split, plan_windows


def test_split_plan_is_every_ranks_sampler():
    """Invariant: the plan printed by split is what each rank's DistributedSampler yields."""
    from distsampling import DistributedSampler

    for epoch, ranks in enumerate(plan_split(11, 3, 2, seed=4)):
        for rank, indices in enumerate(ranks):
            s = DistributedSampler(range(11), 3, rank, seed=4)
            s.set_epoch(epoch)
            assert indices == list(s)


def test_split_window_plan_is_torchs_split_of_the_epochs_windows():
    """Invariant: split --window shows, for each rank, the window starts that torch's
    DistributedSampler picks over the windowed dataset of that epoch."""
    from torch.utils.data.distributed import DistributedSampler as TorchDistributedSampler

    from distsampling import SequentialWindowedDataset

    for epoch, ranks in enumerate(plan_windows(23, 4, 3, 3, seed=6)):
        ds = SequentialWindowedDataset(23, 4, seed=6)
        ds.set_epoch(epoch)
        for rank, idx_ours in enumerate(ranks):
            torch_sampler = TorchDistributedSampler(ds, 3, rank, seed=6)
            torch_sampler.set_epoch(epoch)
            idx_torch = [ds[i] for i in torch_sampler]
            assert idx_ours == idx_torch


def test_split_window_prints_windows_of_consecutive_samples_wrapping_at_the_end(capsys):
    """Invariant: every printed window is ``window`` consecutive samples modulo the size, and
    each rank prints ``num_samples`` windows, padding marked ``*``."""
    main(["split", "--size", "11", "--replicas", "3", "--window", "3", "--epochs", "2"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  rank")]
    assert len(rows) == 2 * 3
    for row in rows:
        windows = row.split(": ", 1)[1].strip("[]").split(", ")
        assert len(windows) == 2  # ceil(ceil(11 / 3) / 3) windows per rank
        for w in windows:
            first, *rest = (int(x) for x in w.rstrip("*").split("-"))
            assert [first, *rest] == [(first + j) % 11 for j in range(3)]
    assert sum(row.count("*") for row in rows) == 2 * 2  # 4 windows padded to 6, per epoch


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["split", "--size", "10", "--replicas", "0"],
            "replicas should be >= 1, but got replicas=0",
        ),
        (
            ["split", "--size", "10", "--replicas", "2", "--epochs", "0"],
            "epochs should be >= 1, but got epochs=0",
        ),
        (["split", "--size", "10", "--replicas", "2", "--batch-size", "0"], "batch_size=0"),
        (
            ["split", "--size", "10", "--replicas", "2", "--window", "0"],
            "window should be >= 1, but got window=0",
        ),
        (
            ["split", "--size", "10", "--replicas", "2", "--window", "11"],
            "window should be <= size=10",
        ),
        (["split", "--size", "-1", "--replicas", "2"], "size should be >= 0, but got size=-1"),
        (
            ["split", "--size", str(2**70), "--replicas", "2"],
            f"dataset should have a length <= {sys.maxsize}, but got dataset=range(0, {2**70})",
        ),
        (
            ["split", "--size", "10", "--replicas", "2", "--window", "3", "--batch-size", "0"],
            "batch_size should be a positive integer value, but got batch_size=0",
        ),
    ],
)
def test_bad_arguments_exit_with_the_error_naming_the_value(argv, message, capsys):
    """Invariant: the CLI turns a bad argument into a usage error naming it, never a traceback."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def expected_rows(size, replicas, epochs, seed, shuffle, drop_last, batch_size, window):
    """Each rank's printed row per epoch, built from the samplers themselves: what every flag
    asks for. Raises where a flag's value cannot be honoured."""
    if epochs < 1 or size < 0:
        raise ValueError("epochs and size")
    if batch_size is not None:
        BatchSampler([], batch_size, drop_last)  # its own checks, even for an empty rank
    rows = []
    for epoch in range(epochs):
        data = range(size) if window is None else SequentialWindowedDataset(size, window, seed)
        if window is not None:
            data.set_epoch(epoch)
        for rank in range(max(replicas, 1)):
            sampler = DistributedSampler(data, replicas, rank, shuffle, seed, drop_last)
            sampler.set_epoch(epoch)
            shown = []
            for k, i in enumerate(sampler):
                item = (
                    str(i)
                    if window is None
                    else "-".join(str((data[i] + j) % size) for j in range(window))
                )
                shown.append(item + ("*" if rank + k * replicas >= len(data) else ""))
            groups = [shown] if batch_size is None else BatchSampler(shown, batch_size, drop_last)
            rows.append(f"  rank {rank}: " + " ".join("[" + ", ".join(b) + "]" for b in groups))
    return rows


@given(
    size=st.integers(-1, 13),
    replicas=st.integers(-1, 4),
    epochs=st.integers(0, 2),
    seed=st.integers(-1, 3),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
    batch_size=st.none() | st.integers(-1, 4),
    window=st.none() | st.integers(-1, 5),
)
def test_every_flag_is_honoured_or_rejected_with_exit_code_2(
    size, replicas, epochs, seed, shuffle, drop_last, batch_size, window
):
    """Invariant: every combination of flags prints exactly the rows its samplers yield, with
    the flags' values in the header (``--window 3 --no-shuffle`` does not shuffle the windows),
    or exits with code 2 and a message; never exit 0 with a plan that ignores a flag."""
    argv = ["split", "--size", str(size), "--replicas", str(replicas), "--epochs", str(epochs)]
    argv += ["--seed", str(seed)] + ["--no-shuffle"] * (not shuffle) + ["--drop-last"] * drop_last
    argv += [] if batch_size is None else ["--batch-size", str(batch_size)]
    argv += [] if window is None else ["--window", str(window)]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exit_:
            code = exit_.code
    try:
        rows = expected_rows(size, replicas, epochs, seed, shuffle, drop_last, batch_size, window)
    except (TypeError, ValueError):
        assert code == 2 and "error: " in err.getvalue()
        return
    assert code == 0, err.getvalue()
    lines = out.getvalue().splitlines()
    assert [line for line in lines if line.startswith("  rank")] == rows
    assert f"shuffle={shuffle}, seed={seed}, drop_last={drop_last})" in lines[0] + lines[1]
    assert (f"BatchSampler(batch_size={batch_size}," in out.getvalue()) == (batch_size is not None)


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
