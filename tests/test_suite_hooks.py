"""The suite's own hooks (tests/conftest.py), run on a tiny suite in a fresh pytest.

Grouped tests share one worker under ``pytest -n 2`` (xdist's own renaming is lost with pytest
9.2, so the conftest does it), under ``CI=true`` the slow tests are named at the end, and
under mutmut a mutant's tests run fastest first.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parent / "conftest.py"
TINY = """
import pytest

@pytest.mark.xdist_group("g")
@pytest.mark.parametrize("k", range(4))
def test_grouped(k):
    pass

@pytest.mark.parametrize("k", range(4))
def test_free(k):
    pass
"""


def run_tiny(tmp_path: Path, *args: str, **env: str) -> str:
    """Run the tiny suite with the project's conftest; return pytest's output. Only xdist is
    loaded (``-p xdist.plugin``): the other installed plugins would triple the start-up time."""
    shutil.copy(CONFTEST, tmp_path / "conftest.py")
    (tmp_path / "test_tiny.py").write_text(TINY)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "no:cacheprovider", "-v"]
        + list(args),
        cwd=tmp_path,
        env=dict(os.environ, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1", **env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


@pytest.mark.parametrize("dist", [[], ["--dist", "loadgroup"]], ids=["no --dist", "loadgroup"])
def test_the_tests_of_a_group_run_on_one_worker(tmp_path, dist):
    """Invariant: under ``-n 2`` (with or without ``--dist loadgroup``), every test of an
    ``xdist_group`` runs on the same worker, with ``@group`` in its id."""
    out = run_tiny(tmp_path, "-n", "2", *dist)
    workers = re.findall(r"\[(gw\d)\] .*PASSED test_tiny\.py::test_grouped\[\d\]@g", out)
    assert len(workers) == 4, out
    assert len(set(workers)) == 1, out


def test_an_explicit_dist_mode_is_kept(tmp_path):
    """Invariant: ``--dist load`` given on the command line is not turned into loadgroup."""
    out = run_tiny(tmp_path, "-n", "2", "--dist", "load")
    assert "scheduling tests via LoadScheduling" in out
    assert "@g" not in out


def test_under_ci_the_slow_tests_are_named_at_the_end(tmp_path):
    """Invariant: with ``CI=true``, each test over the threshold is listed in a closing section
    (a threshold of 0 makes every test slow); without ``CI`` nothing is listed."""
    out = run_tiny(tmp_path, "-n", "0", CI="true", DISTSAMPLING_SLOW_TEST_SECONDS="0")
    section = out.split("tests over 0 s (setup + call + teardown)", 1)[1]
    assert len(re.findall(r"^\s*\d+\.\d+s test_tiny\.py::test_", section, re.M)) == 8, out
    quiet = run_tiny(tmp_path, "-n", "0", CI="", DISTSAMPLING_SLOW_TEST_SECONDS="0")
    assert "tests over" not in quiet


def test_under_mutmut_a_mutants_tests_run_fastest_first(tmp_path):
    """Invariant: with a mutant under test and mutmut's stats beside the suite, the tests run
    in the order of their recorded durations (unrecorded ones last, as collected); with no
    mutant under test, as collected."""
    seconds = {f"test_tiny.py::test_free[{k}]": 4 - k for k in range(4)}  # the last fastest
    (tmp_path / "mutmut-stats.json").write_text(json.dumps({"duration_by_test": seconds}))
    ran = r"test_tiny\.py::(test_\w+\[\d\]) PASSED"
    out = run_tiny(tmp_path, "-n", "0", MUTANT_UNDER_TEST="m.x_f__mutmut_1")
    frees, grouped = (
        [f"test_free[{k}]" for k in (3, 2, 1, 0)],
        [f"test_grouped[{k}]" for k in range(4)],
    )
    assert re.findall(ran, out) == frees + grouped, out
    assert (
        re.findall(ran, run_tiny(tmp_path, "-n", "0", MUTANT_UNDER_TEST=""))
        == grouped + frees[::-1]
    )
