"""The SNPE input_list format.

    #layer_a layer_b          optional first lines: output layers ...
    %tensor_a tensor_b        ... and output tensors
    data/0.raw                then one line per inference: a single path,
    in0:=data/0.raw in1:=x.raw  or name:=path pairs, one per model input

Paths are relative to the list file's folder. A `#` inside a path is part of the path (only a
leading `#` in the header lines names layers). Blank lines are skipped. Files are raw
little-endian float32 or .npy; an integer input's raw file (token ids) may also be in the
input's own type (int64: 8 bytes a value; int32: 4, told from float32 by its values, since whole
numbers written as int32 are not whole as float32).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import Problem, UserError, raise_if_any
from ..source import decode_text, read_limited

MAX_LIST_BYTES = 16 << 20


@dataclass(frozen=True)
class Entry:
    """One model input of one inference: its name (None for a bare path) and its file."""

    name: str | None
    path: Path
    line: int


@dataclass(frozen=True)
class InputList:
    file: Path
    output_layers: tuple[str, ...]
    output_tensors: tuple[str, ...]
    inferences: tuple[tuple[Entry, ...], ...]

    def files(self) -> list[Path]:
        return [e.path for inference in self.inferences for e in inference]


def parse_input_list(path: Path, root: Path | None = None,
                     files: Sequence[Path] | None = None) -> InputList:
    """Parse a list; every named file must exist (and stay inside `root`, when given).
    `files`: the entries' files in order (an action's inputs: a list whose files were handed
    over by digest), taken instead of the paths the list names."""
    text = decode_text(read_limited(path, MAX_LIST_BYTES, "input list"), str(path))
    layers: list[str] = []
    tensors: list[str] = []
    inferences: list[tuple[Entry, ...]] = []
    problems: list[Problem] = []
    folder = path.parent
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        if not inferences and line[0] in "#%":
            (layers if line[0] == "#" else tensors).extend(line[1:].split())
            continue
        entries = _entries(line, number, path, folder, root if files is None else None,
                           problems, files is None)
        if files is not None:
            start = sum(len(i) for i in inferences)
            entries = [replace(e, path=files[start + j]) for j, e in enumerate(entries)]
        inferences.append(tuple(entries))
    if not inferences and not problems:
        problems.append(Problem("the input list names no input file", str(path),
                                hint="add one line per inference: a path, or name:=path pairs"))
    raise_if_any(problems)
    return InputList(path, tuple(layers), tuple(tensors), tuple(inferences))


def _entries(line: str, number: int, path: Path, folder: Path, root: Path | None,
             problems: list[Problem], check: bool = True) -> list[Entry]:
    out = []
    for item in line.split():
        name, sep, target = item.partition(":=")
        if not sep:
            name, target = "", item
        elif not name or not target:
            problems.append(Problem(f"'{item}' is not name:=path", str(path), number))
            continue
        resolved = (folder / target).resolve()
        if root is not None and not resolved.is_relative_to(root):
            problems.append(Problem(f"'{target}' leads outside the project folder {root}",
                                    str(path), number))
        elif check and not resolved.is_file():
            problems.append(Problem(f"input file not found: '{target}' (looked for {resolved})",
                                    str(path), number))
        else:
            out.append(Entry(name or None, resolved, number))
    return out


def load_tensor(path: Path, name: str, dtype: str, shape: tuple[int, ...] | None) -> Any:
    """One input file as an array of the input's shape: raw little-endian float32 (SNPE's
    format) or .npy; the size must match, else the message says what it implies. Sizes are
    checked before anything is allocated."""
    import numpy as np

    from ..source import tensor_problem

    problem = None if shape is None else tensor_problem(shape, 4)
    if problem is not None:
        raise UserError(f"input '{name}': {problem}", file=path,
                        hint="check the input dimensions")
    if path.suffix == ".npy":
        array = _load_npy(path, name)
        if shape is not None and tuple(array.shape) != tuple(shape):
            if array.size != int(np.prod(shape)):
                raise UserError(f"input '{name}': the .npy holds shape {list(array.shape)}, "
                                f"the model expects {list(shape)}", file=path)
            array = array.reshape(shape)
        return array.astype(dtype, copy=False)
    if shape is None:
        raise UserError(f"input '{name}' has no static shape, so a raw file cannot be read",
                        file=path, hint="give the input's dimensions (input_dimensions) or "
                                        "use .npy files")
    expected = int(np.prod(shape)) * 4
    native = np.dtype(dtype).newbyteorder("<")
    data = read_limited(path, max(expected, int(np.prod(shape)) * native.itemsize,
                                  MAX_LIST_BYTES), "input file")
    if native.kind in "iu" and len(data) == int(np.prod(shape)) * native.itemsize and (
            native.itemsize != 4 or not _integral_float32(data)):
        return np.frombuffer(data, dtype=native).reshape(shape).astype(dtype, copy=False)
    if len(data) != expected:
        found = len(data) / 4
        also = f" or {native.name}" if native.kind in "iu" else ""
        raise UserError(
            f"input '{name}': expected {expected} bytes (float32{also} {list(shape)}), found "
            f"{len(data)} bytes ({found:g} float32 values)", file=path,
            hint="raw inputs are little-endian float32 in the model's input shape (an "
                 "integer input's also in its own type)")
    return np.frombuffer(data, dtype="<f4").reshape(shape).astype(dtype, copy=False)


def _integral_float32(data: bytes) -> bool:
    """Every value, read as float32, is a whole number: SNPE's float32 form of an integer
    input (token ids written as int32 read as float32 are tiny fractions: 1 is 1.4e-45)."""
    import numpy as np

    values = np.frombuffer(data, dtype="<f4")
    return bool(np.all(np.isfinite(values)) and np.all(values == np.round(values)))


def _load_npy(path: Path, name: str) -> Any:
    """A .npy file's array; its header's shape is checked against the file's size (mapped,
    not read) before the data is copied into memory."""
    import numpy as np

    from ..source import tensor_problem

    try:
        mapped = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:  # a header over the file's size: ValueError
        raise UserError(f"input '{name}': not a readable .npy file: {exc}",
                        file=path) from None
    if not isinstance(mapped, np.ndarray) or mapped.dtype.kind not in "biuf":
        raise UserError(f"input '{name}': the .npy file holds no numeric array", file=path)
    problem = tensor_problem(list(mapped.shape), mapped.dtype.itemsize)
    if problem is not None:
        raise UserError(f"input '{name}': {problem}", file=path)
    return np.array(mapped)


def feeds(listing: InputList, inputs: list[Any],
          dims: Mapping[str, Sequence[int]] | None = None) -> Iterator[dict[str, Any]]:
    """The model feeds of each inference: {input name: array}. Bare paths map to the inputs in
    order; named entries must name model inputs. `dims` (input name -> dimensions) overrides
    the shapes the files are read in (a run at other input dimensions than the model's)."""
    names = [t.name for t in inputs]
    by_name = {t.name: replace(t, shape=tuple(dims[t.name])) if t.name in (dims or {}) else t
               for t in inputs}
    for inference in listing.inferences:
        line = inference[0].line if inference else 0
        mapping: dict[str, Path] = {}
        for position, entry in enumerate(inference):
            name = entry.name or (names[position] if position < len(names) else None)
            if name is None or name not in by_name:
                raise UserError(f"'{entry.name or entry.path.name}' does not name a model input",
                                file=listing.file, line=line,
                                hint="model inputs: " + ", ".join(names))
            mapping[name] = entry.path
        missing = [n for n in names if n not in mapping]
        if missing:
            raise UserError(f"no file for input(s) {', '.join(missing)}", file=listing.file,
                            line=line, hint="write name:=path for each input")
        yield {n: load_tensor(p, n, by_name[n].dtype, by_name[n].static_shape)
               for n, p in mapping.items()}
