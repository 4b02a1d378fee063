"""The DDP template (docs/examples/ddp_template.py) runs as its page says: under torchrun."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "docs" / "examples" / "ddp_template.py"
pytestmark = [pytest.mark.multiprocess, pytest.mark.xdist_group("worlds")]


def test_the_template_is_at_most_40_lines():
    """Invariant: the template stays short enough to read in one screen."""
    assert len(TEMPLATE.read_text().splitlines()) <= 40


def test_the_template_trains_under_torchrun_on_two_cpu_ranks():
    """Invariant: ``torchrun --standalone --nproc_per_node=2`` runs the template to the end on
    gloo; every epoch the two ranks read all 1000 samples between them, and the loss falls."""
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone"]
    command += ["--nproc_per_node=2", str(TEMPLATE)]
    proc = subprocess.Popen(
        command,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: a timeout kills torchrun and its ranks
    )
    try:
        out, err = proc.communicate(timeout=180)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"torchrun did not finish in 180 s:\n{out}\n{err}")
    assert proc.returncode == 0, f"{out}\n{err}"
    epochs = re.findall(r"^epoch (\d+): loss ([\d.]+) over (\d+) samples$", out, re.M)
    assert [int(e) for e, _, _ in epochs] == [0, 1, 2], out
    assert all(int(n) == 1000 for _, _, n in epochs), out
    losses = [float(loss) for _, loss, _ in epochs]
    assert losses[-1] < losses[0], out
