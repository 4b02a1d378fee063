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
- :mod:`~distsampling.growing.buffers`: ``BatchBuffers``, the few batch buffers each process
  reuses (a worker's batch crosses as which buffer holds it);
- :mod:`~distsampling.growing.prefetch`: ``prefetch_epochs``, builds the next epoch's loader
  ahead;
- :mod:`~distsampling.growing.retry`: retries of remote requests with backoff and a deadline;
- :mod:`~distsampling.growing.nodes`: ``NodeFeed``, many nodes: a producer and a cache per node,
  the same number of steps on every rank.

The samplers at the top of ``distsampling`` never import this package.
"""

from .buffers import BatchBuffers
from .cache import ShardCache
from .dataset import SnapshotDataset, collate_batch
from .manifest import ManifestError
from .nodes import FirstOf, NodeFeed, node_topology
from .prefetch import prefetch_epochs
from .producer import Producer, produce
from .remote import RemoteSource
from .retry import RemoteUnavailableError
from .snapshot import CorruptShardError, Snapshot, load_shard

__all__ = [
    "BatchBuffers",
    "CorruptShardError",
    "FirstOf",
    "ManifestError",
    "NodeFeed",
    "Producer",
    "RemoteSource",
    "RemoteUnavailableError",
    "ShardCache",
    "Snapshot",
    "SnapshotDataset",
    "collate_batch",
    "load_shard",
    "node_topology",
    "prefetch_epochs",
    "produce",
]
