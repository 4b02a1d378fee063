"""3 sources of 60,000 / 6,000 / 600 samples at 0.5 / 0.3 / 0.2, on 8 ranks of micro-batch 8:
how far each source's count strays from its share, on every prefix of the global stream, inside
every global batch of 64, and over each rank's whole share."""

import numpy as np

from distsampling import MixtureSampler

sizes, weights, world, b = [60000, 6000, 600], [0.5, 0.3, 0.2], 8, 8
steps = 937  # 59,968 positions: 937 global batches of 64
share, n = np.array(weights), steps * world * b


def deviations(sources: np.ndarray) -> tuple[float, float, float]:
    """(prefix, batch, rank): the largest |count_k - w_k * length| over each kind of stretch."""
    onehot = np.eye(3)[sources]  # (n, 3) the source of every position, in stream order
    prefix = np.abs(onehot.cumsum(0) - np.outer(np.arange(1, n + 1), share)).max()
    by_step = onehot.reshape(steps, world, b, 3)  # rank r reads [s*64 + 8r, s*64 + 8r + 8)
    batch = np.abs(by_step.sum((1, 2)) - world * b * share).max()
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


sampler = MixtureSampler(sizes, weights, batch_size=b, num_replicas=world, rank=0)
offsets = np.cumsum([0, *sizes[:-1]])
indices = np.array([sampler.batch_at(s) for s in range(steps)]).ravel()  # every rank's
ours = np.searchsorted(offsets, indices, side="right") - 1  # the source of each index

print(f"{'':26} prefix  batch  rank")
for name, sources in [("MixtureSampler", ours), ("Megatron's greedy", megatron(n)),
                      ("i.i.d. draws per rank", iid_per_rank())]:  # fmt: skip
    prefix, batch, rank = deviations(sources)
    print(f"{name:26} {prefix:6.2f} {batch:6.2f} {rank:5.1f}")
print(f"proven: every global batch and every rank within {2 * sampler.bound()} of each share")
