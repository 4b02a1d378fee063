"""Hypothesis profiles and shared fixtures.

Profiles (pick one with ``HYPOTHESIS_PROFILE=...``; ``make test`` uses ``ci``):

- ``ci``: a fixed example budget, no deadline, derandomized: the same examples on every run, so a
  red CI is reproducible and a green one is not luck.
- ``dev``: a smaller budget and a random seed, for quick local loops.
- ``thorough``: ten times the ``ci`` budget with a random seed, for a deep search before a release.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

_SUPPRESS = [HealthCheck.too_slow, HealthCheck.differing_executors]

settings.register_profile(
    "ci", max_examples=100, deadline=None, derandomize=True, suppress_health_check=_SUPPRESS
)
settings.register_profile(
    "dev", max_examples=30, deadline=None, print_blob=True, suppress_health_check=_SUPPRESS
)
settings.register_profile(
    "thorough", max_examples=1000, deadline=None, print_blob=True, suppress_health_check=_SUPPRESS
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
