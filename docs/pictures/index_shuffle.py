"""Pictures for docs/tutorials/index_shuffle.md, drawn from distsampling.scale.index_shuffle itself."""

from __future__ import annotations

import torch
from _svg import CELL, GAP, LABEL, PALETTE, document, rect, text

from distsampling import index_shuffle

N, SEED, DOMAIN = 10, 0, 64  # [0, 10) lies in the cipher's smallest domain, [0, 2**6)


def walks(n: int, seed: int) -> list[list[int]]:
    """For each position p of [0, n): E(p), E(E(p)), ... until a value falls in [0, n).

    E is the cipher on the whole domain: ``index_shuffle`` with n = 64, where nothing walks.
    """
    cipher = index_shuffle(torch.arange(DOMAIN), DOMAIN, seed).tolist()
    out = []
    for p in range(n):
        steps = [cipher[p]]
        while steps[-1] >= n:
            steps.append(cipher[steps[-1]])
        out.append(steps)
    sigma = index_shuffle(torch.arange(n), n, seed).tolist()
    assert [w[-1] for w in out] == sigma, "the walks must end where index_shuffle says"
    return out


def render() -> dict[str, str]:
    rows = walks(N, SEED)
    title = (
        f"index_shuffle(p, {N}, seed={SEED}): E on [0, {DOMAIN}), again while the value is ≥ {N}"
    )
    body = [text(10, 20, title, 13, weight="bold")]
    y = 36
    for p, steps in enumerate(rows):
        body.append(text(10, y + CELL * 0.68, f"position {p}"))
        for k, value in enumerate(steps):
            x = LABEL + k * (CELL + GAP)
            outside = value >= N
            body.append(rect(x, y, CELL, CELL, PALETTE[7] if outside else PALETTE[0], outside))
            body.append(text(x + CELL / 2, y + CELL * 0.68, value, 11, "middle"))
        y += CELL + GAP
    y += 10
    legend = [
        (PALETTE[0], False, f"the index: in [0, {N})"),
        (PALETTE[7], True, f"≥ {N}: encrypt again"),
    ]
    for k, (colour, dashed, words) in enumerate(legend):
        x = 10 + k * 220
        body.append(rect(x, y, 14, 14, colour, dashed))
        body.append(text(x + 20, y + 12, words))
    width = max(LABEL + max(map(len, rows)) * (CELL + GAP) + 20, len(title) * 8 + 20)
    return {"index-shuffle-walk.svg": document(width, y + 30, body, title)}
