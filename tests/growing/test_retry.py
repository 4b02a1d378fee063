"""Properties of distsampling.growing.retry: transient errors retried until a deadline, the rest at once.

The calls here are real Python functions that fail a chosen number of times; the clock is real
too (deadlines of a fraction of a second).
"""

from __future__ import annotations

import errno

import pytest
from hypothesis import given
from hypothesis import strategies as st

from distsampling.growing.retry import RemoteUnavailableError, is_transient, retried

botocore = pytest.importorskip("botocore.exceptions", reason="s3fs's client library")

#: errors that pass if one waits: resets, refusals, timeouts, S3 throttling and 5xx (as s3fs
#: translates them), and the client libraries' own classes, found by name
TRANSIENT = [
    ConnectionResetError("reset by peer"),
    ConnectionRefusedError(),
    BrokenPipeError(),
    TimeoutError("timed out"),
    OSError(errno.EBUSY, "Please reduce your request rate (SlowDown)"),
    OSError(errno.EREMOTEIO, "We encountered an internal error"),
    botocore.EndpointConnectionError(endpoint_url="http://127.0.0.1:9/b/k"),
    botocore.ReadTimeoutError(endpoint_url="http://127.0.0.1:9/b/k"),
    botocore.ConnectionClosedError(endpoint_url="http://127.0.0.1:9/b/k"),
    Exception("An error occurred (Throttling) when calling GetObject: Rate exceeded"),
]
#: errors that will not pass by waiting: missing keys, refused credentials, bad data
PERMANENT = [
    FileNotFoundError("The specified key does not exist."),
    PermissionError("The AWS Access Key Id you provided does not exist"),
    ValueError("not a .npy file"),
    OSError(errno.EINVAL, "InvalidRange"),
]


class Flaky:
    """A call that raises ``error`` ``failures`` times, then returns ``b"data"``."""

    def __init__(self, error: BaseException, failures: int) -> None:
        self.error, self.failures, self.calls = error, failures, 0

    def __call__(self) -> bytes:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return b"data"


@pytest.mark.parametrize("error", TRANSIENT, ids=lambda e: type(e).__name__)
def test_transient_errors_are_classified_transient(error):
    """Invariant: resets, timeouts, throttling and 5xx are transient."""
    assert is_transient(error)


@pytest.mark.parametrize("error", PERMANENT, ids=lambda e: type(e).__name__)
def test_permanent_errors_are_classified_permanent(error):
    """Invariant: missing keys, refused credentials and bad data are not transient."""
    assert not is_transient(error)


@given(error=st.sampled_from(TRANSIENT), failures=st.integers(0, 3))
def test_a_transient_error_is_retried_until_the_call_succeeds(error, failures):
    """Invariant: ``failures`` transient errors then success: one call more, each retry counted."""
    call, seen = Flaky(error, failures), []
    assert retried(call, "s3://b/k", deadline=30.0, on_retry=seen.append) == b"data"
    assert call.calls == failures + 1 and seen == [error] * failures


@pytest.mark.parametrize("error", PERMANENT, ids=lambda e: type(e).__name__)
def test_a_permanent_error_is_raised_at_once(error):
    """Invariant: a permanent error is raised after one call, with the URL for a missing key or access."""
    call = Flaky(error, 1)
    with pytest.raises(type(error)) as raised:
        retried(call, "s3://b/k", deadline=30.0)
    assert call.calls == 1
    if isinstance(error, FileNotFoundError | PermissionError):
        assert str(raised.value).startswith("s3://b/k")


def test_a_transient_error_past_the_deadline_names_the_url_and_the_last_error():
    """Invariant: past the deadline, RemoteUnavailableError names the URL, attempts and cause."""
    call = Flaky(ConnectionResetError("reset by peer"), 10**9)
    with pytest.raises(
        RemoteUnavailableError,
        match=r"s3://b/k: the storage kept failing for \d+\.\d s \(\d+ attempts, deadline=0.3 s\); "
        r"last error: ConnectionResetError: reset by peer",
    ) as raised:
        retried(call, "s3://b/k", deadline=0.3)
    assert call.calls >= 2  # it did retry before giving up
    assert isinstance(raised.value.__cause__, ConnectionResetError)
