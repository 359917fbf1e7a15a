"""The SNPE input_list format.

    #layer_a layer_b          optional first lines: output layers ...
    %tensor_a tensor_b        ... and output tensors
    data/0.raw                then one line per inference: a single path,
    in0:=data/0.raw in1:=x.raw  or name:=path pairs, one per model input

Paths are relative to the list file's folder. A `#` inside a path is part of the path (only a
leading `#` in the header lines names layers). Blank lines are skipped. Files are raw
little-endian float32 or .npy.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import Problem, raise_if_any
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


def parse_input_list(path: Path, root: Path | None = None) -> InputList:
    """Parse a list; every named file must exist (and stay inside `root`, when given)."""
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
        inferences.append(tuple(_entries(line, number, path, folder, root, problems)))
    if not inferences and not problems:
        problems.append(Problem("the input list names no input file", str(path),
                                hint="add one line per inference: a path, or name:=path pairs"))
    raise_if_any(problems)
    return InputList(path, tuple(layers), tuple(tensors), tuple(inferences))


def _entries(line: str, number: int, path: Path, folder: Path, root: Path | None,
             problems: list[Problem]) -> list[Entry]:
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
        elif not resolved.is_file():
            problems.append(Problem(f"input file not found: '{target}' (looked for {resolved})",
                                    str(path), number))
        else:
            out.append(Entry(name or None, resolved, number))
    return out

