"""Fixtures of the remote-cache tests (see remote_fixtures.py)."""

from .remote_fixtures import clean_env, keys, nginx_server  # noqa: F401
from .s3_fixtures import aws, moto  # noqa: F401
from .warm_remote import shared, warm  # noqa: F401
