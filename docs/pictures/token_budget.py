"""Pictures for docs/tutorials/token_budget.md: one bar per rank per step, its height the cost.

Left of each row, the ranks batch their own shares (docs/examples/token_budget_hang.py): the
counts differ, and a rank with no batch left waits in the all-reduce forever. Below, the plan of
TokenBudgetBatchSampler (docs/examples/token_budget_plan.py): every rank a batch at every step,
of about the same cost.
"""

from __future__ import annotations

import torch.utils.data as tud
from _svg import PALETTE, document, rect, text

from distsampling import TokenBudgetBatchSampler

LENGTHS = [5, 12, 7, 40, 9, 3, 22, 6, 15, 60, 8, 4, 11, 30, 5,
           9, 18, 7, 3, 48, 10, 6, 14, 25, 4, 8, 35, 12, 6, 20]  # fmt: skip
MAX_TOKENS, WORLD = 64, 3
BAR, GAP, STEP_GAP, HEIGHT, LEFT = 16, 2, 18, 90, 70


def _cost(batch: list[int]) -> int:
    return max(LENGTHS[i] for i in batch) * len(batch)


def _own_batches(rank: int) -> list[int]:
    """The costs of a rank's batches of its own share (sorted by length, filled to the budget)."""
    share = list(tud.DistributedSampler(range(len(LENGTHS)), WORLD, rank, seed=0))
    costs, batch = [], []
    for i in sorted(share, key=LENGTHS.__getitem__):
        if batch and LENGTHS[i] * (len(batch) + 1) > MAX_TOKENS:
            costs.append(_cost(batch))
            batch = []
        batch.append(i)
    return [*costs, _cost(batch)]


def _planned(rank: int) -> list[int]:
    s = TokenBudgetBatchSampler(LENGTHS, MAX_TOKENS, num_buckets=4, num_replicas=WORLD, rank=rank)
    return [_cost(b) for b in s]


def _panel(body: list[str], y: float, title: str, per_rank: list[list[int]]) -> float:
    """Bars of ``per_rank[r][step]`` below ``y``; a missing batch marked as a waiting rank."""
    body.append(text(10, y + 14, title, 13, weight="bold"))
    top, steps = y + 24, max(map(len, per_rank))
    base = top + HEIGHT
    width = WORLD * (BAR + GAP) + STEP_GAP
    budget_y = base - HEIGHT  # the budget: the full height
    body.append(f'<line x1="{LEFT - 6}" y1="{budget_y}" x2="{LEFT + steps * width}" '
                f'y2="{budget_y}" stroke="#999" stroke-dasharray="4,3"/>')  # fmt: skip
    body.append(text(10, budget_y + 4, f"{MAX_TOKENS} tokens", 10))
    body.append(text(10, base, "0", 10))
    for step in range(steps):
        x0 = LEFT + step * width
        for rank, costs in enumerate(per_rank):
            x = x0 + rank * (BAR + GAP)
            if step < len(costs):
                h = HEIGHT * costs[step] / MAX_TOKENS
                body.append(rect(x, base - h, BAR, h, PALETTE[rank]))
            else:  # no batch: this rank is already in the next all-reduce, waiting
                body.append(rect(x, base - 12, BAR, 12, "#ffffff", dashed=True))
                body.append(text(x + BAR / 2, base - 16, "…", 11, "middle"))
        body.append(text(x0 + WORLD * (BAR + GAP) / 2, base + 14, f"step {step}", 10, "middle"))
    return base + 24


def render() -> dict[str, str]:
    body: list[str] = []
    own = [_own_batches(r) for r in range(WORLD)]
    planned = [_planned(r) for r in range(WORLD)]
    y = _panel(body, 4, "each rank batches its own share: 3, 4 and 5 batches", own)
    y = _panel(body, y + 8, "TokenBudgetBatchSampler: one plan, 5 batches on every rank", planned)
    for rank in range(WORLD):  # the legend
        body.append(rect(10 + rank * 90, y + 4, 14, 14, PALETTE[rank]))
        body.append(text(30 + rank * 90, y + 16, f"rank {rank}"))
    body.append(rect(10 + WORLD * 90, y + 4, 14, 14, "#ffffff", dashed=True))
    body.append(text(30 + WORLD * 90, y + 16, "no batch: waits forever"))
    steps = max(map(len, own + planned))
    width = LEFT + steps * (WORLD * (BAR + GAP) + STEP_GAP) + 20
    title = "Batch cost (longest x size) per rank and step, 30 samples, 3 ranks"
    return {"token-budget-steps.svg": document(max(width, 560), y + 30, body, title)}
