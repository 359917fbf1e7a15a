"""Reading user files safely, with the position of every value kept.

`load_yaml` turns YAML (safe tags only) into plain Python data plus a `Positions` map from each
field path to its line and column. Duplicate keys are an error; aliases are counted so that an
alias bomb is refused, not expanded; files over a size limit are refused before parsing.
`load_json` does the same for JSON, strictly (what `json` accepts), using the YAML composer only
to find positions.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UserError

FieldPath = tuple[str | int, ...]

MAX_YAML_BYTES = 1 << 20
MAX_JSON_BYTES = 8 << 20
MAX_NODES = 100_000
MAX_DEPTH = 64
CHUNK = 1 << 20
# no tensor of a model, a recipe's input dimensions or a record may be larger than this
MAX_TENSOR_ELEMENTS = 1 << 31
MAX_TENSOR_BYTES = 16 << 30

_MERGE_TAG = "tag:yaml.org,2002:merge"

PROJECT_MARKERS = (".git", "pyproject.toml", ".udo-build-root")


def find_root(folder: Path) -> Path:
    """The project folder: the nearest folder at or above `folder` with a project marker."""
    for candidate in (folder, *folder.parents):
        if any((candidate / marker).exists() for marker in PROJECT_MARKERS):
            return candidate
    return folder


def format_path(path: FieldPath) -> str:
    """('prepare', 'matrix', 'soc', 2) -> 'prepare.matrix.soc[2]'."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


@dataclass
class Positions:
    """Where each value (and each mapping key) of a document stands in its file."""

    file: str
    values: dict[FieldPath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[FieldPath, tuple[int, int]] = field(default_factory=dict)

    def of(self, path: FieldPath, *, key: bool = False) -> tuple[int | None, int | None]:
        """Line and column of `path`, or of its nearest ancestor that has one."""
        tables = (self.keys, self.values) if key else (self.values, self.keys)
        p = tuple(path)
        while p:
            for table in tables:
                if p in table:
                    return table[p]
            p = p[:-1]
        return self.values.get((), (None, None))

    def to_json(self) -> dict[str, Any]:
        return {"values": [[list(p), *lc] for p, lc in self.values.items()],
                "keys": [[list(p), *lc] for p, lc in self.keys.items()]}

    @staticmethod
    def from_json(file: str, doc: dict[str, Any]) -> Positions:
        return Positions(file, {tuple(p): (line, col) for p, line, col in doc["values"]},
                         {tuple(p): (line, col) for p, line, col in doc["keys"]})

    def error(
        self, path: FieldPath, message: str, hint: str | None = None, *, key: bool = False
    ) -> UserError:
        line, column = self.of(path, key=key)
        return UserError(
            message, file=self.file, line=line, column=column, field=format_path(path) or None,
            hint=hint,
        )


def read_limited(path: str | os.PathLike[str], limit: int, what: str) -> bytes:
    """The bytes of a user file, refusing folders, missing files and files over `limit`."""
    p = Path(path)
    try:
        if p.is_dir():
            raise UserError(f"{what} is a folder, not a file", file=p,
                            hint="name the file itself")
        size = p.stat().st_size
        if size > limit:
            raise UserError(
                f"{what} is {size} bytes, over the limit of {limit} bytes", file=p,
                hint="is this the right file?",
            )
        data = _read_chunks(p, limit)
    except FileNotFoundError:
        raise UserError(f"{what} not found", file=p, hint="check the path") from None
    except PermissionError:
        raise UserError(f"{what} cannot be read (permission denied)", file=p,
                        hint="check that the file is readable") from None
    except OSError as exc:
        raise UserError(f"{what} cannot be read: {exc.strerror or exc}", file=p,
                        hint="check that the file is readable") from None
    if len(data) > limit:
        raise UserError(f"{what} grew past the limit of {limit} bytes while reading", file=p)
    return data


def _read_chunks(path: Path, limit: int) -> bytes:
    """At most `limit + 1` bytes of `path`, read in chunks: memory follows the file's size,
    not the limit (a file may grow between the size check and the read)."""
    chunks: list[bytes] = []
    total = 0
    with open(path, "rb") as fh:
        while total <= limit:
            chunk = fh.read(min(CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def tensor_problem(shape: tuple[int, ...] | list[int], itemsize: int = 4) -> str | None:
    """Why a tensor of `shape` is refused (negative, over MAX_TENSOR_ELEMENTS elements or
    MAX_TENSOR_BYTES bytes), or None when it is acceptable."""
    elements = 1
    for d in shape:
        if not isinstance(d, int) or isinstance(d, bool) or d < 0:
            return f"dimension {d!r} is not a size (a whole number, 0 or more)"
        elements *= d
    if elements > MAX_TENSOR_ELEMENTS:
        return (f"a tensor of shape {'x'.join(map(str, shape))} has {elements:,} elements, "
                f"over the limit of {MAX_TENSOR_ELEMENTS:,}")
    if elements * itemsize > MAX_TENSOR_BYTES:
        return (f"a tensor of shape {'x'.join(map(str, shape))} needs "
                f"{elements * itemsize:,} bytes, over the limit of {MAX_TENSOR_BYTES:,}")
    return None


def decode_text(data: bytes, file: str) -> str:
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise UserError(
            f"not valid UTF-8 text (byte 0x{data[exc.start]:02x})", file=file, line=line,
            hint="save the file as UTF-8",
        ) from None


def _loader_class() -> type:
    import yaml

    # the C loader keeps marks too, and is ten times faster
    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str, file: str) -> tuple[Any, Positions]:
    """Parse one YAML document into plain data and the positions of its values."""
    import yaml

    loader = _loader_class()(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (None, None)
        problem = " ".join(filter(None, [exc.context, exc.problem]))
        raise UserError(f"not valid YAML: {problem}", file=file, line=line, column=col) from None
    except yaml.YAMLError as exc:
        raise UserError(f"not valid YAML: {exc}", file=file) from None
    finally:
        loader.dispose()
    positions = Positions(file)
    if node is None:
        return None, positions
    builder = _Builder(loader, positions)
    return builder.build(node, (), 0), positions


class _Builder:
    """Turns a composed YAML node graph into plain data, counting every node it visits."""

    def __init__(self, loader: Any, positions: Positions) -> None:
        self.loader = loader
        self.positions = positions
        self.visited = 0
        self.merging: set[int] = set()  # the mapping nodes being built, to refuse self-merges

    def build(self, node: Any, path: FieldPath, depth: int) -> Any:
        import yaml

        self.visited += 1
        mark = node.start_mark
        if self.visited > MAX_NODES:
            raise UserError(
                f"the document expands to more than {MAX_NODES} values (an alias bomb?)",
                file=self.positions.file, line=mark.line + 1, column=mark.column + 1,
            )
        if depth > MAX_DEPTH:
            raise UserError(
                f"the document nests deeper than {MAX_DEPTH} levels",
                file=self.positions.file, line=mark.line + 1, column=mark.column + 1,
            )
        self.positions.values.setdefault(path, (mark.line + 1, mark.column + 1))
        plain = {yaml.MappingNode: "tag:yaml.org,2002:map",
                 yaml.SequenceNode: "tag:yaml.org,2002:seq"}.get(type(node))
        if plain is not None and node.tag != plain:
            raise UserError(
                f"the tag {node.tag} is not allowed: recipes are safe YAML (plain mappings, "
                "lists and scalars)", file=self.positions.file, line=mark.line + 1,
                column=mark.column + 1, field=format_path(path) or None)
        if isinstance(node, yaml.MappingNode):
            return self._mapping(node, path, depth)
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i), depth + 1) for i, item in enumerate(node.value)]
        try:
            return self.loader.construct_object(node, deep=True)
        except yaml.YAMLError as exc:
            raise UserError(
                f"bad value: {getattr(exc, 'problem', exc)}", file=self.positions.file,
                line=mark.line + 1, column=mark.column + 1, field=format_path(path) or None,
            ) from None

    def _mapping(self, node: Any, path: FieldPath, depth: int) -> dict[str, Any]:
        self.merging.add(id(node))
        try:
            return self._mapping_items(node, path, depth)
        finally:
            self.merging.discard(id(node))

    def _mapping_items(self, node: Any, path: FieldPath, depth: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        merged: dict[str, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                merged.update(self._merge_sources(value_node, path, depth))
                continue
            key = self.build(key_node, (*path, "<key>"), depth + 1)
            kmark = key_node.start_mark
            where = {"file": self.positions.file, "line": kmark.line + 1,
                     "column": kmark.column + 1}
            if not isinstance(key, (str, int, float, bool)) or key is None:
                raise UserError("a mapping key must be a plain value", **where,
                                field=format_path(path) or None)
            key = str(key) if not isinstance(key, str) else key
            if key in out:
                first = self.positions.keys[(*path, key)]
                raise UserError(
                    f"duplicate key '{key}' (first given at line {first[0]})",
                    **where, field=format_path((*path, key)), hint="give each key once",
                )
            self.positions.keys[(*path, key)] = (kmark.line + 1, kmark.column + 1)
            out[key] = self.build(value_node, (*path, key), depth + 1)
        self.positions.values.pop((*path, "<key>"), None)
        for key, value in merged.items():
            out.setdefault(key, value)
        return out

    def _merge_sources(self, node: Any, path: FieldPath, depth: int) -> dict[str, Any]:
        import yaml

        sources = node.value if isinstance(node, yaml.SequenceNode) else [node]
        merged: dict[str, Any] = {}
        for source in sources:
            mark = source.start_mark
            where = {"file": self.positions.file, "line": mark.line + 1,
                     "column": mark.column + 1, "field": format_path(path) or None}
            if not isinstance(source, yaml.MappingNode):
                raise UserError("'<<' merges only mappings", **where)
            if id(source) in self.merging or depth > MAX_DEPTH:
                raise UserError("'<<' merges a mapping into itself (a recursive alias)",
                                **where, hint="merge an anchor defined before this mapping")
            for key, value in self._mapping(source, path, depth + 1).items():
                merged.setdefault(key, value)
        return merged


def load_json(data: bytes, file: str) -> tuple[Any, Positions]:
    """Parse JSON strictly; positions come from composing the same text as YAML."""
    text = decode_text(data, file)
    try:
        value = json.loads(text, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"not valid JSON: {exc.msg}", file=file, line=exc.lineno, column=exc.colno,
            hint="strict JSON: keys in double quotes, no comments, no trailing commas",
        ) from None
    except _DuplicateKey as exc:
        try:  # the YAML composer finds the same duplicate, with its position
            load_yaml(text.replace("\t", " "), file)
        except UserError as located:
            if "duplicate key" in located.problem.message:
                raise located from None
        raise UserError(f"duplicate key '{exc.key}'", file=file,
                        hint="give each key once") from None
    except RecursionError:
        raise UserError("the JSON nests too deeply", file=file) from None
    except ValueError as exc:  # e.g. an integer over Python's digit limit
        raise UserError(f"not valid JSON: {str(exc).split(';')[0][:90]}", file=file,
                        hint="write numbers with at most 4300 digits") from None
    positions = _json_positions(text, file)
    _refuse_surrogates(value, positions)
    return value, positions


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        self.key = key


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _json_positions(text: str, file: str) -> Positions:
    try:
        return load_yaml(text.replace("\t", " "), file)[1]
    except UserError:
        return Positions(file)  # valid JSON that YAML reads differently: no positions


def _refuse_surrogates(data: Any, positions: Positions) -> None:
    """JSON may escape lone surrogates (\\ud800), which are not text: refuse them."""
    stack: list[tuple[FieldPath, Any]] = [((), data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if _is_surrogate(key):
                    raise positions.error((*path, key), _SURROGATE, _SURROGATE_HINT, key=True)
                stack.append(((*path, key), item))
        elif isinstance(value, list):
            stack.extend(((*path, i), item) for i, item in enumerate(value))
        elif isinstance(value, str) and _is_surrogate(value):
            raise positions.error(path, _SURROGATE, _SURROGATE_HINT)


_SURROGATE = "this string holds an unpaired surrogate escape (\\ud800-\\udfff), which is not text"
_SURROGATE_HINT = "escape characters outside the BMP as a surrogate pair, or write them as is"


def _is_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False
