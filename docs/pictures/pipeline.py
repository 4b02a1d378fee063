"""Pictures for docs/tutorials/pipeline.md, drawn from the pipeline's own samplers."""

from __future__ import annotations

from _svg import CELL, GAP, LABEL, PALETTE, document, rect, text

from distsampling import IterationBasedBatchSampler, make_batch_data_sampler, make_data_sampler

# the twelve images of the tutorial's examples: height / width, below 1 is landscape
RATIOS = [0.75, 1.33, 0.75, 0.56, 1.5, 0.75, 1.33, 0.66, 0.75, 1.25, 0.75, 1.5]
BATCH_GAP = 12  # the space between two batches of a row


def shape(i: int) -> int:
    """Colour of image i: 0 landscape, 1 portrait (the group of bin edges [1.0])."""
    return int(RATIOS[i] >= 1)


def rows_picture(rows: list[tuple[str, list[list[tuple[object, int]]]]], title: str, legend) -> str:
    """Rows of batches: ``(label, [[(cell text, colour index), ...] per batch])``."""
    body, y, width = [text(10, 20, title, 13, weight="bold")], 36, 0
    for label, batches in rows:
        body.append(text(10, y + CELL * 0.68, label))
        x = LABEL
        for batch in batches:
            for s, colour in batch:
                body.append(rect(x, y, CELL, CELL, PALETTE[colour % len(PALETTE)]))
                body.append(text(x + CELL / 2, y + CELL * 0.68, s, 11, "middle"))
                x += CELL + GAP
            x += BATCH_GAP
        width, y = max(width, x), y + CELL + GAP + 4
    y += 10
    for k, (name, colour) in enumerate(legend):
        body.append(rect(10 + k * 190, y, 14, 14, PALETTE[colour % len(PALETTE)]))
        body.append(text(30 + k * 190, y + 12, name))
    width = max(width + 20, 10 + len(legend) * 190, 20 + len(title) * 8)  # 13px monospace
    return document(width, y + 30, body, title)


def chain() -> str:
    """Dataset -> each rank's share -> each rank's grouped batches (epoch 0)."""
    rows = [("dataset", [[(i, shape(i)) for i in range(len(RATIOS))]])]
    for rank in range(2):
        sampler = make_data_sampler(RATIOS, True, True, num_replicas=2, rank=rank)
        rows.append((f"rank {rank} reads", [[(i, shape(i)) for i in sampler]]))
        batches = make_batch_data_sampler(RATIOS, sampler, [1.0], batch_size=2)
        rows.append((f"{len(batches)} batches", [[(i, shape(i)) for i in b] for b in batches]))
    return rows_picture(
        rows,
        "12 images, 2 ranks, aspect_grouping=[1.0], batch_size=2: one shape per batch",
        [("landscape (h/w < 1)", 0), ("portrait (h/w >= 1)", 1)],
    )


def iterations(num_iters: int = 8) -> str:
    """Each rank's first num_iters batches, coloured by the pass (epoch) they come from."""
    rows = []
    for rank in range(2):
        sampler = make_data_sampler(RATIOS, True, True, num_replicas=2, rank=rank)
        per_pass = make_batch_data_sampler(RATIOS, sampler, [1.0], batch_size=2)
        run, epoch = [], 0
        while len(run) < num_iters:  # tag each batch with its pass, as the sampler below reads it
            sampler.set_epoch(epoch)
            run += [(b, epoch) for b in per_pass]
            epoch += 1
        assert [b for b, _ in run[:num_iters]] == list(
            IterationBasedBatchSampler(per_pass, num_iters)
        )
        rows.append((f"rank {rank}", [[(i, p + 2) for i in b] for b, p in run[:num_iters]]))
    return rows_picture(
        rows,
        f"num_iters={num_iters}: every rank yields {num_iters} batches; passes end at different times",
        [(f"pass {p}", p + 2) for p in range(3)],
    )


def render() -> dict[str, str]:
    return {"pipeline-chain.svg": chain(), "pipeline-iterations.svg": iterations()}
