"""Fixtures shared by the growing-dataset tests: ``s3_server`` (moto's S3 API on 127.0.0.1)."""

from s3_server import s3_server  # noqa: F401 (a fixture, found by pytest here)
