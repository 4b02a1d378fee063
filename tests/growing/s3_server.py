"""A real S3 API on 127.0.0.1 for the tests: moto's standalone server, started and stopped here.

``s3_server`` (a pytest fixture) starts ``moto.server.ThreadedMotoServer`` on a free loopback port
and yields an :class:`S3`: its URL, the ``storage_options`` s3fs needs to reach it, and
``stop()`` / ``start()`` to take it down and bring it back on the same port (its buckets live in
this process, so they survive a restart). Every test starts from an empty store (moto's reset
endpoint), and the server is stopped whatever the test does.
"""

from __future__ import annotations

import io
import os
import urllib.request

import numpy as np
import pytest

from distsampling.tools.launch import free_port


def _needs(module: str):
    """``module`` imported when a test first starts a server (moto and s3fs take about a second
    to import: a pytest worker that runs no S3 test never pays it), or the test skipped."""
    return pytest.importorskip(module, reason=f"the S3 tests need {module.split('.')[0]}")


class S3:
    """A moto S3 server on 127.0.0.1:port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._server = None
        self.start()

    def start(self) -> None:
        self._server = _needs("moto.server").ThreadedMotoServer(
            ip_address="127.0.0.1", port=self.port, verbose=False
        )
        self._server.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()
            self._server = None

    def reset(self) -> None:
        """Delete every bucket (moto's own endpoint for it)."""
        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            assert response.status == 200

    def options(self, **overrides) -> dict:
        """s3fs's keyword arguments for this server (fake credentials; short client timeouts)."""
        return {
            "key": "testing",
            "secret": "testing",
            "endpoint_url": self.endpoint,
            "config_kwargs": {
                "connect_timeout": 2,
                "read_timeout": 5,
                "retries": {"max_attempts": 1},
            },
            "skip_instance_cache": True,
        } | overrides

    def filesystem(self):
        return _needs("s3fs").S3FileSystem(**self.options())

    def put_arrays(self, prefix: str, arrays: dict[str, np.ndarray]) -> str:
        """Upload ``name -> array`` as ``.npy`` objects under ``s3://prefix``; return that URL."""
        fs = self.filesystem()
        bucket = prefix.split("/")[0]
        if not fs.exists(bucket):
            fs.mkdir(bucket)
        for name, array in arrays.items():
            buf = io.BytesIO()
            np.save(buf, array)
            fs.pipe(f"{prefix}/{name}", buf.getvalue())
        return f"s3://{prefix}"


@pytest.fixture
def s3_server(monkeypatch):
    """A fresh S3 server on a free loopback port, stopped at the end of the test."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for name in ("AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", os.devnull)  # never a real account's settings
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", os.devnull)
    server = S3()
    try:
        server.reset()  # moto keeps buckets per process: start every test from an empty store
        yield server
    finally:
        server.stop()


def rows(j: int, n: int, width: int = 3) -> np.ndarray:
    """File ``j`` of the test remotes: row ``r`` is ``[j, r, 1000 j + r, ...]`` (int32).

    A sample read anywhere proves where it came from, and that it is whole: every column is
    ``1000 j + r`` past the first two.
    """
    out = np.empty((n, width), np.int32)
    out[:, 0], out[:, 1] = j, np.arange(n)
    out[:, 2:] = (1000 * j + np.arange(n))[:, None]
    return out


def assert_whole_rows(samples: np.ndarray, counts: dict[int, int]) -> None:
    """Every sample is a whole row of a test remote whose file ``j`` holds ``counts[j]`` rows."""
    samples = np.asarray(samples).reshape(-1, samples.shape[-1])
    for j, r, *rest in samples.tolist():
        assert j in counts and 0 <= r < counts[j], (j, r)
        assert all(x == 1000 * j + r for x in rest), (j, r, rest)
