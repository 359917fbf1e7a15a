"""A real S3 server for the S3 remote-cache tests and benchmarks: moto's standalone server
(`python -m moto.server`, from the `moto[server]` package of the `test` extra) on a free
loopback port, as a child process; `kill()` it (SIGKILL) or `start()` it again on the same port
(a restarted server is empty: moto keeps its buckets in memory).

`client()` is a boto3 client of it (boto3 comes with moto) for what the tests do behind the
transport's back: create buckets, list objects, overwrite one with poisoned bytes. `env()` is
what points an S3 client at it: the endpoint, a region and test keys (moto takes any).
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .nginx import free_port

KEYS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
REGION = "us-east-1"


def moto_installed() -> bool:
    return all(importlib.util.find_spec(name) is not None
               for name in ("moto", "flask", "boto3", "obstore"))


class MotoS3:
    def __init__(self, log: Path) -> None:
        self.log = log
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        return {"AWS_ENDPOINT_URL": self.endpoint, "AWS_REGION": REGION, **KEYS}

    def start(self, timeout: float = 20.0) -> MotoS3:
        if self.process is not None and self.process.poll() is None:
            return self
        with open(self.log, "ab") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
                stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"moto exited with {self.process.returncode}: "
                                   f"{self.log.read_text(errors='replace')[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"moto did not listen on port {self.port} within {timeout} s")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self.process = None

    def client(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=self.endpoint, region_name=REGION,
                            aws_access_key_id=KEYS["AWS_ACCESS_KEY_ID"],
                            aws_secret_access_key=KEYS["AWS_SECRET_ACCESS_KEY"])

    def create_bucket(self, name: str) -> None:
        self.client().create_bucket(Bucket=name)

    def objects(self, bucket: str) -> dict[str, bytes]:
        """Every object of a bucket: its key -> its bytes."""
        s3 = self.client()
        found: dict[str, bytes] = {}
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for item in page.get("Contents", []):
                found[item["Key"]] = s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        return found

    def put(self, bucket: str, key: str, data: bytes, *, public: bool = False) -> None:
        """Store an object (`public`: readable without credentials)."""
        self.client().put_object(Bucket=bucket, Key=key, Body=data,
                                 **({"ACL": "public-read"} if public else {}))

    def empty(self, bucket: str) -> None:
        s3 = self.client()
        for key in self.objects(bucket):
            s3.delete_object(Bucket=bucket, Key=key)
