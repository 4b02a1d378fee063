r"""A background process that samples from "remote" storage and fills a :class:`ShardCache`.

The remote is a directory of ``.npy`` files, each holding ``(m, *sample_shape)`` samples — or an
fsspec URL (``s3://bucket/data``, ``memory://x``) when fsspec is installed. The producer reads
random samples one at a time (a seek and a read of one row: it never loads a whole remote file),
stacks ``samples_per_shard`` of them and adds them to the cache as one shard. A bandwidth cap
(bytes per second) makes a local directory behave like slow storage.

It runs in its own process, so its reading and writing never hold the training process's GIL. A
SIGKILL at any moment is safe: a shard becomes visible only by the cache's atomic rename, and the
next :class:`ShardCache` opened on the directory deletes the dead process's temporary file.

References:
    seed 004 (a sampling subprocess writing local shards while training runs).
"""

from __future__ import annotations

import multiprocessing as mp
import numbers
import os
import time
from typing import IO, Any

import numpy as np

from ._validate import check_int
from .cache import ShardCache

__all__ = ["Producer", "RemoteSource", "produce"]

_HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}


class RemoteSource:
    r"""Random access to the samples of a directory (or fsspec URL) of ``.npy`` files.

    Args:
        source: a local directory, or a URL with a ``://`` (needs the ``fsspec`` package).

    Examples:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> np.save(f"{d}/a.npy", np.arange(6, dtype=np.int16).reshape(3, 2))
        >>> remote = RemoteSource(d)
        >>> remote.sample_shape, remote.read(0, 2)
        ((2,), array([4, 5], dtype=int16))
    """

    def __init__(self, source: str | os.PathLike) -> None:
        source = os.fspath(source)
        self.source = source
        if "://" in source:
            try:
                import fsspec
            except ImportError as err:
                raise ImportError(
                    f"source={source!r} is a URL, which needs fsspec: pip install fsspec"
                ) from err
            self._fs, root = fsspec.core.url_to_fs(source)
            self.files = sorted(self._fs.glob(root.rstrip("/") + "/*.npy"))
        else:
            if not os.path.isdir(source):
                raise FileNotFoundError(
                    f"source should be an existing directory, but got source={source!r}"
                )
            self._fs = None
            names = sorted(n for n in os.listdir(source) if n.endswith(".npy"))
            self.files = [os.path.join(source, n) for n in names]
        if not self.files:
            raise ValueError(f"source should hold .npy files, but got none in source={source!r}")
        self._open: dict[int, tuple[IO[bytes], int, int]] = {}  # file -> (handle, offset, rows)
        _, first_shape, self.dtype = self._header(0)
        self.sample_shape: tuple[int, ...] = first_shape
        self.row_bytes = int(np.prod(first_shape, dtype=np.int64)) * self.dtype.itemsize

    def _header(self, k: int) -> tuple[int, tuple[int, ...], np.dtype]:
        """Open file ``k``; parse its ``.npy`` header: (rows, sample_shape, dtype)."""
        path = self.files[k]
        f = self._fs.open(path, "rb") if self._fs else open(path, "rb")
        version = np.lib.format.read_magic(f)
        if version not in _HEADER_READERS:
            raise ValueError(f"{path} should be a .npy file of format 1.0 or 2.0, got {version}")
        shape, fortran, dtype = _HEADER_READERS[version](f)
        if fortran or len(shape) < 1 or dtype.hasobject:
            raise ValueError(f"{path} should hold a C-order array of samples, but got {shape}")
        self._open[k] = (f, f.tell(), shape[0])  # the data starts right after the header
        return shape[0], tuple(shape[1:]), dtype

    def read(self, k: int, row: int) -> np.ndarray:
        """Read sample ``row`` of file ``k`` (one seek, one read of ``row_bytes``)."""
        if k not in self._open:
            _, shape, dtype = self._header(k)
            if shape != self.sample_shape or dtype != self.dtype:
                raise ValueError(
                    f"every file of the source should hold samples of shape {self.sample_shape} "
                    f"and dtype {self.dtype}, but {self.files[k]} holds {shape}, {dtype}"
                )
        f, offset, _ = self._open[k]
        f.seek(offset + row * self.row_bytes)
        data = f.read(self.row_bytes)
        if len(data) != self.row_bytes:
            raise ValueError(f"{self.files[k]} is truncated: its sample {row} is cut short")
        return np.frombuffer(data, self.dtype).reshape(self.sample_shape)

    def close(self) -> None:
        """Close the open files."""
        for f, _, _ in self._open.values():
            f.close()
        self._open.clear()

    def rows(self, k: int) -> int:
        """Number of samples in file ``k``."""
        if k not in self._open:
            self.read(k, 0)
        return self._open[k][2]


def produce(
    source: str | os.PathLike,
    cache: ShardCache,
    *,
    samples_per_shard: int,
    bandwidth: float | None = None,
    seed: int = 0,
    max_shards: int | None = None,
    stop: Any = None,
    written: Any = None,
) -> int:
    r"""Fill ``cache`` with shards of random remote samples (the loop the :class:`Producer` runs).

    Args:
        source: a directory of ``.npy`` sample files, or an fsspec URL.
        cache: the :class:`ShardCache` to fill.
        samples_per_shard: samples stacked into each shard.
        bandwidth: the most bytes per second read from the source (``None``: no cap).
        seed: seed of the random choice of samples (``>= 0``).
        max_shards: stop after this many shards (``None``: run until ``stop`` is set).
        stop: an event; the loop ends (between shards) once it is set.
        written: a shared ``multiprocessing.Value`` counting the shards committed.

    Returns:
        The number of shards written.
    """
    samples_per_shard, bandwidth, max_shards = _check(
        samples_per_shard, bandwidth, max_shards, seed
    )
    remote = RemoteSource(source)
    rng = np.random.default_rng(seed)
    start, read, count = time.monotonic(), 0, 0
    while (max_shards is None or count < max_shards) and not (stop and stop.is_set()):
        shard = np.empty((samples_per_shard, *remote.sample_shape), remote.dtype)
        for i in range(samples_per_shard):
            k = int(rng.integers(len(remote.files)))  # a random file, then a random row of it
            shard[i] = remote.read(k, int(rng.integers(remote.rows(k))))
            read += remote.row_bytes
            if bandwidth is not None:  # sleep until the average rate is back under the cap
                time.sleep(max(0.0, read / bandwidth - (time.monotonic() - start)))
        cache.add(shard)
        count += 1
        if written is not None:
            with written.get_lock():
                written.value += 1
    remote.close()
    return count


class Producer:
    r"""Run :func:`produce` in a background process; ``stop()`` (or leaving ``with``) ends it.

    Args:
        source: a directory of ``.npy`` sample files, or an fsspec URL.
        cache: the :class:`ShardCache` to fill.
        samples_per_shard: samples stacked into each shard.
        bandwidth: the most bytes per second read from the source (``None``: no cap).
        seed: seed of the random choice of samples.
        max_shards: stop after this many shards (``None``: run until stopped).
        context: the multiprocessing start method (``"spawn"`` is safe with torch's threads).

    Examples:
        >>> import tempfile
        >>> remote, local = tempfile.mkdtemp(), tempfile.mkdtemp()
        >>> np.save(f"{remote}/a.npy", np.ones((10, 4), np.float32))
        >>> cache = ShardCache(local, capacity_bytes=1 << 20)
        >>> with Producer(remote, cache, samples_per_shard=5, max_shards=3) as p:
        ...     p.join(timeout=60)
        >>> p.written, len(cache.snapshot(epoch=0))
        (3, 15)
    """

    def __init__(
        self,
        source: str | os.PathLike,
        cache: ShardCache,
        *,
        samples_per_shard: int,
        bandwidth: float | None = None,
        seed: int = 0,
        max_shards: int | None = None,
        context: str = "spawn",
    ) -> None:
        _check(samples_per_shard, bandwidth, max_shards, seed)
        RemoteSource(source).close()  # fail here, in the caller, on a bad source (not the child)
        ctx = mp.get_context(context)
        self._stop, self._written = ctx.Event(), ctx.Value("q", 0)
        kwargs = {"samples_per_shard": samples_per_shard, "bandwidth": bandwidth, "seed": seed}
        kwargs |= {"max_shards": max_shards, "stop": self._stop, "written": self._written}
        self.process = ctx.Process(target=produce, args=(source, cache), kwargs=kwargs, daemon=True)
        self.process.start()

    @property
    def written(self) -> int:
        """Shards committed to the cache so far."""
        return self._written.value

    def join(self, timeout: float | None = None) -> None:
        """Wait for the process to finish (``max_shards`` reached, or stopped)."""
        self.process.join(timeout)

    def stop(self, timeout: float = 30.0) -> None:
        """Ask the process to stop after its current shard, wait; kill it after ``timeout``."""
        self._stop.set()
        self.process.join(timeout)
        if self.process.is_alive():
            self.process.kill()  # safe at any moment: no torn shard becomes visible
            self.process.join()

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _check(
    samples_per_shard: int, bandwidth: float | None, max_shards: int | None, seed: int
) -> tuple[int, float | None, int | None]:
    """Validate the arguments shared by :func:`produce` and :class:`Producer`."""
    check_int("seed", seed, low=0)  # numpy's generators take non-negative seeds
    samples_per_shard = check_int("samples_per_shard", samples_per_shard, low=1)
    if bandwidth is not None and (
        isinstance(bandwidth, bool) or not isinstance(bandwidth, numbers.Real) or not bandwidth > 0
    ):
        raise ValueError(
            f"bandwidth should be a positive number of bytes per second or None, "
            f"but got bandwidth={bandwidth!r}"
        )
    if max_shards is not None:
        max_shards = check_int("max_shards", max_shards, low=1)
    return samples_per_shard, bandwidth, max_shards
