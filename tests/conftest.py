"""Hypothesis profiles, and the hooks that keep the suite's parallel run honest.

Profiles (pick one with ``HYPOTHESIS_PROFILE=...``; ``make test`` uses ``ci``):

- ``ci``: a fixed example budget (50 a property), no deadline, derandomized: the same examples on
  every run, so a red CI is reproducible and a green one is not luck. 50, not Hypothesis's
  default 100, keeps ``make test`` near 5 minutes on a 2-core CI machine.
- ``mutate``: as ``ci`` with 100 examples a property, for ``make mutate``: a mutant must be
  killed by a deeper search than one CI run makes. No shrinking: a mutant is killed by the first
  failing example, and shrinking it would only run the mutant into its timeout.
- ``dev``: a smaller budget and a random seed, for quick local loops.
- ``thorough``: 1000 examples a property (twenty times ``ci``) with a random seed, for a deep search before a release.

``costly`` is no profile of its own but a scale of the active one: a tenth of its examples, for
the properties whose one example costs what tens of others do (``settings.get_profile("costly")``).

Hooks: ``pytest -n N`` runs the tests of one ``xdist_group`` on one worker (so a fixture they
share, such as one 2-node torchrun run or one site build, runs once); under ``CI=true`` the
tests that took over ``DISTSAMPLING_SLOW_TEST_SECONDS`` (10 by default) are listed at the end.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

# One torch thread per test process, set before anything imports torch and inherited by every
# rank, torchrun agent and server a test starts. `make test` already runs two pytest workers a
# core and the multi-process tests add ranks: torch's own thread pools would only oversubscribe
# the cores, and OpenMP threads spinning on a busy core stall unrelated tests many times over
# (a 0.4 s property took 10.6 s). torchrun sets the same for its ranks.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest
from hypothesis import HealthCheck, Phase, settings

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.differing_executors]

settings.register_profile(
    "ci", max_examples=50, deadline=None, derandomize=True, suppress_health_check=_SUPPRESS
)
settings.register_profile(
    "mutate", max_examples=100, deadline=None, derandomize=True, suppress_health_check=_SUPPRESS,
    phases=(Phase.explicit, Phase.reuse, Phase.generate),
)  # fmt: skip
settings.register_profile(
    "dev", max_examples=30, deadline=None, print_blob=True, suppress_health_check=_SUPPRESS
)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, print_blob=True, suppress_health_check=_SUPPRESS
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# ``costly``: a tenth of the active profile's examples (at least 1: 5 under ``ci``, 100 under
# ``thorough``), for the properties whose one example costs what tens of others do: DataLoader
# workers started, 1500 passes drawn, a sweep over every integer argument of the package (one
# test per argument). At the profile's own depth they alone would add minutes to ``make test``;
# scaled from the profile, not fixed, they still search twenty times deeper under ``thorough``.
# A test takes it as ``@settings(settings.get_profile("costly"))`` above its ``@given``.
settings.register_profile(
    "costly", settings.default, max_examples=max(1, settings.default.max_examples // 10)
)
# ``documented``: not a search but a replay, the same under every profile: the docs page shows
# the counterexample each classic bug shrinks to, and tests/test_properties.py checks that the
# page's example is the one a derandomized search of this depth finds (a deeper or shallower
# search may shrink to another, equally true, counterexample)
settings.register_profile(
    "documented", max_examples=100, deadline=None, derandomize=True, database=None,
    print_blob=False, report_multiple_bugs=False, suppress_health_check=list(HealthCheck),
)  # fmt: skip


# --- xdist groups: the tests of one ``xdist_group`` run on one worker -----------------------------


def pytest_configure(config):
    """``pytest -n N`` without ``--dist``: distribute by group, as ``make test`` does.

    A group holds the tests that share an expensive fixture (one real process group, one
    2-node torchrun run): split over workers, each worker would start it again.
    """
    given = config.invocation_params.args
    explicit = any(str(a).startswith(("--dist", "-d")) for a in given)
    if getattr(config.option, "numprocesses", None) and not explicit:
        if config.option.dist == "load":  # xdist's default once -n is given
            config.option.dist = "loadgroup"


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Tell each xdist worker whether the controller distributes by group (the worker parses
    the command line again, so it would not know when ``pytest_configure`` chose it)."""
    node.workerinput["loadgroup"] = node.config.option.dist == "loadgroup"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """On an xdist worker under ``--dist loadgroup``: give each grouped test its ``@group`` id.

    xdist (3.8) renames ``item._nodeid``; pytest 9.2 keeps the id in ``item._id`` instead, so
    xdist's renaming is lost and every group is spread over the workers. Renamed here, once.

    Under mutmut (``make mutate``), a mutant's tests run fastest first, by the durations its
    stats run recorded: with ``-x`` a mutant is killed by its first failing test, and mutmut's
    fork server hands pytest the tests in no order (its fork runner sorts them; this does the
    same for both).
    """
    _fastest_first_under_mutmut(items)
    worker = getattr(config, "workerinput", {})  # what the controller sent this worker
    if not worker.get("loadgroup"):
        return
    for item in items:
        groups = sorted(
            {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
             for m in item.iter_markers("xdist_group")}
        )  # fmt: skip
        suffix = "@" + "_".join(groups)
        if not groups or item.nodeid.endswith(suffix):  # ungrouped, or xdist renamed it
            continue
        if hasattr(item, "_id"):  # pytest >= 9.2: a structured id, its string form cached
            item._id = type(item._id).parse(item.nodeid + suffix)
        else:
            item._nodeid = item.nodeid + suffix


def _fastest_first_under_mutmut(items: list) -> None:
    # mutmut names the mutant under test in the environment and runs pytest in its work tree,
    # beside the stats file of each test's duration; elsewhere nothing changes
    stats = Path("mutmut-stats.json")
    if "__mutmut_" not in os.environ.get("MUTANT_UNDER_TEST", "") or not stats.is_file():
        return
    seconds = json.loads(stats.read_text()).get("duration_by_test", {})
    items.sort(key=lambda item: seconds.get(item.nodeid, math.inf))  # stable: ties as collected


# --- a guard on the suite's speed: tests over 10 s are named at the end under CI -----------------

SLOW_TEST_SECONDS = float(os.environ.get("DISTSAMPLING_SLOW_TEST_SECONDS", "10"))
_durations: dict[str, float] = {}


def pytest_runtest_logreport(report):
    """Sum each test's setup, call and teardown (a shared fixture counts for its first user);
    collect the loop matrix's cells."""
    _durations[report.nodeid] = _durations.get(report.nodeid, 0.0) + report.duration
    _collect_cells(report)


def pytest_terminal_summary(terminalreporter, config):
    """Under ``CI=true``, list the tests that took over ``SLOW_TEST_SECONDS``: a report, not a
    failure (a loaded machine is no bug), so that a slow test is seen the day it lands."""
    if os.environ.get("CI", "").lower() != "true" or hasattr(config, "workerinput"):
        return
    slow = sorted(((d, n) for n, d in _durations.items() if d > SLOW_TEST_SECONDS), reverse=True)
    if slow:
        title = f"tests over {SLOW_TEST_SECONDS:g} s (setup + call + teardown)"
        terminalreporter.section(title)
        for seconds, nodeid in slow:
            terminalreporter.write_line(f"{seconds:6.1f}s {nodeid}")


# --- the loop matrix: every cell's outcome, for docs/loops.md -------------------------------------

LOOP_RESULTS = os.path.join(os.path.dirname(__file__), "..", "docs", "generated", "loops.json")
_cells: dict[tuple[str, str], dict] = {}


@pytest.fixture
def loop_cell(request):
    """``loop_cell(sampler, loop, status, note)``: what a matrix cell showed (``passed``;
    ``setting``: the setting it needs, the default raises; ``warned``: the setting it needs, the
    default trains on another plan and the package warns while it runs; ``silent``: the setting
    it needs, the default trains on another plan without a word; ``refused`` with the error's
    words).
    Recorded on the report, so the controller sees it under ``pytest -n``."""

    def record(sampler: str, loop: str, status: str, note: str = "") -> None:
        cell = {"sampler": sampler, "loop": loop, "status": status, "note": note,
                "test": request.node.nodeid.split("@")[0]}  # fmt: skip
        request.node.user_properties.append(("loop_cell", cell))

    return record


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A cell whose test failed is recorded as failed, whatever it recorded before failing."""
    outcome = yield
    report = outcome.get_result()
    if report.when == "call" and report.failed:
        for name, cell in item.user_properties:
            if name == "loop_cell":
                cell["status"] = "failed"


def _collect_cells(report) -> None:
    """Keep each cell's outcome; a cell that several tests share (cases of one loop) is failed
    if any of them failed."""
    if report.when == "call":
        for name, cell in report.user_properties:
            key = (cell["sampler"], cell["loop"]) if name == "loop_cell" else None
            if key and _cells.get(key, {}).get("status") != "failed":
                _cells[key] = dict(cell)


def pytest_sessionfinish(session, exitstatus):
    """On the controller (or a run without xdist), after a run that ran any cell: write this
    run's results whole to ``docs/generated/loops.json`` (``docs/hooks/loops.py`` renders it):
    every cell it did not run is marked ``not run``, and the page refuses those."""
    if hasattr(session.config, "workerinput") or not _cells:
        return
    import json
    import sys

    sys.path.insert(0, os.path.dirname(__file__))
    try:
        from loops import expected_cells, results
    finally:
        sys.path.pop(0)
    path = os.path.normpath(LOOP_RESULTS)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        json.dump(results(_cells, expected_cells()), f, indent=1)
