"""Pictures for docs/tutorials/sharded_mixture.md: which worker of which rank reads which run of
which shard, drawn from ShardedMixtureDataset.batch_at itself (no data read)."""

from __future__ import annotations

from _svg import grid

from distsampling import ShardedMixtureDataset

NAMES, SIZES, WEIGHTS = ["web", "code", "math"], [[40, 40, 40], [30, 30], [12]], [0.6, 0.3, 0.1]
WORLD, WORKERS, BATCH, STEPS = 2, 2, 10, 4


def render() -> dict[str, str]:
    sources = [(list(range(len(s))), s, lambda shard: iter(())) for s in SIZES]  # never read
    rows = []
    for r in range(WORLD):
        ds = ShardedMixtureDataset(
            sources, WEIGHTS, BATCH, num_replicas=WORLD, rank=r, seed=1, num_workers=WORKERS
        )
        for w in range(WORKERS):  # worker w yields the steps s = w (mod WORKERS), in order
            cells = [
                (offset, k, shard % 2 == 1)  # an odd shard dashed: a new shard shows
                for step in range(w, STEPS, WORKERS)
                for k, shard, offset in ds.batch_at(step)[r]
            ]
            rows.append((f"rank {r} worker {w}", cells))
    title = (
        f"steps 0-{STEPS - 1}, {WORLD} ranks x {WORKERS} workers, micro-batch {BATCH}: "
        "each reader's samples in order (offset in the shard; odd shards dashed)"
    )
    return {"sharded_mixture-readers.svg": grid(rows, title, NAMES)}
