"""ONNX external data: weights kept in files beside the model, read one tensor at a time.

A model saved with `save_as_external_data=True` (any model over protobuf's 2 GB must be) keeps
each large initializer as a reference: `location` (a file relative to the model's folder),
`offset` and `length` in bytes. `load_onnx` parses the model without its data and validates every
reference here before anything is read:

- the location is a relative path that stays inside the model's folder: no absolute path, no
  `..`, no symlink that leads out, and it names a regular file;
- offset and length are whole numbers, the range lies inside the file, and the length is what
  the tensor's dtype and shape need (length defaults to the rest of the file);
- the dtype is one whose bytes are numpy's little-endian layout (strings, bfloat16, float8 and
  packed 4-bit types are refused).

A problem is a UserError naming the tensor, the file and the field (the location's check is
external_files.located, which the planner uses too). The validated references
become `ExternalTensor`s, and the importer's weights a `LazyWeights` mapping: looking a weight up
maps its bytes (np.memmap: its shape at no cost, its values read when touched), and the bundle
writer streams each one (`chunks`) or reads it whole (`read`) when it stores it, one at a time.

The importer's side: a ModelProto takes no attributes, so `remember` keeps the external
tensors of the last models `load_onnx` returned (by identity, the model held with them) for
`import_onnx` to find (`external_of`); tensors up to SMALL_EXTERNAL (shapes, axes, scalars:
what shape inference reads) are read into a copy of the model (`small_inline`), and the ONNX
checker sees the large ones as graph inputs (`checkable`), since it would look for their files
relative to the working folder.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError
from .external_files import located

CHUNK = 16 << 20
# ONNX data types whose external bytes are numpy's little-endian layout of the same dtype
EXTERNAL = 1  # onnx.TensorProto.EXTERNAL (onnx is imported where it is used)
SMALL_EXTERNAL = 64 << 10  # external tensors up to this size are read with the model
RAW_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
             7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64"}


@dataclass(frozen=True)
class ExternalTensor:
    """One initializer's bytes in an external file (validated: see the module docstring)."""

    name: str
    path: Path  # resolved, inside the model's folder (never written to an artifact)
    location: str  # as the model names it, for messages
    offset: int
    size: int
    dtype: str
    shape: tuple[int, ...]

    def mapped(self) -> np.ndarray:
        """The tensor as a read-only memory map (values read from the file when touched)."""
        if self.size == 0:
            return np.zeros(self.shape, self.dtype)
        return np.memmap(self.path, dtype=np.dtype(self.dtype).newbyteorder("<"), mode="r",
                         offset=self.offset, shape=self.shape)

    def read(self) -> bytes:
        """The tensor's bytes, read whole (one buffer: no pieces joined)."""
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(self.size)
        if len(data) != self.size:
            raise self._short()
        return data

    def chunks(self, chunk: int = CHUNK) -> Iterator[bytes]:
        """The tensor's bytes in pieces of at most `chunk` bytes."""
        left = self.size
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            while left > 0:
                piece = fh.read(min(chunk, left))
                if not piece:
                    raise self._short()
                left -= len(piece)
                yield piece

    def _short(self) -> UserError:
        return UserError(f"initializer {self.name}: its external file {self.location} ended "
                         "early (it changed after the model was loaded)", file=str(self.path))


class LazyWeights(MutableMapping[str, np.ndarray]):
    """The weights of a model with external data: arrays in memory (small initializers,
    folded constants) and external tensors, mapped when looked up. `streamed(name)` gives the
    external tensor itself, so a writer can copy its bytes without holding them all."""

    def __init__(self, inline: dict[str, np.ndarray],
                 external: dict[str, ExternalTensor]) -> None:
        self._inline = inline
        self._external = external

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self._inline:
            return self._inline[name]
        return self._external[name].mapped()

    def __setitem__(self, name: str, value: np.ndarray) -> None:
        self._external.pop(name, None)
        self._inline[name] = value

    def __delitem__(self, name: str) -> None:
        if self._inline.pop(name, None) is None:
            del self._external[name]

    def __contains__(self, name: object) -> bool:
        return name in self._inline or name in self._external

    def __iter__(self) -> Iterator[str]:
        yield from self._inline
        yield from self._external

    def __len__(self) -> int:
        return len(self._inline) + len(self._external)

    def streamed(self, name: str) -> ExternalTensor | None:
        return self._external.get(name)

    def only(self, names: Iterable[str]) -> LazyWeights:
        keep = set(names)
        return LazyWeights({k: v for k, v in self._inline.items() if k in keep},
                           {k: v for k, v in self._external.items() if k in keep})


def external_tensors(model: Any, folder: Path, file: str) -> dict[str, ExternalTensor]:
    """Every external initializer of `model` (loaded without its data from a file in
    `folder`), validated; a UserError names the first bad one."""
    import onnx

    found: dict[str, ExternalTensor] = {}
    for index, init in enumerate(model.graph.initializer):
        if init.data_location == onnx.TensorProto.EXTERNAL:
            found[init.name] = _tensor(init, index, folder, file)
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.HasField("t") and attr.t.data_location == onnx.TensorProto.EXTERNAL:
                raise UserError(f"node {node.name or node.op_type}: attribute {attr.name} keeps "
                                "its tensor in an external file, which is not supported",
                                file=file, hint="keep Constant values inside the model, or make "
                                "them initializers")
    return found


def _tensor(init: Any, index: int, folder: Path, file: str) -> ExternalTensor:
    field = f"graph.initializer[{index}].external_data"
    entries = {e.key: e.value for e in init.external_data}
    where = f"initializer {init.name}"
    dtype = RAW_TYPES.get(init.data_type)
    if dtype is None:
        raise UserError(f"{where}: data type {init.data_type} is not supported in external data",
                        file=file, field=f"graph.initializer[{index}].data_type",
                        hint="supported: " + ", ".join(sorted(set(RAW_TYPES.values()))))
    path, location = located(entries.get("location"), where, folder, file, field)
    total = path.stat().st_size
    offset = _whole(entries.get("offset", "0"), f"{where}: offset", file, f"{field}.offset")
    size = _whole(entries.get("length", str(max(total - offset, 0))), f"{where}: length", file,
                  f"{field}.length")
    shape = tuple(int(d) for d in init.dims)
    if any(d < 0 for d in shape):
        raise UserError(f"{where}: negative dimension in shape {list(shape)}", file=file,
                        field=f"graph.initializer[{index}].dims")
    if offset + size > total:
        raise UserError(f"{where}: bytes {offset} to {offset + size} lie past the end of "
                        f"{location} ({total} bytes)", file=file, field=field,
                        hint="the external data file is truncated or not this model's")
    need = math.prod(shape) * np.dtype(dtype).itemsize
    if size != need:
        raise UserError(f"{where}: {location} holds {size} bytes for it, but {dtype} of shape "
                        f"{list(shape)} is {need} bytes", file=file, field=f"{field}.length")
    return ExternalTensor(init.name, path, location, offset, size, dtype, shape)


def _whole(text: str, what: str, file: str, field: str) -> int:
    if not text.isdigit():
        raise UserError(f"{what} {text!r} is not a whole number of bytes", file=file,
                        field=field)
    return int(text)


# -- the importer's side -------------------------------------------------------------------------


# the external tensors of the models load_onnx returned last, by id (the model is kept alive
# with them, so its id is not reused while it is here); a ModelProto takes no attributes
_LOADED: dict[int, tuple[Any, dict[str, ExternalTensor]]] = {}
_KEEP = 4


def remember(model: Any, tensors: dict[str, ExternalTensor]) -> None:
    while len(_LOADED) >= _KEEP:
        del _LOADED[next(iter(_LOADED))]
    _LOADED[id(model)] = (model, tensors)


def external_of(model: Any, file: str) -> dict[str, ExternalTensor]:
    """The validated external tensors of a model load_onnx read; a model with external data
    that did not come through load_onnx is refused (its folder is unknown)."""
    import onnx

    kept = _LOADED.get(id(model))
    if kept is not None and kept[0] is model:
        return kept[1]
    for init in model.graph.initializer:
        if init.data_location == onnx.TensorProto.EXTERNAL:
            raise UserError(f"initializer {init.name} keeps its data in an external file, and "
                            "the model's folder is not known", file=file,
                            hint="read the model with udo_build.model.onnx_import.load_onnx")
    return {}


def small_inline(model: Any, external: dict[str, ExternalTensor]
                 ) -> tuple[Any, dict[str, ExternalTensor]]:
    """A copy of the model with its small external tensors (shapes, axes, scalars: what shape
    inference reads) inside it, and the external tensors left."""
    small = {name for name, t in external.items() if t.size <= SMALL_EXTERNAL}
    if not small:
        return model, external
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for init in copy.graph.initializer:
        if init.name in small and init.data_location == EXTERNAL:
            init.raw_data = external[init.name].read()
            init.data_location = onnx.TensorProto.DEFAULT
            del init.external_data[:]
    return copy, {k: v for k, v in external.items() if k not in small}


def checkable(model: Any) -> Any:
    """What the ONNX checker is given: the model, or (external data) a copy whose external
    initializers are graph inputs of their type and shape. The checker would look for their
    files relative to the working folder; external_data.py has checked them against the
    model's own folder, more strictly."""
    import onnx

    if all(i.data_location != EXTERNAL for i in model.graph.initializer):
        return model
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    listed = {i.name for i in copy.graph.input}
    kept = [i for i in copy.graph.initializer if i.data_location != EXTERNAL]
    moved = [i for i in copy.graph.initializer if i.data_location == EXTERNAL]
    del copy.graph.initializer[:]
    copy.graph.initializer.extend(kept)
    copy.graph.input.extend(onnx.helper.make_tensor_value_info(i.name, i.data_type, i.dims)
                            for i in moved if i.name not in listed)
    return copy

