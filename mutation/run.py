r"""Mutation testing of every sampler module: do its own tests catch each small bug?

mutmut (https://mutmut.readthedocs.io) changes one thing at a time in a module (an operator, a
comparison, a constant, a default, a removed statement) and reruns the tests that cover the
changed function. A mutant the tests fail on is *killed*; one they pass is a *survivor*: either a
bug the properties cannot see, or an *equivalent* mutant that changes no behaviour. Every
equivalent one is listed, with its reason, in ``mutation/equivalent.md``.

Each module runs alone, against its same-stem tests, in its own copy of the repo under
``mutants/<module>/`` (mutmut writes its mutated tree into ``mutants/`` below it). The counts go
to ``mutation/results.json`` and ``mutation/results.md`` (the docs include the latter).

    python mutation/run.py                 # every module in MODULES
    python mutation/run.py distributed     # one module (the others keep their last counts)
    python mutation/run.py --survivors distributed   # its last survivors again, with new tests
    python mutation/run.py inference --functions InferenceSampler.state_dict   # one method's
    python mutation/run.py --survivors inference --functions InferenceSampler.state_dict  # again
    python mutation/run.py --collect mixture   # a run cut short: the functions it finished

A run of some functions (``--functions``, ``--survivors``, ``--collect``) updates only their
counts in the module's row: results.json keeps each function's counts, the row sums the latest.

The exit status is 1 when a survivor is not listed as equivalent.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "mutation"
WORK = ROOT / "mutants"

# every sampler's state_dict / load_state_dict and indices are proven in one file, side by side
RESUME = "tests/test_resume.py"
# the docs' example code, which some tests load beside the package (mutmut copies it into its tree)
EXAMPLES = "docs/examples"
# module -> (its tests, whether its multi-process tests run too). Adding a module is one line.
# tests/test_validate.py goes with every module that warns of a framework's default: it holds
# the warnings' tests (every entry of the loop matrix under accelerate's prepared loader), and
# those of the hold of a dataset's epoch while a pass of our sampler is read (windowed, wrapper).
MODULES: dict[str, tuple[list[str], bool]] = {
    "distributed": (["tests/test_distributed.py", "tests/test_validate.py", RESUME], False),
    "batch": (["tests/test_batch.py", "tests/test_validate.py", RESUME], False),
    "detection/evaluation": (["tests/test_evaluation.py", RESUME], True),
    "windowed": (
        [
            "tests/test_windowed.py",
            "tests/test_windowed_series.py",
            "tests/test_validate.py",
            RESUME,
        ],
        False,
    ),
    "weighted": (["tests/test_weighted.py", RESUME], False),
    "wrapper": (["tests/test_wrapper.py", "tests/test_validate.py", RESUME], False),
    "detection/grouped": (["tests/test_grouped.py", "tests/test_validate.py", RESUME], False),
    "detection/iteration": (["tests/test_iteration.py", RESUME], False),
    "detection/pipeline": (["tests/test_pipeline.py", RESUME], False),
    "tools/checks": (["tests/test_checks.py", RESUME], True),
    "detection/infinite": (
        ["tests/test_infinite.py", "tests/test_detection_loaders.py", RESUME],
        False,
    ),
    "detection/repeat_factor": (
        ["tests/test_repeat_factor.py", "tests/test_detection_loaders.py", RESUME],
        False,
    ),
    "detection/inference": (["tests/test_inference.py", "tests/test_validate.py", RESUME], False),
    "detection/balanced": (["tests/test_balanced.py", "tests/test_validate.py", RESUME], False),
    "scale/ahead": (["tests/test_ahead.py", "tests/test_validate.py"], False),
    # its resume is the resume layer's (tests/test_resume.py); its own file proves the rest
    "scale/index_shuffle": (["tests/test_index_shuffle.py"], False),
    # the cipher the sampler and the mixture read their orders from (the reference, the
    # bijection, the statistics, the scalar path); its errors swept with every public name's
    "scale/cipher": (["tests/test_cipher.py", "tests/test_errors_sweep.py"], False),
    "streaming/sharded": (["tests/test_sharded.py", "tests/test_validate.py"], False),
    "streaming/token_budget": (["tests/test_token_budget.py", "tests/test_validate.py"], False),
    # the mixture's inner modules: its own tests (the framework warnings' tests, in
    # tests/test_validate.py, go with sampler.py, the one that calls the guards)
    "mixing/weights": (
        ["tests/test_mixture.py", "tests/test_mixture_global.py", "tests/test_mixture_pinned.py"],
        False,
    ),
    "mixing/tree": (
        ["tests/test_mixture.py", "tests/test_mixture_global.py", "tests/test_mixture_pinned.py"],
        False,
    ),
    "mixing/phases": (["tests/test_phases.py"], False),
    # the per-rank table alone, against its position-by-position reference (its own tests)
    "mixing/rank_phases": (["tests/test_rank_phases.py"], False),
    "mixing/stream": (
        ["tests/test_mixture.py", "tests/test_mixture_global.py", "tests/test_mixture_pinned.py"],
        False,
    ),
    "mixing/layout": (
        ["tests/test_mixture.py", "tests/test_mixture_global.py", "tests/test_mixture_pinned.py"],
        False,
    ),
    "mixing/samples": (
        ["tests/test_mixture.py", "tests/test_mixture_global.py", "tests/test_mixture_pinned.py"],
        False,
    ),
    "mixing/state": (
        ["tests/test_mixture.py", "tests/test_mixture_global.py", "tests/test_mixture_pinned.py"],
        False,
    ),
    "mixing/sampler": (
        [
            "tests/test_mixture.py",
            "tests/test_mixture_global.py",
            "tests/test_mixture_pinned.py",
            "tests/test_mixture_lightning.py",
            "tests/test_validate.py",
        ],
        False,
    ),
    "streaming/sharded_mixture": (
        [
            "tests/test_sharded_mixture.py",
            "tests/test_mixture_readers.py",
            "tests/test_validate.py",
        ],
        False,
    ),
    "streaming/mixture_readers": (
        ["tests/test_sharded_mixture.py", "tests/test_mixture_readers.py"],
        False,
    ),
    "streaming/mixture_resume": (["tests/test_sharded_mixture.py"], False),
    "streaming/mixture_sources": (
        ["tests/test_sharded_mixture.py", "tests/test_validate.py"],
        False,
    ),
    # the resume layer, and the resumable forms built on it
    "resume/state": ([RESUME, "tests/test_validate.py"], False),
    "resume/resumable": (["tests/test_resumable.py", RESUME], False),
    # the checks every sampler copies along (tests/test_validate.py) and the split arithmetic
    # of DistributedSampler (proven against torch's in tests/test_distributed.py)
    "_checks": (["tests/test_validate.py", "tests/test_distributed.py"], False),
    "_split": (["tests/test_validate.py", "tests/test_distributed.py"], False),
    "guards": (["tests/test_validate.py"], False),
    # the exported classes: the reference ones under the guards (indices that carry an epoch)
    "guarded": (
        ["tests/test_validate.py", "tests/test_windowed.py", "tests/test_wrapper.py"],
        False,
    ),
}

# mutmut's exit codes per mutant (mutmut/stats.py), folded into the columns we report
_STATUS = {1: "killed", 3: "killed", 0: "survived", 33: "no tests", 5: "no tests", 36: "timeout"}
_STATUS.update({-24: "timeout", 24: "timeout", 152: "timeout", 255: "timeout", -9: "timeout"})
_STATUS[-11] = "killed"  # the tests crashed the interpreter: they noticed


#: one reviewed equivalent mutant: - `module.function` `+ the mutated line` — why nothing changes
EQUIVALENT = re.compile(r"^- `([\w./]+)` `\+ ?(.*)` — (.+)$")


def equivalents() -> dict[tuple[str, str], str]:
    r"""Parse ``equivalent.md``: ``(module.function, the mutated line) -> why nothing changes``.

    One line per mutant: ``- `module.function` `+ the line as mutated` — why``. The line, not
    mutmut's mutant number, names the mutant, so the list survives unrelated edits.
    """
    out = {}
    for line in (HERE / "equivalent.md").read_text().splitlines():
        if line.startswith("- "):
            m = EQUIVALENT.match(line)
            assert m, f"mutation/equivalent.md: not `- `module.function` `+ line` — why`: {line}"
            out[(m[1], m[2].strip())] = m[3]
    return out


def prepare(module: str) -> Path:
    """A fresh copy of src/, tests/, docs/examples/ and pyproject.toml under mutants/<module>/, for mutmut."""
    work = WORK / module
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(ROOT / "src", work / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    # some tests load the docs' example code (e.g. the wrapper tutorial's catalyst-style classes)
    shutil.copytree(ROOT / EXAMPLES, work / EXAMPLES, ignore=shutil.ignore_patterns("__pycache__"))
    _configure(module, work)
    return work


def _configure(module: str, work: Path) -> None:
    """mutmut's settings in ``work``: only this module is mutated, and only its tests (MODULES,
    as they are now) are run against it."""
    tests, multiprocess = MODULES[module]
    text = (ROOT / "pyproject.toml").read_text()
    marker = [] if multiprocess else ["-m", "not multiprocess"]
    text += (
        f"only_mutate = {json.dumps([f'src/distsampling/{module}.py'])}\n"
        f"also_copy = {json.dumps([EXAMPLES])}\n"
        f"pytest_add_cli_args_test_selection = {json.dumps(tests + marker)}\n"
    )
    assert text.rfind("\n[") == text.find("\n[tool.mutmut]"), "[tool.mutmut] must come last"
    (work / "pyproject.toml").write_text(text)


def _patterns(module: str, functions: list[str]) -> list[str]:
    """mutmut's names of the mutants of ``functions`` (``f`` or ``Class.method``) in ``module``."""
    return [f"distsampling.{module.replace('/', '.')}.x{'ǁ' if '.' in f else '_'}{f.replace('.', 'ǁ')}__mutmut_*"
            for f in functions]  # fmt: skip


#: the counts of a function's mutants as mutmut reads them (survived and no tests: the unexplained
#: and the equivalent, told apart by equivalent.md)
_COUNTED = ("mutants", "killed", "survived", "timeout", "no tests")
#: the counts of a row of results.md
COLUMNS = ("mutants", "killed", "equivalent", "timeout", "survived")


def function_of(name: str, module: str) -> str:
    """``f`` or ``Class.method`` of mutmut's mutant name: ``distsampling.M.x_f__mutmut_7`` or
    ``distsampling.M.xǁClassǁmethod__mutmut_7``."""
    return (
        name.split("__mutmut_")[0].split(f"{module.replace('/', '.')}.", 1)[1][2:].replace("ǁ", ".")
    )


def total(by_function: dict[str, dict[str, int]]) -> dict[str, int]:
    """A module's row: the sum of its functions' counts."""
    return {k: sum(c[k] for c in by_function.values()) for k in COLUMNS}


def merge(old: dict | None, new: dict) -> dict:
    """The row after a run of some functions (``--functions``, ``--survivors``): ``new``'s counts
    for the functions it ran, ``old``'s (its latest run of each) for the others, the row their
    sum. A row from before counts were kept per function holds its functions' counts as one
    entry (``"f, C.m"``), dropped when one of them runs again; a failed row, or a whole one of
    that time, is replaced."""
    if not old or "failed" in old or "failed" in new:
        return new
    if "by_function" in old:
        earlier = old["by_function"]
    elif "functions" in old:
        earlier = {", ".join(old["functions"]): {k: old[k] for k in COLUMNS}}
    else:
        return new
    ran = set(new["by_function"]) | set(new.get("functions", []))
    by_function = {f: c for f, c in earlier.items() if not set(f.split(", ")) & ran}
    by_function.update(new["by_function"])
    kept = {name for f in by_function for name in f.split(", ")}
    carried, known = [], equivalents()
    for u in old["unexplained"]:
        name = u["function"].split(".", 1)[1]
        if name not in kept - ran:
            continue
        if (u["function"], u["line"].strip()) in known and name in by_function:
            # listed as equivalent since its run: counted so, not carried as unexplained
            counts = by_function[name] = dict(by_function[name])
            counts["survived"], counts["equivalent"] = (
                counts["survived"] - 1,
                counts["equivalent"] + 1,
            )
        else:
            carried.append(u)
    row = {**total(by_function), "by_function": by_function}
    row["unexplained"] = carried + new["unexplained"]
    if "functions" in old:  # a row of some functions (now of these too), not of the module
        row["functions"] = [name for f in by_function for name in f.split(", ")]
    return row


def survivors_and_counts(
    work: Path, module: str, only: list[str] = (), finished: bool = False
) -> tuple[dict, list[tuple[str, str, str]]]:
    """Read mutmut's results in ``work``: the counts, and each survivor as (name, function, line);
    with ``only`` (mutmut name patterns), of those mutants alone; with ``finished`` (a run cut
    short), of the functions whose every mutant was run alone."""
    sys.path.insert(0, str(work))  # nothing of ours is imported: only mutmut's result files
    cwd = os.getcwd()
    os.chdir(work)
    try:
        from mutmut.configuration import reset_config
        from mutmut.mutation.data import SourceFileMutationData
        from mutmut.mutation.diff_apply import get_diff_for_mutant

        reset_config()
        path = Path(f"src/distsampling/{module}.py")
        data = SourceFileMutationData(path=path)
        data.load()
        counts: dict[str, dict[str, int]] = {}  # function -> its counts
        found = []
        codes = data.exit_code_by_key
        unrun = {function_of(name, module) for name, code in codes.items() if code is None}
        for name, code in sorted(codes.items()):
            if only and not any(fnmatch.fnmatch(name, p) for p in only):
                continue
            if finished and function_of(name, module) in unrun:
                continue
            status = _STATUS.get(code, "survived")  # suspicious or unchecked: never a pass
            function = function_of(name, module)
            mine = counts.setdefault(function, dict.fromkeys(_COUNTED, 0))
            mine["mutants"] += 1
            mine[status] += 1
            if status in ("survived", "no tests"):
                diff = get_diff_for_mutant(name, path=path)
                # the mutated line: the first added line of the diff (not its +++ header)
                added = [ln[1:].strip() for ln in diff.splitlines() if ln[:1] == "+"]
                line = next((a for a in added if a and not a.startswith("++")), "")
                found.append((name, f"{module}.{function}", line, diff))
        return counts, found
    finally:
        os.chdir(cwd)
        sys.path.remove(str(work))


def run(module: str, max_children: int, survivors: bool = False, functions: list[str] = ()) -> dict:
    """Mutate ``module`` and run its tests on every mutant; with ``survivors``, rerun only the
    last run's survivors against the tests as they are now (the module itself unchanged); with
    ``functions``, only the mutants of those functions (what a change touched)."""
    mutmut = Path(sys.executable).with_name("mutmut")
    env = {**os.environ, "HYPOTHESIS_PROFILE": "mutate", "PYTHONPATH": ""}
    if survivors:
        work = WORK / module
        code = f"src/distsampling/{module}.py"
        if not (work / code).exists() or (work / code).read_text() != (ROOT / code).read_text():
            return {"failed": f"{code} changed since its last run: run it whole", "unexplained": []}
        for folder in ("tests", EXAMPLES):  # the tests as they are now
            shutil.rmtree(work / folder)
            shutil.copytree(
                ROOT / folder, work / folder, ignore=shutil.ignore_patterns("__pycache__")
            )
        _configure(module, work)  # and the list of them, as it is now
        # with --functions, the survivors among those functions' mutants (the others never ran)
        only = _patterns(module, list(functions))
        names = [name for name, *_ in survivors_and_counts(work, module, only)[1]]
        print(f"== {module}: mutmut run {len(names)} survivors again", flush=True)
    else:
        work, names = prepare(module), _patterns(module, list(functions))
        print(
            f"== {module}: mutmut run --max-children {max_children} {' '.join(names)}", flush=True
        )
    done = subprocess.run(
        [str(mutmut), "run", "--max-children", str(max_children), *names],
        cwd=work,
        env=env,
        check=False,
    )
    if done.returncode != 0:  # e.g. the clean run of the tests failed: no count means anything
        return {"failed": f"mutmut run exited with {done.returncode}", "unexplained": []}
    by_function, found = survivors_and_counts(work, module, _patterns(module, list(functions)))
    return row(by_function, found, functions)


def collect(module: str) -> dict:
    """The row of a run of ``module`` cut short (stopped, or out of time): the counts of the
    functions whose every mutant was run, as a ``--functions`` run of them."""
    work = WORK / module
    if not (work / "mutants").exists():
        return {"failed": f"no run of {module} to collect", "unexplained": []}
    by_function, found = survivors_and_counts(work, module, finished=True)
    return row(by_function, found, sorted(by_function))


def row(by_function: dict, found: list, functions: list[str] = ()) -> dict:
    """A module's row: each survivor explained (equivalent.md) or not, counted per function."""
    known = equivalents()
    for counts in by_function.values():
        counts["equivalent"], counts["survived"] = 0, 0
        counts.pop("no tests")
    unexplained = []
    for name, function, line, diff in found:
        mine = by_function[function.split(".", 1)[1]]
        if (function, line) in known:
            mine["equivalent"] += 1
        else:
            mine["survived"] += 1
            unexplained.append({"mutant": name, "function": function, "line": line, "diff": diff})
    return {
        **total(by_function),
        "by_function": by_function,
        "unexplained": unexplained,
        **({"functions": list(functions)} if functions else {}),
    }


def read() -> dict:
    """results.json: each module's row."""
    path = HERE / "results.json"
    results = json.loads(path.read_text()) if path.exists() else {}
    return {m: r for m, r in results.items() if m in MODULES}


def write(results: dict) -> None:
    (HERE / "results.json").write_text(json.dumps(results, indent=1, sort_keys=True) + "\n")
    rows = [
        "| module | mutants | killed | equivalent | timeout | survived |",
        "|---|---|---|---|---|---|",
    ]
    for module in MODULES:
        r = results.get(module)
        if r and "failed" in r:
            rows.append(f"| `{module}.py` | run failed: {r['failed']} | | | | |")
        elif r:
            cells = [r[k] for k in COLUMNS]
            only = f" (the changed: {', '.join(r['functions'])})" if r.get("functions") else ""
            rows.append(f"| `{module}.py`{only} | " + " | ".join(map(str, cells)) + " |")
        else:
            rows.append(f"| `{module}.py` | not run yet | | | | |")
    (HERE / "results.md").write_text("\n".join(rows) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("modules", nargs="*", choices=[[], *MODULES], help="default: all")
    parser.add_argument("--max-children", type=int, default=2, help="parallel mutants (<= cores)")
    parser.add_argument(
        "--recount", action="store_true", help="only reclassify the last survivors (equivalent.md)"
    )
    parser.add_argument(
        "--survivors",
        action="store_true",
        help="rerun only the last run's survivors of each module, against the tests as they are now",
    )
    parser.add_argument(
        "--collect",
        action="store_true",
        help="a run cut short: record the functions all of whose mutants were run",
    )
    parser.add_argument(
        "--functions",
        nargs="+",
        default=[],
        help="only these functions' mutants (f or Class.method): what a change touched",
    )
    args = parser.parse_args(argv)
    results = read()
    if args.recount:  # survivors since listed in equivalent.md: no mutant is run again
        known = equivalents()
        for r in results.values():
            listed = [u for u in r.get("unexplained", []) if (u["function"], u["line"]) in known]
            r["equivalent"] = r.get("equivalent", 0) + len(listed)
            r["unexplained"] = [u for u in r["unexplained"] if u not in listed]
            r["survived"] = len(r["unexplained"])
            for u in listed:  # and in its function's counts
                mine = r.get("by_function", {}).get(u["function"].split(".", 1)[1])
                if mine:
                    mine["equivalent"], mine["survived"] = (
                        mine["equivalent"] + 1,
                        mine["survived"] - 1,
                    )
        write(results)
    for module in [] if args.recount else args.modules or list(MODULES):
        if args.collect:
            done = collect(module)
            if not done.get("by_function"):  # no function finished: the row stays as it was
                print(f"== {module}: no function of a run cut short has all its mutants run")
                continue
        else:
            done = run(module, args.max_children, args.survivors, args.functions)
        results = read()  # as it is now: a run of other modules meanwhile keeps its rows
        # a run of some functions updates only their counts in the module's row
        some = args.functions or args.survivors or args.collect  # --survivors: the last run's
        results[module] = merge(results.get(module), done) if some else done
        write(results)
        for s in results[module]["unexplained"]:
            print(f"survived: {s['mutant']}\n{s['diff']}\n")
    bad = sum(r.get("survived", 0) + ("failed" in r) for r in results.values())
    print(open(HERE / "results.md").read())
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
