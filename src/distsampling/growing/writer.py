r"""The write path of a shard: checked samples, written whole to a temporary file with their crc32.

**Invariant.** :func:`write_shard` either returns a temporary ``.npy`` file that holds every byte
of the shard, fsynced, together with the crc32 of its sample bytes, or raises and leaves no file
behind. A full disk (``ENOSPC``, a quota, or a short write) is one ``OSError(ENOSPC)`` naming the
cache and the bytes. The cache makes the file visible later, by a rename under its lock
(:mod:`distsampling.growing.manifest`).

The crc32 is computed on the bytes as they are written (``zlib.crc32``, chunk by chunk), so it
costs no second pass; :func:`~distsampling.growing.snapshot.load_shard` checks it when a shard is
first opened. Samples are plain numbers in native byte order (what a memory map can hand to
torch): big-endian arrays are converted; strings, objects, records and dates are refused.

References:
    numpy/lib/format.py (the ``.npy`` header written here); zlib.crc32.
"""

from __future__ import annotations

import contextlib
import io
import os
import zlib

import numpy as np

from .manifest import is_full_disk, no_space, tmp_path

__all__ = ["check_samples", "npy_header", "write_shard"]

#: bytes written (and checksummed) per call: large enough to cost nothing, small enough to stream
CHUNK = 8 << 20
#: numpy kinds a shard may hold: bool, signed and unsigned integers, floats, complex numbers
NUMBERS = "biufc"


def check_samples(samples: object) -> np.ndarray:
    """``samples`` as a C-ordered array in native byte order; ``ValueError`` naming it if unfit."""
    if (
        not isinstance(samples, np.ndarray)
        or samples.ndim < 1
        or samples.shape[0] < 1
        or samples.dtype.kind not in NUMBERS
    ):
        raise ValueError(
            "samples should be a numpy array of numbers (bool, int, uint, float or complex) of "
            f"shape (k, *sample_shape) with k >= 1, but got samples={describe(samples)}"
        )
    if not samples.dtype.isnative:  # e.g. '>f4': stored as '<f4' on a little-endian machine
        samples = samples.astype(samples.dtype.newbyteorder("="))
    return np.ascontiguousarray(samples)


def npy_header(samples: np.ndarray) -> bytes:
    """The ``.npy`` header (format 1.0) of ``samples``: magic, version, dict, padding."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, np.lib.format.header_data_from_array_1_0(samples))
    return header.getvalue()


def write_shard(root: str, header: bytes, samples: np.ndarray) -> tuple[str, int]:
    """Write ``header`` + ``samples``' bytes to a temporary file in ``root``, fsynced.

    Returns:
        ``(path of the temporary file, crc32 of the sample bytes)``.
    """
    tmp = tmp_path(root, f"{os.urandom(4).hex()}.npy")
    size = len(header) + samples.nbytes
    try:
        with open(tmp, "wb") as f:
            crc = _write_npy(f, header, samples)
            f.flush()
            os.fsync(f.fileno())  # on disk before the rename makes it visible
            if os.fstat(f.fileno()).st_size != size:  # taken short by the file system
                raise OSError(f"{size} requested and {os.fstat(f.fileno()).st_size} written")
    except BaseException as err:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)  # the cache is as before: no temporary file, manifest untouched
        if is_full_disk(err):
            raise no_space(root, f"a shard of {size} bytes") from err
        raise
    return tmp, crc


def _write_npy(f: io.BufferedWriter, header: bytes, samples: np.ndarray) -> int:
    """Write the header, then the samples chunk by chunk; return the crc32 of the sample bytes."""
    f.write(header)
    data = samples.reshape(-1).view(np.uint8)  # (nbytes,) the C-ordered bytes, no copy
    crc = 0
    for start in range(0, len(data), CHUNK):
        chunk = data[start : start + CHUNK]
        crc = zlib.crc32(chunk, crc)
        f.write(chunk)  # a buffered write: all of it, or OSError (ENOSPC)
    return crc


def describe(x: object) -> str:
    """``array(shape=..., dtype=...)`` for an array, else its repr and type."""
    if isinstance(x, np.ndarray):
        return f"array(shape={x.shape}, dtype={x.dtype.str})"
    return f"{x!r} of type {type(x).__name__}"
