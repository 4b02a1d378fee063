"""distsampling: small, readable reimplementations of PyTorch's distributed samplers.

Each module mirrors one torch class (or answers one user question where torch has none) and is
proven against torch by the Hypothesis properties in ``tests/``.
"""

# one line per module: the code, its tests and its tutorial share the module's stem
from .batch import BatchSampler
from .checks import RankMismatchError, assert_rank_consistent, epoch_digest
from .distributed import DistributedSampler, rank_positions, split_sizes
from .evaluation import UnpaddedDistributedSampler, gather_by_index, merge_by_index
from .grouped import GroupedBatchSampler
from .growing import (
    CorruptShardError,
    ManifestError,
    Producer,
    RemoteSource,
    ShardCache,
    Snapshot,
    SnapshotDataset,
    collate_batch,
    load_shard,
    prefetch_epochs,
    produce,
)
from .iteration import IterationBasedBatchSampler
from .launch import run_world
from .pipeline import (
    aspect_ratio_groups,
    aspect_ratios,
    make_batch_data_sampler,
    make_data_sampler,
)
from .weighted import WeightedBalanceClassSampler, largest_remainder_counts
from .windowed import SequentialWindowedDataset, epoch_offset, window_indices
from .wrapper import DatasetFromSampler, DistributedSamplerWrapper

__version__ = "0.1.0"

__all__ = [
    "BatchSampler",
    "CorruptShardError",
    "DatasetFromSampler",
    "DistributedSampler",
    "DistributedSamplerWrapper",
    "GroupedBatchSampler",
    "IterationBasedBatchSampler",
    "ManifestError",
    "Producer",
    "RankMismatchError",
    "RemoteSource",
    "SequentialWindowedDataset",
    "ShardCache",
    "Snapshot",
    "SnapshotDataset",
    "UnpaddedDistributedSampler",
    "WeightedBalanceClassSampler",
    "aspect_ratio_groups",
    "aspect_ratios",
    "assert_rank_consistent",
    "collate_batch",
    "epoch_digest",
    "epoch_offset",
    "gather_by_index",
    "largest_remainder_counts",
    "load_shard",
    "make_batch_data_sampler",
    "make_data_sampler",
    "merge_by_index",
    "prefetch_epochs",
    "produce",
    "rank_positions",
    "run_world",
    "split_sizes",
    "window_indices",
]
