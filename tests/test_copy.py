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
from hypothesis import settings

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "distsampling"
TESTS = ROOT / "tests"
TUTORIALS = sorted((ROOT / "docs" / "tutorials").glob("*.md"))
README = ROOT / "README.md"
#: a README row's copy set: `a.py` + `b/c.py` + ... (the module first, then what it imports;
#: paths relative to src/distsampling/, a folder's files under it)
README_SET = re.compile(r"^\| [^|]+ \| (?P<files>`[\w/]+\.py`(?: \+ `[\w/]+\.py`)*)[ (]")
BULLET = re.compile(r"^- `(?P<name>\w+)`: (?P<files>`[\w./]+\.py`(?:, `[\w./]+\.py`)*)\s*$")

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
    "ShardedMixtureDataset": ("test_sharded_mixture", "test_every_sample_is_read_once_a_pass_the_unread_rest_of_the_passes_in_flight_closes_them"),
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
                out.append((page.stem, m["name"], re.findall(r"`([\w./]+\.py)`", m["files"])))
    return out


SAMPLER_TUTORIALS = ["batch", "ddp", "distributed", "pipeline", "resume", "weighted", "windowed"]
SAMPLER_TUTORIALS += ["wrapper"]
SAMPLER_TUTORIALS += ["detection"]
SAMPLER_TUTORIALS += ["sharded_mixture"]
SAMPLER_TUTORIALS += ["mixture"]
SETS = copy_sets()


def module_file(target: list[str]) -> str | None:
    """``a/b`` for the module file ``src/distsampling/a/b.py``, or ``a/__init__`` for a folder."""
    path = SRC.joinpath(*target)
    if path.with_suffix(".py").is_file():
        return "/".join(target)
    return "/".join([*target, "__init__"]) if (path / "__init__.py").is_file() else None


def relative_imports(module: str) -> set[str]:
    """The package modules ``src/distsampling/<module>.py`` imports (``from .x import``,
    ``from ..y.z import``, ``from . import x``), anywhere in it, as paths like ``mixing/mixture``."""
    tree = ast.parse((SRC / f"{module}.py").read_text())
    package, found = module.split("/")[:-1], set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom) or not node.level:
            continue
        base = package[: len(package) - (node.level - 1)] + (node.module or "").split(".")
        base = [p for p in base if p]
        for a in node.names:  # `from .pkg import module` imports the module file itself
            found.add(module_file([*base, a.name]) or module_file(base))
    return found - {None}


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
    where = reference_module(name).replace(".", "/")
    assert files[0] == f"{where}.py", f"{stem}.md: list {name}'s own file {where}.py first"
    assert {f.removesuffix(".py") for f in files} == closure(where)


def reference_module(name: str) -> str:
    """The module (``mixing.mixture``) of the class or function the package exports as ``name``:
    for a guarded class (guarded.py), its reference class's module, the file a reader copies."""
    obj = getattr(importlib.import_module("distsampling"), name)
    if obj.__module__ == "distsampling.guarded":  # the reference: the base with the same name
        obj = next(c for c in obj.__mro__[1:] if c.__name__ == obj.__name__)
    return obj.__module__.split(".", 1)[1]


RUNNER = r"""
import ast, importlib, json, sys, traceback
specs = json.loads(sys.argv[1])
sys.modules["distsampling"] = None  # the real package cannot be imported here
from hypothesis import HealthCheck, settings
settings.register_profile("copy", max_examples=int(sys.argv[2]), deadline=None, derandomize=True,
                          suppress_health_check=list(HealthCheck))
settings.register_profile("costly", max_examples=max(1, int(sys.argv[2]) // 5), deadline=None,
                          derandomize=True, suppress_health_check=list(HealthCheck))  # conftest's
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
        loaded = sorted(m.split(".", 1)[1] for m, v in sys.modules.items()
                        if m.startswith("copied.") and not hasattr(v, "__path__"))
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
                    where[a.name] = reference_module(a.name)
                else:
                    where[a.name] = node.module.split(".", 1)[1]
    return where


@pytest.fixture(scope="module")
def copied_runs(tmp_path_factory) -> dict[str, dict]:
    """Every set copied into a folder of its own, and its property run there: all sets in one
    fresh Python, one after another (a Python per set paid torch's import 15 times), each with
    the modules of the sets before it dropped. ``{name: {"loaded": [...]} or {"error": ...}}``."""
    base, specs = tmp_path_factory.mktemp("copies"), []
    every = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if p.name != "__init__.py"]
    for _stem, name, files in SETS:
        root = base / name
        for package, names in (("copied", files), ("helpers", every)):
            for f in names:  # folders kept, so that relative imports hold; each an empty package
                target = root / package / f
                for folder in [target.parent, *target.parent.parents]:
                    if folder == root:
                        break
                    folder.mkdir(parents=True, exist_ok=True)
                    (folder / "__init__.py").touch()
                shutil.copy(SRC / f, target)
        test_module, prop = PROPERTY[name]
        test_file = TESTS / f"{test_module}.py"
        specs.append({
            "name": name, "root": str(root), "base": str(base), "tests": str(TESTS),
            "test_file": str(test_file), "property": prop, "where": imported_names(test_file),
            "copied": [f.removesuffix(".py").replace("/", ".") for f in files],
        })  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    # half the active profile's examples (25 under ci): what is tested is that the copies run
    examples = str(max(1, settings.default.max_examples // 2))
    proc = subprocess.run(
        [sys.executable, "-c", RUNNER, json.dumps(specs), examples],
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
    loaded, listed = run["loaded"], {f.removesuffix(".py").replace("/", ".") for f in files}
    assert files[0].removesuffix(".py").replace("/", ".") in loaded, loaded  # ran on the copy
    assert set(loaded) <= listed, loaded


# --- the import graph -----------------------------------------------------------------------
#: what no sampler module is: the package's own files, its command line and tools, growing
NOT_SAMPLERS = {"__init__", "__main__"}


def sampler_modules() -> list[str]:
    """Every module of src/ but the package files, tools/ and growing/: ``distsampling.a.b``."""
    out = []
    for path in SRC.rglob("*.py"):
        parts = path.relative_to(SRC).with_suffix("").parts
        if parts[-1] not in NOT_SAMPLERS and parts[0] not in ("tools", "growing"):
            out.append(".".join(("distsampling", *parts)))
    return out


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
    """Invariant: the sampler modules, at the top and in every folder but tools/ and growing/,
    import none of distsampling.growing, distsampling.tools.launch, distsampling.tools.checks
    (and so stay copyable on their own)."""
    edges = graph()
    samplers = sampler_modules()
    assert {"distsampling.distributed", "distsampling.scale.cipher"} <= set(samplers)
    for s in samplers:
        bad = {
            t for t in edges[s]
            if t.startswith("distsampling.growing") or t in {"distsampling.tools.launch", "distsampling.tools.checks"}
        }  # fmt: skip
        assert not bad, f"{s} imports {sorted(bad)}"


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
        names = re.findall(r"`([\w/]+)\.py`", files)
        assert set(names) == closure(names[0]), files


# --- what a reader copies stays short enough to read ------------------------------------------
#: the most lines each of these sets may hold, its file and its helpers together (docstrings,
#: checks and examples included), in at most 3 files: every error's words are kept, so a new
#: check is paid for by shorter code elsewhere in the set. The framework guards live in
#: guards.py, over these files (guarded.py), never in them
MARKS = {
    "DistributedSampler": 260,
    "BatchSampler": 80,
    "SequentialWindowedDataset": 260,
    "WeightedBalanceClassSampler": 380,
    "DistributedSamplerWrapper": 300,
}
#: the reference files: torch-like, what a reader copies; the package files each may import
REFERENCE = ["distributed", "batch", "windowed", "weighted", "wrapper"]
#: what a reference file never does: inspect frames, name a framework, warn about a loop, hold a
#: weakref, allocate shared memory
NEVER = ["_getframe", "f_locals", "f_back", "accelerate", "lightning", "warnings", "weakref",
         "share_memory", "guards", "FrameworkWarning"]  # fmt: skip


def lines(files: list[str]) -> int:
    return sum(len((SRC / f).read_text().splitlines()) for f in files)


@pytest.mark.parametrize(("stem", "name", "files"), SETS, ids=[s[1] for s in SETS])
def test_a_copy_set_stays_within_its_mark_and_its_tutorial_states_its_length(stem, name, files):
    """Invariant: the marked sets hold at most their mark of lines, in at most 3 files; a
    tutorial that says how long its first set is ("N lines together") says its exact count."""
    if name in MARKS:
        assert lines(files) <= MARKS[name], f"{name}: {' + '.join(files)}: {lines(files)} lines"
        assert len(files) <= 3, f"{name}: {files}"
    stated = re.search(
        r"(\d[\d,]*) lines together", (TUTORIALS[0].parent / f"{stem}.md").read_text()
    )
    if stated and next(s for s in SETS if s[0] == stem)[1] == name:
        assert int(stated[1].replace(",", "")) == lines(files), f"{stem}.md states {stated[1]}"


def test_every_marked_set_is_listed_in_a_tutorial():
    """Invariant: each marked name has a bullet to copy (so its mark is measured here)."""
    assert set(MARKS) <= {name for _, name, _ in SETS}


@pytest.mark.parametrize("module", REFERENCE)
def test_a_reference_file_imports_only_the_checks_and_the_split_and_watches_no_framework(module):
    """Invariant: a reference file imports from the package only ``_checks.py`` and
    ``_split.py``, and its text names none of the means of a guard (a frame, a framework, a
    warning, a weakref, shared memory): those live in guards.py, over it."""
    assert closure(module) - {module} <= {"_checks", "_split"}, closure(module)
    text = (SRC / f"{module}.py").read_text()
    found = [word for word in NEVER if word.lower() in text.lower()]
    assert not found, f"{module}.py: {found}"


def test_every_tutorials_import_line_names_a_copied_module_that_defines_the_name():
    """Invariant: each "Then `from yourproject.sampling.<path> import <Name>`" of a tutorial
    names a module of the package by its folder (``detection.infinite``: the file
    ``detection/infinite.py``) that defines ``<Name>``: a reader who copies the files and types
    that line gets the class."""
    found = 0
    for page in TUTORIALS:
        for path, name in re.findall(r"from yourproject\.sampling\.([a-z_.]+) import (\w+)",
                                     page.read_text()):  # fmt: skip
            module = SRC / (path.replace(".", "/") + ".py")
            assert module.is_file(), (page.name, path)
            tree = ast.parse(module.read_text())
            defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
            assert name in defined, (page.name, path, name)
            found += 1
    assert found >= 10
