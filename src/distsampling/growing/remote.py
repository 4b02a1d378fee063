r"""RemoteSource: random access to single samples of a directory (or fsspec URL) of ``.npy`` files.

It stands for the user's remote storage (a terabyte-sized store sampled anew every epoch): a local
directory, or any fsspec URL (``s3://bucket/data`` through s3fs, ``memory://x``). Each file holds
``(m, *sample_shape)`` samples of numbers; :meth:`RemoteSource.read` fetches one sample as one
ranged read of its bytes (an HTTP ``Range`` request on S3: never the whole file), right after
the ``.npy`` header.

What a real object store needs, and where it is handled:

- every request (listing, header, size, sample) goes through
  :func:`~distsampling.growing.retry.retried`: throttling, timeouts and connection resets are
  retried with backoff until ``deadline`` seconds pass, then an error names the URL;
- a missing bucket or key, or bad credentials, is an error naming the URL at once;
- a file is checked when it is first opened: a ``.npy`` header, C order, >= 1 sample, a dtype of
  numbers (strings, objects, structured records and datetimes are refused naming the file;
  big-endian numbers are converted to native order on read), and the whole data present (a
  truncated file is named, not read in a worker as garbage). A read that returns fewer bytes than
  a sample is a torn transfer: retried, never returned.
- ``part=(i, n)`` keeps files ``i, i + n, i + 2n, ...`` only: ``n`` nodes sampling parts ``0..n-1``
  read disjoint files (:mod:`distsampling.growing.nodes`).

References:
    numpy/lib/format.py (the ``.npy`` header: magic, version, then shape/dtype/order);
    fsspec/spec.py (``url_to_fs``, ``cat_file(path, start, end)``: one ranged read).
"""

from __future__ import annotations

import io
import os
from typing import Any

import numpy as np

from .._checks import check_int
from .retry import retried

__all__ = ["RemoteSource"]

_HEADER_READERS = {
    (1, 0): np.lib.format.read_array_header_1_0,
    (2, 0): np.lib.format.read_array_header_2_0,
}
_NUMBERS = "biufc"  # dtype kinds of bool, signed, unsigned, float and complex numbers


class RemoteSource:
    r"""Random access to the samples of a directory (or fsspec URL) of ``.npy`` files.

    Args:
        source: a local directory, or a URL with a ``://`` (needs ``fsspec``; ``s3://`` needs
            ``s3fs``).
        storage_options: keyword arguments for the URL's file system (for s3fs: ``key``,
            ``secret``, ``endpoint_url``, ``client_kwargs``, ...); ``None``: the defaults.
        part: ``(i, n)``: keep only files ``i, i + n, ...`` of the sorted listing (``None``: all).
        deadline: seconds a request keeps retrying transient errors before it fails.

    Examples:
        >>> import tempfile
        >>> d = tempfile.mkdtemp()
        >>> np.save(f"{d}/a.npy", np.arange(6, dtype=np.int16).reshape(3, 2))
        >>> remote = RemoteSource(d)
        >>> remote.sample_shape, remote.rows(0), remote.read(0, 2)
        ((2,), 3, array([4, 5], dtype=int16))
    """

    def __init__(
        self,
        source: str | os.PathLike,
        *,
        storage_options: dict[str, Any] | None = None,
        part: tuple[int, int] | None = None,
        deadline: float = 60.0,
    ) -> None:
        source = os.fspath(source)
        self.source = source
        if not (isinstance(deadline, int | float) and not isinstance(deadline, bool)) or not (
            0 < deadline < float("inf")
        ):
            raise ValueError(
                f"deadline should be a positive finite number of seconds, but got "
                f"deadline={deadline!r}"
            )
        self.deadline = float(deadline)
        self.retries = 0  # transient errors retried so far, in this process
        if storage_options is not None and not isinstance(storage_options, dict):
            raise TypeError(
                f"storage_options should be a dict of keyword arguments for the file system, "
                f"but got storage_options={storage_options!r}"
            )
        if "://" in source:
            try:
                import fsspec
            except ImportError as err:
                raise ImportError(
                    f"source={source!r} is a URL, which needs fsspec: pip install fsspec"
                ) from err
            self._fs, root = fsspec.core.url_to_fs(source, **(storage_options or {}))
            root = root.rstrip("/")
            found = self._retried(source, lambda: self._fs.glob(root + "/*.npy"))
            if not found and not self._retried(source, lambda: self._fs.exists(root)):
                raise FileNotFoundError(
                    f"source should be an existing bucket and prefix, but got source={source!r}"
                    " (not found)"
                )
            files = [self._fs.unstrip_protocol(p) for p in sorted(found)]
        else:
            if storage_options is not None:
                raise ValueError(
                    f"storage_options are for a URL source, but got source={source!r}, "
                    "a local directory"
                )
            if not os.path.isdir(source):
                raise FileNotFoundError(
                    f"source should be an existing directory, but got source={source!r}"
                )
            self._fs = None
            names = sorted(n for n in os.listdir(source) if n.endswith(".npy"))
            files = [os.path.join(source, n) for n in names]
        if not files:
            raise ValueError(f"source should hold .npy files, but got none in source={source!r}")
        self.part = None if part is None else _check_part(part, len(files), source)
        self.files = files if part is None else files[self.part[0] :: self.part[1]]
        # file k -> (local handle or None, data offset, rows, the file's dtype), opened on first use
        self._open: dict[int, tuple[Any, int, int, np.dtype]] = {}
        # every file must hold samples like the first one's; reads return native byte order
        self.sample_shape, self.dtype = self._opened(0)
        self.row_bytes = int(np.prod(self.sample_shape, dtype=np.int64)) * self.dtype.itemsize

    # --- requests, each retried ---------------------------------------------------------------

    def _retried(self, url: str, call: Any) -> Any:
        def count(_: BaseException) -> None:
            self.retries += 1

        return retried(call, url, deadline=self.deadline, on_retry=count)

    def _fetch(self, k: int, start: int, length: int) -> bytes:
        """Bytes ``[start, start + length)`` of file ``k``: one seek and read, or one ranged GET."""
        path = self.files[k]
        if self._fs is None:
            f = self._open[k][0] if k in self._open else None
            if f is None:  # the header, before the file is registered
                with open(path, "rb") as g:
                    g.seek(start)
                    return g.read(length)
            f.seek(start)
            return f.read(length)
        return self._fs.cat_file(path, start=start, end=start + length)

    # --- opening a file: header, dtype, size --------------------------------------------------

    def _opened(self, k: int) -> tuple[tuple[int, ...], np.dtype]:
        """Open file ``k`` and check its ``.npy`` header; return its ``(sample_shape, dtype)``."""
        path = self.files[k]
        head = self._retried(path, lambda: self._fetch(k, 0, 4096))
        try:
            offset = _data_offset(head)
            if len(head) < offset:  # a long header (many dimensions or fields): fetch all of it
                head = self._retried(path, lambda: self._fetch(k, 0, offset))
            f = io.BytesIO(head)
            version = np.lib.format.read_magic(f)
            shape, fortran, dtype = _HEADER_READERS[version](f)
        except (ValueError, EOFError, KeyError) as err:  # not .npy, or its header is cut short
            raise ValueError(f"{path} should be a .npy file, but reading it says: {err!r}") from err
        if fortran or len(shape) < 1 or shape[0] < 1:
            raise ValueError(
                f"{path} should hold a C-order array of >= 1 samples, but got shape {shape}, "
                f"{'Fortran' if fortran else 'C'} order, dtype {dtype}"
            )
        if dtype.kind not in _NUMBERS or dtype.fields is not None:
            raise ValueError(
                f"{path} should hold numbers (bool, int, uint, float or complex), but it holds "
                f"dtype {dtype.str!r} ({dtype})"
            )
        need = offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        size = self._retried(
            path, lambda: os.path.getsize(path) if self._fs is None else self._fs.size(path)
        )
        if size < need:
            raise ValueError(
                f"{path} is truncated: its header promises {need} bytes, but it holds {size}"
            )
        handle = open(path, "rb") if self._fs is None else None
        self._open[k] = (handle, offset, shape[0], dtype)
        return tuple(shape[1:]), dtype.newbyteorder("=")  # native order: what read() returns

    def _file(self, k: int) -> tuple[Any, int, int, np.dtype]:
        """File ``k``'s ``(handle, data offset, rows, dtype)``, opened and checked on first use."""
        if k not in self._open:
            shape, dtype = self._opened(k)
            if shape != self.sample_shape or dtype != self.dtype:
                handle = self._open.pop(k)[0]  # it does not fit: not kept open
                if handle is not None:
                    handle.close()
                raise ValueError(
                    f"every file of the source should hold samples of shape {self.sample_shape} "
                    f"and dtype {self.dtype}, but {self.files[k]} holds {shape}, {dtype}"
                )
        return self._open[k]

    # --- public API ---------------------------------------------------------------------------

    def rows(self, k: int) -> int:
        """Number of samples in file ``k`` (``0 <= k < len(files)``)."""
        k = check_int("k", k, low=0, high=len(self.files) - 1)
        return self._file(k)[2]

    def read(self, k: int, row: int) -> np.ndarray:
        """Read sample ``row`` of file ``k``: one ranged read of ``row_bytes``, retried if torn."""
        k = check_int("k", k, low=0, high=len(self.files) - 1)
        _, offset, rows, dtype = self._file(k)
        row = check_int("row", row, low=0, high=rows - 1)
        path = self.files[k]

        def whole_row() -> bytes:
            data = self._fetch(k, offset + row * self.row_bytes, self.row_bytes)
            if len(data) != self.row_bytes:  # a transfer cut short: never return part of a row
                raise ConnectionResetError(
                    f"read {len(data)} of the {self.row_bytes} bytes of sample {row}"
                )
            return data

        data = self._retried(path, whole_row)
        return np.frombuffer(data, dtype).reshape(self.sample_shape).astype(self.dtype, copy=False)

    def close(self) -> None:
        """Close the open files."""
        for f, *_ in self._open.values():
            if f is not None:
                f.close()
        self._open.clear()


def _data_offset(head: bytes) -> int:
    """Where the data of a ``.npy`` file starts, from its first bytes (magic, version, length)."""
    if len(head) < 12 or head[:6] != b"\x93NUMPY":
        raise ValueError("the magic string b'\\x93NUMPY' is missing or cut short")
    if head[6] == 1:  # version 1.0: a 2-byte header length
        return 10 + int.from_bytes(head[8:10], "little")
    return 12 + int.from_bytes(head[8:12], "little")  # 2.0: a 4-byte length


def _check_part(part: object, files: int, source: str) -> tuple[int, int]:
    """``part = (i, n)`` with ``0 <= i < n <= files``: part ``i`` of ``n`` holds >= 1 file."""
    if not isinstance(part, tuple | list) or len(part) != 2:
        raise TypeError(f"part should be a pair (i, n), but got part={part!r}")
    n = check_int("part[1]", part[1], low=1)
    i = check_int("part[0]", part[0], low=0, high=n - 1)
    if n > files:
        raise ValueError(
            f"part should split the files among at most {files} parts (source={source!r} "
            f"holds {files} .npy files), but got part={tuple(part)!r}"
        )
    return i, n
