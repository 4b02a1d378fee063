r"""Run a function on every rank of a real ``torch.distributed`` group, and never hang.

:func:`run_world` is a tiny ``torchrun`` for tests and demos: it starts ``world_size`` fresh
Python processes, joins them in one process group (gloo on localhost, a free port), calls the
same function in each, and returns what every rank returned, in rank order. If a rank fails,
or the whole run outlasts ``timeout``, every rank is killed (their whole process groups) and
the error shows each rank's last output: no orphan processes, no hung test.

The function is named by import path (``"package.module:function"``) rather than pickled, so
each rank imports it fresh, exactly as ``torchrun script.py`` would run a script.

References:
    torch/distributed/run.py (torchrun: the environment variables set here are the same)
"""

from __future__ import annotations

import gc
import importlib
import math
import numbers
import os
import pickle
import signal
import socket
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from ._validate import check_int

__all__ = ["free_port", "run_world"]


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
            cmd = [
                sys.executable,
                "-m",
                "distsampling.launch",
                target,
                str(work),
                backend,
                str(timeout),
            ]
            # a new session per rank: killpg then takes the rank and anything it started
            procs.append(
                subprocess.Popen(
                    cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
                )
            )
            logs.append(log)
        try:
            failed = _wait_all(procs, time.monotonic() + timeout)
        finally:
            for p in procs:  # no orphans, whatever happened
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            outputs = []
            for log in logs:
                log.seek(0)
                outputs.append(log.read().decode(errors="replace")[-3000:])
                log.close()
        if failed is not None:
            tails = "\n".join(
                f"--- rank {r} (exit {p.returncode}):\n{out}"
                for r, (p, out) in enumerate(zip(procs, outputs))
            )
            what = (
                f"did not finish within timeout={timeout}s"
                if failed == "timeout"
                else f"rank {failed} failed"
            )
            raise (TimeoutError if failed == "timeout" else RuntimeError)(
                f"run_world({target!r}, world_size={world_size}): {what}\n{tails}"
            )
        return [
            pickle.loads((work / f"result{rank}.pkl").read_bytes()) for rank in range(world_size)
        ]


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


if __name__ == "__main__":
    _rank_main(*sys.argv[1:])
