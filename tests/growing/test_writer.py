"""Properties of distsampling.growing.writer: a shard is written whole with its crc32, or not at all.

The full-disk test runs the cache on a real 4 MiB tmpfs, mounted in a private mount namespace
(``unshare -m`` as root, ``unshare -rm`` as a user), so the mount vanishes with the process.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zlib

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distsampling.growing.cache import ShardCache
from strategies import shard_dtypes, shard_samples

RAM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None
SRC = os.path.join(os.path.dirname(__file__), "..", "..", "src")

# --- a real full disk ---------------------------------------------------------------------------

#: run in a private mount namespace: fill a 4 MiB tmpfs with 1 MiB shards, then with a Producer
FILL_A_SMALL_DISK = r"""
import json, os, subprocess, sys
import numpy as np
from distsampling import Producer, ShardCache

small, remote = sys.argv[1], sys.argv[2]
subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", small], check=True)
os.mkdir(f"{small}/cache")
cache = ShardCache(f"{small}/cache", capacity_bytes=1 << 30)
out = {"committed": [], "data": []}
for k in range(10):
    data = np.full((64, 4096), k, np.float32)  # 1 MiB + 128 bytes of header
    try:
        out["committed"].append(os.path.basename(cache.add(data)))
    except OSError as err:
        out["errno"], out["error"] = err.errno, str(err)
        break
out["files"] = sorted(os.listdir(f"{small}/cache"))
snap = cache.snapshot(0)
out["read"] = [float(snap.load(k)[0, 0]) for k in range(len(snap.shards))]  # crc32 checked
out["listed"] = [os.path.basename(p) for p, _ in snap.shards]
os.mkdir(f"{small}/other")  # a producer filling what is left of the disk
producer = Producer(remote, ShardCache(f"{small}/other", capacity_bytes=1 << 30),
                    samples_per_shard=64, context="fork")
try:
    producer.join(timeout=120)
except RuntimeError as err:
    out["producer"] = str(err)
out["producer_files"] = sorted(os.listdir(f"{small}/other"))
print(json.dumps(out))
"""


def _namespace() -> list[str]:
    """A command prefix that may mount a tmpfs in a private mount namespace; skip if none can."""
    tried = []
    for prefix in (["unshare", "-m"], ["unshare", "-rm"]):  # as root; in a user namespace
        if shutil.which(prefix[0]) is None:
            tried.append(f"{prefix[0]} not installed")
            continue
        probe = subprocess.run(
            [*prefix, "mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", tempfile.gettempdir()],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if probe.returncode == 0:
            return prefix
        tried.append(f"{' '.join(prefix)} mount: {probe.stderr.strip()}")
    pytest.skip(f"cannot mount a 4 MiB tmpfs to fill ({'; '.join(tried)})")


def test_a_full_file_system_refuses_a_shard_naming_the_cache_and_the_bytes(tmp_path):
    """Invariant: on a real full disk, add() raises OSError(ENOSPC) naming the cache and the
    shard's bytes; committed shards stay listed and intact, no temporary file is left, and
    Producer.join re-raises the same words."""
    prefix = _namespace()
    small, remote = tmp_path / "small", tmp_path / "remote"
    small.mkdir(), remote.mkdir()
    np.save(remote / "f0.npy", np.ones((64, 4096), np.float32))
    env = {**os.environ, "PYTHONPATH": os.path.abspath(SRC)}
    run = subprocess.run(
        [*prefix, sys.executable, "-c", FILL_A_SMALL_DISK, str(small), str(remote)],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout.splitlines()[-1])
    shard = 128 + 64 * 4096 * 4
    assert out["errno"] == errno.ENOSPC
    assert out["error"].startswith(
        f"[Errno 28] no space left on the device for a shard of {shard} bytes in the cache "
        f"{small}/cache ("
    ), out["error"]
    assert "the cache is unchanged" in out["error"]
    assert 1 <= len(out["committed"]) < 4  # 4 MiB hold at most 3 of them
    assert out["listed"] == out["committed"]
    assert out["read"] == [float(k) for k in range(len(out["committed"]))]
    assert out["files"] == sorted([".lock", "manifest.json", *out["committed"]])  # no temp file
    assert out["producer"].startswith(
        "the producer process failed: OSError: [Errno 28] no space left on the device for a "
        f"shard of {shard} bytes in the cache {small}/other ("
    ), out["producer"]
    assert not [n for n in out["producer_files"] if n.startswith(".tmp-")]


# --- what a shard may hold ----------------------------------------------------------------------


@given(k=shard_samples, dtype=shard_dtypes, big_endian=st.booleans())
def test_a_shard_holds_the_samples_in_native_byte_order_with_their_crc32(k, dtype, big_endian):
    """Invariant: the shard read back equals the samples (big-endian ones converted to native
    order), and the manifest's crc32 is that of its sample bytes."""
    samples = (np.arange(k * 3) % 7).reshape(k, 3).astype(dtype)
    given_samples = samples.astype(samples.dtype.newbyteorder(">")) if big_endian else samples
    with tempfile.TemporaryDirectory(dir=RAM_DIR) as root:
        cache = ShardCache(root, capacity_bytes=10**6)
        cache.add(given_samples)
        snap = cache.snapshot(0)
        back = snap.load(0)
        assert back.dtype.isnative and back.dtype == samples.dtype
        np.testing.assert_array_equal(back, samples)
        assert snap.checksums == (zlib.crc32(np.ascontiguousarray(samples).tobytes()),)
        assert (snap.sample_shape, snap.dtype) == ((3,), samples.dtype.str)
        cache.add(samples)  # the same kind of sample, whichever byte order it came in
        assert len(cache.shards()) == 2


@pytest.mark.parametrize(
    "bad",
    [
        np.array([["ab"]]),  # unicode strings
        np.array([[b"ab"]]),  # byte strings
        np.array([[None]], dtype=object),
        np.zeros((2,), dtype=[("x", "<f4"), ("y", "<i4")]),  # records (void)
        np.zeros((2, 1), dtype="datetime64[s]"),
        np.zeros((2, 1), dtype="timedelta64[s]"),
    ],
)
def test_samples_that_are_not_numbers_are_refused_at_add(bad):
    """Invariant: add() refuses what a memory map cannot hand to torch, naming samples and the
    dtype; the cache stays empty."""
    with tempfile.TemporaryDirectory(dir=RAM_DIR) as root:
        cache = ShardCache(root, capacity_bytes=10**6)
        with pytest.raises(
            ValueError,
            match=r"samples should be a numpy array of numbers \(bool, int, uint, float or "
            r"complex\) of shape \(k, \*sample_shape\) with k >= 1, but got samples="
            + re.escape(f"array(shape={bad.shape}, dtype={bad.dtype.str})"),
        ):
            cache.add(bad)
        assert sorted(os.listdir(root)) == [".lock", "manifest.json"] and cache.shards() == []
