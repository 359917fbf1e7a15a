"""The S3 tests' bucket, environment and moto server (fixtures `moto`, module-scoped, and `aws`,
the environment of a client of it): shared by test_s3.py and test_s3_requests.py."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from .moto_s3 import MotoS3, moto_installed
from .remote_fixtures import ENV

BUCKET = "udo-cache"
PREFIX = "team/v1"
URL = f"s3://{BUCKET}/{PREFIX}"
AWS = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_REGION",
       "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE",
       "AWS_DEFAULT_PROFILE", "AWS_EC2_METADATA_DISABLED")


def isolate(env: pytest.MonkeyPatch, folder: Path) -> None:
    """No udo-build remote settings, and no AWS settings but those a test gives."""
    for name in (*ENV, *AWS):
        env.delenv(name, raising=False)
    env.setenv("XDG_CONFIG_HOME", str(folder / "xdg-config"))
    env.setenv("AWS_CONFIG_FILE", str(folder / "no-aws-config"))
    env.setenv("AWS_SHARED_CREDENTIALS_FILE", str(folder / "no-aws-credentials"))


@pytest.fixture(scope="module")
def moto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoS3]:
    if not moto_installed():
        pytest.skip("moto[server] and obstore are not installed (pip install "
                    "'udo-build[test]'): the S3 tests run against moto's real S3 server")
    server = MotoS3(tmp_path_factory.mktemp("moto") / "moto.log").start()
    try:
        server.create_bucket(BUCKET)
        yield server
    finally:
        server.kill()


@pytest.fixture
def aws(moto: MotoS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> MotoS3:
    """The environment of an S3 client of the moto server (keys, region, endpoint)."""
    isolate(monkeypatch, tmp_path)
    for name, value in moto.env().items():
        monkeypatch.setenv(name, value)
    return moto
