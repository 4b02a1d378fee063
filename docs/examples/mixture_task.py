"""3 sources of 60,000 / 6,000 / 600 samples at 0.5 / 0.3 / 0.2, on 8 ranks of micro-batch 8:
how far each source's count strays from its share, on every prefix of the global stream, inside
every global batch of 64, and over each rank's whole share."""

import numpy as np

from distsampling import MixtureSampler

sizes, weights, world, b = [60000, 6000, 600], [0.5, 0.3, 0.2], 8, 8
steps = 937  # 59,968 positions: 937 global batches of 64
share, n = np.array(weights), steps * world * b


def deviations(sources: np.ndarray, rotated: bool = False) -> tuple[float, float, float]:
    """(prefix, batch, rank): the largest |count_k - w_k * length| over each kind of stretch;
    ``sources`` in stream order, step s's micro-batch m read by rank m (Megatron's layout, the
    per-rank one's positions) or, ``rotated``, by rank (m - s) mod 8 (the global layout)."""
    onehot = np.eye(3)[sources]  # (n, 3) the source of every position, in stream order
    prefix = np.abs(onehot.cumsum(0) - np.outer(np.arange(1, n + 1), share)).max()
    by_step = onehot.reshape(steps, world, b, 3)  # (steps, micro-batch, slot, source)
    batch = np.abs(by_step.sum((1, 2)) - world * b * share).max()
    if rotated:  # rank r reads micro-batch (r + s) mod 8 of step s
        by_step = np.stack([np.roll(by_step[s], -s, axis=0) for s in range(steps)])
    per_rank = by_step.sum((0, 2))  # (8, 3)
    rank = np.abs(per_rank - per_rank.sum(1, keepdims=True) * share).max()
    return prefix, batch, rank


def megatron(n: int) -> np.ndarray:
    """Megatron's build_blending_indices (helpers.cpp), step by step: the largest error wins."""
    current, out = [0, 0, 0], np.empty(n, np.int64)
    for i in range(n):
        errors = [w * max(i, 1) - c for w, c in zip(weights, current)]
        out[i] = k = errors.index(max(errors))  # the first of equal errors, as its strict >
        current[k] += 1
    return out


def iid_per_rank() -> np.ndarray:
    """Each rank draws each sample's source at random by weight, with a generator of its own."""
    draws = [np.random.default_rng(r).choice(3, size=(steps, b), p=share) for r in range(world)]
    return np.stack(draws, 1).ravel()  # laid out as the ranks' micro-batches of each step


print(f"{'':26} prefix  batch  rank")
for layout in ("global", "per_rank"):
    sampler = MixtureSampler(sizes, weights, batch_size=b, num_replicas=world, rank=0,
                             layout=layout)  # fmt: skip
    ours = sampler.sources(np.arange(n))[0]  # the source at every position of the stream
    prefix, batch, rank = deviations(ours, rotated=layout == "global")
    print(f"{'MixtureSampler, ' + layout:26} {prefix:6.2f} {batch:6.2f} {rank:5.1f}")
for name, sources in [
    ("Megatron's greedy", megatron(n)),
    ("i.i.d. draws per rank", iid_per_rank()),
]:
    prefix, batch, rank = deviations(sources)
    print(f"{name:26} {prefix:6.2f} {batch:6.2f} {rank:5.1f}")
print(f"proven: every prefix of the global stream within {sampler.bound()}; every global batch, "
      f"and per rank every rank, within {float(2 * sampler.bound()):g} of each share")  # fmt: skip
