r"""Run a function on every rank of a real ``torch.distributed`` group, and never hang.

:func:`run_world` is a tiny ``torchrun`` for tests and demos: it starts ``world_size``
processes, joins them in one process group (gloo on localhost, a free port), calls the same
function in each, and returns what every rank returned, in rank order. If a rank fails, or the
whole run outlasts ``timeout``, every rank is killed (their whole process groups) and the error
shows each rank's last output: no orphan processes, no hung test. Before a timeout's kill, each
rank and each process it forked (a DataLoader worker) writes its threads' Python stacks to that
output (``faulthandler``, asked by ``SIGUSR2``): the error says where each one waited.

On Linux, gloo ranks are forked from a *zygote*: a Python process, started once with the
caller's environment and import path, that imported torch and this package and nothing else.
Importing torch costs a fresh interpreter about 3 s of CPU; a fork costs milliseconds, and the
rank starts as a fresh process would, with its own session, environment, working directory and
log. A caller whose environment or ``sys.path`` changed gets a new zygote. nccl ranks, and
other systems, start as fresh interpreters (``python -m distsampling.tools.launch``).

The function is named by import path (``"package.module:function"``) rather than pickled, so
each rank imports it fresh, exactly as ``torchrun script.py`` would run a script. A rank that
returned runs its exit handlers (``atexit``, multiprocessing's) and then ends at once, without
the interpreter's slow teardown of torch's modules.

:func:`run_nodes` does the same through real ``torchrun`` agents, one per simulated node
(``--nnodes``, ``--node-rank``, static rendezvous on 127.0.0.1): ``RANK`` and ``LOCAL_RANK``
then differ, as on a cluster, so code that mixes them up fails here.

References:
    torch/distributed/run.py (torchrun: the environment variables set here are the same)
"""

from __future__ import annotations

import atexit
import faulthandler
import gc
import importlib
import json
import math
import numbers
import os
import pickle
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

from .._checks import check_int

__all__ = ["free_port", "run_nodes", "run_world"]


def free_port() -> int:
    """A TCP port on localhost that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_world(
    target: str,
    world_size: int,
    *args: Any,
    timeout: float = 120.0,
    backend: str = "gloo",
    pythonpath: list[str] | None = None,
) -> list[Any]:
    r"""Call ``target(*args)`` on each rank of a new ``world_size``-process group.

    Args:
        target: ``"module:function"``; the function runs after ``init_process_group`` and may
            use any collective; its return value must pickle.
        world_size: number of processes (ranks).
        *args: positional arguments for the function (must pickle), the same on every rank.
        timeout: seconds for the whole run; past it every rank is killed and ``TimeoutError``
            raised.
        backend: ``"gloo"`` (CPU) or ``"nccl"`` (one GPU per rank: ``LOCAL_RANK`` is set).
        pythonpath: extra import paths for the ranks (e.g. the tests folder).

    Returns:
        ``[result of rank 0, result of rank 1, ...]``.

    Examples:
        >>> run_world("torch.distributed:get_rank", 2)
        [0, 1]
    """
    # every check in the parent, before any rank starts: a bad argument fails once, here
    _check_target(target)
    world_size = check_int("world_size", world_size, low=1)
    _check_timeout(timeout)
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="distsampling-world-") as tmp:
        work = Path(tmp)
        (work / "args.pkl").write_bytes(pickle.dumps(args))
        paths = [*(pythonpath or []), *sys.path]
        procs, logs = [], []
        for rank in range(world_size):
            env = dict(
                os.environ,
                RANK=str(rank),
                LOCAL_RANK=str(rank),
                WORLD_SIZE=str(world_size),
                LOCAL_WORLD_SIZE=str(world_size),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
                PYTHONPATH=os.pathsep.join(p for p in paths if p),
            )
            log = open(work / f"rank{rank}.log", "w+b")
            argv = [target, str(work), backend, str(timeout)]
            if backend == "gloo" and _ZYGOTE_WORKS:  # forked: no 3 s torch import a rank
                procs.append(_zygote().fork(argv, env, work / f"rank{rank}.log"))
            else:
                procs.append(
                    _start([sys.executable, "-m", "distsampling.tools.launch", *argv], env, log)
                )
            logs.append(log)
        try:
            failed = _wait_all(procs, time.monotonic() + timeout)
            if failed == "timeout":  # before the kill: where each hung rank waits, in its log
                _dump_stacks([p.pid for p in procs if p.poll() is None])
        finally:
            for p in procs:  # no orphans, whatever happened
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            outputs = _read_logs(logs)
        if failed is not None:
            call = f"run_world({target!r}, world_size={world_size})"
            raise _failure(call, failed, timeout, "rank", procs, outputs)
        return [
            pickle.loads((work / f"result{rank}.pkl").read_bytes()) for rank in range(world_size)
        ]


def run_nodes(
    target: str,
    nnodes: int,
    nproc_per_node: int,
    *args: Any,
    timeout: float = 180.0,
    backend: str = "gloo",
    pythonpath: list[str] | None = None,
) -> list[Any]:
    r"""Call ``target(*args)`` on every rank of ``nnodes`` torchrun agents of ``nproc_per_node``.

    Each agent is ``torchrun --nnodes=N --node-rank=K --nproc-per-node=P --master-addr=127.0.0.1
    --master-port=<free>`` (static rendezvous), as one would start it on node ``K``. Ranks
    ``K * P .. K * P + P - 1`` run on agent ``K``; their ``LOCAL_RANK`` is ``0 .. P - 1``.
    If an agent fails or the run outlasts ``timeout``, the agents are stopped (SIGTERM, then
    SIGKILL) and every process the run started (workers, and whatever they started) is killed:
    they all carry a marker in their environment, looked up in ``/proc``.

    Args:
        target: ``"module:function"``, run after ``init_process_group`` on every rank.
        nnodes: number of agents (simulated nodes).
        nproc_per_node: ranks per agent.
        *args: positional arguments for the function (must pickle).
        timeout: seconds for the whole run.
        backend: ``"gloo"`` or ``"nccl"``.
        pythonpath: extra import paths for the ranks.

    Returns:
        ``[result of rank 0, result of rank 1, ...]`` over all ``nnodes * nproc_per_node`` ranks.

    Examples:
        >>> import os
        >>> run_nodes("os:getenv", 2, 1, "LOCAL_RANK")  # ranks 0 and 1, each local rank 0
        ['0', '0']
    """
    _check_target(target)
    _check_timeout(timeout)
    nnodes = check_int("nnodes", nnodes, low=1)
    nproc_per_node = check_int("nproc_per_node", nproc_per_node, low=1)
    port, mark = free_port(), uuid.uuid4().hex
    with tempfile.TemporaryDirectory(prefix="distsampling-nodes-") as tmp:
        work = Path(tmp)
        (work / "args.pkl").write_bytes(pickle.dumps(args))
        paths = [*(pythonpath or []), *sys.path]
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(p for p in paths if p),
            DISTSAMPLING_RUN=mark,  # every process of this run inherits it: found and killed
        )
        agents, logs = [], []
        for node in range(nnodes):
            cmd = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}"]
            cmd += [f"--node-rank={node}", f"--nproc-per-node={nproc_per_node}"]
            cmd += ["--master-addr=127.0.0.1", f"--master-port={port}", "--rdzv-backend=static"]
            cmd += ["--max-restarts=0", "--monitor-interval=0.1"]
            cmd += ["-m", "distsampling.tools.launch", target, str(work), backend, str(timeout)]
            log = open(work / f"node{node}.log", "w+b")
            agents.append(_start(cmd, env, log))
            logs.append(log)
        try:
            failed = _wait_all(agents, time.monotonic() + timeout)
            if failed == "timeout":  # before the kill: where each hung rank waits, in its log
                ranks, alive = [int(f.read_text()) for f in work.glob("pid*")], _marked(mark)
                _dump_stacks([pid for pid in ranks if pid in alive])
        finally:
            for agent in agents:  # SIGTERM: the agent stops its workers (own sessions) itself
                if agent.poll() is None:
                    os.killpg(agent.pid, signal.SIGTERM)
            for agent in agents:
                try:
                    agent.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(agent.pid, signal.SIGKILL)
                    agent.wait()
            _kill_marked(mark)  # whatever is left (a worker, a producer, a loader's worker)
            outputs = _read_logs(logs)
        if failed is not None:
            call = f"run_nodes({target!r}, nnodes={nnodes}, nproc_per_node={nproc_per_node})"
            raise _failure(call, failed, timeout, "node", agents, outputs)
        world = nnodes * nproc_per_node
        return [pickle.loads((work / f"result{rank}.pkl").read_bytes()) for rank in range(world)]


def _start(cmd: list[str], env: dict[str, str], log: Any) -> subprocess.Popen:
    """Start ``cmd`` in a new session (``killpg`` then takes it and what it starts), logging to ``log``."""
    return subprocess.Popen(
        cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )


def _read_logs(logs: list, keep: int = 8000) -> list[str]:
    """The last ``keep`` characters of each process's log; the logs are closed."""
    outputs = []
    for log in logs:
        log.seek(0)
        outputs.append(log.read().decode(errors="replace")[-keep:])
        log.close()
    return outputs


def _failure(
    call: str,
    failed: int | str,
    timeout: float,
    unit: str,
    procs: list[subprocess.Popen],
    outputs: list[str],
) -> Exception:
    """The error for a failed run: which ``unit`` (rank, node) failed or the timeout, and logs."""
    tails = "\n".join(
        f"--- {unit} {k} (exit {p.returncode}):\n{out}"
        for k, (p, out) in enumerate(zip(procs, outputs))
    )
    if failed == "timeout":
        return TimeoutError(f"{call}: did not finish within timeout={timeout}s\n{tails}")
    return RuntimeError(f"{call}: {unit} {failed} failed\n{tails}")


def _marked(mark: str) -> list[int]:
    """Every process whose environment holds ``DISTSAMPLING_RUN=mark`` (Linux ``/proc``)."""
    needle, found = f"DISTSAMPLING_RUN={mark}".encode(), []
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as f:
                if needle in f.read().split(b"\0"):
                    found.append(int(pid))
        except OSError:  # gone already, or not ours to read
            continue
    return found


def _kill_marked(mark: str) -> None:
    """SIGKILL every process whose environment holds ``DISTSAMPLING_RUN=mark``."""
    for pid in _marked(mark):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:  # ended since it was found
            continue


def _with_children(pids: list[int]) -> list[int]:
    """``pids`` and every process below them (Linux ``/proc``: each process's parent)."""
    parent = {}
    for pid in os.listdir("/proc") if os.path.isdir("/proc") else []:
        try:
            with open(f"/proc/{pid}/stat") as f:  # "pid (name) state ppid ..."
                parent[int(pid)] = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):  # gone already
            continue
    found, todo = list(pids), list(pids)
    while todo:
        above = todo.pop()
        below = [child for child, p in parent.items() if p == above]
        found += below
        todo += below
    return found


def _dump_stacks(ranks: list[int]) -> None:
    """Ask each rank still running, and each process it forked (a DataLoader worker inherits
    the handler), for its threads' Python stacks (``faulthandler``, on ``SIGUSR2``, written to
    the rank's log), one after the other so that the dumps do not interleave in a shared log."""
    for pid in _with_children(ranks):
        try:
            os.kill(pid, signal.SIGUSR2)
        except ProcessLookupError:  # it ended since it was found
            continue
        time.sleep(0.2)  # its dump is written in the handler, at once


def _check_target(target: object) -> None:
    # "package.module:function": dotted identifiers, one colon, an identifier
    module, _, function = target.partition(":") if isinstance(target, str) else ("", "", "")
    if not (
        module and all(p.isidentifier() for p in module.split(".")) and function.isidentifier()
    ):
        raise (ValueError if isinstance(target, str) else TypeError)(
            "target should be 'module:function' (a dotted module path, a colon, a function "
            f"name), but got target={target!r}"
        )


def _check_timeout(timeout: object) -> None:
    # the ranks' process groups take timedelta(seconds=timeout): finite, and > 0 to run at all
    real = isinstance(timeout, numbers.Real) and not isinstance(timeout, bool)
    if not real or not 0 < timeout < math.inf:  # NaN fails the comparison too
        raise (ValueError if real else TypeError)(
            f"timeout should be a finite number of seconds > 0, but got timeout={timeout!r}"
        )


def _wait_all(procs: list[subprocess.Popen], deadline: float) -> int | str | None:
    # poll until all exit 0 (None), one exits non-zero (its rank), or the deadline ("timeout")
    while True:
        codes = [p.poll() for p in procs]
        for rank, code in enumerate(codes):
            if code not in (None, 0):
                return rank
        if all(code == 0 for code in codes):
            return None
        if time.monotonic() > deadline:
            return "timeout"
        time.sleep(0.02)


def _rank_main(target: str, work: str, backend: str, timeout: str) -> None:
    import torch.distributed as dist  # imported here: the parent never needs torch.distributed

    # a run that times out asks its ranks where they wait (SIGUSR2): each thread's stack, to
    # the log, which the error shows; the pid file tells run_nodes, whose children are agents
    faulthandler.register(signal.SIGUSR2, all_threads=True)
    Path(work, f"pid{os.environ['RANK']}").write_text(str(os.getpid()))
    module, function = target.split(":")
    fn = getattr(importlib.import_module(module), function)
    args = pickle.loads(Path(work, "args.pkl").read_bytes())
    if backend == "nccl":
        import torch

        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group(backend, timeout=timedelta(seconds=float(timeout)))
    try:
        result = fn(*args)
        dist.barrier()  # every rank finished its collectives before any rank tears down
    finally:
        # DDP's reducer sits in a reference cycle that still holds the group: free it while the
        # group is alive, or gloo's threads die at interpreter exit and abort the rank
        # ("terminate called without an active exception"; seen here under load)
        gc.collect()
        dist.destroy_process_group()
    Path(work, f"result{os.environ['RANK']}.pkl").write_bytes(pickle.dumps(result))


def _exit_now() -> None:
    # The result is written: run the exit handlers (multiprocessing's, which stop the rank's
    # children, and any the target registered), flush, and leave without the interpreter's
    # teardown of torch's modules, which costs a rank about a second (measured: 1.1 s from the
    # last exit handler to the process's end under torchrun) and gives back nothing we need.
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


# --- the zygote: gloo ranks forked from a process that imported torch once ---------------------

_ZYGOTE_WORKS = sys.platform == "linux" and hasattr(os, "pidfd_open")
_ZYGOTES: list[_Zygote] = []  # the caller's one zygote, kept while its environment holds


class _Forked:
    """A rank forked by the zygote, as ``run_world`` uses a ``subprocess.Popen``: ``pid`` (its
    own process group), ``poll()``, ``wait()`` and ``returncode`` (negative: killed by that
    signal). The zygote, its parent, reports its exit."""

    def __init__(self, zygote: _Zygote, pid: int) -> None:
        self.zygote, self.pid, self.returncode = zygote, pid, None

    def poll(self) -> int | None:
        self.zygote.pump(0)
        self.returncode = self.zygote.codes.get(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"rank {self.pid}", timeout or 0)
            self.zygote.pump(0.05)
        return self.returncode  # type: ignore[return-value]


class _Zygote:
    """A Python process (``_serve``) started with ``env`` and ``path``: it forks a
    rank for each request line and reports ``pid P`` after each fork, ``exit P CODE`` after
    each end. It ends when the caller closes its stdin (the caller ended)."""

    def __init__(self, env: dict[str, str], path: list[str]) -> None:
        self.env, self.path, self.codes, self.lines = env, path, {}, []
        self.buffer, self.alive, self.started = b"", True, []
        zenv = dict(env, PYTHONPATH=os.pathsep.join(p for p in path if p))
        cmd = [sys.executable, "-c", "from distsampling.tools.launch import _serve; _serve()"]
        self.proc = subprocess.Popen(
            cmd, env=zenv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
        )
        self._line(120.0)  # "ready": torch imported

    def fork(self, argv: list[str], env: dict[str, str], log: Path) -> _Forked:
        request = {"argv": argv, "env": env, "log": str(log), "cwd": os.getcwd()}
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request).encode() + b"\n")
        self.proc.stdin.flush()
        pid = int(self._line(60.0).split()[1])  # "pid P"
        self.started.append(pid)
        return _Forked(self, pid)

    def pump(self, wait: float) -> None:
        """Read what the zygote wrote (within ``wait`` seconds): exits land in ``codes``."""
        fd = self.proc.stdout.fileno()  # type: ignore[union-attr]
        while self.alive and select.select([fd], [], [], wait)[0]:
            chunk = os.read(fd, 65536)
            if not chunk:  # the zygote is gone: so are its ranks' reports
                self.alive = False
                break
            self.buffer += chunk
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                word, *rest = line.decode().split()
                if word == "exit":
                    self.codes[int(rest[0])] = int(rest[1])
                else:  # "ready", "pid P": answers to the caller
                    self.lines.append(line.decode())
            wait = 0
        if not self.alive:  # ranks of a dead zygote: ended once their process is gone
            for pid in self.started:
                if pid not in self.codes and not _exists(pid):
                    self.codes[pid] = -signal.SIGKILL

    def _line(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while not self.lines:
            if not self.alive or time.monotonic() > deadline:
                raise RuntimeError("the zygote that forks run_world's ranks did not answer")
            self.pump(0.1)
        return self.lines.pop(0)


def _exists(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, orphaned when its zygote died, has ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


#: variables that change while a caller runs and that no import reads (pytest names each test)
_VOLATILE = ("PYTEST_CURRENT_TEST",)


def _zygote() -> _Zygote:
    """The caller's zygote, new if there is none yet or the environment or path changed (the
    ranks get the environment of the call in full; the zygote's matters to what it imported)."""
    env = {k: v for k, v in os.environ.items() if k not in _VOLATILE}
    path = list(sys.path)
    old = _ZYGOTES[0] if _ZYGOTES else None
    if old and (old.env != env or old.path != path or old.proc.poll() is not None):
        _ZYGOTES.pop().proc.kill()
    if not _ZYGOTES:
        _ZYGOTES.append(_Zygote(env, path))
    return _ZYGOTES[0]


def _serve() -> None:
    """The zygote's loop: fork a rank for each request on stdin, report pids and exits."""
    import torch.distributed  # noqa: F401  (the point: imported once, inherited by each rank)

    inp, out, children = sys.stdin.fileno(), sys.stdout.fileno(), {}
    os.write(out, b"ready\n")
    buffer = b""
    while True:
        for fd in select.select([inp, *children], [], [])[0]:
            if fd != inp:  # a rank ended: its pidfd is readable
                pid = children.pop(fd)
                os.close(fd)
                code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
                os.write(out, f"exit {pid} {code}\n".encode())
                continue
            chunk = os.read(inp, 65536)
            if not chunk:  # the caller ended
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                started, ready = os.pipe()
                pid = os.fork()
                if pid == 0:
                    os.close(started)
                    _forked_rank(json.loads(line), ready, [inp, out, *children])
                os.close(ready)
                os.read(started, 1)  # the rank leads its own session: killpg(pid) finds it
                os.close(started)
                children[os.pidfd_open(pid)] = pid
                os.write(out, f"pid {pid}\n".encode())


def _forked_rank(request: dict[str, Any], ready: int, inherited: list[int]) -> None:
    """In the forked rank: a session, the log as stdout and stderr, the rank's environment,
    working directory and import path, as ``python -m distsampling.tools.launch`` would have them."""
    code = 1
    try:
        os.setsid()
        os.write(ready, b"1")
        os.close(ready)
        log = os.open(request["log"], os.O_WRONLY | os.O_APPEND)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd in [log, *inherited[2:]]:  # the zygote's pipes are 0 and 1: replaced above
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        extra = request["env"].get("PYTHONPATH", "").split(os.pathsep)
        sys.path[:0] = [p for p in [os.getcwd(), *extra] if p and p not in sys.path]
        sys.argv = [__file__, *request["argv"]]
        if "numpy" in sys.modules:  # a fresh process draws its own global numpy seed
            sys.modules["numpy"].random.seed()
        _rank_main(*request["argv"])
        _exit_now()
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 1
    except BaseException:
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _rank_main(*sys.argv[1:])
    _exit_now()  # only after success: a failing rank raises, and its traceback is its report
