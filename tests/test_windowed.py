"""Properties of distsampling.SequentialWindowedDataset, through our samplers and torch's."""

from __future__ import annotations

import json
import pickle
import random
import subprocess
import sys
from collections import Counter
from itertools import count, pairwise

import numpy as np
import pytest
import torch
import torch.utils.data as tud
from hypothesis import given
from hypothesis import strategies as st

from distsampling import (
    BatchSampler,
    DistributedSampler,
    SequentialWindowedDataset,
    epoch_offset,
    window_indices,
)
from strategies import (
    batch_sizes,
    epochs,
    flags,
    non_integers,
    seeds,
    windowed_args,
    windowed_seeds,
    world_sizes,
)


def starts_of(epoch: int = 0, **args) -> list[int]:
    """All window starts of one epoch, in dataset order."""
    ds = SequentialWindowedDataset(**args)
    ds.set_epoch(epoch)
    return [ds[i] for i in range(len(ds))]


def coverage(args: dict, epoch: int) -> Counter:
    """How often each sample index is read by the windows of one epoch."""
    rows = window_indices(starts_of(epoch, **args), args["window"], args["size"])
    return Counter(rows.flatten().tolist())


def epoch_with_offset(size: int, offset: int, seed: int = 0) -> int:
    """The first epoch whose offset is ``offset`` (found, not hard-coded)."""
    return next(e for e in count() if epoch_offset(size, seed, e) == offset)


@given(args=windowed_args(), epoch=epochs)
def test_consecutive_starts_differ_by_exactly_window_modulo_size(args, epoch):
    """Invariant: start i+1 - start i == window (mod size), and window 0 starts at the offset."""
    s = starts_of(epoch, **args)
    n, t = args["size"], args["window"]
    assert s[0] == epoch_offset(n, args["seed"], epoch)
    assert all(0 <= a < n for a in s)
    assert all((b - a) % n == t % n for a, b in pairwise(s))


@given(args=windowed_args(), epoch=epochs)
def test_len_is_ceil_of_size_over_window_or_floor_with_drop_last(args, epoch):
    """Invariant: len == ceil(size / window), or size // window with drop_last; iteration stops there."""
    ds = SequentialWindowedDataset(**args)
    ds.set_epoch(epoch)
    n, t = args["size"], args["window"]
    assert len(ds) == (n // t if args["drop_last"] else -(-n // t))
    assert len(list(ds)) == len(ds)  # __getitem__ raises IndexError at len(ds)


@given(size=st.integers(2**40, 2**62), window=st.integers(1, 64), epoch=epochs, data=st.data())
def test_no_array_of_starts_exists_so_a_huge_dataset_costs_nothing_per_item(
    size, window, epoch, data
):
    """Invariant: O(1) memory and work per item: sizes far beyond memory index like small ones.

    An array of starts (the user's design) would need ``size / window`` int64s, at least 2**34
    of them here (128 GiB and more): building one fails, so only arithmetic can pass.
    """
    ds = SequentialWindowedDataset(size, window, seed=1)
    ds.set_epoch(epoch)
    m = len(ds)
    assert m == -(-size // window)
    i = data.draw(st.integers(0, m - 1), label="i")
    assert ds[i] == (epoch_offset(size, 1, epoch) + i * window) % size
    assert ds[-1] == (ds.offset + (m - 1) * window) % size


@given(args=windowed_args(), epoch=epochs)
def test_windows_cover_every_index_once_when_window_divides_size(args, epoch):
    """Invariant: size % window == 0 -> every sample is read exactly once, drop_last or not."""
    args["size"] -= args["size"] % args["window"]
    if args["size"] == 0:
        args["size"] = args["window"]
    assert coverage(args, epoch) == Counter(range(args["size"]))


@given(args=windowed_args(), epoch=epochs)
def test_wrapped_windows_cover_all_and_repeat_exactly_window_minus_remainder(args, epoch):
    """Invariant: without drop_last all samples are read; window - size % window of them twice."""
    args["drop_last"] = False
    n, t = args["size"], args["window"]
    cover = coverage(args, epoch)
    assert set(cover) == set(range(n))
    twice = sorted(i for i, c in cover.items() if c == 2)
    assert set(cover.values()) <= {1, 2}
    assert len(twice) == (t - n % t if n % t else 0)
    # the repeats are the head of window 0: the last window wraps onto it
    offset = epoch_offset(n, args["seed"], epoch)
    assert twice == sorted((offset + k) % n for k in range(len(twice)))


@given(args=windowed_args(), epoch=epochs)
def test_drop_last_never_repeats_and_leaves_size_mod_window_before_the_offset(args, epoch):
    """Invariant: with drop_last no sample repeats; exactly size % window are unread, just before the offset."""
    args["drop_last"] = True
    n, t = args["size"], args["window"]
    cover = coverage(args, epoch)
    assert set(cover.values()) == {1}
    missing = set(range(n)) - set(cover)
    offset = epoch_offset(n, args["seed"], epoch)
    assert missing == {(offset - 1 - k) % n for k in range(n % t)}


@given(args=windowed_args(), epoch=epochs, other_state=st.integers(0, 2**32 - 1))
def test_starts_ignore_the_global_torch_numpy_and_random_state(args, epoch, other_state):
    """Invariant: the starts depend on (seed, epoch) only, whatever the global RNGs were seeded with."""
    torch.manual_seed(other_state)
    np.random.seed(other_state)
    random.seed(other_state)
    a = starts_of(epoch, **args)
    torch.rand(7), np.random.rand(7), random.random()  # move every global stream on
    assert starts_of(epoch, **args) == a


def test_a_fresh_process_with_other_global_rng_state_yields_the_same_starts():
    """Invariant: same (seed, epoch) -> same starts in a new interpreter (what every rank relies on)."""
    code = (
        "import json, random, numpy, torch\n"
        "random.seed(5); numpy.random.seed(5); torch.manual_seed(5); torch.rand(9)\n"
        "from distsampling import SequentialWindowedDataset\n"
        "ds = SequentialWindowedDataset(1000, 7, seed=42)\n"
        "out = []\n"
        "for epoch in range(4):\n"
        "    ds.set_epoch(epoch)\n"
        "    out.append(list(ds))\n"
        "print(json.dumps(out))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    torch.manual_seed(0)
    here = [starts_of(e, size=1000, window=7, seed=42) for e in range(4)]
    assert json.loads(proc.stdout) == here


@given(size=st.integers(2, 10**9), seed=windowed_seeds)
def test_epochs_draw_their_offsets_from_the_seed_stream(size, seed):
    """Invariant: offsets vary epoch to epoch, are reproduced by the same seed, and not by another."""
    stream = [epoch_offset(size, seed, e) for e in range(64)]
    assert len(set(stream)) > 1
    assert stream == [epoch_offset(size, seed, e) for e in range(64)]
    assert stream != [epoch_offset(size, seed + 1, e) for e in range(64)]
    # a hash of the pair, not of seed + epoch (torch's DistributedSampler uses the sum)
    assert stream[1:] != [epoch_offset(size, seed + 1, e) for e in range(63)]


@given(args=windowed_args(), world=world_sizes, seed=seeds, epoch=epochs, drop=flags)
def test_ranks_get_disjoint_windows_and_the_order_of_torchs_sampler(args, world, seed, epoch, drop):
    """Invariant: via DistributedSampler, ranks read disjoint positions covering all windows (+ padding), in torch's order."""
    ds = SequentialWindowedDataset(**args)
    ds.set_epoch(epoch)
    per_rank = []
    for rank in range(world):
        ours = DistributedSampler(ds, world, rank, shuffle=True, seed=seed, drop_last=drop)
        theirs = tud.DistributedSampler(ds, world, rank, shuffle=True, seed=seed, drop_last=drop)
        ours.set_epoch(epoch)
        theirs.set_epoch(epoch)
        idx_ours, idx_torch = list(ours), list(theirs)
        assert idx_ours == idx_torch  # the same window numbers, so the same starts
        per_rank.append(idx_ours)
    # position p of the padded epoch belongs to rank p % world only
    positions = [per_rank[p % world][p // world] for p in range(sum(map(len, per_rank)))]
    m = len(ds)
    if drop:
        assert len(positions) == len(set(positions)) == (m // world) * world
    else:
        assert sorted(set(positions[:m])) == list(range(m))  # every window once ...
        assert positions[m:] == [positions[k % m] for k in range(len(positions) - m)]  # + padding


@given(args=windowed_args(), world=world_sizes, epoch=epochs, n=batch_sizes, drop=flags)
def test_every_batch_is_n_windows_of_window_consecutive_samples(args, world, epoch, n, drop):
    """Invariant: DistributedSampler -> BatchSampler(n) yields batches of n windows, each t consecutive samples mod size."""
    ds = SequentialWindowedDataset(**args)
    ds.set_epoch(epoch)
    size, t = args["size"], args["window"]
    for rank in range(world):
        sampler = DistributedSampler(ds, world, rank, seed=3)
        sampler.set_epoch(epoch)
        idx_ours = list(BatchSampler(sampler, n, drop))
        idx_torch = list(tud.BatchSampler(sampler, n, drop))
        assert idx_ours == idx_torch
        assert all(len(b) == n for b in idx_ours[:-1])  # only the last batch may be short
        assert all(0 < len(b) <= n and (len(b) == n or not drop) for b in idx_ours[-1:])
        for batch in idx_ours:
            rows = window_indices([ds[i] for i in batch], t, size)  # (len(batch), t)
            assert rows.shape == (len(batch), t)
            assert ((rows[:, 1:] - rows[:, :-1]) % size == 1).all()  # consecutive, mod size


def test_the_users_example_ten_samples_n2_t3():
    """Invariant: data 1..10, n=2, t=3 gives the user's batches: [1-2-3, 4-5-6], [7-8-9, 10-1-2] at offset 0;
    at offset 1 on two ranks without shuffling, [2-3-4, 8-9-10] and [5-6-7, 1-2-3]."""
    data = torch.arange(1, 11)
    ds = SequentialWindowedDataset(10, 3, seed=0)
    ds.set_epoch(epoch_with_offset(10, 0))
    batches = BatchSampler(tud.SequentialSampler(ds), 2, False)
    got = [data[window_indices([ds[i] for i in b], 3, 10)].tolist() for b in batches]
    assert got == [[[1, 2, 3], [4, 5, 6]], [[7, 8, 9], [10, 1, 2]]]

    ds.set_epoch(epoch_with_offset(10, 1))
    per_rank = []
    for rank in range(2):
        sampler = DistributedSampler(ds, 2, rank, shuffle=False)
        (batch,) = BatchSampler(sampler, 2, False)
        per_rank.append(data[window_indices([ds[i] for i in batch], 3, 10)].tolist())
    assert per_rank == [[[2, 3, 4], [8, 9, 10]], [[5, 6, 7], [1, 2, 3]]]


@given(
    starts=st.lists(st.integers(-(10**6), 10**6), max_size=20),
    size=st.integers(1, 50),
    data=st.data(),
)
def test_window_indices_are_consecutive_runs_wrapped_into_range(starts, size, data):
    """Invariant: row k is starts[k] + 0..window-1 mod size, for lists, numpy arrays and tensors alike."""
    window = data.draw(st.integers(1, size), label="window")
    expected = [[(s + j) % size for j in range(window)] for s in starts]
    for form in (starts, np.array(starts, dtype=np.int64), torch.tensor(starts, dtype=torch.int32)):
        rows = window_indices(form, window, size)
        assert rows.dtype == torch.int64
        assert rows.shape == (len(starts), window)
        assert rows.tolist() == expected


@given(args=windowed_args(), epoch=epochs, features=st.integers(1, 3))
def test_indexing_a_series_reads_each_window_as_a_contiguous_wrapped_slice(args, epoch, features):
    """Invariant: series[window_indices(starts)] row k equals the slice series[s : s + t] of the series repeated twice."""
    n, t = args["size"], args["window"]
    series = torch.randn(n, features)
    starts = starts_of(epoch, **args)
    windows = series[window_indices(starts, t, n)]  # (batch, window, features)
    assert windows.shape == (len(starts), t, features)
    twice = torch.cat([series, series])
    for k, s in enumerate(starts):
        assert torch.equal(windows[k], twice[s : s + t])


def _loader_epochs(ds, sampler, epochs_, **loader_kwargs) -> list[list[list[int]]]:
    loader = tud.DataLoader(ds, batch_sampler=BatchSampler(sampler, 3, False), **loader_kwargs)
    out = []
    for epoch in range(epochs_):
        ds.set_epoch(epoch)  # before iter(loader), on the main process only
        sampler.set_epoch(epoch)
        out.append([b.tolist() for b in loader])
    return out


@pytest.mark.timeout(120)
@pytest.mark.parametrize("persistent", [False, True], ids=["fresh-workers", "persistent-workers"])
def test_dataloader_workers_see_each_epoch(persistent):
    """Invariant: with num_workers=2 (fresh or persistent workers), each epoch's batches hold that epoch's starts."""
    ds = SequentialWindowedDataset(200, 7, seed=9)
    sampler = DistributedSampler(ds, 2, 1, seed=4)
    got = _loader_epochs(ds, sampler, 3, num_workers=2, persistent_workers=persistent)
    expected = []
    for epoch in range(3):
        ds.set_epoch(epoch)
        sampler.set_epoch(epoch)
        expected.append([[ds[i] for i in b] for b in BatchSampler(sampler, 3, False)])
    assert got == expected
    assert expected[0] != expected[1] != expected[2]  # the epochs really differ


@pytest.mark.timeout(180)
def test_spawned_persistent_worker_sees_each_epoch_through_its_indices():
    """Invariant: a spawned (pickled) persistent worker still reads the epoch set after it
    started: each index our DistributedSampler hands it carries its pass's epoch."""
    ds = SequentialWindowedDataset(60, 4, seed=2)
    sampler = DistributedSampler(ds, 1, 0, seed=1)
    got = _loader_epochs(
        ds, sampler, 2, num_workers=1, persistent_workers=True, multiprocessing_context="spawn"
    )
    assert got == _loader_epochs(ds, sampler, 2)  # in-process loading as the reference


def test_pickling_keeps_the_epoch_and_the_starts():
    """Invariant: a pickled copy (what spawn sends a worker) has the same epoch, offset and
    starts; its set_epoch moves its own windows only, at once."""
    ds = SequentialWindowedDataset(100, 6, seed=8, drop_last=True)
    ds.set_epoch(5)
    copy = pickle.loads(pickle.dumps(ds))
    assert (copy.epoch, copy.offset, list(copy)) == (5, ds.offset, list(ds))
    copy.set_epoch(6)
    assert (copy.offset, ds.offset) == (epoch_offset(100, 8, 6), epoch_offset(100, 8, 5))
    assert repr(copy) == "SequentialWindowedDataset(size=100, window=6, seed=8, drop_last=True)"


@pytest.mark.timeout(120)
def test_a_late_set_epoch_with_a_persistent_worker_is_the_next_passs_and_moves_the_dataset_at_once():
    """Invariant: with one persistent worker, four epochs each read their own windows, and a
    ``set_epoch(99)`` after them moves the dataset to epoch 99's offset at once (nothing waits
    for the loader's iterator, which never ends); a ``set_epoch`` after the first batch leaves
    the rest of that pass its epoch's windows, and the next pass reads the new epoch's."""
    w = SequentialWindowedDataset(12, 3, seed=0)
    s = DistributedSampler(w, 1, 0, seed=1)
    loader = tud.DataLoader(w, sampler=s, batch_size=2, num_workers=1, persistent_workers=True)
    for e in range(4):
        s.set_epoch(e)
        assert [i for b in loader for i in b.tolist()] == [w[i] for i in s]
    s.set_epoch(99)
    assert (w.epoch, w.offset) == (99, epoch_offset(12, 0, 99))
    plan = [w[i] for i in s]
    batches = iter(loader)
    first = next(batches).tolist()
    s.set_epoch(100)  # late: after the first batch
    assert first + [i for b in batches for i in b.tolist()] == plan
    assert [i for b in loader for i in b.tolist()] == [w[i] for i in s]  # epoch 100's
    assert plan != [w[i] for i in s]


@given(args=windowed_args(), epoch=epochs, data=st.data())
def test_negative_and_numpy_indices_behave_like_a_sequence(args, epoch, data):
    """Invariant: ds[-k] == ds[len - k], numpy and 0-d tensor ints are accepted; outside the range raises IndexError."""
    ds = SequentialWindowedDataset(**args)
    ds.set_epoch(epoch)
    m = len(ds)
    i = data.draw(st.integers(0, m - 1), label="i")
    assert ds[i - m] == ds[i] == ds[np.int64(i)] == ds[torch.tensor(i)]
    for bad in (m, -m - 1):
        with pytest.raises(
            IndexError, match=rf"index should be in \[{-m}, {m}\), but got index={bad}$"
        ):
            ds[bad]


# ---- bad input: every error names the argument and its value ----


@pytest.mark.parametrize("name", ["size", "window", "seed"])
@given(value=non_integers)
def test_non_integer_arguments_are_rejected_naming_the_value(name, value):
    """Invariant: size, window and seed must be ints (bool excluded); the TypeError names them."""
    kwargs = {"size": 10, "window": 3, "seed": 0, name: value}
    with pytest.raises(TypeError, match=rf"{name} should be an integer, but got {name}="):
        SequentialWindowedDataset(**kwargs)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"size": 0}, "size should be >= 1, but got size=0"),
        ({"size": -4}, "size should be >= 1, but got size=-4"),
        ({"window": 0}, "window should be >= 1, but got window=0"),
        ({"window": 11}, r"window should be <= size=10 .*, but got window=11"),
        ({"seed": -1}, "seed should be >= 0, but got seed=-1"),
        ({"size": 2**63}, rf"size should be < 2\*\*63 \(stored as int64\), but got size={2**63}$"),
    ],
)
def test_out_of_range_arguments_are_rejected_naming_the_value(kwargs, message):
    """Invariant: size >= 1, 1 <= window <= size, seed >= 0; the ValueError names argument and value."""
    with pytest.raises(ValueError, match=message):
        SequentialWindowedDataset(**{"size": 10, "window": 3, **kwargs})


def test_drop_last_must_be_a_bool():
    """Invariant: drop_last is not guessed from a truthy value."""
    with pytest.raises(TypeError, match="drop_last should be a boolean value, but got drop_last=1"):
        SequentialWindowedDataset(10, 3, drop_last=1)


@given(value=st.one_of(non_integers, st.integers(max_value=-1)))
def test_set_epoch_rejects_negative_and_non_integer_epochs(value):
    """Invariant: set_epoch takes a non-negative int; the error names epoch and its value."""
    ds = SequentialWindowedDataset(10, 3)
    error = ValueError if isinstance(value, int) and not isinstance(value, bool) else TypeError
    with pytest.raises(error, match=r"epoch should be .*, but got epoch="):
        ds.set_epoch(value)
    assert ds.epoch == 0  # a rejected epoch changes nothing


def test_set_epoch_rejects_an_epoch_past_int64():
    """Invariant: the epoch is shared with workers as int64; a larger one is refused by name."""
    with pytest.raises(ValueError, match=rf"epoch should be < 2\*\*63 .*, but got epoch={2**63}$"):
        SequentialWindowedDataset(10, 3).set_epoch(2**63)


@pytest.mark.parametrize("index", [1.0, "0", None, torch.tensor([0, 1])])
def test_a_non_integer_index_is_rejected_naming_the_value(index):
    """Invariant: only integer indices are accepted; the TypeError names index."""
    with pytest.raises(TypeError, match=r"index should be an integer, but got index="):
        SequentialWindowedDataset(10, 3)[index]


@pytest.mark.parametrize(
    ("starts", "error", "message"),
    [
        ([0.5, 1.0], TypeError, r"starts should be 1-D integers, but got starts=tensor\(\[0.5"),
        ([True], TypeError, r"starts should be 1-D integers, but got starts=tensor\(\[True\]\)"),
        (["a"], TypeError, r"starts should be 1-D integers, but got starts=\['a'\]"),
        ([[0, 1]], ValueError, r"starts should be 1-D, but got starts of shape \(1, 2\)"),
        (torch.tensor(3), ValueError, r"starts should be 1-D, but got starts of shape \(\)"),
    ],
)
def test_window_indices_rejects_bad_starts_naming_them(starts, error, message):
    """Invariant: starts must be 1-D integers; the error names starts and what was passed."""
    with pytest.raises(error, match=message):
        window_indices(starts, 3, 10)


def test_window_indices_rejects_a_size_past_int64_like_the_dataset():
    """Invariant: the helper takes the sizes the dataset takes: past int64 is refused by name,
    not an OverflowError from torch."""
    with pytest.raises(ValueError, match=rf"size should be < 2\*\*63 .*, but got size={2**70}$"):
        window_indices([0], 1, 2**70)


def test_window_indices_rejects_a_window_longer_than_the_data():
    """Invariant: window <= size in the helper as in the dataset, with both values named."""
    with pytest.raises(ValueError, match=r"window should be <= size=4 .*, but got window=5"):
        window_indices([0], 5, 4)


@given(args=windowed_args(), epoch=epochs, data=st.data())
def test_omitted_seed_and_drop_last_are_zero_and_false(args, epoch, data):
    """Invariant: leaving out seed or drop_last is the same as seed=0 and drop_last=False."""
    omitted = {k: v for k, v in args.items() if k in ("size", "window") or data.draw(st.booleans())}
    defaults = {"seed": 0, "drop_last": False, **omitted}
    assert starts_of(epoch, **omitted) == starts_of(epoch, **defaults)
    assert len(SequentialWindowedDataset(**omitted)) == len(SequentialWindowedDataset(**defaults))


@given(window=st.integers(1, 8), epoch=st.sampled_from([0, 1, 2**63 - 1]))
def test_sizes_and_epochs_up_to_int64_max_are_kept_exactly(window, epoch):
    """Invariant: size and epoch of exactly 2**63 - 1 (the int64 limit) are accepted and read back
    exactly; the windows are still window apart, wrapped into [0, size)."""
    size = 2**63 - 1
    ds = SequentialWindowedDataset(size, window)
    ds.set_epoch(epoch)
    assert (ds.size, ds.epoch, ds.offset) == (size, epoch, epoch_offset(size, 0, epoch))
    assert len(ds) == -(-size // window)
    assert (
        ds[1] == (ds.offset + window) % size
        and ds[-1] == (ds.offset + (len(ds) - 1) * window) % size
    )


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"size": 0}, ValueError, "size should be >= 1, but got size=0"),
        ({"seed": -1}, ValueError, "seed should be >= 0, but got seed=-1"),
        ({"epoch": -1}, ValueError, "epoch should be >= 0, but got epoch=-1"),
        ({"size": 2.0}, TypeError, "size should be an integer, but got size=2.0"),
        ({"seed": "0"}, TypeError, "seed should be an integer, but got seed='0'"),
        ({"epoch": None}, TypeError, "epoch should be an integer, but got epoch=None"),
    ],
)
def test_epoch_offset_rejects_bad_arguments_naming_the_value(kwargs, error, message):
    """Invariant: the public epoch_offset checks size >= 1 and non-negative integer seed and epoch."""
    with pytest.raises(error, match=f"^{message}"):
        epoch_offset(**{"size": 10, "seed": 0, "epoch": 0, **kwargs})


@pytest.mark.parametrize(
    ("window", "size", "message"),
    [
        (0, 10, "window should be >= 1, but got window=0"),
        (3, 0, "size should be >= 1, but got size=0"),
        (1.0, 10, "window should be an integer, but got window=1.0"),
    ],
)
def test_window_indices_rejects_a_bad_window_or_size_naming_the_value(window, size, message):
    """Invariant: window_indices checks its window and size as the dataset does."""
    with pytest.raises((TypeError, ValueError), match=f"^{message}"):
        window_indices([0], window, size)


@given(size=st.integers(1, 2**63 - 1), seed=windowed_seeds, epoch=st.integers(0, 2**63 - 1))
def test_the_offset_is_the_seed_sequences_128_bits_of_seed_and_epoch_modulo_size(size, seed, epoch):
    """Invariant: epoch_offset is the documented hash: SeedSequence([seed, epoch]) read as one
    128-bit number (first word high), modulo size; no other state enters."""
    high, low = np.random.SeedSequence([seed, epoch]).generate_state(2, dtype=np.uint64)
    assert epoch_offset(size, seed, epoch) == (int(high) * 2**64 + int(low)) % size


@given(
    args=windowed_args(),
    dtype=st.sampled_from(
        [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64]
    ),
    data=st.data(),
)
def test_window_indices_take_starts_of_every_integer_dtype(args, dtype, data):
    """Invariant: starts as a numpy array of any integer dtype (unsigned ones included, which
    torch cannot add to int64 directly) give the same int64 windows as a list of ints."""
    size, window = args["size"], args["window"]
    starts = data.draw(st.lists(st.integers(0, size - 1), max_size=6), label="starts")
    expected = window_indices(starts, window, size)
    got = window_indices(np.array(starts, dtype=dtype), window, size)
    assert got.dtype == torch.int64 and torch.equal(got, expected)


def test_window_indices_take_numpy_unsigned_starts_past_int64_exactly():
    """Invariant: uint64 starts at or past 2**63, as a numpy array or as a list of numpy's
    scalars (which torch.as_tensor refuses), give each start's exact windows mod ``size``,
    never int64's wrap of the start."""
    starts = np.array([2**63, 2**64 - 1, 3], dtype=np.uint64)
    expected = [[(int(s) + k) % 10 for k in range(3)] for s in starts]
    assert window_indices(starts, 3, 10).tolist() == expected
    assert window_indices(list(starts), 3, 10).tolist() == expected


@given(bad=st.sets(st.sampled_from(["size", "window", "seed", "drop_last"]), min_size=1))
def test_the_first_bad_argument_is_the_one_named(bad):
    """Invariant: SequentialWindowedDataset checks size, window, seed and drop_last in that
    order: whichever others are wrong too, the error names the first bad one."""
    good = {"size": 10, "window": 3, "seed": 0, "drop_last": False}
    wrong = {"size": 0, "window": 11, "seed": -1, "drop_last": 1}
    args = {k: wrong[k] if k in bad else v for k, v in good.items()}
    first = next(k for k in good if k in bad)
    with pytest.raises((ValueError, TypeError), match=rf"^{first} should be "):
        SequentialWindowedDataset(**args)
