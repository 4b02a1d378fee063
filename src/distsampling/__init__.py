"""distsampling: small, readable reimplementations of PyTorch's distributed samplers.

Each module mirrors one torch class (or answers one user question where torch has none) and is
proven against torch by the Hypothesis properties in ``tests/``.
"""

# one line per module: the code, its tests and its tutorial share the module's stem
from .batch import BatchSampler
from .distributed import DistributedSampler, rank_positions, split_sizes

__version__ = "0.1.0"

__all__ = [
    # batch
    "BatchSampler",
    # distributed
    "DistributedSampler",
    "rank_positions",
    "split_sizes",
]
