"""Picture for docs/tutorials/sharded.md, drawn from ShardedIterableDataset itself."""

from __future__ import annotations

from _svg import CELL, GAP, LABEL, PALETTE, document, rect, text

from distsampling import ShardedIterableDataset

SHARDS, SIZES = ["a", "b", "c", "d", "e", "f"], [5, 2, 7, 0, 3, 4]
WORLD, WORKERS, EPOCH = 2, 2, 0


def read(shard: str) -> list[str]:
    """Samples named by shard and index: "c3" is sample 3 of shard c."""
    return [f"{shard}{j}" for j in range(SIZES[SHARDS.index(shard)])]


def split_picture() -> str:
    """The epoch's stream (shards in their epoch order), then each worker of each rank's range."""
    datasets = [ShardedIterableDataset(SHARDS, SIZES, read, num_replicas=WORLD, rank=r, seed=0)
                for r in range(WORLD)]  # fmt: skip
    for ds in datasets:
        ds.set_epoch(EPOCH)
    # the stream: what rank 0 to W - 1 read in turn, positions 0 .. W * L - 1
    ranges = [[list(ds.iter_worker(k, WORKERS)) for k in range(WORKERS)] for ds in datasets]
    stream = [x for rank in ranges for worker in rank for x in worker]
    total = sum(SIZES)
    step = CELL + GAP
    title = (
        f"{len(SHARDS)} shards of {SIZES} samples ({total}), {WORLD} ranks x {WORKERS} workers, "
        f"epoch {EPOCH}"
    )
    body = [text(10, 20, title, 13, weight="bold")]
    y = 40
    body.append(text(10, y + CELL * 0.68, "epoch's stream"))
    for p, name in enumerate(stream):  # coloured by the rank that reads it; padding dashed
        x = LABEL + p * step
        body.append(rect(x, y, CELL, CELL, PALETTE[p // len(datasets[0])], p >= total))
        body.append(text(x + CELL / 2, y + CELL * 0.68, name, 11, "middle"))
        if name.endswith("0") and p < total:  # a shard starts: its name above
            body.append(text(x + 2, y - 4, f"shard {name[0]}", 10))
    y += CELL + 18
    p = 0
    for rank, workers in enumerate(ranges):
        for k, got in enumerate(workers):
            body.append(text(10, y + CELL * 0.68, f"rank {rank} worker {k}"))
            opened = sorted({name[0] for name in got})
            for name in got:  # at its stream position: each worker's range is contiguous
                x = LABEL + p * step
                body.append(rect(x, y, CELL, CELL, PALETTE[4 + k], p >= total))
                body.append(text(x + CELL / 2, y + CELL * 0.68, name, 11, "middle"))
                p += 1
            note = f"opens {', '.join(opened)}" if opened else "opens nothing"
            body.append(text(LABEL + p * step + 6, y + CELL * 0.68, note, 11))
            y += CELL + GAP
        y += 8
    y += 6
    legend = [(PALETTE[r], f"rank {r}") for r in range(WORLD)]
    legend += [(PALETTE[4 + k], f"worker {k}") for k in range(WORKERS)]
    for i, (colour, name) in enumerate(legend):
        body.append(rect(10 + i * 100, y, 14, 14, colour))
        body.append(text(30 + i * 100, y + 12, name))
    body.append(rect(10 + len(legend) * 100, y, 14, 14, "#ffffff", dashed=True))
    body.append(text(30 + len(legend) * 100, y + 12, "padding (the stream's head again)"))
    width = max(LABEL + len(stream) * step + 150, 30 + len(legend) * 100 + 280, len(title) * 8 + 20)
    return document(width, y + 30, body, "Shards split over ranks, then over workers")


def render() -> dict[str, str]:
    return {"sharded-split.svg": split_picture()}
