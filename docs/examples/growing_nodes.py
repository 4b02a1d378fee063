"""A growing dataset on every rank of every node. On each node K of a real job, run:

    torchrun --nnodes=2 --node-rank=K --nproc-per-node=2 --master-addr=HOST --master-port=PORT \
        docs/examples/growing_nodes.py s3://bucket/train /local/disk/cache

Run without torchrun, it starts two local "nodes" of two ranks itself, over a small remote
directory it writes, and checks what every rank did.
"""

import os
import sys
import tempfile

import numpy as np
import torch.distributed as dist

from distsampling import NodeFeed, run_nodes


def train(remote: str, cache_dir: str, epochs: int = 2) -> tuple[list[int], set[int]]:
    """One rank's loop: returns its steps per epoch and the remote files its samples came from."""
    steps, files = [], set()
    with NodeFeed(
        remote,
        cache_dir,  # on the node's local disk: the node's ranks share it, other nodes never see it
        capacity_bytes=1 << 20,
        samples_per_shard=8,
        batch_size=4,
        loader_options={"num_workers": 1},
    ) as feed:
        for epoch in range(epochs):
            n = 0
            for batch in feed.epoch(epoch):  # snapshot, agreement, sampler, loader, end_epoch
                n += 1  # forward, backward, optimizer.step(): DDP needs equal steps everywhere
                files |= set(batch[:, 0].int().tolist())  # column 0 of a sample: its file
            steps.append(n)
    return steps, files


def local_demo() -> None:
    """Two torchrun agents on this machine, a cache directory per "node"."""
    remote, caches = tempfile.mkdtemp(), tempfile.mkdtemp()
    for j in range(4):  # 4 files of 50 samples [file, row]
        rows = np.stack([np.full(50, j), np.arange(50)], axis=1).astype(np.float32)
        np.save(f"{remote}/part-{j}.npy", rows)
    here = os.path.dirname(os.path.abspath(__file__))
    results = run_nodes(
        "growing_nodes:node_main", 2, 2, remote, caches, timeout=300, pythonpath=[here]
    )
    print(f"{len(results)} ranks on 2 nodes")
    for epoch in range(2):
        same = len({steps[epoch] for steps, _ in results}) == 1
        print(f"epoch {epoch}: every rank ran the same number of steps: {same}")
    node_files = [results[0][1] | results[1][1], results[2][1] | results[3][1]]
    print(f"the nodes read disjoint files: {not node_files[0] & node_files[1]}")


def node_main(remote: str, cache_root: str) -> tuple[list[int], set[int]]:
    """What run_nodes calls on every rank: a cache directory per node, as on separate machines."""
    return train(remote, os.path.join(cache_root, f"node{os.environ['GROUP_RANK']}"))


if __name__ == "__main__":  # the producer is a spawned process: it re-imports this file
    if "RANK" in os.environ:  # started by torchrun: this process is one rank
        dist.init_process_group("gloo")  # "nccl" on GPUs
        train(sys.argv[1], sys.argv[2])
        dist.destroy_process_group()
    else:
        local_demo()
