import json

from torch.utils.data import DataLoader
from torchdata.stateful_dataloader import StatefulDataLoader

from distsampling import ShardedIterableDataset, loader_dataset_states

shards, sizes = ["a", "b", "c", "d", "e", "f"], [5, 2, 7, 0, 3, 4]


def read(shard):
    yield from (f"{shard}{j}" for j in range(sizes[shards.index(shard)]))


def dataset(world, rank):
    ds = ShardedIterableDataset(shards, sizes, read, num_replicas=world, rank=rank, seed=0)
    ds.set_epoch(3)  # the saved epoch first: a state of another epoch is refused
    return ds


# 2 ranks, 2 workers each; every rank stops after 2 batches and saves its loader's state
saved, seen = [], []
for rank in range(2):
    loader = StatefulDataLoader(dataset(2, rank), batch_size=2, num_workers=2, collate_fn=list)
    it = iter(loader)
    seen += [x for _ in range(2) for x in next(it)]
    saved.append(json.dumps(loader.state_dict()))  # JSON-ready
print(f"read before the stop: {seen}")

# the same world: each rank's loader resumes where it stopped (every worker at its place)
loader = StatefulDataLoader(dataset(2, 0), batch_size=2, num_workers=2, collate_fn=list)
loader.load_state_dict(json.loads(saved[0]))
print(f"rank 0 resumed: {list(loader)}")

# 3 ranks: rank 0's state (every worker's) says what all ranks consumed; the rest is re-split
rest = []
for rank in range(3):
    ds = dataset(3, rank)
    ds.load_state_dict(loader_dataset_states(json.loads(saved[0])))
    batches = list(DataLoader(ds, batch_size=2, num_workers=2, collate_fn=list))
    rest += [x for b in batches for x in b]
    left = sum(map(len, batches))  # len(ds) is the whole epoch's: what was read before, and this
    print(f"on 3 ranks, rank {rank}: {left} samples left of {len(ds)} {batches}")
twice = sorted(x for x in set(rest) if (seen + rest).count(x) > 1)
print(f"all 21 samples read: {len(set(seen + rest)) == 21}, twice (padding): {twice}")
