"""distsampling: small, readable reimplementations of PyTorch's distributed samplers.

Each module mirrors one torch class (or answers one user question where torch has none) and is
proven against torch by the Hypothesis properties in ``tests/``.
"""

# one line per module: the code, its tests and its tutorial share the module's stem
from ._split import epoch_permutation, rank_positions, split_sizes
from .detection.balanced import BatchBalanceClassSampler, distinct_draws
from .detection.evaluation import UnpaddedDistributedSampler, gather_by_index, merge_by_index
from .detection.grouped import GroupedBatchSampler
from .detection.inference import InferenceSampler, inference_shard
from .detection.infinite import InfiniteSampler, shared_random_seed
from .detection.iteration import IterationBasedBatchSampler
from .detection.pipeline import (
    aspect_ratio_groups,
    aspect_ratios,
    make_batch_data_sampler,
    make_data_sampler,
)
from .detection.repeat_factor import RepeatFactorSampler, repeat_factors_from_category_frequency
from .growing import (
    BatchBuffers,
    CorruptShardError,
    ManifestError,
    NodeFeed,
    Producer,
    RemoteSource,
    RemoteUnavailableError,
    ShardCache,
    Snapshot,
    SnapshotDataset,
    collate_batch,
    load_shard,
    prefetch_epochs,
    produce,
)

# the exported samplers are the reference ones (distributed.py, batch.py, windowed.py,
# wrapper.py) with the framework guards over them: guarded.py
from .guarded import (
    BatchSampler,
    DatasetFromSampler,
    DistributedSampler,
    DistributedSamplerWrapper,
    SequentialWindowedDataset,
)
from .guards import FrameworkWarning
from .mixing.sampler import MixtureBatchSampler, MixtureSampler, Read
from .resume.resumable import (
    ResumableBatchSampler,
    ResumableDistributedSampler,
    ResumableDistributedSamplerWrapper,
    ResumableIndexShuffleSampler,
    ResumableUnpaddedDistributedSampler,
    ResumableWeightedBalanceClassSampler,
)
from .resume.state import Resumable, check_state, resumed_positions
from .scale.ahead import OrderAhead
from .scale.index_shuffle import IndexShuffleSampler, epoch_key, index_shuffle, index_unshuffle
from .streaming.sharded import ShardedIterableDataset, loader_dataset_states
from .streaming.sharded_mixture import ShardedMixtureDataset
from .streaming.token_budget import TokenBudgetBatchSampler
from .tools.checks import RankMismatchError, assert_rank_consistent, epoch_digest
from .tools.launch import run_nodes, run_world
from .weighted import WeightedBalanceClassSampler, largest_remainder_counts
from .windowed import epoch_offset, window_indices
from .wrapper import index_tensor

__version__ = "0.1.0"

__all__ = [
    "BatchBuffers",
    "BatchSampler",
    "CorruptShardError",
    "DatasetFromSampler",
    "DistributedSampler",
    "DistributedSamplerWrapper",
    "FrameworkWarning",
    "GroupedBatchSampler",
    "IndexShuffleSampler",
    "IterationBasedBatchSampler",
    "ManifestError",
    "MixtureBatchSampler",
    "MixtureSampler",
    "NodeFeed",
    "OrderAhead",
    "Producer",
    "RankMismatchError",
    "Read",
    "RemoteSource",
    "RemoteUnavailableError",
    "Resumable",
    "ResumableBatchSampler",
    "ResumableDistributedSampler",
    "ResumableDistributedSamplerWrapper",
    "ResumableIndexShuffleSampler",
    "ResumableUnpaddedDistributedSampler",
    "ResumableWeightedBalanceClassSampler",
    "SequentialWindowedDataset",
    "ShardCache",
    "ShardedIterableDataset",
    "ShardedMixtureDataset",
    "Snapshot",
    "SnapshotDataset",
    "TokenBudgetBatchSampler",
    "UnpaddedDistributedSampler",
    "WeightedBalanceClassSampler",
    "aspect_ratio_groups",
    "aspect_ratios",
    "assert_rank_consistent",
    "check_state",
    "collate_batch",
    "epoch_digest",
    "epoch_key",
    "epoch_offset",
    "epoch_permutation",
    "gather_by_index",
    "index_shuffle",
    "index_tensor",
    "index_unshuffle",
    "largest_remainder_counts",
    "load_shard",
    "loader_dataset_states",
    "make_batch_data_sampler",
    "make_data_sampler",
    "merge_by_index",
    "prefetch_epochs",
    "produce",
    "rank_positions",
    "resumed_positions",
    "run_nodes",
    "run_world",
    "split_sizes",
    "window_indices",
]

# samplers of detection and metric-learning codebases (infinite streams, repeat factors,
# contiguous inference shards, class-balanced batches)
__all__ += [
    "BatchBalanceClassSampler",
    "InferenceSampler",
    "InfiniteSampler",
    "RepeatFactorSampler",
    "distinct_draws",
    "inference_shard",
    "repeat_factors_from_category_frequency",
    "shared_random_seed",
]
