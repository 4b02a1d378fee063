r"""The cache's manifest: read and rewritten atomically under a lock; the directory kept true to it.

**Invariant.** From the moment a cache is created, its directory holds a complete
``manifest.json`` (the empty one first), and every file the manifest lists exists. A shard file
counts only once the manifest lists it. Every change is one transaction under the cache's lock
(``fcntl.flock`` on ``.lock``): read the manifest, change it, write it to a temporary file,
fsync, ``os.replace`` it over the old one, fsync the directory. Readers and a crash see the old
manifest or the new one, never half of one; files the transaction retires are deleted only after
the new manifest is in force.

So what a killed writer leaves behind can always be accounted for: a temporary file of a dead
process, an uncommitted shard (sequence number ``next_seq``, renamed but not yet listed) or an
evicted shard whose deletion had not happened yet (below ``next_seq``, unlisted). :func:`recover`
deletes exactly those. Anything else it cannot account for (a missing or damaged manifest, shard
files beyond ``next_seq``) is a :class:`ManifestError` naming the path, and nothing is deleted.

The lock is released when its holder ends, even killed: the kernel closes its file. A process
forked while another thread holds it (a ``fork`` producer, a DataLoader's workers) closes its
copy of that file at once, so that it never holds the parent's lock for its whole life.

References:
    the write-then-rename commit of LMDB / git objects; POSIX ``rename(2)`` atomicity;
    flock(2) (a lock belongs to the open file, which a forked child shares until it closes it).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import socket
import threading
from collections.abc import Iterator

from ._park import park

__all__ = [
    "ManifestError",
    "is_full_disk",
    "locked",
    "no_space",
    "read",
    "recover",
    "remove_temp_files",
    "tmp_path",
]

MANIFEST = "manifest.json"
SHARD = re.compile(r"^shard-(\d{10})\.npy$")
#: a temporary file: ``.tmp-<pid>-<host>-<what>``; only its own host can tell whether pid is alive
_TMP = re.compile(r"^\.tmp-(\d+)-(\w+)-")
_HOST = re.sub(r"\W", "_", socket.gethostname()) or "host"

# the lock files this process has open (fds); a fork waits while one is being opened, and the
# child closes its copies: a copy shares the parent's flock (one open file description), which
# would stay held as long as the child lives, though the parent's thread released it long ago
_LOCK_FDS: set[int] = set()
_OPENING = threading.Lock()


def _close_inherited_locks() -> None:
    """In a forked child: close the copies of the parent's lock files (not unlock: that would
    unlock the parent too)."""
    global _OPENING
    for fd in _LOCK_FDS:
        with contextlib.suppress(OSError):
            os.close(fd)
    _LOCK_FDS.clear()
    _OPENING = threading.Lock()  # held by the fork (before=...): a fresh one in the child


os.register_at_fork(
    before=lambda: _OPENING.acquire(),
    after_in_parent=lambda: _OPENING.release(),
    after_in_child=_close_inherited_locks,
)
_FIELDS = {"next_seq": int, "shards": list, "retired": list, "pins": dict, "ended": list}


class ManifestError(ValueError):
    """A cache's manifest is missing, truncated or damaged, or does not account for its shards."""


def _empty() -> dict:
    return {"next_seq": 0, "shards": [], "retired": [], "pins": {}, "ended": []}


def read(path: str) -> dict:
    """The manifest at ``path``; :class:`ManifestError` naming it if it is not a whole manifest."""
    try:
        with open(path) as f:
            manifest = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ManifestError(
            f"manifest {path} is truncated or corrupt ({err}): the cache cannot tell which shards "
            "are committed, so it changes nothing; restore the file from a backup, or move the "
            "cache directory away and start an empty one"
        ) from err
    bad = [
        k
        for k, kind in _FIELDS.items()
        if not isinstance(manifest, dict) or not isinstance(manifest.get(k), kind)
    ]
    if bad:
        raise ManifestError(
            f"manifest {path} is not a shard cache's manifest (missing or malformed: "
            f"{', '.join(bad)}); the cache changes nothing"
        )
    return manifest


@contextlib.contextmanager
def locked(
    root: str,
    *,
    create: bool = False,
    undo: list[str] | None = None,
    delete: list[str] | None = None,
) -> Iterator[dict]:
    """Hold the cache's lock; yield the manifest; write it back (atomically) if it changed.

    Args:
        root: the cache directory.
        create: write an empty manifest if there is none and the directory holds no shard file
            (a new cache). Without it, a missing manifest is a :class:`ManifestError`.
        undo: files removed if the new manifest cannot be written (a shard just renamed).
        delete: files removed once the new manifest is in force (retired shards).
    """
    path = os.path.join(root, MANIFEST)
    with _OPENING:  # no fork between the open and the note of it
        lock = os.open(os.path.join(root, ".lock"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o666)
        _LOCK_FDS.add(lock)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or its holder dies
        park("manifest")  # a test seam (see _park.py): a no-op unless a test asked
        if os.path.exists(path):
            manifest = read(path)
            before = json.dumps(manifest, sort_keys=True)
        else:
            shards = sorted(n for n in os.listdir(root) if SHARD.match(n))
            if not create or shards:
                raise ManifestError(_missing(path, shards))
            manifest, before = _empty(), None  # a new cache: its empty manifest is written now
        yield manifest
        if json.dumps(manifest, sort_keys=True) != before:
            _write(root, path, manifest, undo or [])
        for file in delete or []:  # unlisted now: safe to delete (or left for recover)
            with contextlib.suppress(FileNotFoundError):
                os.remove(file)
    finally:
        with _OPENING:  # forgotten and closed at once: a fork never closes a reused number
            if lock in _LOCK_FDS:  # (not: a child forked inside this block closed its copy)
                _LOCK_FDS.discard(lock)
                os.close(lock)  # the lock is released


def _missing(path: str, shards: list[str]) -> str:
    if shards:
        return (
            f"manifest {path} is missing, but the cache holds {len(shards)} shard files "
            f"({shards[0]} ...): without it the cache cannot tell which are committed, so it "
            "deletes none; restore the manifest, or move the shards away to start an empty cache"
        )
    return (
        f"manifest {path} is missing: it was deleted after the cache was created; "
        "open a new ShardCache on the directory to start an empty cache"
    )


def _write(root: str, path: str, manifest: dict, undo: list[str]) -> None:
    """Replace the manifest atomically; on failure remove ``undo`` and keep the old one."""
    tmp = tmp_path(root, MANIFEST)
    try:
        with open(tmp, "w") as f:
            json.dump(manifest, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)  # atomic: readers see the old or the new manifest
    except BaseException as err:
        for file in [tmp, *undo]:
            with contextlib.suppress(FileNotFoundError):
                os.remove(file)  # the old manifest stays in force, and is true
        if is_full_disk(err):
            raise no_space(root, f"the manifest ({len(json.dumps(manifest))} bytes)") from err
        raise
    _fsync_dir(root)  # the renames (shard, manifest) survive a power cut


def recover(root: str, m: dict) -> None:
    """Delete what killed writers left: dead processes' temporary files, unlisted shards.

    An unlisted shard below or at ``next_seq`` is an evicted shard not yet deleted, or one
    renamed but never committed: both are garbage. One beyond ``next_seq`` cannot come from this
    manifest's history (an older manifest restored?): :class:`ManifestError`, nothing deleted.
    """
    listed = {s["name"] for s in m["shards"] + m["retired"]}
    names = os.listdir(root)
    unknown = [n for n in names if SHARD.match(n) and int(SHARD.match(n)[1]) > m["next_seq"]]
    if unknown:
        raise ManifestError(
            f"manifest {os.path.join(root, MANIFEST)} cannot account for {len(unknown)} shard "
            f"files numbered beyond its next shard {m['next_seq']} ({sorted(unknown)[0]} ...); "
            "the cache deletes none: move them away, or restore the manifest that lists them"
        )
    for name in names:
        tmp = _TMP.match(name)
        dead = tmp and tmp[2] == _HOST and not _alive(int(tmp[1]))
        if dead or (SHARD.match(name) and name not in listed):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(root, name))


def remove_temp_files(root: str, pid: int) -> None:
    """Delete the temporary files of process ``pid`` of this host, which has ended."""
    prefix = f".tmp-{pid}-{_HOST}-"
    for name in os.listdir(root):
        if name.startswith(prefix):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(root, name))


def tmp_path(root: str, what: str) -> str:
    """A temporary file name that says which process on which host writes it."""
    return os.path.join(root, f".tmp-{os.getpid()}-{_HOST}-{what}")


def _fsync_dir(root: str) -> None:
    """Flush a directory's entries (its renames) to disk."""
    fd = os.open(root, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie, killed but not yet reaped, writes nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):  # Linux: state is the field after "(name)"
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    return True


def is_full_disk(err: BaseException) -> bool:
    """Whether a write failed for lack of space: ENOSPC, a quota, or a short write.

    A short write is an ``OSError`` without an errno (numpy's ``tofile`` raises
    ``OSError("262144 requested and 258016 written")``): the file system took what it had room for.
    """
    return isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT, None)


def no_space(root: str, what: str) -> OSError:
    """The error for a full disk: it names the cache, what did not fit, and the free bytes."""
    try:
        free = f"{os.statvfs(root).f_bavail * os.statvfs(root).f_frsize} bytes free"
    except OSError:
        free = "free space unknown"
    return OSError(
        errno.ENOSPC,
        f"no space left on the device for {what} in the cache {root} ({free}): the cache is "
        "unchanged; free space or lower capacity_bytes",
    )
