"""Named Hypothesis strategies shared by every test module.

Each is a noun for the argument it draws, sized so that edge cases (empty data, fewer samples
than ranks, one rank) come up often while a whole suite stays fast.
"""

from __future__ import annotations

from hypothesis import strategies as st

#: dataset lengths: 0 and lengths smaller than any world size included
dataset_lengths = st.integers(min_value=0, max_value=200)
#: number of ranks
world_sizes = st.integers(min_value=1, max_value=9)
#: seeds, negative ones included (torch accepts any int64-compatible seed)
seeds = st.integers(min_value=-(2**31), max_value=2**31)
#: epoch numbers
epochs = st.integers(min_value=0, max_value=1000)
#: batch sizes
batch_sizes = st.integers(min_value=1, max_value=12)
#: shuffle / drop_last flags
flags = st.booleans()


def ranks_for(world_size: int) -> st.SearchStrategy[int]:
    """A rank valid for ``world_size``: in ``[0, world_size)``."""
    return st.integers(min_value=0, max_value=world_size - 1)


@st.composite
def sampler_args(draw: st.DrawFn) -> dict:
    """Every argument of ``DistributedSampler`` but the dataset, with a rank valid for the world."""
    world = draw(world_sizes)
    return {
        "num_replicas": world,
        "rank": draw(ranks_for(world)),
        "shuffle": draw(flags),
        "seed": draw(seeds),
        "drop_last": draw(flags),
    }


#: values that are not integers, for bad-input tests
non_integers = st.one_of(
    st.booleans(),
    st.floats(allow_nan=True),
    st.text(max_size=3),
    st.just([1]),
)
