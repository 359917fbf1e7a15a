"""Which external data files an ONNX model names, found without onnx or numpy (the planner
asks on every build: udo_build.builder.plan keys each file as a source of the convert step), and
the one check of a location that the importer (udo_build.model.external_data) makes too: a
relative path that stays inside the model's folder, no absolute path, no `..`, no symbolic link
leading out, naming a readable regular file. A problem is a UserError naming the model file and
the field (`graph.initializer[i].external_data.location`)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any

from ..errors import UserError

EXTERNAL = 1  # onnx.TensorProto.EXTERNAL


def located(value: str | None, where: str, folder: Path, file: str,
            field: str) -> tuple[Path, str]:
    """The external file, resolved, checked to lie inside the model's folder."""
    hint = "external data files are named relative to the model's folder and lie inside it"
    if not value or "\0" in value:
        raise UserError(f"{where}: its external data names no location", file=file,
                        field=f"{field}.location", hint=hint)
    pure = PurePosixPath(value.replace("\\", "/"))
    if pure.is_absolute() or PureWindowsPath(value).drive or ".." in pure.parts:
        raise UserError(f"{where}: external data location {value!r} leaves the model's folder",
                        file=file, field=f"{field}.location", hint=hint)
    base = folder.resolve()
    try:
        path = (base / pure).resolve(strict=True)
    except (FileNotFoundError, RuntimeError):
        raise UserError(f"{where}: external data file {value} not found", file=file,
                        field=f"{field}.location", hint=f"it should be at {folder / pure}") \
            from None
    if not path.is_relative_to(base):
        raise UserError(f"{where}: external data location {value!r} leads out of the model's "
                        "folder (a symbolic link?)", file=file, field=f"{field}.location",
                        hint=hint)
    if not path.is_file() or not os.access(path, os.R_OK):
        raise UserError(f"{where}: external data location {value!r} is not a readable file",
                        file=file, field=f"{field}.location", hint=hint)
    return path, value


def referenced_files(model: Path) -> list[tuple[str, Path]]:
    """The external data files a model's initializers name, validated as `load_onnx` does
    (inside the model's folder, existing, readable): (location as named, resolved path), each
    once, in the order the model names them. The model is scanned, not parsed: its
    protobuf fields are walked and skipped (weights inside it are seeked over, never read),
    and onnx is not imported, so a build that plans a recipe pays next to nothing. A file that
    is not valid protobuf names no files here (the convert step reports it)."""
    found: dict[str, Path] = {}
    try:
        with open(model, "rb") as fh:
            size = os.fstat(fh.fileno()).st_size
            for index, name, entries in _external_initializers(fh, size):
                value = entries.get("location")
                if value is not None and value in found:
                    continue
                path, _ = located(value, f"initializer {name}", model.parent, str(model),
                                    f"graph.initializer[{index}].external_data")
                found[value] = path  # type: ignore[index]
    except (ValueError, EOFError):  # not protobuf (UnicodeDecodeError is a ValueError)
        pass
    return list(found.items())


_GRAPH, _INITIALIZER = 7, 5  # ModelProto.graph, GraphProto.initializer
_NAME, _EXTERNAL_DATA, _DATA_LOCATION = 8, 13, 14  # TensorProto's fields


def _external_initializers(fh: Any, end: int) -> Iterator[tuple[int, str, dict[str, str]]]:
    """(index, name, external_data entries) of each initializer kept in an external file."""
    for field, value in _fields(fh, end):
        if field != _GRAPH or not isinstance(value, tuple):
            continue
        index = 0
        for inner, span in _fields(fh, _end(value)):
            if inner == _INITIALIZER and isinstance(span, tuple):
                name, entries, location = _tensor_fields(fh, _end(span))
                if location == EXTERNAL:
                    yield index, name, entries
                index += 1


def _tensor_fields(fh: Any, end: int) -> tuple[str, dict[str, str], int]:
    name, entries, location = "", {}, 0
    for field, value in _fields(fh, end):
        if field == _NAME and isinstance(value, tuple):
            name = fh.read(value[1]).decode()
        elif field == _DATA_LOCATION and isinstance(value, int):
            location = value
        elif field == _EXTERNAL_DATA and isinstance(value, tuple):
            pair: dict[int, str] = {}
            for key, text in _fields(fh, _end(value)):
                if key in (1, 2) and isinstance(text, tuple):
                    pair[key] = fh.read(text[1]).decode()
            entries[pair.get(1, "")] = pair.get(2, "")
    return name, entries, location


def _fields(fh: Any, end: int) -> Iterator[tuple[int, int | tuple[int, int]]]:
    """The protobuf fields up to byte `end`: (number, a varint's value, or a length-delimited
    field's (start, length), skipped after the caller looked at it)."""
    while fh.tell() < end:
        tag = _varint(fh)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            yield field, _varint(fh)
        elif wire in (1, 5):
            fh.seek(8 if wire == 1 else 4, 1)
        elif wire == 2:
            length = _varint(fh)
            start = fh.tell()
            if start + length > end:
                raise ValueError("a field runs past its message")
            yield field, (start, length)
            fh.seek(start + length)
        else:
            raise ValueError(f"wire type {wire} is not one ONNX uses")


def _end(span: tuple[int, int]) -> int:
    return span[0] + span[1]


def _varint(fh: Any) -> int:
    value = shift = 0
    while shift < 64:
        byte = fh.read(1)
        if not byte:
            raise EOFError
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7
    raise ValueError("a varint longer than 10 bytes")
