"""The streaming mixtures' benchmark data (``peers_sharded_mixture.py``): the same shards in
every peer's format, written once into ``/tmp/distsampling-bench-sharded-mixture``.

``.npy`` files of the indices (ours, Hugging Face and torchdata read them through a generator, as
``read(shard)``), MDS shards by Mosaic's ``MDSWriter`` (``size_limit`` set for about the shard's
samples), LitData chunks by its ``optimize()`` (``chunk_size`` the shard's samples). A sample is
its ``(source, index in the source)``: nothing to decode. Three scales of the three-source task
at 0.5 / 0.3 / 0.2: small (60,000 / 6,000 / 600 in shards of 500, 500, 300), large (1e6) and
huge (1e8, written for Mosaic and LitData only: the others read lazy generators).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np

DATA = Path("/tmp/distsampling-bench-sharded-mixture")
WEIGHTS = [0.5, 0.3, 0.2]
SMALL = ([60_000, 6_000, 600], [500, 500, 300])  # (sizes, samples a shard)
LARGE = ([900_000, 90_000, 10_000], [10_000] * 3)  # 1e6
HUGE = ([90_000_000, 9_000_000, 1_000_000], [10_000] * 3)  # 1e8: lazy shards only
SCALES = {"small": SMALL, "large": LARGE, "huge": HUGE}


def _shards(size: int, per: int) -> list[range]:
    return [range(a, min(a + per, size)) for a in range(0, size, per)]


def _dir(scale: str) -> Path:
    return DATA / scale


def npy_shards(scale: str) -> list[list[str]]:
    """Per source, its shards' ``.npy`` paths (each file: the indices of its samples)."""
    sizes, per = SMALL if scale == "small" else LARGE
    out = []
    for k, (n, p) in enumerate(zip(sizes, per, strict=True)):
        paths = []
        for j, r in enumerate(_shards(n, p)):
            path = _dir(scale) / "npy" / f"{k}-{j:05d}.npy"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                np.save(path, np.arange(r.start, r.stop, dtype=np.int64))
            paths.append(str(path))
        out.append(paths)
    return out


def read_npy(path: str) -> Iterator[int]:
    """One shard's samples front to back (ours' ``read(shard)``; HF's and torchdata's too)."""
    return iter(np.load(path).tolist())


def _streaming():
    from .peers import _streaming

    return _streaming()


def mds_dirs(scale: str) -> list[str]:
    """Per source, a directory of MDS shards written by Mosaic's ``MDSWriter``."""
    sizes, per = SCALES[scale]
    out = []
    for k, (n, p) in enumerate(zip(sizes, per, strict=True)):
        d = _dir(scale) / "mds" / str(k)
        if not (d / "index.json").exists():
            # an MDS sample of two int64 columns takes 4 (offset) + 16 bytes: ~p a shard
            with _streaming().MDSWriter(out=str(d), columns={"k": "int64", "i": "int64"},
                                        size_limit=20 * p + 64) as writer:  # fmt: skip
                for i in range(n):
                    writer.write({"k": k, "i": i})
        out.append(str(d))
    return out


def _litdata_items(r: tuple[int, int, int]) -> Iterator[dict[str, int]]:
    k, a, b = r
    for i in range(a, b):
        yield {"k": k, "i": i}


def litdata_dirs(scale: str) -> list[str]:
    """Per source, a directory of LitData chunks written by its ``optimize()``."""
    import litdata

    sizes, per = SCALES[scale]
    out = []
    for k, (n, p) in enumerate(zip(sizes, per, strict=True)):
        d = _dir(scale) / "litdata" / str(k)
        if not (d / "index.json").exists():
            inputs = [(k, r.start, r.stop) for r in _shards(n, p)]
            litdata.optimize(fn=_litdata_items, inputs=inputs, output_dir=str(d), chunk_size=p,
                             num_workers=os.cpu_count() or 1, mode="overwrite")  # fmt: skip
        out.append(str(d))
    return out


def write_all(speed: bool = True) -> None:
    """Every format written once; the 1e6 and 1e8 ones only for the speed part (composition
    and resume read the small task alone)."""
    for scale in ("small", "large") if speed else ("small",):
        npy_shards(scale), mds_dirs(scale), litdata_dirs(scale)
    if speed:
        mds_dirs("huge")  # 1e8 samples, 2 GB: MDSWriter took 15 min here (110,000 samples/s)
        litdata_dirs("huge")  # 2 GB: optimize() with 2 workers took 25 min here
