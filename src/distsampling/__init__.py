"""distsampling: small, readable reimplementations of PyTorch's distributed samplers.

Each module mirrors one torch class (or answers one user question where torch has none) and is
proven against torch by the Hypothesis properties in ``tests/``.
"""

# one line per module: the code, its tests and its tutorial share the module's stem
from .batch import BatchSampler
from .cache import CorruptShardError, ShardCache, Snapshot, load_shard
from .checks import RankMismatchError, assert_rank_consistent, epoch_digest
from .distributed import DistributedSampler, rank_positions, split_sizes
from .evaluation import UnpaddedDistributedSampler, gather_by_index, merge_by_index
from .grouped import GroupedBatchSampler
from .growing import SnapshotDataset, collate_batch
from .iteration import IterationBasedBatchSampler
from .launch import run_world
from .pipeline import (
    aspect_ratio_groups,
    aspect_ratios,
    make_batch_data_sampler,
    make_data_sampler,
)
from .prefetch import prefetch_epochs
from .producer import Producer, RemoteSource, produce
from .weighted import WeightedBalanceClassSampler, largest_remainder_counts
from .windowed import SequentialWindowedDataset, epoch_offset, window_indices
from .wrapper import DatasetFromSampler, DistributedSamplerWrapper

__version__ = "0.1.0"

__all__ = [
    # batch
    "BatchSampler",
    # distributed
    "DistributedSampler",
    # checks
    "RankMismatchError",
    # evaluation
    "UnpaddedDistributedSampler",
    "assert_rank_consistent",
    "epoch_digest",
    "gather_by_index",
    "merge_by_index",
    "rank_positions",
    # launch
    "run_world",
    "split_sizes",
    # windowed
    "SequentialWindowedDataset",
    "epoch_offset",
    "window_indices",
    # grouped
    "GroupedBatchSampler",
    # iteration
    "IterationBasedBatchSampler",
    # pipeline
    "aspect_ratio_groups",
    "aspect_ratios",
    "make_batch_data_sampler",
    "make_data_sampler",
    # weighted
    "WeightedBalanceClassSampler",
    "largest_remainder_counts",
    # wrapper
    "DatasetFromSampler",
    "DistributedSamplerWrapper",
    # growing
    "SnapshotDataset",
    "collate_batch",
    "prefetch_epochs",
    # cache
    "CorruptShardError",
    "ShardCache",
    "Snapshot",
    "load_shard",
    # producer
    "Producer",
    "RemoteSource",
    "produce",
]
