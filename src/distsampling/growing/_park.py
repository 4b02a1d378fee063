r"""A private test seam: the producer process stops ("parks") at a named point until it is killed.

The property "a producer killed at any instant never hangs its parent" is tested by killing the
producer exactly where it uses what it shares with its parent: its counters, its stop flag, the
pipe of its error report, the cache's lock. Timing a kill to land there would be luck; so the
producer process passes by :func:`park` at each such point, and a test that sets

    ``_DISTSAMPLING_PARK=<point>:<file>``

in the environment before it starts a :class:`~distsampling.growing.producer.Producer` makes
the process, at ``park("<point>")``, write its pid to ``<file>`` (atomically: a rename) and
sleep until it is killed. The test waits for the file, sends SIGKILL, and calls the parent.

Only the producer process parks: its target calls :func:`arm`, which reads the variable; the
training process that set it, and passes by the same points (it takes the cache's lock too),
never parks. Without the variable, :func:`park` costs one comparison.

Points (where each is, in the producer process):

- ``stop``: reading the stop flag (before each shard);
- ``retried``: reading its count of retried requests (after each sample read);
- ``written``: updating its count of committed shards (after each commit);
- ``manifest``: holding the cache's ``flock``, before the manifest is written (each commit);
- ``errors``: its error report sent down the pipe, before it exits (a failed producer).

References:
    the property it serves: tests/growing/test_faults.py.
"""

from __future__ import annotations

import os
import time

__all__: list[str] = []  # private: nothing here is public

ENV = "_DISTSAMPLING_PARK"
POINTS = ("stop", "retried", "written", "manifest", "errors")
_armed: tuple[str, str] | None = None  # (point, file) in an armed producer process, else None


def arm() -> None:
    """In the producer process: read ``_DISTSAMPLING_PARK``, if set, to park at its point."""
    global _armed
    value = os.environ.get(ENV)
    if value:
        point, _, path = value.partition(":")  # "written:/tmp/x/parked"
        if point not in POINTS or not path:
            raise ValueError(
                f"{ENV} should be <point>:<file> with a point of {POINTS}, but got {value!r}"
            )
        _armed = (point, path)


def park(point: str) -> None:
    """At ``point``: if this process was armed for it, say so in the file and sleep until killed."""
    if _armed is None or _armed[0] != point:
        return
    path = _armed[1]
    with open(path + ".tmp", "w") as f:  # the whole pid, or no file: the test polls for it
        f.write(str(os.getpid()))
    os.replace(path + ".tmp", path)
    while True:  # parked: holding whatever the point holds, until SIGKILL
        time.sleep(3600)
