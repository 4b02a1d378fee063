"""The command line: the split table at any size, where an index is read, their errors, and the
live demo."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import event, given
from hypothesis import strategies as st
from torch.utils.data.distributed import DistributedSampler as TorchDistributedSampler

from distsampling import (
    BatchSampler,
    DistributedSampler,
    IndexShuffleSampler,
    SequentialWindowedDataset,
    epoch_key,
    index_shuffle,
)
from distsampling.tools.cli import _integer, main
from distsampling.tools.demo import EXAMPLES, plan
from distsampling.tools.render import (
    TORCH_SAMPLER_BYTES,
    format_split,
    plan_split,
    split_lines,
)
from strategies import seeds, world_sizes


def run_cli(argv: list[str]) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of ``python -m distsampling *argv``, run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(argv)
            code = 0
        except SystemExit as exit_:
            code = exit_.code
    return code, out.getvalue(), err.getvalue()


def test_split_plan_is_every_ranks_sampler():
    """Invariant: the plan printed by split is what each rank's DistributedSampler yields."""
    for epoch, ranks in enumerate(plan_split(11, 3, 2, seed=4)):
        for rank, indices in enumerate(ranks):
            s = DistributedSampler(range(11), 3, rank, seed=4)
            s.set_epoch(epoch)
            assert indices == list(s)


def test_split_window_plan_is_torchs_split_of_the_epochs_windows():
    """Invariant: split --window shows, for each rank, the window starts that torch's
    DistributedSampler picks over the windowed dataset of that epoch."""
    for epoch, ranks in enumerate(plan_split(23, 3, 3, window=4, seed=6)):
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
        (
            ["split", "--size", "10", "--replicas", "2", "--head", "0"],
            "head should be >= 1, but got head=0",
        ),
        (
            ["split", "--size", "10", "--replicas", "2", "--order", "random"],
            "argument --order: invalid choice: 'random'",
        ),
        (
            ["split", "--size", "10", "--replicas", "2", "--max-memory", "lots"],
            "argument --max-memory: max_memory should be a number of bytes with an optional unit",
        ),
        (
            ["split", "--size", "10", "--replicas", "2", "--max-memory", "1PB"],
            "but got max_memory='1PB'",
        ),
        (
            ["where", "--size", "10", "--replicas", "2"],
            "the following arguments are required: --index",
        ),
        (
            ["where", "--size", "10", "--replicas", "2", "--index", "10"],
            "index should be in [0, size) = [0, 10), but got index=10",
        ),
        (
            ["where", "--size", "10", "--replicas", "2", "--index", "-1"],
            "index should be in [0, size) = [0, 10), but got index=-1",
        ),
        (
            ["where", "--size", "0", "--replicas", "2", "--index", "0"],
            "index should be in [0, size) = [0, 0), but got index=0",
        ),
        (
            ["where", "--size", "10", "--replicas", "0", "--index", "1"],
            "replicas should be >= 1, but got replicas=0",
        ),
        (
            ["where", "--size", "10", "--replicas", "2", "--index", "1", "--epoch", "-1"],
            "epoch should be >= 0, but got epoch=-1",
        ),
        (
            ["where", "--size", "10", "--replicas", "2", "--index", "1", "--seed", str(2**64)],
            f"seed should be in the interval [{-(2**63)}, {2**64 - 1}], but got seed={2**64}",
        ),
        (
            ["where", "--size", "10", "--replicas", "2", "--index", "1", "--order", "numpy"],
            "argument --order: invalid choice: 'numpy'",
        ),
    ],
)
def test_bad_arguments_exit_with_the_error_naming_the_value(argv, message, capsys):
    """Invariant: the CLI turns a bad argument into a usage error naming it, never a traceback."""
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def shown_row(tokens, batch_size, drop_last, head):
    """``(text, read, whole)``: one rank's printed row from all its items, as the samplers yield
    them: whole up to ``max(32, 2 * head)`` read, else only the first and last ``head``, each run
    of left-out items within a batch, and each run of left-out batches, written ``...``."""
    groups = [tokens] if batch_size is None else list(BatchSampler(tokens, batch_size, drop_last))
    read = sum(map(len, groups))
    whole = read <= max(32, 2 * head)
    parts, step = [], 0
    for group in groups:
        items = []
        for token in group:
            if whole or step < head or step >= read - head:
                items.append(token)
            elif items[-1:] != ["..."]:
                items.append("...")
            step += 1
        if group and items == ["..."]:  # a batch none of whose items is shown
            parts += ["..."] * (parts[-1:] != ["..."])
        else:
            parts.append("[" + ", ".join(items) + "]")
    return " ".join(parts), read, whole


def expected_rows(
    size, replicas, epochs, seed, shuffle, drop_last, batch_size, window, order="torch", head=5
):
    """Each rank's printed row per epoch, built from the samplers themselves (torch's own for
    ``--order torch``): what every flag asks for. Raises where a flag's value cannot be honoured."""
    if epochs < 1 or size < 0 or head < 1:
        raise ValueError("epochs, size and head")
    if batch_size is not None:
        BatchSampler([], batch_size, drop_last)  # its own checks, even for an empty rank
    kind = TorchDistributedSampler if order == "torch" else IndexShuffleSampler
    rows = []
    for epoch in range(epochs):
        data = range(size) if window is None else SequentialWindowedDataset(size, window, seed)
        if window is not None:
            data.set_epoch(epoch)
        for rank in range(max(replicas, 1)):
            sampler = kind(data, replicas, rank, shuffle, seed, drop_last)
            sampler.set_epoch(epoch)
            shown = []
            for k, i in enumerate(sampler):
                if window is None:
                    item = str(i)
                elif window <= 8:
                    item = "-".join(str((data[i] + j) % size) for j in range(window))
                else:  # a long window: its first and last sample
                    item = f"{data[i]}-...-{(data[i] + window - 1) % size}"
                shown.append(item + ("*" if rank + k * replicas >= len(data) else ""))
            text, read, whole = shown_row(shown, batch_size, drop_last, head)
            if whole:
                rows.append(f"  rank {rank}: {text}")
            else:
                word = "indices" if window is None else "windows"
                padded = sum(token.endswith("*") for token in shown[:read])
                rows.append(f"  rank {rank}: {read} {word}, {padded} padded: {text}")
    return rows


@given(
    size=st.integers(-1, 13) | st.integers(60, 300),
    replicas=st.integers(-1, 4),
    epochs=st.integers(0, 2),
    seed=st.integers(-1, 3),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
    batch_size=st.none() | st.integers(-1, 4) | st.integers(5, 40),
    window=st.none() | st.integers(-1, 5) | st.integers(6, 12),
    order=st.sampled_from(["torch", "index-shuffle"]),
    head=st.none() | st.integers(-1, 20),
)
def test_every_flag_is_honoured_or_rejected_with_exit_code_2(
    size, replicas, epochs, seed, shuffle, drop_last, batch_size, window, order, head
):
    """Invariant: every combination of flags prints exactly the rows its samplers yield (whole
    up to a few dozen a rank, past that each rank's count, padding and first and last ``--head``),
    with the flags' values in the header (``--window 3 --no-shuffle`` does not shuffle the
    windows), or exits with code 2 and a message; never exit 0 with a plan that ignores a flag."""
    argv = ["split", "--size", str(size), "--replicas", str(replicas), "--epochs", str(epochs)]
    argv += ["--seed", str(seed)] + ["--no-shuffle"] * (not shuffle) + ["--drop-last"] * drop_last
    argv += [] if batch_size is None else ["--batch-size", str(batch_size)]
    argv += [] if window is None else ["--window", str(window)]
    argv += ["--order", order] + ([] if head is None else ["--head", str(head)])
    code, out, err = run_cli(argv)
    event("refused" if code else "summarised" if " padded: " in out else "printed whole")
    try:
        rows = expected_rows(
            size,
            replicas,
            epochs,
            seed,
            shuffle,
            drop_last,
            batch_size,
            window,
            order,
            5 if head is None else head,
        )
    except (TypeError, ValueError):
        assert code == 2 and "error: " in err
        return
    assert code == 0, err
    lines = out.splitlines()
    assert [line for line in lines if line.startswith("  rank")] == rows
    kind = "DistributedSampler(" if order == "torch" else "IndexShuffleSampler("
    assert kind in lines[0] + lines[1]
    assert f"shuffle={shuffle}, seed={seed}, drop_last={drop_last})" in lines[0] + lines[1]
    assert (f"BatchSampler(batch_size={batch_size}," in out) == (batch_size is not None)


@given(
    size=st.integers(33, 400),
    replicas=world_sizes,
    seed=st.integers(0, 3),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
    batch_size=st.none() | st.integers(1, 40),
    window=st.none() | st.integers(1, 12),
    order=st.sampled_from(["torch", "index-shuffle"]),
    head=st.integers(1, 20),
)
def test_past_a_few_dozen_a_rank_split_shows_each_ranks_first_and_last_items(
    size, replicas, seed, shuffle, drop_last, batch_size, window, order, head
):
    """Invariant: past ``max(32, 2 * head)`` items a rank, each rank's row is its count, how
    many are padding, and the first and last ``--head`` of the items its sampler yields (in
    their batches, the rest written ``...``); at most that many, the row is whole."""
    argv = ["split", "--size", str(size), "--replicas", str(replicas), "--seed", str(seed)]
    argv += ["--no-shuffle"] * (not shuffle) + ["--drop-last"] * drop_last
    argv += [] if batch_size is None else ["--batch-size", str(batch_size)]
    argv += [] if window is None else ["--window", str(window)]
    argv += ["--order", order, "--head", str(head)]
    code, out, err = run_cli(argv)
    event("summarised" if " padded: " in out else "printed whole")
    rows = expected_rows(
        size, replicas, 1, seed, shuffle, drop_last, batch_size, window, order, head
    )
    assert code == 0, err
    assert [line for line in out.splitlines() if line.startswith("  rank")] == rows


READ = re.compile(r"by rank (\d+) at step (\d+) \(position (\d+) of the epoch\)")
MORE = re.compile(r"and (\d+) more times? as padding")


def parse_where(out: str) -> tuple[list[tuple[int, int, int]], int]:
    """``(reads listed, reads in all)`` from what ``where`` prints: each ``(rank, step, position)``."""
    listed = [tuple(map(int, m.groups())) for m in READ.finditer(out)]
    more = MORE.search(out)
    return listed, len(listed) + (int(more[1]) if more else 0)


@given(
    data=st.data(),
    size=st.integers(1, 30),
    replicas=world_sizes | st.integers(10, 70),  # more ranks than samples: padding reads again
    seed=seeds,
    epoch=st.integers(0, 5),
    shuffle=st.booleans(),
    drop_last=st.booleans(),
    order=st.sampled_from(["torch", "index-shuffle"]),
)
def test_where_names_every_rank_and_step_that_reads_the_index(
    data, size, replicas, seed, epoch, shuffle, drop_last, order
):
    """Invariant: ``where`` lists exactly the (rank, step) pairs at which iterating every rank's
    sampler (torch's own for ``--order torch``, IndexShuffleSampler) yields the index, by
    position, each at position ``rank + step * replicas``; with none, it says the index is dropped
    at its position in the epoch's order."""
    index = data.draw(st.integers(0, size - 1), label="index")
    kind = TorchDistributedSampler if order == "torch" else IndexShuffleSampler
    reads = []
    for rank in range(replicas):
        sampler = kind(range(size), replicas, rank, shuffle, seed, drop_last)
        sampler.set_epoch(epoch)
        reads += [(rank, k, rank + k * replicas) for k, i in enumerate(sampler) if i == index]
    reads.sort(key=lambda read: read[2])
    argv = ["where", "--size", str(size), "--replicas", str(replicas), "--index", str(index)]
    argv += ["--seed", str(seed), "--epoch", str(epoch), "--order", order]
    argv += ["--no-shuffle"] * (not shuffle) + ["--drop-last"] * drop_last
    code, out, err = run_cli(argv)
    assert code == 0, err
    listed, total = parse_where(out)
    assert listed == reads[:8] and total == len(reads)
    assert out.startswith(f"index {index} of epoch {epoch} is ")
    whole = kind(range(size), 1, 0, shuffle, seed)  # one rank reads the epoch's order whole
    whole.set_epoch(epoch)
    position = list(whole).index(index)
    if reads:
        assert reads[0][2] == position and all(q >= size for _, _, q in reads[1:])
    else:
        assert "is dropped this epoch" in out and f"sits at position {position}" in out


def test_where_at_billions_answers_with_the_position_index_shuffle_maps_to_the_index():
    """Invariant: at N = 5.85e9 on 1024 ranks, ``where`` answers at once: index_shuffle at the
    printed position is the index asked about, read by rank ``position % W`` at step
    ``position // W``; without shuffle the position is the index, and padding (the epoch is
    padded by 384 positions) or drop_last (cut by 640) show at the ends of the order."""
    n, world, index = 5_850_000_000, 1024, 123456789
    common = ["where", "--size", str(n), "--replicas", str(world), "--epoch", "3"]
    code, out, err = run_cli([*common, "--index", str(index), "--order", "index-shuffle"])
    assert code == 0, err
    [(rank, step, position)], total = parse_where(out)
    assert total == 1 and (rank, step) == (position % world, position // world)
    assert index_shuffle([position], n, epoch_key(0, 3)).item() == index
    # without shuffle: the position is the index; index 0 is padding again at position n
    code, out, err = run_cli([*common, "--index", "0", "--no-shuffle"])
    assert parse_where(out) == ([(0, 0, 0), (n % world, n // world, n)], 2)
    code, out, err = run_cli([*common, "--index", str(n - 1), "--no-shuffle", "--drop-last"])
    assert code == 0 and "is dropped this epoch" in out
    assert f"keeps positions 0 to {n // world * world - 1}" in out


def summary_rows(out: str) -> dict[int, tuple[int, int, list[str], list[str]]]:
    """``rank -> (count, padded, first items, last items)`` from the summary rows of ``split``."""
    rows = {}
    for m in re.finditer(r"  rank (\d+): (\d+) indices, (\d+) padded: \[(.*)\]", out):
        tokens = m[4].split(", ")
        cut = tokens.index("...")
        rows[int(m[1])] = (int(m[2]), int(m[3]), tokens[:cut], tokens[cut + 1 :])
    return rows


@pytest.mark.parametrize("order", ["index-shuffle", "torch"])
def test_split_at_a_billion_prints_each_ranks_head_and_tail_as_its_sampler_holds_them(order):
    """Invariant: at N = 1e9, ``split`` prints for every rank its count, its padding and its
    first and last ``--head`` indices: IndexShuffleSampler's order at those positions
    (``--order index-shuffle``), the positions themselves modulo N (``--no-shuffle``, torch's
    order is arange); padding (2 positions on 3 ranks) marked ``*``."""
    n, world, head = 10**9, 3, 4
    argv = ["split", "--size", str(n), "--replicas", str(world), "--epochs", "2", "--seed", "7"]
    argv += ["--head", str(head), "--order", order] + ["--no-shuffle"] * (order == "torch")
    code, out, err = run_cli(argv)
    assert code == 0, err
    assert out.count("  rank ") == 2 * world
    rows = summary_rows(out.split("epoch 1\n")[1])  # the last epoch shown
    num_samples = -(-n // world)
    for rank, (count, padded, first, last) in rows.items():
        steps = [*range(head), *range(num_samples - head, num_samples)]
        positions = [rank + k * world for k in steps]
        if order == "torch":
            values = [p % n for p in positions]  # arange, padded with its head
        else:
            sampler = IndexShuffleSampler(range(n), world, rank, seed=7)
            sampler.set_epoch(1)
            values = sampler.order_at(torch.tensor(positions) % n).tolist()
        tokens = [f"{v}*" if p >= n else str(v) for v, p in zip(values, positions)]
        assert first + last == tokens
        padding = range(n, num_samples * world)  # the positions past n, each read by q % world
        assert (count, padded) == (num_samples, sum(q % world == rank for q in padding))
    assert sorted(rows) == list(range(world))


def boom(*args, **kwargs):
    raise AssertionError("torch.randperm was called")


@pytest.mark.parametrize(
    ("argv", "memory"),
    [
        (["split", "--size", str(10**9), "--replicas", "8"], "3.7 GiB (int32, 4 bytes an index)"),
        (
            ["where", "--size", "5850000000", "--replicas", "1024", "--index", "1"],
            "43.6 GiB (int64, 8 bytes an index)",
        ),
        (
            ["split", "--size", str(10**10), "--replicas", "2", "--window", "2"],
            "37.3 GiB (int64, 8 bytes an index)",
        ),
        (
            ["split", "--size", "1000", "--replicas", "2", "--max-memory", "3kB"],
            "3.9 KiB (int32, 4 bytes an index) at its peak, over --max-memory=2.9 KiB",
        ),
    ],
)
def test_torch_shuffle_past_the_memory_budget_is_refused_before_drawing_saying_the_way_out(
    argv, memory, monkeypatch
):
    """Invariant: torch's shuffled order past ``--max-memory`` (1 GiB by default) is refused up
    front, nothing drawn: the error names randperm, the memory it would take and the ways out
    (``--order index-shuffle``, ``--no-shuffle``, a larger ``--max-memory``)."""
    monkeypatch.setattr(torch, "randperm", boom)
    code, out, err = run_cli(argv)
    assert code == 2 and out == ""
    assert memory in err and "torch.randperm(" in err
    assert "Use --order index-shuffle" in err and "--no-shuffle" in err and "--max-memory" in err


def test_torch_shuffle_within_the_memory_budget_is_drawn():
    """Invariant: ``--max-memory`` is the budget: torch's order of 1000 indices (4000 bytes)
    is drawn with 4000 bytes allowed, the same as without the option."""
    small = ["split", "--size", "1000", "--replicas", "2"]
    assert run_cli([*small, "--max-memory", "4000"]) == run_cli(small)
    assert run_cli([*small, "--max-memory", "4kB"])[0] == 0


def test_split_streams_its_lines_and_a_closed_pipe_ends_it_quietly():
    """Invariant: ``split`` prints as it computes, so a reader closing the pipe after a few
    lines (``| head``) ends it with exit code 0 and nothing on stderr."""
    argv = ["split", "--size", str(10**9), "--replicas", "100000", "--order", "index-shuffle"]
    with subprocess.Popen(
        [sys.executable, "-m", "distsampling", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        first = [proc.stdout.readline() for _ in range(5)]
        proc.stdout.close()
        assert proc.wait(timeout=120) == 0
        assert proc.stderr.read() == ""
    assert first[0].startswith("IndexShuffleSampler(size=1000000000, num_replicas=100000")
    assert first[4].startswith("  rank 0: 10000 indices, 0 padded: [")


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


@st.composite
def integer_notations(draw: st.DrawFn) -> tuple[str, int]:
    """``(text, value)``: an integer written as digits, with underscores, in e-notation (a
    mantissa, its fraction included, times a power of ten) or as a power ``a**b``."""
    how = draw(st.sampled_from(["digits", "underscores", "e", "power"]))
    if how == "power":
        base, exp = draw(st.integers(0, 12)), draw(st.integers(0, 40))
        return f"{base}**{exp}", base**exp
    if how == "e":  # m.f e k, with k at least the fraction's digits: a whole number
        mantissa, k = draw(st.integers(0, 10**6)), draw(st.integers(0, 15))
        point = draw(st.integers(0, min(k, 6)))
        digits = str(mantissa).rjust(point + 1, "0")
        text = digits if point == 0 else f"{digits[:-point]}.{digits[-point:]}"
        return f"{text}e{k}", mantissa * 10 ** (k - point)
    value = draw(st.integers(0, 10**15))
    return (f"{value:_}" if how == "underscores" else str(value)), value


@given(notation=integer_notations())
def test_an_integer_option_takes_any_exact_notation_of_its_value(notation):
    """Invariant: ``--size 1e9``, ``1_000_000_000`` and ``2**30`` are the integers they write,
    exactly (no float rounding: 123456789012345e3 stays exact)."""
    text, value = notation
    assert _integer("size")(text) == value
    if value >= 2**63:  # past any dataset's length: refused further on, by name
        return
    code, out, err = run_cli(["where", "--size", text, "--replicas", "1", "--index", "0",
                              "--order", "index-shuffle", "--no-shuffle"])  # fmt: skip
    if value == 0:
        assert code == 2 and "index should be in [0, size) = [0, 0)" in err
    else:
        assert (code, err) == (0, "") and out.startswith("index 0 of epoch 0 is read by rank 0")


@pytest.mark.parametrize(
    "text",
    ["1.5e0", "0.5", "1e-1", "nan", "inf", "1e5000", "9**9999", "1,000", "0x10", "ten"],
)
def test_an_integer_option_refuses_what_is_not_a_whole_number_naming_it(text):
    """Invariant: a fraction, a non-number or a number too long to print is refused by argparse
    with the option's name, the ways to write an integer and the text given; nothing runs."""
    code, out, err = run_cli(["split", "--size", "10", "--replicas", text])
    assert code == 2 and out == ""
    assert err.splitlines()[-1] == (
        "python -m distsampling split: error: argument --replicas: replicas should be an "
        f"integer, written e.g. 1000000, 1_000_000, 1e6 or 2**20, but got replicas={text!r}"
    )


def test_every_integer_option_takes_e_notation():
    """Invariant: each integer option of both commands goes through the same parser: the plan
    with every number in e-notation or as a power is the plan with plain digits."""
    plain = [
        "split",
        "--size",
        "1000",
        "--replicas",
        "4",
        "--seed",
        "3",
        "--epochs",
        "2",
        "--batch-size",
        "20",
        "--window",
        "10",
        "--head",
        "2",
        "--max-memory",
        "4000000",
    ]
    other = [
        "split",
        "--size",
        "1e3",
        "--replicas",
        "2**2",
        "--seed",
        "3e0",
        "--epochs",
        "2",
        "--batch-size",
        "2e1",
        "--window",
        "1_0",
        "--head",
        "2.0",
        "--max-memory",
        "4e6",
    ]
    assert run_cli(other) == run_cli(plain) and run_cli(plain)[0] == 0
    where = ["where", "--size", "1e3", "--replicas", "4", "--index", "5e1", "--epoch", "1e0"]
    assert run_cli(where) == run_cli(["where", "--size", "1000", "--replicas", "4", "--index",
                                      "50", "--epoch", "1"])  # fmt: skip


def test_max_memory_takes_e_notation_and_powers_with_a_unit():
    """Invariant: ``--max-memory 1e9`` is 10**9 bytes and ``2**30B`` is 1 GiB: the budget's
    edge (4000 bytes for 1000 int32 indices) holds at 4e3 and fails at 3.999e3."""
    small = ["split", "--size", "1000", "--replicas", "2"]
    assert run_cli([*small, "--max-memory", "4e3"])[0] == 0
    assert run_cli([*small, "--max-memory", "3.999e3"])[0] == 2
    assert run_cli([*small, "--max-memory", "2**30B"]) == run_cli(small)


def test_help_describes_the_tool_in_whole_sentences():
    """Example: ``--help`` opens with the module docstring's first paragraph, whole (it once
    stopped at its first line, "... prints which rank reads what, and")."""
    code, out, _ = run_cli(["--help"])
    description = " ".join(out.split("\n\n")[1].split())
    assert code == 0 and description == (
        "The command line: python -m distsampling split ... prints which rank reads what, "
        "python -m distsampling where ... which rank reads one index, and python -m distsampling "
        "mixture ... what each rank reads at a step of a MixtureSampler, and when a sample is read."
    )


def test_make_help_prints_each_target_with_no_make_escapes_left():
    """Example: ``make help`` prints the help lines as written for a reader: no ``$$`` (make's
    escape, which only a recipe expands) is left in them."""
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run(["make", "-s", "help"], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0 and "  test " in re.sub(r"\x1b\[[0-9;]*m", "", out.stdout)
    assert "$" not in out.stdout


def test_the_bytes_an_index_quoted_for_torchs_sampler_are_the_benchmarks_measure():
    """Invariant: the ~48 bytes an index that the refusal (and distributed.md) quote for torch's
    DistributedSampler is what ``make bench`` measured at N = 10**7 (its peak over N), to the
    byte, and the page quotes the same number."""
    root = Path(__file__).resolve().parent.parent
    bench = json.loads((root / "benchmarks/results/distributed.json").read_text())
    (row,) = [c for c in bench["comparisons"] if c["params"]["n"] == 10**7]
    measured = row["figures"]["torch"]["peak_MiB"]["median"] * 2**20 / 10**7
    assert round(measured) == TORCH_SAMPLER_BYTES
    page = (root / "docs/tutorials/distributed.md").read_text()
    assert f"about {TORCH_SAMPLER_BYTES} bytes an index" in page
    code, _, err = run_cli(["split", "--size", str(10**9), "--replicas", "2"])
    assert code == 2 and f"about {TORCH_SAMPLER_BYTES} bytes an index, 44.7 GiB" in err


def test_the_split_header_says_padded_dropped_or_none_and_whether_the_last_window_wraps():
    """Example: the header of ``split`` (samples) and ``split --window`` (windows) in each case:
    padding, a cut tail, neither; a last window that wraps or not; the summary line's word;
    every default as documented (shuffle, seed 0, no drop_last, torch's order, head 5); a
    max_memory of 0 is allowed (nothing to draw without shuffle), -1 refused by name."""
    assert list(split_lines(10, 3, 1, shuffle=False))[1].endswith(
        "total_size=12 (2 padded, marked *)"
    )
    assert list(split_lines(10, 3, 1, drop_last=True))[1].endswith("total_size=9 (1 dropped)")
    assert list(split_lines(9, 3, 1, shuffle=False))[1].endswith("total_size=9 (no padding)")
    wraps = "SequentialWindowedDataset(size=10, window=3, seed=0): 4 windows, the last wraps around"
    assert format_split(10, 2, 1, window=3).splitlines()[0] == wraps
    assert format_split(9, 2, 1, window=3).splitlines()[0].endswith("seed=0): 3 windows")
    assert (
        format_split(1000, 2, 1, window=3, head=2)
        .splitlines()[2]
        .startswith("more than 32 windows a rank: each rank's count")
    )
    given = dict(shuffle=True, seed=0, drop_last=False, order="torch", head=5)
    for size in (5, 100):
        assert format_split(size, 2, 2) == format_split(size, 2, 2, **given)
        assert format_split(size, 2, 2, window=3) == format_split(size, 2, 2, window=3, **given)
    assert next(split_lines(10, 2, 1, shuffle=False, max_memory=0)).startswith("Distributed")
    with pytest.raises(ValueError, match=r"^max_memory should be >= 0, but got max_memory=-1$"):
        split_lines(10, 2, 1, max_memory=-1)
