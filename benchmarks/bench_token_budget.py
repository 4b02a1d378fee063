"""Batches by token budget, W = 8: padding, steps, step imbalance and planning time.

Set up as training pipelines run: samples truncated to a maximum length, and a token budget
several times that length. Two length distributions. A real one that no one here made up: the
number of tokens (Python's ``tokenize``, comments and layout tokens left out) of every function
in this Python's standard library, found with ``ast`` (cached in ``benchmarks/data/``, computed
once; heavy-tailed, like text), truncated to 1024 tokens, ``max_tokens = 8192``. A synthetic
long tail: 1e7 lengths drawn from a lognormal (median 245 tokens, sigma 1), truncated to 2048,
``max_tokens = 16384``; and the first 1e5 of them, small enough for every peer.

Figures, over the 8 ranks' batches of one epoch (all of them, padding included):

- ``padding_pct``: real tokens / tokens of the padded batches (longest x size), in %;
- ``fill_pct``: the mean padded cost of a batch / ``max_tokens``, in %;
- ``steps_pct_of_bound``: steps of the epoch (batches per rank) / the lower bound
  ``sum(lengths) / max_tokens / W``, in %;
- ``imbalance_pct``: mean over steps of the heaviest batch's padded cost / the step's mean, in %;
- ``over_budget``: batches whose padded cost exceeds ``max_tokens``;
- ``unequal_ranks``: batches a rank has that another lacks (a hang at the end of the epoch);
- ``plan_s``: rank 0 building its sampler and its epoch's batches (the peers' too).

Steps are about the bound / (padding x fill), rounded up to whole steps: the batches hold
padding, and a padded batch of longest length ``h`` holds at most ``max_tokens // h`` samples.

Contenders: ``TokenBudgetBatchSampler`` (padded cost, its defaults); torch's ``BatchSampler``
over ``DistributedSampler`` with the largest batch size whose padded batches never exceed the
budget (``max_tokens // max(lengths)``, the maximum length: 8 here); Hugging Face's
``DistributedLengthGroupedSampler`` with that batch size (as Trainer users set
``per_device_train_batch_size``), batched as the Trainer does; Lhotse's
``DynamicBucketingSampler`` (``max_duration = max_tokens``, cuts whose duration is the length,
``world_size = 8``). The peers run their real code in ``.venv-peers``
(``benchmarks/peers_token_budget.py``); without that venv their rows are left out.
"""

from __future__ import annotations

import ast
import io
import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import time
import tokenize
from pathlib import Path

import numpy as np
import torch

from ._harness import ROOT, Comparison

WORLD = 8
DATA = ROOT / "benchmarks" / "data"
PEERS_PYTHON = ROOT / ".venv-peers" / "bin" / "python"
_SKIP = {tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT, tokenize.ENDMARKER,
         tokenize.COMMENT}  # fmt: skip


def _function_tokens(source: str) -> list[int]:
    """Tokens of every function (and method) of one module's source."""
    lines, out = source.splitlines(keepends=True), []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            text = textwrap.dedent("".join(lines[node.lineno - 1 : node.end_lineno]))
            try:
                tokens = tokenize.generate_tokens(io.StringIO(text).readline)
                out.append(sum(1 for t in tokens if t.type not in _SKIP))
            except (tokenize.TokenError, IndentationError, SyntaxError):
                continue  # a decorator line or a string that dedent cannot free: left out
    return out


def stdlib_lengths() -> np.ndarray:
    """Token counts of the standard library's functions, cached per Python version."""
    version = f"{sys.version_info.major}{sys.version_info.minor}"
    path = DATA / f"stdlib_function_tokens_py{version}.npy"
    if not path.exists():
        root, lengths = Path(sysconfig.get_paths()["stdlib"]), []
        for module in sorted(root.rglob("*.py")):
            if "site-packages" in module.parts:
                continue
            try:
                lengths += _function_tokens(module.read_text(encoding="utf-8"))
            except (SyntaxError, UnicodeDecodeError, ValueError):
                continue  # test files that are broken on purpose
        DATA.mkdir(exist_ok=True)
        np.save(path, np.asarray(lengths, np.int32))
    return np.load(path)


def lognormal_lengths(n: int, max_length: int) -> np.ndarray:
    """``n`` lengths of a lognormal long tail (median e^5.5 = 245), truncated to ``max_length``."""
    drawn = np.random.default_rng(0).lognormal(5.5, 1.0, 10**7)[:n]
    return np.clip(np.rint(drawn), 1, max_length).astype(np.int32)


#: (maximum length the samples are truncated to, max_tokens) of each distribution
SETUPS = {"stdlib": (1024, 8192), "lognormal": (2048, 16384)}


def lengths_of(dataset: str) -> tuple[np.ndarray, int]:
    """``(lengths, max_tokens)`` of a named distribution, truncated as a pipeline does."""
    max_length, max_tokens = SETUPS[dataset.split("-")[0]]
    if dataset == "stdlib":
        return np.minimum(stdlib_lengths(), max_length), max_tokens
    return lognormal_lengths(int(float(dataset.split("-")[1])), max_length), max_tokens


def figures(per_rank: list[list], lengths: np.ndarray, max_tokens: int) -> dict[str, float]:
    """The figures of the module docstring from every rank's batches (lists of indices)."""
    costs, real = [], 0
    for batches in per_rank:
        sizes = np.fromiter((len(b) for b in batches), np.int64, len(batches))
        flat = np.fromiter((i for b in batches for i in b), np.int64, int(sizes.sum()))
        ls = lengths[flat].astype(np.int64)
        starts = np.cumsum(sizes) - sizes
        longest = np.maximum.reduceat(ls, starts) if len(ls) else np.zeros(0, np.int64)
        costs.append(longest * sizes)
        real += int(ls.sum())
    counts = [len(c) for c in costs]
    steps = min(counts)
    by_step = np.stack([c[:steps] for c in costs], 1).astype(float)  # (steps, W)
    bound = float(lengths.sum()) / max_tokens / len(per_rank)
    padded = sum(float(c.sum()) for c in costs)
    return {
        "padding_pct": 100 * real / padded,
        "fill_pct": 100 * padded / sum(counts) / max_tokens,
        "steps_pct_of_bound": 100 * max(counts) / bound,
        "imbalance_pct": 100 * float((by_step.max(1) / by_step.mean(1)).mean()),
        "over_budget": float(sum(int((c > max_tokens).sum()) for c in costs)),
        "unequal_ranks": float(max(counts) - steps),  # batches a rank has that another lacks
    }


def ours(timer, dataset: str) -> dict[str, float]:
    from distsampling import TokenBudgetBatchSampler

    lengths, budget = lengths_of(dataset)
    timer.start()
    sampler = TokenBudgetBatchSampler(lengths, budget, num_replicas=WORLD, rank=0)
    mine = sampler.batches()  # rank 0's batches of the epoch, as lists
    timer.stop()
    plan_s = timer.t_end - timer.t0
    per_rank = [mine] + [
        TokenBudgetBatchSampler(lengths, budget, num_replicas=WORLD, rank=r).batches()
        for r in range(1, WORLD)
    ]
    return {"plan_s": plan_s, **figures(per_rank, lengths, budget)}


def fixed(timer, dataset: str) -> dict[str, float]:
    lengths, budget = lengths_of(dataset)
    batch_size = budget // int(lengths.max())  # the largest that never exceeds the budget

    def build(rank: int) -> list[list[int]]:
        share = torch.utils.data.DistributedSampler(range(len(lengths)), WORLD, rank, seed=0)
        return list(torch.utils.data.BatchSampler(share, batch_size, drop_last=False))

    timer.start()
    mine = build(0)
    timer.stop()
    per_rank = [mine] + [build(r) for r in range(1, WORLD)]
    return {"plan_s": timer.t_end - timer.t0, **figures(per_rank, lengths, budget)}


def peer(timer, dataset: str, name: str) -> dict[str, float]:
    """A peer's figures, measured by its real code in .venv-peers (a process of its own)."""
    proc = subprocess.run(
        [str(PEERS_PYTHON), "-m", "benchmarks.peers_token_budget", name, dataset],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=3000,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{name} on {dataset} failed in .venv-peers:\n{proc.stderr}")
    timer.start()  # the peer timed its own planning: plan_s
    timer.stop()
    return json.loads(proc.stdout.strip().splitlines()[-1])


def hugging_face(timer, dataset: str) -> dict[str, float]:
    return peer(timer, dataset, "hugging_face")


def lhotse(timer, dataset: str) -> dict[str, float]:
    return peer(timer, dataset, "lhotse")


COLUMNS = ("plan_s", "padding_pct", "fill_pct", "steps_pct_of_bound", "imbalance_pct",
           "over_budget", "unequal_ranks")  # fmt: skip
RATIOS = ("plan_s", "steps_pct_of_bound")


def plan_memory(timer, dataset: str, n: int = 10**6) -> dict[str, float]:
    """The epoch's plan alone (what ``len()`` computes on every rank): its time and the memory
    the process grew by, per sample; the lengths are read before the span."""
    from distsampling import TokenBudgetBatchSampler

    lengths, budget = lengths_of(dataset)
    lengths = np.ascontiguousarray(lengths[:n])
    timer.start()
    sampler = TokenBudgetBatchSampler(lengths, budget, num_replicas=WORLD, rank=0)
    steps = len(sampler)
    timer.stop()
    assert steps > 0
    return {"bytes_per_sample": timer.figures()["peak_MiB"] * 2**20 / n}


def suite(large: bool) -> list[Comparison]:
    peers = (PEERS_PYTHON.parent.parent / ".installed").exists()  # `make bench-peers` built it
    contenders = {
        "TokenBudgetBatchSampler": "bench_token_budget:ours",
        "BatchSampler(DistributedSampler)": "bench_token_budget:fixed",
    }
    if peers:
        contenders |= {
            "transformers DistributedLengthGroupedSampler": "bench_token_budget:hugging_face",
            "lhotse DynamicBucketingSampler": "bench_token_budget:lhotse",
        }
    note = "W=8; padding, steps and imbalance in % (100 is ideal); plan_s: rank 0's epoch"

    def on(title: str, dataset: str) -> Comparison:  # every contender, on one length set
        return Comparison(
            title=title,
            contenders=contenders,
            baseline="TokenBudgetBatchSampler",
            params={"dataset": dataset},
            note=note,
            columns=COLUMNS,
            ratios=RATIOS,
        )

    out = [
        on(
            "Functions of the standard library (tokens), truncated to 1024, max_tokens=8192",
            "stdlib",
        ),
        on(
            "Lognormal long tail, 1e5 samples, truncated to 2048, max_tokens=16384", "lognormal-1e5"
        ),
        Comparison(
            title="Lognormal long tail, 1e7 samples, truncated to 2048, max_tokens=16384",
            contenders={
                "TokenBudgetBatchSampler": "bench_token_budget:ours",
                "BatchSampler(DistributedSampler)": "bench_token_budget:fixed",
            },
            baseline="TokenBudgetBatchSampler",
            params={"dataset": "lognormal-1e7"},
            note=note + " (ours and torch's only: the peers' runs are at 1e5 above)",
            columns=COLUMNS,
            ratios=RATIOS,
        ),
        Comparison(
            title="Planning memory: the plan of one epoch, lognormal lengths, max_tokens=16384",
            contenders={
                "1e6 samples": "bench_token_budget:plan_memory",
                "1e7 samples": "bench_token_budget:plan_memory_1e7",
            },
            baseline="1e6 samples",
            params={"dataset": "lognormal-1e7"},
            note="TokenBudgetBatchSampler(...) and len(): the memory every rank grows by to plan "
            "the epoch, and per sample (it grows linearly with N)",
            columns=("time_s", "peak_MiB", "bytes_per_sample"),
        ),
    ]
    return out


def plan_memory_1e7(timer, dataset: str) -> dict[str, float]:
    return plan_memory(timer, dataset, 10**7)


if __name__ == "__main__":  # the stdlib lengths, computed and cached once
    t0 = time.perf_counter()
    lengths = stdlib_lengths()
    print(f"{len(lengths)} functions, {lengths.sum()} tokens in {time.perf_counter() - t0:.1f} s")
    for name in ("stdlib", "lognormal-1e7"):
        lengths, budget = lengths_of(name)
        print(
            f"{name}: max {lengths.max()}, the sum bound {lengths.sum() / budget / WORLD:.1f}"
            f" steps, the padded bound {(1 / (budget // lengths)).sum() / WORLD:.1f}"
        )
