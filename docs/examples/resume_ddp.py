"""A DDP loop that is preempted mid-epoch and resumed, possibly on another number of ranks.

Run: torchrun --standalone --nproc_per_node=2 docs/examples/resume_ddp.py --preempt-after 3
then: torchrun --standalone --nproc_per_node=3 docs/examples/resume_ddp.py
"""

import argparse
import json
import os
import tempfile

import torch.distributed as dist
from torch.utils.data import DataLoader

from distsampling import ResumableDistributedSampler, assert_rank_consistent

N, BATCH, EPOCHS = 50, 4, 2
CHECKPOINT = os.path.join(tempfile.gettempdir(), "distsampling-resume-demo.json")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--preempt-after", type=int, help="steps of epoch 0 before preemption")
    args = parser.parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    sampler = ResumableDistributedSampler(range(N), seed=0)  # world and rank from the group
    loader = DataLoader(list(range(N)), batch_size=BATCH, sampler=sampler)

    start_epoch, read = 0, []  # `read`: every rank's indices so far, only to check the demo
    if args.preempt_after is None:  # resume: every rank loads the same checkpoint
        with open(CHECKPOINT) as f:
            checkpoint = json.load(f)
        sampler.load_state_dict(checkpoint["sampler"])
        start_epoch, read = checkpoint["sampler"]["epoch"], checkpoint["read"]
    for epoch in range(start_epoch, EPOCHS):
        sampler.set_epoch(epoch)  # on resume the same epoch: the loaded position survives it
        assert_rank_consistent(sampler)  # same epoch, same position on every rank, or it raises
        mine = [
            i for step, batch in zip(range(args.preempt_after or N), loader) for i in batch.tolist()
        ]
        everyone = [None] * world
        dist.all_gather_object(everyone, mine)
        read += [i for r in everyone for i in r]
        if args.preempt_after is not None:  # preempted: save and stop (num_workers=0: exact)
            if rank == 0:
                with open(CHECKPOINT, "w") as f:
                    json.dump({"sampler": sampler.state_dict(), "read": read}, f)
                print(f"preempted on {world} ranks after {len(read)} samples of epoch {epoch}")
            break
        if rank == 0 and epoch == start_epoch:
            extra = len(read) - N
            print(f"epoch {epoch} finished on {world} ranks, each read {len(mine)} more")
            print(
                f"every sample read, none twice beyond {extra} padding: {sorted(set(read)) == list(range(N))}"
            )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
