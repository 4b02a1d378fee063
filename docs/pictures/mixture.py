"""Pictures for docs/tutorials/mixture.md: a small mixture's steps, coloured by source, drawn
from MixtureSampler.batch_at itself."""

from __future__ import annotations

from _svg import grid

from distsampling import MixtureSampler

SIZES, WEIGHTS, WORLD, BATCH, STEPS = [12, 6, 4], [0.5, 0.3, 0.2], 2, 5, 6


def render() -> dict[str, str]:
    sampler = MixtureSampler(SIZES, WEIGHTS, BATCH, num_replicas=WORLD, rank=0, seed=0)
    offsets = [sum(SIZES[:k]) for k in range(len(SIZES))]
    rows = []
    for step in range(STEPS):
        cells: list[tuple[object, int, bool]] = []
        for rank, batch in enumerate(sampler.batch_at(step)):
            if rank:
                cells.append((None, 0, False))  # a gap between the ranks' micro-batches
            for index in batch:
                k = max(k for k, offset in enumerate(offsets) if offset <= index)
                cells.append((index - offsets[k], k, False))
        rows.append((f"step {step}", cells))
    shares = " / ".join(map(str, WEIGHTS))
    title = f"weights {shares}, {WORLD} ranks x micro-batch {BATCH}: rank 0 | rank 1 (a source's sample)"
    legend = [f"source {k}" for k in range(len(SIZES))]
    return {"mixture-steps.svg": grid(rows, title, legend)}
