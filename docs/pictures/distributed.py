"""Pictures for docs/tutorials/distributed.md, drawn from distsampling.DistributedSampler itself."""

from __future__ import annotations

from _svg import grid

from distsampling import DistributedSampler


def epoch_rows(
    size: int, world: int, epochs: int, shuffle: bool, drop_last: bool = False, label: str = "epoch"
) -> list:
    """One row per epoch: the padded epoch in position order, each cell coloured by its rank."""
    rows = []
    for epoch in range(epochs):
        per_rank = []
        for rank in range(world):
            s = DistributedSampler(range(size), world, rank, shuffle=shuffle, drop_last=drop_last)
            s.set_epoch(epoch)
            per_rank.append(list(s))
        total = sum(map(len, per_rank))
        # position p of the padded epoch is read by rank p % W as its (p // W)-th index
        cells = [(per_rank[p % world][p // world], p % world, p >= size) for p in range(total)]
        rows.append((f"{label} {epoch}" if epochs > 1 else label, cells))
    return rows


def render() -> dict[str, str]:
    legend = [f"rank {r}" for r in range(3)]
    return {
        "distributed-epochs.svg": grid(
            epoch_rows(10, 2, 2, shuffle=True),
            "10 samples, 2 ranks, shuffle=True: position p goes to rank p % 2",
            legend[:2],
        ),
        "distributed-padding.svg": grid(
            epoch_rows(10, 3, 1, shuffle=False, label="padded")
            + epoch_rows(10, 3, 1, shuffle=False, drop_last=True, label="drop_last"),
            "10 samples, 3 ranks: padded (dashed cells repeat the head) / drop_last=True",
            legend,
        ),
    }
