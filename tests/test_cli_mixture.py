"""``python -m distsampling mixture``: a step's reads are the sampler's batch_at, ``--where``
is its when_read, bad arguments exit with code 2 naming the value."""

from __future__ import annotations

import subprocess
import sys

import pytest

from distsampling import MixtureSampler
from distsampling.cli import main

TASK = ["mixture", "--sizes", "60000", "6000", "600", "--weights", "0.5", "0.3", "0.2"]
TASK += ["--replicas", "8", "--batch-size", "8"]


def label(index: int) -> str:
    offsets = [0, 60000, 66000]
    k = max(k for k, offset in enumerate(offsets) if offset <= index)
    return f"{k}:{index - offsets[k]}"


def test_a_step_prints_each_ranks_micro_batch_as_batch_at_computes_it(capsys):
    main([*TASK, "--step", "1000"])
    lines = capsys.readouterr().out.splitlines()
    batches = MixtureSampler([60000, 6000, 600], [0.5, 0.3, 0.2], 8, 8, 0).batch_at(1000)
    assert lines[0] == (
        "MixtureSampler(sizes=[60000, 6000, 600], num_replicas=8, batch_size=8, seed=0, "
        "shuffle=True)"
    )
    assert lines[1] == (
        "shares 1/2, 3/10, 1/5; a global batch of 64; every prefix within 4/5 of a sample of "
        "each share (the proven bound)"
    )
    assert lines[2] == "step 1000 (positions 64000..64063): source:sample"
    assert lines[3:11] == [
        f"  rank {r}: {' '.join(label(i) for i in b)}" for r, b in enumerate(batches)
    ]
    assert lines[11] == "  per source: 32 / 19 / 13 (shares x 64: 32 / 19.2 / 12.8)"


def test_where_prints_the_position_step_rank_and_slot_that_read_the_sample(capsys):
    main([*TASK, "--where", "2:17", "--pass", "3"])
    last = capsys.readouterr().out.splitlines()[-1]
    read = MixtureSampler([60000, 6000, 600], [0.5, 0.3, 0.2], 8, 8, 0).when_read(2, 17, 3)
    assert last == (
        f"sample 17 of source 2 (index 66017) in its pass 3 is read at position {read.position}: "
        f"step {read.step}, rank {read.rank}, slot {read.slot}"
    )
    assert (
        MixtureSampler([60000, 6000, 600], [0.5, 0.3, 0.2], 8, 8, 0).batch_at(read.step)[read.rank][
            read.slot
        ]
        == 66000 + 17
    )


def test_fractions_and_a_weight_of_zero_without_shuffle(capsys):
    argv = ["mixture", "--sizes", "4", "4", "--weights", "1/3", "0", "--replicas", "2"]
    main([*argv, "--batch-size", "2", "--no-shuffle", "--step", "1"])
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("shares 1, 0; a global batch of 4; every prefix within 0 of")
    assert out[3:5] == ["  rank 0: 0:0 0:1", "  rank 1: 0:2 0:3"]
    main([*argv, "--batch-size", "2", "--where", "1:0"])
    assert capsys.readouterr().out.splitlines()[-1] == (
        "sample 0 of source 1 (index 4) in its pass 0 is never read: its weight is 0"
    )


def test_a_schedule_of_changes_prints_each_and_the_step_reads_the_weights_then_in_force(capsys):
    """Invariant: --change STEP:W... (repeated) is the sampler's schedule [(0, weights), (STEP,
    W...), ...]: the step printed is its batch_at, and the shares it compares with are those in
    force at that step."""
    schedule = [(0, [0.7, 0.3, 0]), (100, [0.5, 0.3, 0.2]), (200, [1, 1, 1])]
    main([*TASK, "--change", "100:0.5,0.3,0.2", "--change", "200:1,1,1", "--step", "150",
          "--weights", "0.7", "0.3", "0"])  # fmt: skip
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("shares 7/10, 3/10, 0; a global batch of 64")
    assert lines[2:4] == [
        "from step 100: shares 1/2, 3/10, 1/5",
        "from step 200: shares 1/3, 1/3, 1/3",
    ]
    assert lines[4] == "step 150 (positions 9600..9663): source:sample"
    batches = MixtureSampler([60000, 6000, 600], schedule, 8, 8, 0).batch_at(150)
    assert lines[5:13] == [
        f"  rank {r}: {' '.join(label(i) for i in b)}" for r, b in enumerate(batches)
    ]
    assert lines[13].endswith("(shares x 64: 32 / 19.2 / 12.8)")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--weights", "0.5", "x"], "a weight should be a number or a fraction"),
        (["--where", "2-17"], "--where should be SOURCE:SAMPLE"),
        (["--step", "-1"], "step should be >= 0, but got step=-1"),
        (["--where", "3:0"], "source should be in the interval [0, 2], but got source=3"),
        (["--weights", "0", "0", "0"], "weights should have a positive sum"),
        (["--change", "x:1,1,1"], "--change should be STEP:W1,W2,... such as 500:0.4,0.3,0.3"),
        (
            ["--change", "9:1,1"],
            "--change #1's weights should hold one weight per source (3), "
            "but got --change #1's weights=[1.0, 1.0]",
        ),
        (
            ["--change", "9:1,1,1", "--change", "5:1,1,1"],
            "--change #2's step should be > 9 (in increasing order), but got --change #2's step=5",
        ),
        (["--change", "0:1,1,1"], "--change #1's step should be > 0 (in increasing order)"),
    ],
)
def test_bad_arguments_exit_with_code_2_naming_the_value(extra, message, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([*TASK, *extra])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_the_module_runs_from_the_shell_and_survives_a_closed_pipe():
    cmd = f"{sys.executable} -m distsampling {' '.join(TASK)} --step 3 | head -1"
    out = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=True)
    assert out.stdout.startswith("MixtureSampler(sizes=[60000, 6000, 600]")
    assert "Error" not in out.stderr
