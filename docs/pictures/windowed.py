"""Pictures for docs/tutorials/windowed.md, drawn from SequentialWindowedDataset itself."""

from __future__ import annotations

from _svg import CELL, GAP, LABEL, PALETTE, document, rect, text

from distsampling import DistributedSampler, SequentialWindowedDataset, window_indices

SIZE, WINDOW, WORLD, EPOCHS = 10, 3, 2, 2


def plan(epoch: int) -> tuple[int, list[list[list[int]]]]:
    """``(offset, windows[rank])``: each rank's windows (lists of sample indices) in read order."""
    dataset = SequentialWindowedDataset(SIZE, WINDOW, seed=0)
    dataset.set_epoch(epoch)
    per_rank = []
    for rank in range(WORLD):
        sampler = DistributedSampler(dataset, WORLD, rank, seed=0)
        sampler.set_epoch(epoch)
        starts = [dataset[i] for i in sampler]
        per_rank.append(window_indices(starts, WINDOW, SIZE).tolist())
    return dataset.offset, per_rank


def epochs_picture() -> str:
    """Per epoch: the data coloured by the rank reading it, then each rank's windows as runs."""
    body = [
        text(
            10,
            20,
            f"{SIZE} samples, window {WINDOW}, {WORLD} ranks, two epochs",
            13,
            "start",
            "bold",
        )
    ]
    y = 36
    for epoch in range(EPOCHS):
        offset, per_rank = plan(epoch)
        readers: dict[int, list[int]] = {}
        for rank, windows in enumerate(per_rank):
            for i in (i for w in windows for i in w):
                readers.setdefault(i, []).append(rank)
        body.append(text(10, y + CELL * 0.68, f"epoch {epoch}: data"))
        for i in range(SIZE):
            x = LABEL + i * (CELL + GAP)
            # a sample read twice (the wrapping window overlaps window 0) is drawn dashed
            body.append(rect(x, y, CELL, CELL, PALETTE[readers[i][0]], len(readers[i]) > 1))
            body.append(text(x + CELL / 2, y + CELL * 0.68, i, 11, "middle"))
        body.append(text(LABEL + SIZE * (CELL + GAP) + 8, y + CELL * 0.68, f"offset {offset}"))
        y += CELL + GAP + 4
        for rank, windows in enumerate(per_rank):
            body.append(text(10, y + CELL * 0.68, f"  rank {rank} reads"))
            x = LABEL
            for w in windows:  # one run of WINDOW cells per window, a gap between windows
                for i in w:
                    body.append(rect(x, y, CELL, CELL, PALETTE[rank]))
                    body.append(text(x + CELL / 2, y + CELL * 0.68, i, 11, "middle"))
                    x += CELL
                x += 3 * GAP + 6
            y += CELL + GAP
        y += 14
    for rank in range(WORLD):
        body.append(rect(10 + rank * 110, y, 14, 14, PALETTE[rank]))
        body.append(text(30 + rank * 110, y + 12, f"rank {rank}"))
    body.append(rect(10 + WORLD * 110, y, 14, 14, "#ffffff", dashed=True))
    body.append(text(30 + WORLD * 110, y + 12, "read twice (the wrapping window)"))
    width = max(LABEL + SIZE * (CELL + GAP) + 90, 30 + WORLD * 110 + 260)
    return document(width, y + 30, body, "Windows on ranks over two epochs")


def render() -> dict[str, str]:
    return {"windowed-epochs.svg": epochs_picture()}
