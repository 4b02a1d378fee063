"""Benchmarks: ours against torch (or the users' own versions) side by side, reported as ratios.

Run them with ``make bench`` (or ``python -m benchmarks [stem ...] [--large] [--repeats K]``).
Each ``bench_<stem>.py`` module has ``suite(large: bool) -> list[Comparison]``; every contender
of every comparison runs in a **fresh process**, ``--repeats`` times, and the median is kept.
Results are printed and written to ``benchmarks/results/<stem>.md``, which
``docs/benchmarks.md`` includes: the figures in the docs are the last run's.
"""
