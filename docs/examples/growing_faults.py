import os
import signal
import tempfile
import textwrap
import time

import numpy as np

from distsampling import Producer, ShardCache


def main() -> None:
    remote, local = tempfile.mkdtemp(), tempfile.mkdtemp()
    np.save(f"{remote}/part-0.npy", np.ones((100, 16), np.float32))
    cache = ShardCache(local, capacity_bytes=1 << 20)

    producer = Producer(remote, cache, samples_per_shard=8, bandwidth=8_000)
    while producer.written < 2:
        time.sleep(0.01)
    os.kill(producer.process.pid, signal.SIGKILL)  # the out-of-memory killer, at any instant

    # every call of the trainer returns or raises at once: nothing shared is left locked
    try:
        producer.join()  # as check(), stop() and leaving `with Producer(...)` do
    except RuntimeError as err:
        print(textwrap.fill(str(err), width=88))
    written = producer.written  # its counters still read: the shards counted before the kill
    print("shards counted before the kill:", written >= 2)

    # the cache is whole: the epoch goes on with the shards committed before the kill
    frozen = len(cache.snapshot(0))
    print("epoch 0 reads the committed shards:", frozen in (8 * written, 8 * written + 8))
    # but the cache no longer grows: a new producer on the same cache goes on
    with Producer(remote, cache, samples_per_shard=8, max_shards=2) as again:
        again.join()
    print("a new producer adds 2 shards:", len(cache.snapshot(1)) == frozen + 16)


if __name__ == "__main__":  # the producer is a spawned process: it re-imports this file
    main()
