"""Copy-ready: each sampler tutorial's "Copy into your project" file set works on its own.

The sets are read from the tutorials themselves, so the list a reader copies is the list
tested. Each set is copied into an empty package in a temporary folder; a fresh Python, in
which ``distsampling`` cannot be imported, runs one of that sampler's properties from its own
test module there, with the test's imports pointed at the copy. Names the test needs from
outside the set (e.g. a batch sampler to feed a test) come from a second copy of the top-level
modules, never from distsampling. Also here: the import graph of ``src/`` (no sampler module
imports the growing package, ``launch`` or ``checks``; no circle).
"""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "distsampling"
TESTS = ROOT / "tests"
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
README = ROOT / "README.md"
#: a README row's copy set: `a.py` + `b.py` + ... (the module first, then what it imports)
README_SET = re.compile(r"^\| [^|]+ \| (?P<files>`\w+\.py`(?: \+ `\w+\.py`)*)[ (]")
BULLET = re.compile(r"^- `(?P<name>\w+)`: (?P<files>`[\w.]+\.py`(?:, `[\w.]+\.py`)*)\s*$")

#: the property each listed name runs in its copied set: (test module, property)
PROPERTY = {
    "DistributedSampler": ("test_distributed", "test_matches_torch_indices_order_and_len_for_all_arguments"),
    "OrderAhead": ("test_ahead", "test_yields_torchs_distributed_sampler_epochs_for_any_sequence_of_set_epoch"),
    "BatchSampler": ("test_batch", "test_matches_torch_batches_and_len_over_a_sequential_sampler"),
    "UnpaddedDistributedSampler": ("test_evaluation", "test_unpadded_is_torchs_split_with_the_padding_removed"),
    "SequentialWindowedDataset": ("test_windowed", "test_consecutive_starts_differ_by_exactly_window_modulo_size"),
    "GroupedBatchSampler": ("test_grouped", "test_every_batch_holds_indices_of_one_group_only"),
    "IterationBasedBatchSampler": ("test_iteration", "test_resuming_at_every_k_equals_the_tail_of_the_uninterrupted_run"),
    "make_batch_data_sampler": ("test_pipeline", "test_pass_p_of_every_rank_is_its_torch_share_of_epoch_p_so_ranks_stay_disjoint"),
    "WeightedBalanceClassSampler": ("test_weighted", "test_class_counts_of_an_epoch_are_the_largest_remainder_counts"),
    "DistributedSamplerWrapper": ("test_wrapper", "test_each_rank_reads_torchs_positions_of_the_inner_epoch"),
    "Resumable": ("test_resumable", "test_a_sampler_composed_with_resumable_reads_the_rest_of_its_epoch_once"),
    # samplers of detection and metric-learning codebases
    "InfiniteSampler": ("test_infinite", "test_each_rank_reads_its_strided_positions_of_the_stream_of_passes"),
    "RepeatFactorSampler": ("test_repeat_factor", "test_each_rank_reads_its_strided_positions_of_detectron2s_stream"),
    "InferenceSampler": ("test_inference", "test_each_rank_reads_detectron2s_contiguous_block"),
    "BatchBalanceClassSampler": ("test_balanced", "test_index_exact_against_the_batch_by_batch_definition"),
    # mixtures of datasets, and of sharded streams
    "MixtureSampler": ("test_mixture", "test_the_stream_is_the_divisor_merge_of_the_docstring_at_every_node"),
    "ShardedMixtureDataset": ("test_sharded_mixture", "test_the_source_of_every_sample_is_mixture_samplers_on_every_rank_for_any_workers"),
}  # fmt: skip


def copy_sets() -> list[tuple[str, str, list[str]]]:
    """(tutorial, name, files) for each bullet of each tutorial's "Copy into your project"."""
    out = []
    for page in TUTORIALS:
        text = page.read_text()
        if "\n## Copy into your project\n" not in text:
            continue
        section = text.split("\n## Copy into your project\n", 1)[1].split("\n## ", 1)[0]
        for line in section.splitlines():
            if m := BULLET.match(line):
                out.append((page.stem, m["name"], re.findall(r"`([\w.]+\.py)`", m["files"])))
    return out


SAMPLER_TUTORIALS = ["batch", "ddp", "distributed", "pipeline", "resume", "weighted", "windowed"]
SAMPLER_TUTORIALS += ["wrapper"]
SAMPLER_TUTORIALS += ["detection"]
SAMPLER_TUTORIALS += ["sharded_mixture"]
SAMPLER_TUTORIALS += ["mixture"]
SETS = copy_sets()


def relative_imports(module: str) -> set[str]:
    """The sibling modules ``src/distsampling/<module>.py`` imports (``from .x import``), anywhere."""
    tree = ast.parse((SRC / f"{module}.py").read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 1:  # from . import x
            found |= {a.name for a in node.names}
    return found


def closure(module: str) -> set[str]:
    todo, seen = [module], set()
    while todo:
        m = todo.pop()
        if m not in seen:
            seen.add(m)
            todo += relative_imports(m)
    return seen


def test_every_sampler_tutorial_ends_with_its_file_sets():
    """Invariant: each sampler tutorial ends with a "Copy into your project" section listing at
    least one file set, and every listed name has a property to run in its copy."""
    for stem in SAMPLER_TUTORIALS:
        text = (ROOT / "docs" / "tutorials" / f"{stem}.md").read_text()
        assert "\n## Copy into your project\n" in text, f"{stem}.md has no copy section"
        last = text.rsplit("\n## ", 1)[1]
        assert last.startswith("Copy into your project"), f"{stem}.md: the copy section is not last"
        assert any(s[0] == stem for s in SETS), f"{stem}.md lists no file set"
    assert {name for _, name, _ in SETS} <= set(PROPERTY), "a listed name has no property here"


@pytest.mark.parametrize(("stem", "name", "files"), SETS, ids=[s[1] for s in SETS])
def test_a_listed_set_is_exactly_what_the_module_imports(stem, name, files):
    """Invariant: the files listed are the module of the name plus everything it imports from
    the package, transitively: nothing missing, nothing extra."""
    where = getattr(importlib.import_module("distsampling"), name).__module__.rsplit(".", 1)[1]
    assert files[0] == f"{where}.py", f"{stem}.md: list {name}'s own file {where}.py first"
    assert {f.removesuffix(".py") for f in files} == closure(where)


RUNNER = r"""
import ast, importlib, json, sys, traceback
specs = json.loads(sys.argv[1])
sys.modules["distsampling"] = None  # the real package cannot be imported here
from hypothesis import HealthCheck, settings
settings.register_profile("copy", max_examples=25, deadline=None, derandomize=True,
                          suppress_health_check=list(HealthCheck))
settings.load_profile("copy")
for spec in specs:  # one set after another, each from its own folder, nothing of the last kept
    for name in [m for m in sys.modules if m.split(".")[0] in ("copied", "helpers")]:
        del sys.modules[name]
    sys.path[:] = [spec["root"], spec["tests"]] + [p for p in sys.path if p != spec["tests"]
                                                   and not p.startswith(spec["base"])]
    importlib.invalidate_caches()
    try:
        path = spec["test_file"]
        tree = ast.parse(open(path).read())
        body = []
        for node in tree.body:  # `from distsampling import X` -> from the copy (or the helpers')
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "distsampling":
                for a in node.names:
                    module = spec["where"][a.name]
                    package = "copied" if module in spec["copied"] else "helpers"
                    line = f"from {package}.{module} import {a.name} as {a.asname or a.name}"
                    body.append(ast.parse(line).body[0])
            else:
                body.append(node)
        tree.body = body
        namespace = {"__name__": "copied_test", "__file__": path}
        exec(compile(tree, path, "exec"), namespace)
        namespace[spec["property"]]()
        loaded = sorted(m.split(".")[1] for m in sys.modules if m.startswith("copied."))
        print(json.dumps({"name": spec["name"], "loaded": loaded}), flush=True)
    except BaseException:
        print(json.dumps({"name": spec["name"], "error": traceback.format_exc()}), flush=True)
"""


def imported_names(test_file: Path) -> dict[str, str]:
    """Each name the test module imports from distsampling -> the module defining it."""
    where = {}
    for node in ast.parse(test_file.read_text()).body:
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "distsampling":
            for a in node.names:
                if node.module == "distsampling":
                    obj = getattr(importlib.import_module("distsampling"), a.name)
                    module = obj.__module__
                else:
                    module = node.module
                assert module.count(".") == 1, f"{a.name} is not from a top-level module"
                where[a.name] = module.split(".")[1]
    return where


@pytest.fixture(scope="module")
def copied_runs(tmp_path_factory) -> dict[str, dict]:
    """Every set copied into a folder of its own, and its property run there: all sets in one
    fresh Python, one after another (a Python per set paid torch's import 15 times), each with
    the modules of the sets before it dropped. ``{name: {"loaded": [...]} or {"error": ...}}``."""
    base, specs = tmp_path_factory.mktemp("copies"), []
    for _stem, name, files in SETS:
        root = base / name
        for package, names in (("copied", files), ("helpers", [p.name for p in SRC.glob("*.py")])):
            (root / package).mkdir(parents=True)
            (root / package / "__init__.py").write_text("")
            for f in names:
                if f != "__init__.py":
                    shutil.copy(SRC / f, root / package / f)
        test_module, prop = PROPERTY[name]
        test_file = TESTS / f"{test_module}.py"
        specs.append({
            "name": name, "root": str(root), "base": str(base), "tests": str(TESTS),
            "test_file": str(test_file), "property": prop, "where": imported_names(test_file),
            "copied": [f.removesuffix(".py") for f in files],
        })  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(specs)],
        cwd=base,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    runs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith('{"name"')]
    return {r["name"]: r for r in runs} | {"": {"error": proc.stderr[-4000:]}}


@pytest.mark.xdist_group("copy")
@pytest.mark.parametrize(("stem", "name", "files"), SETS, ids=[s[1] for s in SETS])
def test_a_copied_set_runs_its_property_without_distsampling(stem, name, files, copied_runs):
    """Invariant: the files a tutorial lists, copied alone into an empty package where
    ``distsampling`` cannot be imported, pass one of the sampler's own properties; only listed
    files are loaded from the copy."""
    run = copied_runs.get(name, copied_runs[""])  # not reported: the process died (its stderr)
    assert "error" not in run, run["error"]
    loaded = run["loaded"]
    assert files[0].removesuffix(".py") in loaded, loaded  # the property ran on the copy
    assert set(loaded) <= {f.removesuffix(".py") for f in files}, loaded


# --- the import graph -----------------------------------------------------------------------
NOT_SAMPLERS = {"__init__", "__main__", "cli", "demo", "render", "launch", "checks"}


def graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (relative or absolute), for every file in src/."""
    edges: dict[str, set[tuple[str, str]]] = {}  # (module, module.name) per imported name
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges[name] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:  # relative: from .x import y / from .. import y
                    base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                    target = f"{base}.{node.module}" if node.module else base
                else:
                    target = node.module or ""
                # `from . import x` with x a module depends on x only; any other name on target
                edges[name] |= {(target, f"{target}.{a.name}") for a in node.names}
            elif isinstance(node, ast.Import):
                edges[name] |= {(a.name, a.name) for a in node.names}
    resolved = {k: {sub if sub in edges else target for target, sub in v} for k, v in edges.items()}
    return {k: {t for t in v if t in edges and t != k} for k, v in resolved.items()}


def test_no_sampler_module_imports_the_growing_package_launch_or_checks():
    """Invariant: the top-level sampler modules import none of distsampling.growing,
    distsampling.tools.launch, distsampling.tools.checks (and so stay copyable on their own)."""
    edges = graph()
    samplers = [p.stem for p in SRC.glob("*.py") if p.stem not in NOT_SAMPLERS]
    assert "distributed" in samplers and "wrapper" in samplers
    for s in samplers:
        bad = {
            t for t in edges[f"distsampling.{s}"]
            if t.startswith("distsampling.growing") or t in {"distsampling.tools.launch", "distsampling.tools.checks"}
        }  # fmt: skip
        assert not bad, f"distsampling.{s} imports {sorted(bad)}"


def test_the_import_graph_of_src_has_no_circle():
    """Invariant: no module of src/ imports itself through a chain of package imports (a
    package's ``__init__`` re-exporting its modules is not a circle; a module importing the
    package's ``__init__`` back is)."""
    edges = graph()
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(node: str, path: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                cycle = path[path.index(nxt) :] + [nxt] if nxt in path else [node, nxt]
                pytest.fail("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt, [*path, nxt])
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node, [node])


def test_the_readmes_copy_sets_are_exactly_what_each_module_imports():
    """Invariant: each copy set of the README's table (`a.py` + `b.py` + ...) is the module and
    every sibling it imports, directly or through another: a reader who copies it has all of
    it, and nothing more."""
    sets = [m["files"] for line in README.read_text().splitlines() if (m := README_SET.match(line))]
    assert len(sets) >= 17
    for files in sets:
        names = re.findall(r"`(\w+)\.py`", files)
        assert set(names) == closure(names[0]), files


# --- what a reader copies stays short enough to read ------------------------------------------
#: the most lines each of these sets may hold, its file and its helpers together (docstrings,
#: checks and examples included): every error's words are kept, so a new check is paid for by
#: shorter code elsewhere in the set
MARKS = {  # _validate.py holds the errors where a framework's default would train on another
    # plan (accelerate, Lightning) and the hold of a dataset's epoch for a pass of our sampler,
    # which the two datasets with epochs of their own keep (a set_epoch after the first batch)
    "DistributedSampler": 390,
    "SequentialWindowedDataset": 465,
    "WeightedBalanceClassSampler": 525,
    "DistributedSamplerWrapper": 520,
}


def lines(files: list[str]) -> int:
    return sum(len((SRC / f).read_text().splitlines()) for f in files)


@pytest.mark.parametrize(("stem", "name", "files"), SETS, ids=[s[1] for s in SETS])
def test_a_copy_set_stays_within_its_mark_and_its_tutorial_states_its_length(stem, name, files):
    """Invariant: the marked sets hold at most their mark of lines; a tutorial that says how long
    its first set is ("N lines together") says its exact count."""
    if name in MARKS:
        assert lines(files) <= MARKS[name], f"{name}: {' + '.join(files)}"
    stated = re.search(
        r"(\d[\d,]*) lines together", (TUTORIALS[0].parent / f"{stem}.md").read_text()
    )
    if stated and next(s for s in SETS if s[0] == stem)[1] == name:
        assert int(stated[1].replace(",", "")) == lines(files), f"{stem}.md states {stated[1]}"
