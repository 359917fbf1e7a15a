"""Fixtures of the remote-cache tests (see tests/store/remote_fixtures.py)."""

from ..store.remote_fixtures import clean_env, keys, nginx_server  # noqa: F401
