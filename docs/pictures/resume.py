"""Pictures for docs/tutorials/resume.md, drawn from distsampling.ResumableDistributedSampler."""

from __future__ import annotations

from _svg import grid

from distsampling import ResumableDistributedSampler

N, W1, W2, M, SEED = 11, 2, 3, 2, 0  # 11 samples; 2 ranks read 2 each, then 3 ranks finish


def _reads(world: int, state: dict | None = None) -> list[list[int]]:
    """Each rank's indices: the whole epoch, or the rest of it after loading ``state``."""
    out = []
    for rank in range(world):
        s = ResumableDistributedSampler(range(N), world, rank, seed=SEED)
        if state is not None:
            s.load_state_dict(state)
        out.append(s.indices().tolist())
    return out


def render() -> dict[str, str]:
    whole = _reads(W1)
    saver = ResumableDistributedSampler(range(N), W1, 0, seed=SEED)
    it = iter(saver)
    for _ in range(M):
        next(it)
    rest = _reads(W2, saver.state_dict())  # every new rank loads rank 0's state
    consumed = M * W1
    # stream position p of the epoch: read by rank p % W as its (p // W)-th index
    rows = [
        (
            "uninterrupted",
            [(whole[p % W1][p // W1], p % W1, p >= N) for p in range(W1 * len(whole[0]))],
        ),
        ("read, saved", [(whole[p % W1][p // W1], p % W1, False) for p in range(consumed)]),
        (
            "resumed on 3",
            [(None, 0, False)] * consumed
            + [
                (rest[q % W2][q // W2], q % W2, consumed + q >= N) for q in range(W2 * len(rest[0]))
            ],
        ),
    ]
    title = f"{N} samples: 2 ranks read {M} each and save; 3 ranks load it and split the rest"
    return {"resume-elastic.svg": grid(rows, title, [f"rank {r}" for r in range(3)])}
