"""The transport for a remote cache URL, by its scheme (each imported only when used)."""

from __future__ import annotations

import urllib.parse

from .transport import RemoteOptions, Transport


def open_transport(url: str, options: RemoteOptions | None = None) -> Transport:
    """The transport for a remote cache URL (ValueError when the URL is not one)."""
    scheme = urllib.parse.urlsplit(url).scheme
    if scheme in ("http", "https"):
        from .httpcache import HttpCache

        return HttpCache(url, options)
    if scheme in ("grpc", "grpcs"):
        from .grpccache import GrpcCache

        return GrpcCache(url, options)
    if scheme == "s3":
        from .s3cache import S3Cache

        return S3Cache(url, options)
    raise ValueError(f"a remote cache URL is http://HOST[:PORT][/PATH], https://..., "
                     f"grpc://HOST:PORT[/INSTANCE], grpcs://... or s3://BUCKET[/PREFIX], "
                     f"not {url!r}")
