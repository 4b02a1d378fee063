"""distsampling: small, readable reimplementations of PyTorch's distributed samplers.

Each module mirrors one torch class (or answers one user question where torch has none) and is
proven against torch by the Hypothesis properties in ``tests/``.
"""

# one line per module: the code, its tests and its tutorial share the module's stem
from .batch import BatchSampler
from .checks import RankMismatchError, assert_rank_consistent, epoch_digest
from .distributed import DistributedSampler, rank_positions, split_sizes
from .evaluation import UnpaddedDistributedSampler, gather_by_index, merge_by_index
from .launch import run_world

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
]
