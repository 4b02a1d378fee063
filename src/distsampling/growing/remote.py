r"""RemoteSource: random access to single samples of a directory (or fsspec URL) of ``.npy`` files.

It stands in for the user's remote storage (a terabyte-sized store sampled anew every
epoch): a local directory, or any fsspec URL
(``s3://bucket/data``, ``memory://x``) when fsspec is installed. Each file holds
``(m, *sample_shape)`` samples; :meth:`RemoteSource.read` fetches one of them with a seek and a
read of its bytes, right after the ``.npy`` header, and never loads a whole file.

References:
    numpy/lib/format.py (the ``.npy`` header: magic, version, then shape/dtype/order);
    fsspec.core.url_to_fs (one file system API for local paths and object stores).
"""

from __future__ import annotations

import os
from typing import IO

import numpy as np

from .._validate import check_int

__all__ = ["RemoteSource"]

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
        >>> remote.sample_shape, remote.rows(0), remote.read(0, 2)
        ((2,), 3, array([4, 5], dtype=int16))
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
        # every file must hold samples like the first one's
        self.sample_shape, self.dtype = self._opened(0)
        self.row_bytes = int(np.prod(self.sample_shape, dtype=np.int64)) * self.dtype.itemsize

    def _opened(self, k: int) -> tuple[tuple[int, ...], np.dtype]:
        """Open file ``k`` and parse its ``.npy`` header; return its ``(sample_shape, dtype)``."""
        path = self.files[k]
        f = self._fs.open(path, "rb") if self._fs else open(path, "rb")
        try:
            version = np.lib.format.read_magic(f)
            if version not in _HEADER_READERS:
                raise ValueError(f"format version {version} is not 1.0 or 2.0")
            shape, fortran, dtype = _HEADER_READERS[version](f)
        except (ValueError, EOFError) as err:  # not a .npy file, or its header is cut short
            f.close()
            raise ValueError(f"{path} should be a .npy file, but reading it says: {err}") from err
        if fortran or len(shape) < 1 or shape[0] < 1 or dtype.hasobject:
            f.close()
            raise ValueError(
                f"{path} should hold a C-order array of >= 1 samples, but got shape {shape}, "
                f"{'Fortran' if fortran else 'C'} order, dtype {dtype}"
            )
        self._open[k] = (f, f.tell(), shape[0])  # the data starts right after the header
        return tuple(shape[1:]), dtype

    def _file(self, k: int) -> tuple[IO[bytes], int, int]:
        """File ``k``'s ``(handle, data offset, rows)``, opened and checked on first use."""
        if k not in self._open:
            shape, dtype = self._opened(k)
            if shape != self.sample_shape or dtype != self.dtype:
                raise ValueError(
                    f"every file of the source should hold samples of shape {self.sample_shape} "
                    f"and dtype {self.dtype}, but {self.files[k]} holds {shape}, {dtype}"
                )
        return self._open[k]

    def rows(self, k: int) -> int:
        """Number of samples in file ``k`` (``0 <= k < len(files)``)."""
        k = check_int("k", k, low=0, high=len(self.files) - 1)
        return self._file(k)[2]

    def read(self, k: int, row: int) -> np.ndarray:
        """Read sample ``row`` of file ``k`` (one seek, one read of ``row_bytes``)."""
        f, offset, rows = self._file(check_int("k", k, low=0, high=len(self.files) - 1))
        row = check_int("row", row, low=0, high=rows - 1)
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
