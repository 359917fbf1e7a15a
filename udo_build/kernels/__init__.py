"""The emulator's op packages: the op package API, the default package's kernels, and loading
the kernels files of a recipe.

A kernels file imports the API from here:

    from udo_build.kernels import Cost, OpPackage
"""

from .oppkg import Cost, Flags, OpPackage, OpPackageError

__all__ = ["Cost", "Flags", "OpPackage", "OpPackageError"]
