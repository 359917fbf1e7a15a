"""Action kinds: what a build step is, how it is keyed, and the registry of the available ones.

An action kind is registered with a name, an implementation version, the list of parameters that
enter its key, and a function computing its outputs from its inputs:

    @action_kind("opdef", version=1, params=("package_name", "backends"))
    def opdef(ctx: ActionContext) -> Produced: ...

Key = sha256 of canonical JSON {kind, version, params (only the listed ones), input digests}.
Nothing else enters a key: not paths, not names of SoCs, not the tool version.

A kind may read some numbered inputs as a set (`set_inputs=("record",)`: the inputs
`record[0]`, `record[1]`, ...): their digests are deduplicated and renumbered in digest order
before keying, and the action is handed them so numbered, so its output is a function of the
set (two targets with equal records, or the same records in another order, key the same).

Kinds that later parts of udo-build implement are planned by the build graph but not registered;
the build reports them as "not available yet" instead of faking them. Extra kinds (benchmarks,
tests, site-specific steps) are registered by modules named in UDO_BUILD_PLUGINS.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..atomic import write_atomic
from ..canonical import canonical_json, sha256_hex

if TYPE_CHECKING:  # and at run time by __getattr__, on first use
    from .action_io import ActionInput, FileOfParts, Produced, Tree  # noqa: F401

KEY_SCHEMA = "udo-build/action-key"
KEY_VERSION = 1
PLUGINS_ENV = "UDO_BUILD_PLUGINS"
BUILTIN_KINDS = ("udo_build.builder.kinds",)
STREAM_FROM = 64 << 20  # bytes: a larger input is written to a file piece by piece
_LAZY = ("ActionInput", "FileOfParts", "Produced", "Tree")  # in action_io.py


def __getattr__(name: str) -> Any:
    """`Produced`, `Tree`, `FileOfParts` and `ActionInput` (action_io.py), imported when first
    asked for: a build whose actions are all cached runs none (and defines none of them)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from . import action_io

    value = getattr(action_io, name)
    globals()[name] = value
    return value


class ActionKind(NamedTuple):
    """A registered action kind: its name, implementation version, the parameters that enter its
    key, and the function that runs it."""

    name: str
    version: int
    params: tuple[str, ...]
    run: Callable[[ActionContext], Produced]
    doc: str = ""
    set_inputs: tuple[str, ...] = ()  # prefixes of numbered inputs read as a set
    resources: tuple[tuple[str, float], ...] = ()  # what a worker must have (distributed)

    def keyed_names(self, digests: Mapping[str, str]) -> dict[str, str]:
        """The inputs as keyed and handed to the action: name -> the planned input it stands
        for (`digests` by planned name). A set's members are renumbered by digest, one per
        distinct digest (standing for the first planned input that has it)."""
        names = {n: n for n in digests if _set_prefix(n, self.set_inputs) is None}
        for prefix in self.set_inputs:
            members = sorted((_index(n), n) for n in digests
                             if _set_prefix(n, self.set_inputs) == prefix)
            first: dict[str, str] = {}
            for _, name in members:
                first.setdefault(digests[name], name)
            for i, digest in enumerate(sorted(first)):
                names[f"{prefix}[{i}]"] = first[digest]
        return names

    def key(self, params: Mapping[str, Any], inputs: Mapping[str, str]) -> str:
        return action_key(self.name, self.version,
                          {p: params.get(p) for p in self.params}, inputs)

    def key_params(self, params: Mapping[str, Any]) -> dict[str, Any]:
        return {p: params.get(p) for p in self.params}


def action_key(kind: str, version: int, params: Mapping[str, Any],
               inputs: Mapping[str, str]) -> str:
    return sha256_hex(canonical_json({
        "schema": KEY_SCHEMA, "version": KEY_VERSION, "kind": kind, "kind_version": version,
        "params": dict(params), "inputs": dict(inputs),
    }))


def _set_prefix(name: str, prefixes: tuple[str, ...]) -> str | None:
    """The set `name` is a member of (`prefix[i]`), or None."""
    head, bracket, rest = name.partition("[")
    if bracket and head in prefixes and rest[:-1].isdigit() and rest.endswith("]"):
        return head
    return None


def _index(name: str) -> int:
    return int(name[name.index("[") + 1:-1])


_REGISTRY: dict[str, ActionKind] = {}


def action_kind(name: str, *, version: int, params: tuple[str, ...] = (),
                set_inputs: tuple[str, ...] = (), resources: Mapping[str, float] | None = None
                ) -> Callable[[Callable[[ActionContext], Produced]],
                              Callable[[ActionContext], Produced]]:
    """Register an action kind; refuses duplicates and functions not taking one context.
    `set_inputs`: prefixes of numbered inputs that are read as a set (see above); `resources`:
    what a worker of a cluster must offer to run it (Dask's worker resources, e.g. {"SDK": 1}
    for workers that hold a vendor SDK); a local build ignores them."""
    def decorate(fn: Callable[[ActionContext], Produced]) -> Callable[[ActionContext], Produced]:
        if name in _REGISTRY:
            raise ValueError(f"action kind {name!r} is registered twice "
                             f"({_REGISTRY[name].run.__module__} and {fn.__module__})")
        code = getattr(fn, "__code__", None)
        if code is None or code.co_argcount + code.co_kwonlyargcount != 1:
            raise TypeError(f"action kind {name!r}: {fn.__qualname__} must take exactly one "
                            "argument, the ActionContext")
        if not isinstance(version, int) or version < 1:
            raise ValueError(f"action kind {name!r}: version must be a positive int")
        _REGISTRY[name] = ActionKind(name, version, tuple(params), fn,
                                     (fn.__doc__ or "").strip(), tuple(set_inputs),
                                     tuple(sorted((resources or {}).items())))
        return fn
    return decorate


def unregister(name: str) -> None:
    """Remove a kind (tests only)."""
    global _changed
    _changed = True
    _REGISTRY.pop(name, None)


def get_kind(name: str) -> ActionKind | None:
    return _REGISTRY.get(name)


def registered() -> dict[str, ActionKind]:
    return dict(_REGISTRY)


_loaded = False
_changed = False  # a kind was removed: the registry is not what the code and plugins make
_plugins: set[str] = set()  # the modules of the plugins loaded
_plugin_files: list[str] = []  # the plugins loaded from a file (not in sys.modules)


def pristine() -> bool:
    """Whether the kinds are those a fresh process loads: the built-in kinds and the plugins
    UDO_BUILD_PLUGINS names, none removed or registered by other code (a test's). A no-op
    record relies on it (see uptodate.py): it sees the code's files, not this registry."""
    loaded = (*BUILTIN_KINDS, *_plugins)
    return _loaded and not _changed and all(
        any(k.run.__module__ == m or k.run.__module__.startswith(f"{m}.") for m in loaded)
        for k in _REGISTRY.values())


def plugin_files() -> list[str]:
    """The plugin files load_kinds ran (a plugin named as a module is in sys.modules)."""
    return list(_plugin_files)


def load_kinds(env: Mapping[str, str] | None = None) -> None:
    """Import the built-in kinds and the plugins named in UDO_BUILD_PLUGINS (once)."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for module in BUILTIN_KINDS:
        importlib.import_module(module)
    env = os.environ if env is None else env
    for entry in filter(None, env.get(PLUGINS_ENV, "").split(os.pathsep)):
        _import_plugin(entry)


def _import_plugin(entry: str) -> None:
    import importlib.util  # a plugin file is rare: a build without one need not import it

    from ..errors import UserError

    try:
        if entry.endswith(".py"):
            spec = importlib.util.spec_from_file_location(Path(entry).stem, entry)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {entry}")
            module = importlib.util.module_from_spec(spec)
            _plugins.add(module.__name__)
            _plugin_files.append(entry)
            spec.loader.exec_module(module)
        else:
            _plugins.add(importlib.import_module(entry).__name__)
    except (ImportError, OSError) as exc:
        raise UserError(f"plugin {entry} cannot be loaded: {exc}",
                        hint=f"check {PLUGINS_ENV}") from None


class MissingInput(Exception):
    """An input blob is gone from the store or corrupt; the engine rebuilds its producer."""

    def __init__(self, name: str, digest: str) -> None:
        super().__init__(name, digest)
        self.name = name
        self.digest = digest

    def __str__(self) -> str:
        return f"input {self.name} ({self.digest[:12]}) is missing from the store or corrupt"


StepSink = Callable[[str, int, int], None]  # (what, done, total): an action's inner progress
Progress = Callable[[int, int], None]  # (done, total), as a stage reports it


class ActionContext:
    """What an action sees: its parameters, its inputs by name (each fetched from the store by
    its digest), a private work folder, where it tells its inner progress (`progress`), and
    `cores`: how many cores it may keep busy at once (its share of the machine while the engine
    runs other actions beside it: see Engine.cores_for; 1 where nothing says more). A kind
    passes it to the stages that spread work over cores (udo_build.runtime.pool); it changes
    no output."""

    def __init__(self, params: Mapping[str, Any], inputs: Mapping[str, ActionInput],
                 cas: Any, steps: StepSink | None = None, cores: int = 1) -> None:
        self.params = dict(params)
        self.cores = max(1, cores)
        self._inputs = dict(inputs)
        self._cas = cas
        self._part_of: dict[str, str] = {}  # a stored blob this action shares -> its input
        self._steps = steps
        import tempfile  # here: a build whose actions are all cached runs none (nor imports it)

        self.workdir = Path(tempfile.mkdtemp(prefix="udo-build-action-"))

    def progress(self, what: str, total: int = 0) -> Progress | None:
        """A callback for a stage's `progress` argument: its (done, total) sub-steps of `what`
        (e.g. "calibration"; `total` stands in when the stage passes 0), or None when nobody
        listens (then the stage skips the calls)."""
        steps = self._steps
        if steps is None:
            return None
        return lambda done, of: steps(what, done, of or total)

    @classmethod
    def of_files(cls, params: Mapping[str, Any], files: Mapping[str, Path],
                 cas: Any) -> ActionContext:
        """A context whose inputs are these files, stored in `cas` as the engine stores a
        build's source files (to run a kind by hand)."""
        from .action_io import ActionInput

        refs = {name: (cas.put_file(path), path) for name, path in files.items()}
        return cls(params, {name: ActionInput(ref.digest, "blob", path.name, str(path), ref.size)
                            for name, (ref, path) in refs.items()}, cas)

    def input_names(self) -> list[str]:
        return sorted(self._inputs)

    def source_path(self, name: str) -> Path | None:
        """The file a source input came from (for messages), or None for action outputs."""
        found = self._inputs.get(name)
        return Path(found.label) if found is not None and found.file else None

    def sources(self) -> dict[Path, str]:
        """Where the source inputs are materialized -> where they came from (for messages)."""
        return {self._source_file(n, i): i.label for n, i in self._inputs.items() if i.file}

    def input_bytes(self, name: str) -> bytes:
        digest = self._input(name).digest
        data = self._cas.get(digest)
        if data is None:  # deleted, or corrupt (then quarantined): its producer runs again
            raise MissingInput(name, digest)
        return data

    def input_part(self, name: str) -> tuple[Any, bytes]:
        """An input blob as a part of a FileOfParts output (shared in the store, not copied),
        and its bytes (verified)."""
        from ..store.parts import Part

        data = self.input_bytes(name)
        digest = self._input(name).digest
        self._part_of[digest] = name
        return Part(0, digest, len(data)), data

    def input_reader(self, name: str) -> Any:
        """Byte ranges of an input (`.size`, `.read(offset, size)`): a FileOfParts output is
        read part by part from the store, never whole; anything else is read whole."""
        from ..store.parts import MissingPart, PartsReader, parse_layout

        found = self._input(name)
        if not found.file:
            digest, kind = found.digest, found.type
            if kind == "tree":
                layout = parse_layout(self.input_bytes(name))
                if layout is not None:
                    for part in layout.parts:
                        self._part_of.setdefault(part.digest, name)
                    return _Guarded(PartsReader(self._cas, layout), name, digest, MissingPart)
        from ..ir.bundle import MemoryReader

        return MemoryReader(self.input_bytes(name))

    def lost_part(self, digest: str) -> MissingInput | None:
        """A shared part of an output (a blob this action read through `input_part` or
        `input_reader`) that went missing before its output was stored, as the input it came
        from (its producer runs again); None for a blob the action never read."""
        name = self._part_of.get(digest)
        return None if name is None else MissingInput(name, self._input(name).digest)

    def input_path(self, name: str) -> Path:
        """A file holding the input, written to the workdir: a source under its own file
        name, an output of another action under the input's name."""
        found = self._input(name)
        target = (self._source_file(name, found) if found.file
                  else self.workdir / "inputs" / name.replace("/", "_"))
        if not target.exists():
            if found.size is not None and found.size > STREAM_FROM:
                self._stream_to(name, found, target)
            else:
                write_atomic(target, self.input_bytes(name), readonly=False, durable=False)
        return target

    def _stream_to(self, name: str, found: ActionInput, target: Path) -> None:
        """Write a large input blob (a model's external data) piece by piece, verified."""
        from ..atomic import AtomicFile
        from ..store.parts import MissingPart, read_blob

        with AtomicFile(target, mode=None, durable=False) as out:
            try:
                for chunk in read_blob(self._cas, found.digest, found.size or 0):
                    out.write(chunk)
            except MissingPart:
                out.abort()
                raise MissingInput(name, found.digest) from None

    def input_tree(self, name: str) -> Path:
        """A folder holding a tree input (a Tree output of another action), written to the
        workdir under the input's name."""
        from ..store.cas import parse_tree

        entries = parse_tree(self.input_bytes(name))
        if entries is None:
            raise KeyError(f"input {name!r} is not a tree")
        folder = self.workdir / "trees" / name.replace("/", "_")
        for entry in entries:
            data = self._cas.get(entry["digest"])
            if data is None:
                raise MissingInput(name, entry["digest"])
            (folder / entry["path"]).parent.mkdir(parents=True, exist_ok=True)
            write_atomic(folder / entry["path"], data, readonly=False, durable=False)
        return folder

    def _source_file(self, name: str, found: ActionInput) -> Path:
        return self.workdir / "sources" / name.replace("/", "_") / found.file

    def _input(self, name: str) -> ActionInput:
        if name not in self._inputs:
            raise KeyError(f"action has no input {name!r}; it has: {', '.join(self.input_names())}")
        return self._inputs[name]

    def cleanup(self) -> None:
        import shutil

        shutil.rmtree(self.workdir, ignore_errors=True)


class _Guarded:
    """A reader whose missing or corrupt parts are the action's missing input (its producer
    runs again)."""

    def __init__(self, reader: Any, name: str, digest: str, missing: type[Exception]) -> None:
        self.reader = reader
        self.size = reader.size
        self._name, self._digest, self._missing = name, digest, missing

    def read(self, offset: int, size: int) -> bytes:
        try:
            return bytes(self.reader.read(offset, size))
        except self._missing:
            raise MissingInput(self._name, self._digest) from None

    def part_path(self, offset: int, size: int) -> Any:
        """The store file holding exactly this range as it is (a weight to map), or None."""
        return self.reader.part_path(offset, size)
