"""What the properties catch: each classic bug, applied to a copy of its module, fails its property.

Every bug is a one-line diff in docs/examples/bugs/<bug>.diff; the property it must fail and the
shrunk counterexample Hypothesis reports (derandomized, so always the same) are checked here, and
docs/tutorials/properties.md includes the very same files, so the page cannot go stale.
"""

from __future__ import annotations

import importlib
import re
import sys
import types
from pathlib import Path

import _pytest.assertion.util
import pytest
from hypothesis import Phase, settings

BUGS = Path(__file__).resolve().parent.parent / "docs" / "examples" / "bugs"

# bug -> (the test module, the property that must fail)
CAUGHT_BY = {
    "contiguous_split": ("test_distributed", "test_ranks_are_disjoint_and_cover_the_padded_epoch"),
    "padding_from_the_tail": (
        "test_distributed",
        "test_padding_repeats_the_head_so_every_rank_has_num_samples",
    ),
    "forgotten_set_epoch": ("test_distributed", "test_order_depends_only_on_seed_plus_epoch"),
    "seed_by_epoch_alone": ("test_distributed", "test_order_depends_only_on_seed_plus_epoch"),
    "drop_last_off_by_one": ("test_distributed", "test_drop_last_cuts_the_tail_and_never_repeats"),
    "windows_that_do_not_wrap": (
        "test_windowed",
        "test_window_indices_are_consecutive_runs_wrapped_into_range",
    ),
    "counts_that_do_not_sum": (
        "test_weighted",
        "test_counts_are_non_negative_ints_summing_to_exactly_total",
    ),
    "wrapper_without_set_epoch": ("test_wrapper", "test_the_inner_epoch_follows_the_wrapper_epoch"),
}


def _fresh_copy(original: types.ModuleType, source: str) -> types.ModuleType:
    copy = types.ModuleType(original.__name__)
    copy.__dict__.update(__package__="distsampling", __file__=original.__file__)
    exec(compile(source, original.__file__, "exec"), copy.__dict__)
    return copy


def patched_module(diff: str) -> tuple[types.ModuleType, types.ModuleType]:
    """The module the diff names, and a fresh copy of it with the diff's one line replaced."""
    lines = diff.splitlines()
    path = lines[0].removeprefix("--- ")
    old, new = lines[2].removeprefix("-"), lines[3].removeprefix("+")
    original = importlib.import_module("distsampling." + Path(path).stem)
    source = Path(original.__file__).read_text()
    assert source.count(old + "\n") == 1, f"the diff's line is not in {path} exactly once: {old!r}"
    return original, _fresh_copy(original, source.replace(old + "\n", new + "\n"))


def _package_imports(module: types.ModuleType) -> set[str]:
    """The top-level modules of the package that ``module``'s source imports (``from .x import``,
    ``from . import x, y``), as ``distsampling.x``."""
    source = Path(module.__file__).read_text()
    found = set(re.findall(r"^from \.(\w+) import", source, re.M))
    for names in re.findall(r"^from \. import ([\w, ]+)", source, re.M):
        found |= {n.strip() for n in names.split(",")}
    return {f"distsampling.{name}" for name in found}


def copies_for(
    tests: types.ModuleType,
    original: types.ModuleType,
    copy: types.ModuleType,
    monkeypatch: pytest.MonkeyPatch,
) -> dict[str, object]:
    """Name -> buggy object, for every name of the test module that comes from the patched
    module, or from a top-level module of the package that imports from it, directly or through
    another (a sampler calling the arithmetic of its helper; an exported class over its
    reference class): each is executed again, in import order, over the buggy copies."""
    package = importlib.import_module("distsampling")
    top = {
        n: m for n, m in sys.modules.items()
        if n.startswith("distsampling.") and n.count(".") == 1 and getattr(m, "__file__", None)
    }  # fmt: skip
    top[original.__name__] = original  # sys.modules holds its buggy copy already
    imports = {n: _package_imports(m) for n, m in top.items()}
    pending, changed = set(), True
    while changed:  # every module that depends on the patched one, through any chain
        found = {n for n, deps in imports.items() if deps & (pending | {original.__name__})}
        changed, pending = not found <= pending, pending | found
    rebuilt = {original.__name__: copy}
    monkeypatch.setattr(package, original.__name__.rsplit(".", 1)[1], copy)
    while pending:  # a module once everything it imports of the pending ones is rebuilt
        name = min(n for n in pending if not imports[n] & pending)
        rebuilt[name] = _fresh_copy(top[name], Path(top[name].__file__).read_text())
        monkeypatch.setitem(sys.modules, name, rebuilt[name])
        monkeypatch.setattr(package, name.rsplit(".", 1)[1], rebuilt[name])
        pending.discard(name)
    out = {}
    for name, value in vars(tests).items():
        home = getattr(value, "__module__", None)
        if home in rebuilt and getattr(top.get(home, original), name, None) is value:
            out[name] = getattr(rebuilt[home], name)
    return out


def counterexample(error: BaseException) -> str:
    """Hypothesis's report of the shrunk example: the falsifying call and its draws."""
    notes = getattr(error, "__notes__", [])
    start = next(
        i
        for i, note in enumerate(notes)
        if note.startswith(("Falsifying example", "Failing test case"))
    )
    return "\n".join(n for n in notes[start:] if not n.startswith(("Explanation", "You can")))


def failure_report(bug: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run the bug's property on the buggy copy; return Hypothesis's report of the failure."""
    test_module, property_name = CAUGHT_BY[bug]
    tests = importlib.import_module(test_module)
    original, copy = patched_module((BUGS / f"{bug}.diff").read_text())
    # modules executed again import the buggy copy; the property (and its helpers) see the bug
    # wherever they used the module's names, or the names of a module built on it
    monkeypatch.setitem(sys.modules, original.__name__, copy)
    for name, value in copies_for(tests, original, copy, monkeypatch).items():
        monkeypatch.setattr(tests, name, value)
    prop = getattr(tests, property_name)
    # the "documented" replay whatever the profile: the same shrunk example on every run
    # (restored after); no explain phase: it names paths
    strict = settings(
        settings.get_profile("documented"), phases=[Phase.explicit, Phase.generate, Phase.shrink]
    )
    monkeypatch.setattr(prop, "_hypothesis_internal_use_settings", strict)
    # only Hypothesis's report is kept: pytest's explanation of each failing assert (a difflib
    # diff of long lists, for every example tried while shrinking) would be work thrown away
    monkeypatch.setattr(_pytest.assertion.util, "_reprcompare", None)
    with pytest.raises(Exception) as caught:  # an assert, or the error a bug raises
        prop()
    return counterexample(caught.value)


@pytest.mark.parametrize("bug", sorted(CAUGHT_BY))
def test_each_classic_bug_fails_its_property_with_the_documented_counterexample(bug, monkeypatch):
    """Invariant: the property fails on the bug, with exactly the shrunk example the page shows."""
    expected = (BUGS / f"{bug}.txt").read_text().rstrip("\n")
    assert failure_report(bug, monkeypatch) == expected
