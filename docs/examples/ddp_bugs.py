"""Three classic bugs, each provoked on purpose, and how assert_rank_consistent names it.

Run: torchrun --standalone --nproc_per_node=2 docs/examples/ddp_bugs.py
"""

import numpy as np
import torch.distributed as dist
from torch.utils.data import Sampler

from distsampling import (
    DistributedSampler,
    DistributedSamplerWrapper,
    RankMismatchError,
    assert_rank_consistent,
)


class GlobalRNGSampler(Sampler[int]):
    """A sampler as often seen in the wild: its order comes from the global np.random."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return iter(np.random.permutation(self.n).tolist())

    def __len__(self) -> int:
        return self.n


def main() -> None:
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    np.random.seed(rank)  # each process has its own global RNG state, as real ranks do

    forgot = DistributedSampler(range(20))
    if rank == 0:
        forgot.set_epoch(1)  # rank 1 "forgot" set_epoch
    bugs = {
        "forgotten set_epoch": forgot,
        "different dataset length": DistributedSampler(
            range(20 + rank)
        ),  # e.g. files listed per rank
        # the wrapper splits the inner epoch, but each rank's inner epoch is its own draw
        "unseeded inner sampler": DistributedSamplerWrapper(GlobalRNGSampler(20)),
    }
    for bug, sampler in bugs.items():
        # what the bug does: gather every rank's indices and count the overlap
        indices = [None] * world
        dist.all_gather_object(indices, list(sampler))
        overlap = len(set(indices[0]) & set(indices[1]))
        try:
            assert_rank_consistent(sampler)
            verdict = "not caught"
        except RankMismatchError as err:
            verdict = str(err).splitlines()[-1]
        if rank == 0:
            print(f"{bug}: ranks 0 and 1 share {overlap} indices")
            print(f"  {verdict}")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
