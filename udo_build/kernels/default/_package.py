"""The default package object; the family modules register their kernels on it."""

from __future__ import annotations

from ..oppkg import OpPackage

DEFAULT = OpPackage("default")
