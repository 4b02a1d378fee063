"""Every code block in the docs and the README runs, and every output shown is the real output.

The rules a page follows (checked by ``test_every_fence_is_run_or_checked``):

- ```` ```python ```` blocks run, in page order, in one namespace per page (like a notebook);
  ``--8<-- "path"`` / ``--8<-- "path:section"`` lines are expanded as pymdownx.snippets does.
- A ```` ```text title="Output" ```` block right after a python block is its exact stdout.
- ```` ```console ```` blocks: each ``$ command`` runs in the repository root with this venv
  first on PATH; the lines after it, up to the next ``$``, are its exact output.
- ```` ```pycon ```` blocks are ``>>>`` sessions checked like doctests, in the page's namespace.
- ```` ```bash ```` blocks hold only ``make <target>`` lines: the set-up commands that CI runs
  itself (running them here would recurse into ``make test``).
"""

from __future__ import annotations

import contextlib
import doctest
import io
import os
import re
import runpy
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]
OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,})(?P<lang>[\w-]*)(?P<rest>.*)$")
SNIPPET = re.compile(r'^\s*--8<--\s+"(?P<path>[^":]+)(?::(?P<section>[\w-]+))?"\s*$')


@dataclass
class Fence:
    lang: str
    rest: str
    body: str
    line: int

    @property
    def is_output(self) -> bool:
        return self.lang == "text" and 'title="Output"' in self.rest


def fences(text: str) -> list[Fence]:
    """Every fenced block of a markdown text, tabs and admonitions (indented blocks) included."""
    lines, out, i = text.splitlines(), [], 0
    while i < len(lines):
        m = OPEN.match(lines[i])
        if m:
            indent, fence, start = m["indent"], m["fence"], i
            close = re.compile(rf"^{re.escape(indent)}{fence}\s*$")
            body, i = [], i + 1
            while i < len(lines) and not close.match(lines[i]):
                body.append(lines[i][len(indent) :])
                i += 1
            out.append(Fence(m["lang"], m["rest"], "\n".join(body), start + 1))
        i += 1
    return out


def expand(body: str) -> str:
    """Replace snippet lines by the file (or the named ``[start:x]``/``[end:x]`` section) they name."""
    lines = []
    for line in body.splitlines():
        m = SNIPPET.match(line)
        if not m:
            lines.append(line)
            continue
        text = (ROOT / m["path"]).read_text()
        if m["section"]:
            s = re.search(
                rf"--8<-- \[start:{m['section']}\]\n(.*?)\n.*--8<-- \[end:{m['section']}\]",
                text,
                re.S,
            )
            assert s, f"section {m['section']} not found in {m['path']}"
            text = s.group(1)
        lines.append(text.rstrip("\n"))
    return "\n".join(lines)


def run_python(code: str, namespace: dict, where: str) -> str:
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        exec(compile(code, where, "exec"), namespace)
    return buffer.getvalue()


def run_pycon(body: str, namespace: dict, where: str) -> None:
    test = doctest.DocTestParser().get_doctest(body, namespace, where, where, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    with contextlib.redirect_stdout(io.StringIO()) as report:
        runner.run(test)
    assert runner.failures == 0, f"{where}: interactive example differs:\n{report.getvalue()}"


# Python's own warning filters, as a fresh interpreter has them (pytest changes this process's)
_FRESH_FILTERS = [("default", DeprecationWarning, "__main__"), ("ignore", DeprecationWarning, ""),
                  ("ignore", PendingDeprecationWarning, ""), ("ignore", ImportWarning, ""),
                  ("ignore", ResourceWarning, "")]  # fmt: skip


def run_module_forked(module: str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    """``python -m module args`` in a forked child of this process, where torch and the package
    are imported already (a fresh interpreter spends about 3 s of CPU importing torch).

    The child runs the module as ``-m`` does (``runpy``, ``__main__``, ``sys.argv``), in the
    repository root, with a fresh interpreter's warning filters, its stdout and stderr written
    to files of its own; its exit status is the command's."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 1
            try:
                os.chdir(ROOT)
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)
                sys.stderr = open(2, "w", closefd=False)
                warnings.resetwarnings()
                for action, category, where in _FRESH_FILTERS:
                    warnings.filterwarnings(action, category=category, module=where, append=True)
                sys.argv = [module, *args]
                try:
                    runpy.run_module(module, run_name="__main__", alter_sys=True)
                    code = 0
                except SystemExit as stop:
                    if isinstance(stop.code, str):
                        print(stop.code, file=sys.stderr)
                    code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
                except BaseException:
                    traceback.print_exc()
            finally:
                with contextlib.suppress(BaseException):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        deadline = time.monotonic() + timeout
        while (done := os.waitpid(pid, os.WNOHANG))[0] == 0:
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                raise subprocess.TimeoutExpired([module, *args], timeout)
            time.sleep(0.02)
        out.seek(0)
        err.seek(0)
        status = os.waitstatus_to_exitcode(done[1])
        return subprocess.CompletedProcess([module, *args], status, out.read().decode(),
                                           err.read().decode())  # fmt: skip


def run_console(body: str, where: str) -> None:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    commands: list[tuple[str, list[str]]] = []
    for line in body.splitlines():
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            assert commands, f"{where}: output before any '$ ' command"
            commands[-1][1].append(line)
    for command, expected in commands:
        words = shlex.split(command)
        if words[:3] == ["python", "-m", "distsampling"] and not set(command) & set("|&;<>$`"):
            proc = run_module_forked("distsampling", words[3:], timeout=240)
        else:
            proc = subprocess.run(
                command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=240
            )
        assert proc.returncode == 0, f"{where}: `{command}` failed:\n{proc.stdout}\n{proc.stderr}"
        if expected:
            assert proc.stdout.rstrip() == "\n".join(expected).rstrip(), (
                f"{where}: output of `{command}` differs"
            )


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_fence_is_run_or_checked(page: Path):
    """Invariant: each code block of the page runs, and each output block equals the real output."""
    blocks = fences(page.read_text())
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    try:
        check_fences(page, blocks, namespace)
    finally:
        stop_loaders(namespace)


def stop_loaders(namespace: dict) -> None:
    """Stop the worker processes of the page's DataLoaders now, then let the page's names go.

    A page's functions hold the page's namespace as their globals: a cycle, so its loaders would
    outlive this test until some later garbage collection. Collected in a cycle, a loader
    iterator's ``__del__`` may find its queues already finalised: its workers never hear the
    stop and each ``join`` waits out its 5 s, inside whatever test happens to be running (an
    ordinary property took 10 s that way). Stopped here, with the queues alive, it is instant.
    """
    for value in list(namespace.values()):
        iterator = getattr(value, "_iterator", value)  # a DataLoader, or an iterator of one
        if callable(getattr(iterator, "_shutdown_workers", None)):
            iterator._shutdown_workers()
    namespace.clear()


def check_fences(page: Path, blocks: list[Fence], namespace: dict) -> None:
    """Run or check each block of ``page`` in turn, in one ``namespace``."""
    for k, block in enumerate(blocks):
        where = f"{page.relative_to(ROOT)}:{block.line}"
        if block.lang == "python" and is_source_listing(block.body):
            pass  # a module of src/ shown whole: its own tests and doctests run it
        elif block.lang == "python":
            stdout = run_python(expand(block.body), namespace, where)
            if k + 1 < len(blocks) and blocks[k + 1].is_output:
                assert stdout.rstrip() == blocks[k + 1].body.rstrip(), (
                    f"{where}: shown output differs"
                )
        elif block.lang == "pycon":
            run_pycon(block.body, namespace, where)
        elif block.lang == "console":
            pass  # each runs on its own: test_every_console_command_prints_what_the_page_shows
        elif block.is_output:
            previous = blocks[k - 1].lang if k else None
            assert previous == "python", f"{where}: an Output block must follow a python block"
        elif block.lang in ("diff", "text") and all(
            SNIPPET.match(ln) and SNIPPET.match(ln)["path"].startswith("docs/examples/bugs/")
            for ln in block.body.splitlines()
        ):
            pass  # a bug's diff and counterexample: tests/test_properties.py checks both files
        elif block.lang == "bash":
            assert all(
                re.fullmatch(r"(make [\w-]+( [\w=-]+)*|[A-Z_]+=\S+ make [\w-]+)", ln)
                for ln in block.body.splitlines()
                if ln
            ), f"{where}: bash blocks hold only make commands"
        else:
            pytest.fail(f"{where}: a ```{block.lang} block is neither run nor checked")


def is_source_listing(body: str) -> bool:
    """Whether a block is one module of ``src/distsampling/`` included whole (the file a reader
    copies, shown beside the original it mirrors)."""
    lines = body.strip().splitlines()
    m = SNIPPET.match(lines[0]) if len(lines) == 1 else None
    return bool(m) and m["path"].startswith("src/distsampling/") and not m["section"]


def starts_a_process_group(body: str) -> bool:
    """Whether a console block starts a real process group: ``torchrun``, or an example script
    that starts torchrun agents or ranks itself (``run_nodes``, ``run_world``)."""
    scripts = re.findall(r"docs/examples/[\w/]+\.py", body)
    return "torchrun" in body or any(
        re.search(r"\brun_(nodes|world)\(", (ROOT / script).read_text()) for script in scripts
    )


def console_blocks() -> list:
    """Every ```` ```console ```` block of the docs, one test each: they start processes
    (torchrun, the CLI), so a page of them would be one long test."""
    return [
        pytest.param(
            block,
            id=f"{page.relative_to(ROOT)}:{block.line}",
            # a real process group: one at a time with the other worlds (2 cores hold one)
            marks=[pytest.mark.multiprocess, pytest.mark.xdist_group("worlds")]
            if starts_a_process_group(block.body)
            else [],
        )
        for page in PAGES
        for block in fences(page.read_text())
        if block.lang == "console"
    ]


@pytest.mark.parametrize("block", console_blocks())
def test_every_console_command_prints_what_the_page_shows(block: Fence, request):
    """Invariant: each ``$ command`` of the docs exits 0 and prints exactly the lines below it."""
    run_console(block.body, request.node.callspec.id)
