"""Growing datasets: a local cache filled from remote storage while training reads it.

The pieces, in the order data flows through them:

- :mod:`~distsampling.growing.remote`: ``RemoteSource``, rows read from remote storage;
- :mod:`~distsampling.growing.producer`: ``Producer``, a background process that samples the
  remote and writes shards into the cache;
- :mod:`~distsampling.growing.cache`: ``ShardCache``, the on-disk cache (FIFO eviction, pins),
  built on :mod:`~distsampling.growing.writer` (a shard written whole, with its crc32) and
  :mod:`~distsampling.growing.manifest` (the manifest's atomic I/O, ``ManifestError``);
- :mod:`~distsampling.growing.snapshot`: ``Snapshot``, one epoch's frozen list of shards;
- :mod:`~distsampling.growing.dataset`: ``SnapshotDataset``, reads a snapshot in DataLoader
  workers;
- :mod:`~distsampling.growing.prefetch`: ``prefetch_epochs``, builds the next epoch's loader
  ahead.

The samplers at the top of ``distsampling`` never import this package.
"""

from .cache import ShardCache
from .dataset import SnapshotDataset, collate_batch
from .manifest import ManifestError
from .prefetch import prefetch_epochs
from .producer import Producer, produce
from .remote import RemoteSource
from .snapshot import CorruptShardError, Snapshot, load_shard

__all__ = [
    "CorruptShardError",
    "ManifestError",
    "Producer",
    "RemoteSource",
    "ShardCache",
    "Snapshot",
    "SnapshotDataset",
    "collate_batch",
    "load_shard",
    "prefetch_epochs",
    "produce",
]
