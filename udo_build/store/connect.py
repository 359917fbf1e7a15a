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
    if scheme == "s3":
        from .s3cache import S3Cache

        return S3Cache(url, options)
    raise ValueError(f"a remote cache URL is http://HOST[:PORT][/PATH] or https://..., "
                     f"not {url!r}")
