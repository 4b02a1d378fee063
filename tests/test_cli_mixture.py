"""``python -m distsampling mixture``: a step's reads are the sampler's batch_at, ``--where``
is its when_read, shares print as decimals, bad arguments exit with code 2 naming the option
and the value under the ``mixture`` usage, and a closed pipe ends it quietly."""

from __future__ import annotations

import re
import subprocess
import sys
from fractions import Fraction

import pytest

from distsampling import MixtureSampler
from distsampling.tools.cli import main

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
        "shuffle=True, layout='global')"
    )
    assert lines[1] == (
        "shares 0.5, 0.3, 0.2; a global batch of 64; every prefix of the stream within 0.8 and "
        "every global batch within 1.6 of a sample of each share (the proven bound)"
    )
    assert lines[2] == "step 1000 (positions 64000..64063): source:sample"
    assert lines[3:11] == [
        f"  rank {r}: {' '.join(label(i) for i in b)}" for r, b in enumerate(batches)
    ]
    assert lines[11] == "  per source: 32 / 19 / 13 (shares x 64: 32 / 19.2 / 12.8)"


def test_the_per_rank_layout_prints_its_own_bound_and_batch_at(capsys):
    """Invariant: --layout per_rank is the sampler's layout="per_rank": its micro-batches, and
    the bound it proves (each rank's reads, the changes included: its phases carried)."""
    main([*TASK, "--step", "7", "--layout", "per_rank", "--change", "5:1,1,1"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].endswith(
        "every rank's reads within 1.7 of a sample of each share (the proven bound, changes "
        "included)"
    )
    plan = [(0, [0.5, 0.3, 0.2]), (5, [1, 1, 1])]
    batches = MixtureSampler([60000, 6000, 600], plan, 8, 8, 0, layout="per_rank").batch_at(7)
    assert lines[4:12] == [
        f"  rank {r}: {' '.join(label(i) for i in b)}" for r, b in enumerate(batches)
    ]


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
    assert out[1].startswith(
        "shares 1, 0; a global batch of 4; every prefix of the stream within 0 and every global "
        "batch within 0 of"
    )
    assert out[3:5] == ["  rank 0: 0:2 0:3", "  rank 1: 0:0 0:1"]  # step 1: micro-batches rotated
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
    assert lines[1].startswith("shares 0.7, 0.3, 0; a global batch of 64")
    assert lines[2:4] == [
        "from step 100: shares 0.5, 0.3, 0.2",
        "from step 200: shares 0.333333, 0.333333, 0.333333",
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
        (["--step", "-1"], "--step should be >= 0, but got --step=-1"),
        (
            ["--where", "3:0"],
            "--where's source should be in the interval [0, 2], but got --where's source=3",
        ),
        (
            ["--where", "2:600"],
            "--where's sample should be in the interval [0, 599], but got --where's sample=600",
        ),
        (["--where", "2:1", "--pass", "-1"], "--pass should be >= 0, but got --pass=-1"),
        (["--replicas", "0"], "--replicas should be >= 1, but got --replicas=0"),
        (["--batch-size", "0"], "--batch-size should be >= 1, but got --batch-size=0"),
        (
            ["--sizes", "10", "10"],
            "--weights should hold one weight per source (2), but got --weights=[0.5",
        ),
        (
            ["--sizes", "0", "6", "6"],
            "--weights[0]=0.5 should be 0 for a source of length 0: --sizes[0]=0",
        ),
        (["--weights", "0", "0", "0"], "--weights should have a positive sum"),
        (
            ["--weights", "-1", "1", "1", "--change", "5:1,1,1"],
            "--weights[0] should be finite and >= 0, but got --weights[0]=-1.0",
        ),
        (
            ["--weights", "1e-400", "1", "1"],
            "a weight should be 0 or a float above 0 (from 5e-324), but got '1e-400'",
        ),
        (["--change", "5:1,1e-400,1"], "but got '1e-400', which a float holds as 0"),
        (["--weights", "1e400", "1", "1"], "a weight should be at most 1.7976931348623157e+308"),
        (
            ["--change", "5:1,-1,1"],
            "--change #1's weights[1] should be finite and >= 0, but got --change #1's weights[1]=-1.0",
        ),
        (
            ["--where", "2:1", "--step", "3"],
            "--step is not used with --where (it finds the step that reads the sample): give one of them, but got --step 3 and --where 2:1",
        ),
        (
            ["--pass", "3"],
            "--pass is the pass of the sample --where asks about: give --where SOURCE:SAMPLE with it, but got --pass 3 alone",
        ),
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
def test_bad_arguments_exit_with_code_2_naming_the_option_and_value_under_its_usage(
    extra, message, capsys
):
    """Invariant: a bad argument, or one that would be ignored, exits with code 2; the error
    names the option as typed (never the sampler's argument: num_replicas, batch_size, pass_)
    and the value, and the usage printed is the ``mixture`` subcommand's."""
    with pytest.raises(SystemExit) as exit_:
        main([*TASK, *extra])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.startswith("usage: ") and "mixture [-h] --sizes SIZES" in err
    assert "PASS_" not in err and not re.search(r"(?<![\w-])(num_replicas|batch_size|pass_)", err)


def test_the_module_runs_from_the_shell_and_survives_a_closed_pipe(capsys):
    """Invariant: ``... | head -1`` prints the first line and ends without a traceback. The step
    printed (4,096 ranks of 32) is about 1 MB of text, far more than a pipe holds (64 KiB
    on Linux): the writer always meets the closed pipe, on every run."""
    wide = [*TASK[:-4], "--replicas", "4096", "--batch-size", "32", "--step", "3"]
    main(wide)  # the whole output, in this process
    whole = capsys.readouterr().out
    assert len(whole) > 8 * 65536
    cmd = f"{sys.executable} -m distsampling {' '.join(wide)} | head -1"
    out = subprocess.run(cmd, shell=True, capture_output=True, text=True, check=True)
    assert out.stdout == whole.splitlines(keepends=True)[0]
    assert out.stdout.startswith("MixtureSampler(sizes=[60000, 6000, 600]")
    assert "Error" not in out.stderr and "Traceback" not in out.stderr, out.stderr


def digits(decimal: str) -> int:
    """The significant digits of a printed decimal: 0.333333 has 6, 0.5 has 1."""
    return len(decimal.replace(".", "").lstrip("0"))


def test_shares_and_the_bound_print_as_decimals_of_six_digits_at_most(capsys):
    """Invariant: the shares of each weight set of a schedule (weights as users compute them,
    e.g. ``n_tokens / total``, and fractions) and the bound print as decimals of at most 6
    significant digits, each within 5e-6 (relative) of the exact share, never as fractions."""
    first, later = [0.1234567891234, 0.3, 0.2], [Fraction(1, 3), 0.123456789, 2]
    argv = ["mixture", "--sizes", "60000", "6000", "600", "--weights", *map(str, first)]
    main([*argv, "--replicas", "8", "--batch-size", "8", "--change", "7:1/3,0.123456789,2"])
    lines = capsys.readouterr().out.splitlines()
    assert "/" not in lines[1] + lines[2]
    printed = lines[1].split(";")[0].removeprefix("shares ").split(", ")
    printed += lines[2].removeprefix("from step 7: shares ").split(", ")
    printed.append(lines[1].split("global batch within ")[1].split(" ")[0])
    exact = [Fraction(w) if isinstance(w, Fraction) else Fraction(repr(w)) for w in first + later]
    shares = [w / sum(exact[:3]) for w in exact[:3]] + [w / sum(exact[3:]) for w in exact[3:]]
    s = MixtureSampler([60000, 6000, 600], [(0, first), (7, later)], 8, 8, 0)
    for text, value in zip(printed, [*shares, 2 * s.bound()], strict=True):
        assert digits(text) <= 6 and abs(Fraction(text) - value) <= value * Fraction(5, 10**6)


@pytest.mark.parametrize("sample", [0, 3, 4, 50, 99])
def test_where_under_a_schedule_is_batch_at_or_names_the_step_the_weight_turned_0(sample, capsys):
    """Invariant: a source of weight 1 until step 10 and 0 after: ``--where`` of a sample read
    in steps 0-9 prints the step, rank and slot where batch_at puts it; of one not read by then,
    it says that the source's weight is 0 from step 10 on, not that its weight is 0."""
    argv = ["mixture", "--sizes", "100", "100", "--weights", "1", "1", "--change", "10:1,0"]
    main([*argv, "--replicas", "2", "--batch-size", "2", "--where", f"1:{sample}"])
    last = capsys.readouterr().out.splitlines()[-1]
    s = MixtureSampler([100, 100], [(0, [1, 1]), (10, [1, 0])], 2, 2, 0)
    read = {i - 100: (step, rank, slot) for step in range(10)
            for rank, batch in enumerate(s.batch_at(step)) for slot, i in enumerate(batch) if i >= 100}  # fmt: skip
    what = f"sample {sample} of source 1 (index {100 + sample}) in its pass 0"
    if sample in read:
        step, rank, slot = read[sample]
        assert last == (
            f"{what} is read at position {4 * step + 2 * ((rank + step) % 2) + slot}: step {step}, rank {rank}, slot {slot}"
        )
    else:
        assert last == (
            f"{what} is never read: source 1's weight is 0 from step 10 on, before this "
            "sample's turn in its pass"
        )


@pytest.mark.parametrize("dropped", ["--sizes", "--weights", "--replicas", "--batch-size"])
def test_each_required_option_left_out_is_named(dropped, capsys):
    """Invariant: leaving out any of --sizes, --weights, --replicas, --batch-size exits with
    code 2 naming it."""
    at = TASK.index(dropped)
    end = next((i for i in range(at + 1, len(TASK)) if TASK[i].startswith("--")), len(TASK))
    with pytest.raises(SystemExit) as exit_:
        main(TASK[:at] + TASK[end:])
    assert exit_.value.code == 2
    assert f"the following arguments are required: {dropped}" in capsys.readouterr().err


def test_the_mixture_help_lists_each_option_with_its_meaning(capsys, monkeypatch):
    """Example: ``mixture --help``, 100 columns wide: each option, its value's name and what it
    does (its default where it has one)."""
    monkeypatch.setenv("COLUMNS", "100")
    with pytest.raises(SystemExit):
        main(["mixture", "--help"])
    out = capsys.readouterr().out
    assert " ".join(out.split("options:")[0].split()) == (
        "usage: python -m distsampling mixture [-h] --sizes SIZES [SIZES ...] --weights WEIGHTS "
        "[WEIGHTS ...] --replicas REPLICAS --batch-size BATCH_SIZE [--seed SEED] [--no-shuffle] "
        "[--step STEP] [--where K:I] [--pass PASS] [--layout {global,per_rank}] "
        "[--change STEP:W1,W2,...]"
    )
    assert [
        " ".join(line.split()) for line in re.split(r"\n  (?=-)", out.split("options:")[1].strip())
    ] == [
        "-h, --help show this help message and exit",
        "--sizes SIZES [SIZES ...] each source's length",
        "--weights WEIGHTS [WEIGHTS ...] each source's weight",
        "--replicas REPLICAS number of ranks",
        "--batch-size BATCH_SIZE a rank's micro-batch",
        "--seed SEED base seed (default 0)",
        "--no-shuffle passes in order",
        "--step STEP the step to print (default 0), not with --where",
        "--where K:I when sample I of source K is read",
        "--pass PASS with --where: its pass (default 0)",
        "--layout {global,per_rank} global (default): one stream whatever the ranks; per_rank: "
        "each rank's reads exact",
        "--change STEP:W1,W2,... the weights from training step STEP on (repeat for a schedule)",
    ]


def test_a_seed_picks_the_samples_and_the_shares_are_of_weights_of_any_sum(capsys):
    """Invariant: --seed is the sampler's seed (its batch_at), and the shares each source's
    count is compared with are its weight over the weights' sum (3, 5, 7, 11 of 26 here)."""
    argv = ["mixture", "--sizes", "1000", "1000", "1000", "1000", "--weights", "3", "5", "7", "11"]
    main([*argv, "--replicas", "8", "--batch-size", "8", "--step", "6", "--seed", "5"])
    lines = capsys.readouterr().out.splitlines()
    s = MixtureSampler([1000] * 4, [3, 5, 7, 11], 8, 8, 0, seed=5)
    assert lines[3:11] == [
        f"  rank {r}: " + " ".join(f"{i // 1000}:{i % 1000}" for i in b)
        for r, b in enumerate(s.batch_at(6))
    ]
    assert lines[11].endswith("(shares x 64: 7.38462 / 12.3077 / 17.2308 / 27.0769)")


def test_a_source_whose_weight_turns_0_again_is_named_with_the_last_step_it_turned_0(capsys):
    """Invariant: without shuffle, source 1 of weight 0, then 1 from step 10, then 0 from step
    20 reads its first samples only: --where of its last sample says its weight is 0 from step
    20 on (not 0 from the start)."""
    argv = ["mixture", "--sizes", "100", "100", "--weights", "1", "0", "--change", "10:1,1"]
    argv += ["--change", "20:1,0", "--replicas", "2", "--batch-size", "2", "--no-shuffle"]
    main([*argv, "--where", "1:99"])
    assert capsys.readouterr().out.splitlines()[-1] == (
        "sample 99 of source 1 (index 199) in its pass 0 is never read: source 1's weight is 0 "
        "from step 20 on, before this sample's turn in its pass"
    )


def test_a_fraction_is_kept_exact_and_a_decimal_is_its_float():
    """Invariant: a weight given as a/b is that fraction exactly (1/3, not 0.333...), a decimal
    is the float of its text (the sampler reads a float as the decimal it prints as)."""
    from distsampling.tools.cli_mixture import _weight

    assert _weight("1/3") == Fraction(1, 3) and isinstance(_weight("1/3"), Fraction)
    assert _weight("0.3") == 0.3 and isinstance(_weight("0.3"), float)


def test_one_rank_reads_the_whole_global_batch(capsys):
    """Invariant: with --replicas 1 the one rank's micro-batch is the step's global batch, as
    batch_at computes it."""
    main([*TASK[:9], "--replicas", "1", "--batch-size", "4", "--step", "2"])
    lines = capsys.readouterr().out.splitlines()
    (batch,) = MixtureSampler([60000, 6000, 600], [0.5, 0.3, 0.2], 4, 1, 0).batch_at(2)
    assert lines[2:4] == [
        "step 2 (positions 8..11): source:sample",
        f"  rank 0: {' '.join(label(i) for i in batch)}",
    ]


def test_without_step_it_prints_step_0_and_the_help_lists_the_command(capsys):
    """Invariant: without --step (nor --where) the step printed is 0, batch_at(0); the tool's
    --help lists the mixture command with what it prints."""
    main([*TASK[:9], "--replicas", "1", "--batch-size", "4"])
    lines = capsys.readouterr().out.splitlines()
    (batch,) = MixtureSampler([60000, 6000, 600], [0.5, 0.3, 0.2], 4, 1, 0).batch_at(0)
    assert lines[2:4] == [
        "step 0 (positions 0..3): source:sample",
        f"  rank 0: {' '.join(label(i) for i in batch)}",
    ]
    with pytest.raises(SystemExit):
        main(["--help"])
    listed = " ".join(capsys.readouterr().out.split())
    assert "mixture print what each rank reads at one step of a mixture" in listed


def test_the_global_layout_prints_the_schedules_own_bound_with_changes_included(capsys):
    """Invariant: under --change the global layout prints ``bound()`` of the whole schedule (its
    node phases carried across the changes), not a bound plus a cost a change."""
    main([*TASK, "--step", "7", "--change", "5:1,1,1"])
    line = capsys.readouterr().out.splitlines()[1]
    plan = [(0, [0.5, 0.3, 0.2]), (5, [1, 1, 1])]
    bound = MixtureSampler([60000, 6000, 600], plan, 8, 8, 0).bound()
    assert f"every prefix of the stream within {float(bound):g}" in line
    assert line.endswith("(the proven bound, changes included)")
