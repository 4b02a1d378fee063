"""Properties of distsampling.growing.manifest: a whole manifest from creation on; nothing unaccounted deleted.

Every test damages a cache the way a user or a crash can (a truncated or deleted manifest, a
writer killed at a chosen instant, a zombie writer) and checks the error names the path and that
no shard the cache cannot account for is deleted.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from distsampling import ManifestError, ShardCache
from distsampling.growing import manifest
from distsampling.growing.manifest import _HOST

RAM_DIR = "/dev/shm" if os.path.isdir("/dev/shm") else None


def make_shard(seq: int, k: int = 2) -> np.ndarray:
    return np.full((k, 2), seq, np.int32)


@pytest.fixture
def root():
    with tempfile.TemporaryDirectory(dir=RAM_DIR) as path:
        yield path


def shard_files(root: str) -> list[str]:
    return sorted(n for n in os.listdir(root) if n.startswith("shard-"))


def test_a_new_cache_writes_its_empty_manifest_at_once(root):
    """Invariant: from creation on, the directory holds a whole manifest listing no shard."""
    ShardCache(root, capacity_bytes=10**6)
    with open(os.path.join(root, "manifest.json")) as f:
        m = json.load(f)
    assert (m["next_seq"], m["shards"], m["retired"], m["pins"]) == (0, [], [], {})


@given(data=st.data())
def test_a_truncated_manifest_raises_naming_its_path_and_deletes_nothing(data):
    """Invariant: a manifest cut short anywhere is a ManifestError naming it, on open and on
    every call; every shard file stays, and no temporary file is left."""
    with tempfile.TemporaryDirectory(dir=RAM_DIR) as root:
        cache = ShardCache(root, capacity_bytes=10**6)
        for seq in range(3):
            cache.add(make_shard(seq))
        cache.snapshot(0)
        path = os.path.join(root, "manifest.json")
        keep = data.draw(st.integers(0, os.path.getsize(path) - 1), label="bytes kept")
        with open(path, "r+b") as f:
            f.truncate(keep)
        before = shard_files(root)
        message = f"manifest {path} is (truncated or corrupt|not a shard cache's manifest)"
        with pytest.raises(ManifestError, match=message):
            ShardCache(root, capacity_bytes=10**6)
        for call in (cache.shards, lambda: cache.add(make_shard(3)), lambda: cache.snapshot(1)):
            with pytest.raises(ManifestError, match=message):
                call()
        assert shard_files(root) == before
        assert not [n for n in os.listdir(root) if n.startswith(".tmp-")]


def test_a_deleted_manifest_raises_naming_its_path_and_deletes_no_shard(root):
    """Invariant: shards without a manifest are never silently deleted; the error names the path."""
    cache = ShardCache(root, capacity_bytes=10**6)
    for seq in range(3):
        cache.add(make_shard(seq))
    path = os.path.join(root, "manifest.json")
    os.remove(path)
    with pytest.raises(
        ManifestError,
        match=rf"manifest {path} is missing, but the cache holds 3 shard files "
        r"\(shard-0000000000.npy \.\.\.\): without it the cache cannot tell which are committed, "
        "so it deletes none",
    ):
        ShardCache(root, capacity_bytes=10**6)
    with pytest.raises(ManifestError, match=f"manifest {path} is missing"):
        cache.add(make_shard(3))  # the cache already open says so too
    assert shard_files(root) == [f"shard-{seq:010d}.npy" for seq in range(3)]


def test_a_manifest_deleted_from_an_empty_cache_raises_while_it_is_open(root):
    """Invariant: an open cache never silently starts over; reopening starts an empty cache."""
    cache = ShardCache(root, capacity_bytes=10**6)
    os.remove(os.path.join(root, "manifest.json"))
    with pytest.raises(ManifestError, match="it was deleted after the cache was created"):
        cache.snapshot(0)
    assert ShardCache(root, capacity_bytes=10**6).shards() == []


def test_shards_beyond_the_manifests_history_are_refused_not_deleted(root):
    """Invariant: a shard numbered past next_seq cannot be accounted for: an error, and it stays."""
    cache = ShardCache(root, capacity_bytes=10**6)
    cache.add(make_shard(0))
    stray = os.path.join(root, "shard-0000000007.npy")
    np.save(stray, make_shard(7))
    with pytest.raises(
        ManifestError,
        match=r"cannot account for 1 shard files numbered beyond its next shard 1 "
        r"\(shard-0000000007.npy \.\.\.\); the cache deletes none",
    ):
        ShardCache(root, capacity_bytes=10**6)
    assert os.path.exists(stray)


def _add_and_die_before_the_manifest(root: str) -> None:
    """Child: create a cache, add its first shard, SIGKILL itself right before the manifest write."""
    cache = ShardCache(root, capacity_bytes=10**6)
    replace = os.replace

    def kill_before_the_manifest(src, dst):
        if os.path.basename(dst) == "manifest.json" and os.listdir(root).count(
            "shard-0000000000.npy"
        ):
            os.kill(os.getpid(), signal.SIGKILL)  # the shard is renamed, the manifest not written
        replace(src, dst)

    manifest.os.replace = kill_before_the_manifest
    cache.add(make_shard(0))


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL is POSIX")
def test_a_writer_killed_between_its_first_shard_and_its_first_manifest_write(root):
    """Invariant: kill -9 after the first shard's rename but before its manifest commit leaves the
    empty manifest in force; the next cache deletes the uncommitted shard and starts empty."""
    child = mp.get_context("fork").Process(target=_add_and_die_before_the_manifest, args=(root,))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == -signal.SIGKILL
    assert shard_files(root) == ["shard-0000000000.npy"]  # renamed, never listed
    with open(os.path.join(root, "manifest.json")) as f:
        assert json.load(f)["shards"] == []  # the manifest written when the cache was created
    reopened = ShardCache(root, capacity_bytes=10**6)  # no ManifestError: it accounts for it
    assert reopened.shards() == [] and shard_files(root) == []
    assert not [n for n in os.listdir(root) if n.startswith(".tmp-")]
    assert os.path.basename(reopened.add(make_shard(1))) == "shard-0000000000.npy"


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="a zombie is seen in /proc (Linux)")
def test_a_zombie_writers_temporary_file_is_deleted_by_the_next_cache(root):
    """Invariant: a writer killed but not yet reaped (a zombie) writes nothing: its temporary file
    is garbage, deleted when a cache is opened."""
    ShardCache(root, capacity_bytes=10**6)
    writer = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import os, sys, time\n"
            f"open(os.path.join({root!r}, f'.tmp-{{os.getpid()}}-{_HOST}-ab.npy'), 'wb').write(b'half')\n"
            "print('written', flush=True)\n"
            "time.sleep(600)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline() == "written\n"
        os.kill(writer.pid, signal.SIGKILL)  # not waited for: a zombie until reaped
        deadline = time.monotonic() + 60
        while _state(writer.pid) != "Z" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert _state(writer.pid) == "Z"
        ShardCache(root, capacity_bytes=10**6)
        assert not [n for n in os.listdir(root) if n.startswith(".tmp-")]
    finally:
        writer.kill()
        writer.wait(timeout=60)
        writer.stdout.close()
