r"""Retry a storage call with exponential backoff until a deadline; say which URL failed and why.

Object stores fail in two ways. *Transient* failures pass if one waits: throttling (S3's
``SlowDown``, HTTP 503), timeouts, connection resets, a server restarting. *Permanent* ones do
not: a missing bucket or key, bad credentials, a file that is not what it should be. A
transient failure is retried after 0.05 s, 0.1 s, 0.2 s, ... (at most ``max_wait``, each wait
drawn in ``[wait / 2, wait]`` so that many clients do not retry in step), until ``deadline``
seconds have passed since the first attempt; then :class:`RemoteUnavailableError` names the URL,
how long it waited and the last error. A permanent failure is raised at once, with the URL
prepended. The caller's operation must be idempotent (a ranged read is).

Errors are classified without importing botocore or aiohttp: by the builtin classes
(``ConnectionError``, ``TimeoutError``), the errno s3fs gives S3 error codes (``EBUSY`` for
``SlowDown`` / 503, ``EREMOTEIO`` for 500), and the names of the client libraries' classes.

References:
    AWS "Retry behavior" (exponential backoff with jitter); s3fs/core.py (``_error_wrapper``,
    ``S3_RETRYABLE_ERRORS``) and s3fs/errors.py (S3 error codes -> Python exceptions).
"""

from __future__ import annotations

import errno
import random
import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["RemoteUnavailableError", "is_transient", "retried"]

T = TypeVar("T")

#: errno values s3fs and the OS give to failures that pass if one waits
_TRANSIENT_ERRNOS = {
    errno.EBUSY,  # s3fs: SlowDown, ServiceUnavailable, HTTP 503
    errno.EREMOTEIO,  # s3fs: InternalError, HTTP 500
    errno.EAGAIN,
    errno.ECONNRESET,
    errno.ECONNREFUSED,
    errno.ECONNABORTED,
    errno.ETIMEDOUT,
    errno.EPIPE,
    errno.EHOSTUNREACH,
    errno.ENETUNREACH,
}
#: class names of the client libraries' transient errors (botocore, urllib3, aiohttp, fsspec)
_TRANSIENT_NAMES = {
    "ConnectionError",  # botocore's base: EndpointConnectionError, ConnectionClosedError, ...
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "HTTPClientError",
    "IncompleteRead",
    "ResponseParserError",
    "ClientPayloadError",
    "ServerDisconnectedError",
    "ClientOSError",
    "FSTimeoutError",
}
_THROTTLED = ("SlowDown", "Throttl", "reduce your request rate", "RequestLimitExceeded")


class RemoteUnavailableError(ConnectionError):
    """Remote storage kept failing with transient errors until the deadline passed."""


def is_transient(err: BaseException) -> bool:
    r"""Whether ``err`` may pass if the same call is tried again a little later.

    Examples:
        >>> is_transient(ConnectionResetError()), is_transient(OSError(errno.EBUSY, "SlowDown"))
        (True, True)
        >>> is_transient(FileNotFoundError("s3://b/k")), is_transient(PermissionError())
        (False, False)
    """
    if isinstance(
        err, FileNotFoundError | PermissionError | IsADirectoryError | NotADirectoryError
    ):
        return False
    if isinstance(err, ConnectionError | TimeoutError):  # resets, refusals, timeouts
        return True
    if isinstance(err, OSError) and err.errno in _TRANSIENT_ERRNOS:
        return True
    if any(cls.__name__ in _TRANSIENT_NAMES for cls in type(err).__mro__):
        return True
    return any(word in str(err) for word in _THROTTLED)


def retried(
    call: Callable[[], T],
    url: str,
    *,
    deadline: float,
    max_wait: float = 2.0,
    on_retry: Callable[[BaseException], None] | None = None,
) -> T:
    r"""Return ``call()``; retry transient errors with backoff until ``deadline`` seconds pass.

    Args:
        call: the operation (idempotent: it may run several times).
        url: what it reads, named in every error.
        deadline: seconds from the first attempt after which a transient error is final.
        max_wait: the longest pause between two attempts, in seconds.
        on_retry: called with each transient error before its pause (e.g. to count them).

    Raises:
        FileNotFoundError / PermissionError: at once, naming ``url`` (no such bucket or key;
            bad credentials or no access).
        RemoteUnavailableError: a transient error persisted past ``deadline``.

    Examples:
        >>> failures = [ConnectionResetError("reset by peer")]
        >>> def flaky():
        ...     if failures:
        ...         raise failures.pop()
        ...     return b"data"
        >>> retried(flaky, "s3://bucket/a.npy", deadline=5.0)
        b'data'
        >>> retried(lambda: open("/nonexistent"), "/nonexistent", deadline=5.0)
        Traceback (most recent call last):
        ...
        FileNotFoundError: /nonexistent does not exist (no such bucket, key or file): [Errno 2] No such file or directory: '/nonexistent'
    """
    start, wait, attempts = time.monotonic(), 0.05, 0
    while True:
        try:
            return call()
        except FileNotFoundError as err:
            raise FileNotFoundError(
                f"{url} does not exist (no such bucket, key or file): {err}"
            ) from err
        except PermissionError as err:
            raise PermissionError(
                f"{url}: access denied; check the credentials (key, secret, token or the AWS_* "
                f"environment variables) and the bucket's permissions: {err}"
            ) from err
        except Exception as err:
            if not is_transient(err):
                raise
            attempts += 1
            elapsed = time.monotonic() - start
            if elapsed + wait / 2 > deadline:
                raise RemoteUnavailableError(
                    f"{url}: the storage kept failing for {elapsed:.1f} s ({attempts} attempts, "
                    f"deadline={deadline} s); last error: {type(err).__name__}: {err}"
                ) from err
            if on_retry is not None:
                on_retry(err)
            time.sleep(random.uniform(wait / 2, wait))  # jitter: clients do not retry in step
            wait = min(2 * wait, max_wait)
