"""Properties of distsampling.growing.nodes: many nodes, one producer and cache each, equal steps.

The multi-node properties run in one real run: two ``torchrun`` agents (``--nnodes=2
--nproc-per-node=2``, static rendezvous on 127.0.0.1, gloo), started by
:func:`distsampling.run_nodes`, bounded by a timeout, every process killed afterwards. They are
in the ``worlds`` xdist group with every other test that starts a process group: one such run
at a time, so that their processes never crowd the cores together. The run
also replays the sampler harness of tests/worlds.py on 2 nodes x 2 processes, where ``RANK`` and
``LOCAL_RANK`` differ. Each test asserts one property of what rank 0 gathered.
"""

from __future__ import annotations

import os
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest
import torch.distributed as dist
from s3_server import assert_whole_rows, rows

from distsampling import NodeFeed, run_nodes, run_world
from distsampling.distributed import DistributedSampler
from distsampling.growing.nodes import FirstOf, node_topology
from distsampling.tools.launch import free_port
from test_multiprocess import single_process
from worlds import SCENARIOS

TESTS = str(Path(__file__).resolve().parent.parent)
HERE = str(Path(__file__).resolve().parent)
NODES, PER_NODE, EPOCHS, SCENARIO_EPOCHS = 2, 2, 3, 2
FILES = {j: 10 + 3 * j for j in range(4)}  # remote file j holds 10 + 3 j rows


@pytest.fixture(scope="session")  # one run per worker, even if other modules' tests interleave
def two_nodes(tmp_path_factory):
    """``(scenarios, records)`` gathered on rank 0 of a 2 x 2 torchrun run."""
    remote = tmp_path_factory.mktemp("remote")
    for j, n in FILES.items():
        np.save(remote / f"part-{j}.npy", rows(j, n))
    caches = tmp_path_factory.mktemp("caches")
    results = run_nodes(
        "nodes_job:train_on_nodes",
        NODES,
        PER_NODE,
        str(remote),
        str(caches),
        EPOCHS,
        list(SCENARIOS),
        SCENARIO_EPOCHS,
        timeout=240,
        pythonpath=[TESTS, HERE],
    )
    assert results[1:] == [None] * (NODES * PER_NODE - 1)  # only rank 0 returns
    records = [r for rank in results[0]["records"] for r in rank]
    return results[0]["scenarios"], records


def by_epoch(records: list[dict]) -> dict[int, list[dict]]:
    out: dict[int, list[dict]] = defaultdict(list)
    for r in records:
        out[r["epoch"]].append(r)
    return out


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
def test_torchrun_numbers_ranks_node_by_node(two_nodes):
    """Invariant: rank = node * local_world + local_rank; each node has its own cache directory."""
    _, records = two_nodes
    for r in records:
        assert (r["nodes"], r["local_world"]) == (NODES, PER_NODE)
        assert r["rank"] == r["node"] * PER_NODE + r["local_rank"]
    caches = {r["node"]: r["cache"] for r in records}
    assert len(set(caches.values())) == NODES


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
def test_every_rank_runs_the_same_number_of_steps_every_epoch(two_nodes):
    """Invariant: per epoch, every rank reads m = min over nodes of len // ranks per node samples,
    in the same number of batches, though the nodes' snapshots differ in length."""
    _, records = two_nodes
    epochs = by_epoch(records)
    assert sorted(epochs) == list(range(EPOCHS))
    for rs in epochs.values():
        assert len(rs) == NODES * PER_NODE
        m = min(r["length"] for r in rs) // PER_NODE
        assert m >= 1
        assert {r["m"] for r in rs} == {m}
        assert {len(r["indices"]) for r in rs} == {m}
        assert {r["steps"] for r in rs} == {-(-m // 3)}
    # the throttled node lags: the agreement was needed (else this test proves little)
    assert any(len({r["length"] for r in rs}) > 1 for rs in epochs.values())


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
def test_a_nodes_ranks_split_its_snapshot_disjointly(two_nodes):
    """Invariant: the ranks of one node share its snapshot and read disjoint indices of it."""
    _, records = two_nodes
    for rs in by_epoch(records).values():
        for node in range(NODES):
            mine = [r for r in rs if r["node"] == node]
            assert len({tuple(r["shards"]) for r in mine}) == 1  # one frozen snapshot per node
            seen = [i for r in mine for i in r["indices"]]
            assert len(seen) == len(set(seen))
            assert all(0 <= i < mine[0]["length"] for i in seen)


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
def test_nodes_train_on_disjoint_samples_each_whole(two_nodes):
    """Invariant: node k reads only files j with j % 2 == k; every sample is a whole remote row
    and is exactly the snapshot's sample at the index the sampler gave."""
    _, records = two_nodes
    files_of = defaultdict(set)
    for r in records:
        samples = np.asarray(r["samples"], np.int32).reshape(-1, 3)
        assert_whole_rows(samples, FILES)
        assert r["as_in_snapshot"]
        files_of[r["node"]] |= set(samples[:, 0].tolist())
    assert files_of[0] and files_of[1]
    assert all(j % NODES == node for node, files in files_of.items() for j in files)
    assert not files_of[0] & files_of[1]


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
@pytest.mark.parametrize("name", list(SCENARIOS))
def test_sampler_harness_on_two_nodes_matches_the_single_process_computation(two_nodes, name):
    """Invariant: on 2 nodes x 2 processes (RANK != LOCAL_RANK), each rank yields what one
    process computes for its global rank."""
    scenarios, _ = two_nodes
    for epoch in range(SCENARIO_EPOCHS):
        assert scenarios[name][epoch] == single_process(name, NODES * PER_NODE, epoch)


# --- one process, no process group --------------------------------------------------------------


def test_without_a_process_group_the_topology_is_one_node_of_one_rank():
    """Invariant: outside torch.distributed, node_topology() is (0, 1, 0, 1)."""
    assert node_topology() == (0, 1, 0, 1)


def test_first_of_keeps_the_head_of_the_epoch_and_forwards_set_epoch():
    """Invariant: FirstOf(s, n) yields s's first n indices of the epoch set on it."""
    inner = DistributedSampler(range(20), 2, 1, seed=3)
    first = FirstOf(inner, 4)
    first.set_epoch(5)
    assert len(first) == 4 and list(first) == list(inner)[:4] and inner.epoch == 5
    with pytest.raises(ValueError, match=r"n should be in the interval \[0, 10\], but got n=11"):
        FirstOf(inner, 11)


@pytest.mark.multiprocess
@pytest.mark.xdist_group("worlds")
def test_a_producer_that_cannot_start_fails_every_rank_not_only_its_own(tmp_path):
    """Invariant: local rank 0's producer fails to start (no .npy files): rank 0 raises that
    error, the other ranks raise RuntimeError naming the node, none waits in a collective."""
    (tmp_path / "empty").mkdir()
    errors = run_world(
        "nodes_job:start_over",
        2,
        str(tmp_path / "empty"),
        str(tmp_path / "cache"),
        timeout=120,
        pythonpath=[TESTS, HERE],
    )
    assert errors[0].startswith("ValueError: source should hold .npy files, but got none in")
    assert errors[1].startswith("RuntimeError: a node's producer could not start:\nnode 0: ")
    assert "source should hold .npy files" in errors[1]


@pytest.fixture
def process_group(monkeypatch):
    """A real one-process gloo group in this process, destroyed afterwards."""
    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1
    )
    try:
        yield
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"LOCAL_WORLD_SIZE": "1"},
            r"LOCAL_RANK and LOCAL_WORLD_SIZE should be set .* but got "
            r"LOCAL_RANK=None, LOCAL_WORLD_SIZE='1'",
        ),
        (
            {"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"},
            r"ranks should be numbered node \* "
            r"LOCAL_WORLD_SIZE \+ LOCAL_RANK .* but got RANK=0, WORLD_SIZE=1, GROUP_RANK=0, "
            r"LOCAL_RANK=1, LOCAL_WORLD_SIZE=2",
        ),
        (
            {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "1"},
            r"but got RANK=0, "
            r"WORLD_SIZE=1, GROUP_RANK=1",
        ),
    ],
)
def test_a_rank_numbering_torchrun_would_not_give_is_refused(
    process_group, monkeypatch, env, message
):
    """Invariant: node_topology() refuses missing or inconsistent torchrun variables, naming them."""
    for name in ("LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(RuntimeError, match=message):
        node_topology()


def test_torchrun_variables_of_one_node_give_its_topology(process_group, monkeypatch):
    """Invariant: RANK 0 of 1, LOCAL_RANK 0 of 1, GROUP_RANK 0 -> (0, 1, 0, 1)."""
    for name, value in {"LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "0"}.items():
        monkeypatch.setenv(name, value)
    assert node_topology() == (0, 1, 0, 1)


@pytest.fixture
def remote_dir(tmp_path):
    (tmp_path / "remote").mkdir()
    for j, n in FILES.items():
        np.save(tmp_path / "remote" / f"part-{j}.npy", rows(j, n))
    return str(tmp_path / "remote"), str(tmp_path / "cache")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"batch_size": 0}, ValueError, r"batch_size should be >= 1, but got batch_size=0"),
        ({"seed": -1}, ValueError, r"seed should be >= 0, but got seed=-1"),
        ({"min_samples": 0}, ValueError, r"min_samples should be >= 1, but got min_samples=0"),
        ({"wait_timeout": 0}, ValueError, r"wait_timeout should be a positive .* wait_timeout=0"),
    ],
)
def test_bad_arguments_raise_naming_them(remote_dir, kwargs, error, message):
    """Invariant: each bad argument is refused, named, before any producer starts."""
    remote, cache = remote_dir
    args = {"capacity_bytes": 1 << 20, "samples_per_shard": 4, "batch_size": 2} | kwargs
    with pytest.raises(error, match=message):
        NodeFeed(remote, cache, **args)
    assert not os.path.exists(cache) or os.listdir(cache) in ([], [".lock"])


def test_one_process_reads_its_whole_snapshot_every_epoch(remote_dir):
    """Invariant: alone, a rank reads m = len(snapshot) samples, each a whole remote row."""
    remote, cache = remote_dir
    with NodeFeed(
        remote, cache, capacity_bytes=1 << 20, samples_per_shard=4, batch_size=4, min_samples=8
    ) as feed:
        for epoch in range(2):
            got = np.concatenate([b.numpy() for b in feed.epoch(epoch)])
            assert feed.samples_per_rank == len(got) >= 8
            assert_whole_rows(got, FILES)


# --- a real S3 API (moto's server on 127.0.0.1) going down under a training loop -----------------


@pytest.fixture
def s3_feed_args(s3_server):
    """``(server, url, NodeFeed keyword arguments)`` over four files in s3://data/train."""
    url = s3_server.put_arrays(
        "data/train", {f"part-{j}.npy": rows(j, n) for j, n in FILES.items()}
    )
    kwargs = {
        "capacity_bytes": 1 << 20,
        "samples_per_shard": 4,
        "batch_size": 4,
        "min_samples": 8,
        "wait_timeout": 60.0,
    }
    return s3_server, url, kwargs


def wait_until(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


@pytest.mark.timeout(180)
def test_an_s3_server_restarted_mid_epoch_is_retried_and_no_sample_is_torn(s3_feed_args, tmp_path):
    """Invariant: storage down then back mid-epoch: the producer retries and goes on; every
    sample of every epoch is a whole remote row; the training loop sees no error."""
    server, url, kwargs = s3_feed_args
    options = {"storage_options": server.options(), "deadline": 60.0, "bandwidth": 1200.0}
    read = []
    with NodeFeed(url, tmp_path / "cache", **kwargs, producer_options=options) as feed:
        for epoch in range(3):
            for step, batch in enumerate(feed.epoch(epoch)):
                read.append(batch.numpy())
                if epoch == 0 and step == 0:  # mid-epoch: the storage goes away for a while
                    server.stop()
                    time.sleep(1.0)
                    server.start()
                    written_at_restart = feed.producer.written
            if epoch == 0:  # the producer comes back with the storage, and goes on
                target = written_at_restart + 2
                wait_until(lambda: feed.producer.written > target)  # noqa: B023 (called here)
                assert feed.producer.retries >= 1  # the storage was down: it retried
        feed.producer.check()  # it never failed
    assert_whole_rows(np.concatenate(read), FILES)


@pytest.mark.timeout(180)
def test_s3_down_past_the_deadline_stops_training_with_the_url(s3_feed_args, tmp_path):
    """Invariant: storage down longer than the producer's deadline: the next epoch raises, in
    the training process, the producer's error naming the URL."""
    server, url, kwargs = s3_feed_args
    options = {"storage_options": server.options(), "deadline": 1.0, "bandwidth": 1200.0}
    with pytest.raises(
        RuntimeError,
        match=r"(?s)epoch 1 cannot start on every rank:\nnode 0: the producer process failed:.*"
        r"RemoteUnavailableError: s3://data/train/part-\d\.npy: the storage kept failing",
    ):
        with NodeFeed(url, tmp_path / "cache", **kwargs, producer_options=options) as feed:
            for _ in feed.epoch(0):
                server.stop()  # and never back
            wait_until(lambda: not feed.producer.process.is_alive())
            for _ in feed.epoch(1):
                pass
    assert not feed.producer  # stopped (closed) on the way out


def test_a_producer_killed_without_a_word_stops_the_next_epoch_with_its_exit_code(remote_dir):
    """Invariant: a SIGKILLed producer (out of memory, say) is reported at the next epoch with
    its exit code, not waited for until wait_timeout."""
    remote, cache = remote_dir
    with pytest.raises(
        RuntimeError,
        match=r"epoch 1 cannot start on every rank:\nnode 0: the producer process died with "
        r"exit code -9 \(SIGKILL\)",
    ):
        with NodeFeed(
            remote,
            cache,
            capacity_bytes=1 << 20,
            samples_per_shard=4,
            batch_size=4,
            wait_timeout=600.0,
            producer_options={"bandwidth": 240.0},
        ) as feed:
            for _ in feed.epoch(0):
                pass
            feed.producer.process.kill()
            feed.producer.process.join(timeout=60)
            for _ in feed.epoch(1):
                pass
