import os
import tempfile
import textwrap

import numpy as np

from distsampling import (
    CorruptShardError,
    ManifestError,
    ShardCache,
    SnapshotDataset,
    load_shard,
)

root = tempfile.mkdtemp()


def show(err):  # the message, with the temporary directory shown as <cache>, wrapped
    text = f"{type(err).__name__}: {err}".replace(root, "<cache>")
    print(textwrap.fill(text, width=88, subsequent_indent="    "))


cache = ShardCache(root, capacity_bytes=1 << 20)
path = cache.add(np.zeros((4, 8), np.float32))

# samples a memory map cannot hand to torch are refused when added
try:
    cache.add(np.array([["a", "b"]]))
except ValueError as err:
    show(err)

# a big-endian array is stored in native byte order: the same kind of sample
cache.add(np.ones((4, 8), ">f4"))
print("stored as", cache.snapshot(0).load(1).dtype.str)

# a byte flipped on disk: caught the first time a process opens the shard
with open(path, "r+b") as f:
    f.seek(128 + 5)  # a byte of the first sample (after the 128-byte header)
    f.write(b"\x01")
try:
    SnapshotDataset(cache.snapshot(0))[0]
except CorruptShardError as err:
    show(err)

# a bad argument is named; the file is not blamed
try:
    load_shard(path, samples="4")
except TypeError as err:
    show(err)

# a manifest cut short: nothing is changed, nothing deleted
manifest = os.path.join(root, "manifest.json")
with open(manifest, "r+") as f:
    f.truncate(20)
try:
    ShardCache(root, capacity_bytes=1 << 20)
except ManifestError as err:
    show(err)

# a deleted manifest: the shards stay where they are
os.remove(manifest)
try:
    ShardCache(root, capacity_bytes=1 << 20)
except ManifestError as err:
    show(err)
kept = sorted(n for n in os.listdir(root) if n.startswith("shard-"))
print("shard files kept:", kept)
