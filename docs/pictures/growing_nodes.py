"""Pictures for the many-nodes part of docs/tutorials/growing.md, drawn from the code.

``growing-nodes-flow.svg``: who writes and who reads what, on 2 nodes of 2 ranks (the files each
node's producer samples are RemoteSource's ``part=(node, nodes)`` slice). ``growing-nodes-epoch.svg``:
one epoch's split, computed by the same sampler NodeFeed builds (``FirstOf`` over a
``DistributedSampler`` per node, ``m = min over nodes of len // ranks per node``).
"""

from __future__ import annotations

from _svg import PALETTE, document, grid, rect, text

from distsampling import DistributedSampler
from distsampling.growing.nodes import FirstOf

NODES, PER_NODE, FILES = 2, 2, 8


def arrow(x1: float, y1: float, x2: float, y2: float, label: str = "") -> list[str]:
    body = [
        f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#333" stroke-width="1.5" '
        'marker-end="url(#head)"/>'
    ]
    if label:
        body.append(text((x1 + x2) / 2 + 6, (y1 + y2) / 2 + 4, label, 11))
    return body


def flow() -> str:
    """Remote files -> one producer per node -> a node-local cache -> the node's ranks."""
    title = "Who writes, who reads: 2 nodes x 2 ranks, a producer and a cache per node"
    body = [
        '<defs><marker id="head" markerWidth="8" markerHeight="8" refX="7" refY="4" '
        'orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#333"/></marker></defs>',
        text(10, 20, title, 13, weight="bold"),
        text(10, 50, "remote store (s3://bucket/train): files, read one sample per ranged GET"),
    ]
    for j in range(FILES):  # file j belongs to node j % NODES: RemoteSource(part=(node, NODES))
        node = j % NODES
        body += [
            rect(10 + j * 60, 60, 54, 26, PALETTE[node * PER_NODE]),
            text(20 + j * 60, 78, f"f{j}"),
        ]
    for node in range(NODES):
        x = 10 + node * 260
        files = ", ".join(f"f{j}" for j in range(FILES)[node::NODES])
        body += arrow(x + 110, 90, x + 110, 130, f"part=({node}, {NODES}): {files}")
        body += [
            rect(x, 130, 240, 40, "#f4f4f4"),
            text(x + 8, 148, f"node {node}: producer process"),
            text(x + 8, 163, f"(started by local rank 0 = rank {node * PER_NODE})", 11),
        ]
        body += arrow(x + 110, 170, x + 110, 205, "writes shards")
        body += [
            rect(x, 205, 240, 40, "#f4f4f4"),
            text(x + 8, 223, f"cache on node {node}'s local disk"),
            text(x + 8, 238, "manifest: snapshot(epoch) frozen once", 11),
        ]
        for local in range(PER_NODE):
            rank = node * PER_NODE + local
            rx = x + local * 125
            body += arrow(rx + 55, 245, rx + 55, 280, "reads" if local == 0 else "")
            body += [
                rect(rx, 280, 115, 40, PALETTE[rank]),
                text(rx + 6, 298, f"rank {rank}"),
                text(rx + 6, 313, f"local rank {local}", 11),
            ]
    body += [
        text(10, 345, "every epoch, all ranks: all_gather(node, snapshot length, error) ->"),
        text(10, 362, "m = min over nodes of len // ranks per node samples each; then a barrier,"),
        text(10, 379, "and local rank 0 calls end_epoch"),
    ]
    return document(640, 395, body, title)


def epoch_rows(lengths: list[int]) -> tuple[list, int]:
    """One row per node: its snapshot's indices, coloured by the rank that reads each (NodeFeed's
    sampler); dashed: not read this epoch (it waits in the cache)."""
    m = min(lengths) // PER_NODE
    rows = []
    for node, n in enumerate(lengths):
        reader = {}
        for local in range(PER_NODE):
            split = DistributedSampler(range(n), PER_NODE, local, seed=0, drop_last=True)
            sampler = FirstOf(split, m)
            sampler.set_epoch(0)
            reader |= {i: node * PER_NODE + local for i in sampler}
        rows.append(
            (f"node {node} ({n})", [(i, reader.get(i, 7), i not in reader) for i in range(n)])
        )
    return rows, m


def render() -> dict[str, str]:
    rows, m = epoch_rows([11, 7])
    legend = [f"rank {r}" for r in range(NODES * PER_NODE)]
    return {
        "growing-nodes-flow.svg": flow(),
        "growing-nodes-epoch.svg": grid(
            rows,
            f"Epoch 0, snapshots of 11 and 7 samples: each rank reads m = min(11, 7) // 2 = {m} "
            "(dashed: not read, left for a later epoch)",
            legend,
        ),
    }
