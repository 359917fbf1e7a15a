"""The command line: `main(argv) -> exit code`, one module per subcommand.

Exit codes: 0 success, 1 a build step failed, 2 a user error (bad recipe, config, model or
arguments, or a fault of the machine outside a step: a full disk, a read-only or unwritable
store or output folder), 3 a bug of udo-build (traceback only with --debug), 130 interrupted.

A build whose no-op was recorded under the same words is told from its record before the words
are parsed (`plain_words`, cli/build.py's `told_from_record`): argparse and the parsers'
modules are imported only when the words must be parsed.
"""

from __future__ import annotations

from . import interrupt  # first: Ctrl-C while the rest imports exits quietly (see interrupt)

# isort: split
import contextlib
import functools
import os
import sys

from .. import __version__
from ..errors import (
    EXIT_INTERNAL,
    EXIT_STEP_FAILED,
    EXIT_USER_ERROR,
    Problem,
    StepFailed,
    UserError,
    during_interrupt,
    environment_problem,
)
from .reporter import Reporter, choose_mode

# typing's, without importing typing: a replayed no-op imports neither typing nor pathlib (each
# module on its path names its types for type checkers only, and spells paths with os.path:
# about 5 and 8 ms of CPU, a tenth of that no-op's)
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable, Sequence
    from typing import IO

# subcommand -> module (under udo_build.cli) with `add_arguments(parser)` and `run(args, rep)`;
# no module is named after a name of this one (`run` is the console script's function: a
# submodule `run`, once imported, would take its place as the package's attribute)
COMMANDS: dict[str, tuple[str, str]] = {
    "build": ("build", "build a recipe: rebuild what is stale, reuse what is cached (default)"),
    "explain": ("explain", "say why each action of a recipe would run, against its last build"),
    "graph": ("graph", "print the action graph of recipes with each action's status (dot, JSON)"),
    "validate": ("validate", "check a recipe and every op config it names; print the targets"),
    "opdef": ("opdef", "op configs: show the normalized definition of an XML or JSON config"),
    "package": ("package", "generate op packages from op configs, without a recipe"),
    "build-cpu": ("build_cpu", "compile a CPU op package's C++ ops for the emulator (x86 host)"),
    "store": ("store", "inspect and maintain the artifact store: stats, verify, gc, ls"),
    "cache": ("cache", "move a recipe's artifacts to (push) or from (pull) the remote cache"),
    "key": ("key", "signing keys for the remote cache: generate one, show its public key"),
    "convert": ("convert", "convert an ONNX model (with custom ops) to a bundle, without a recipe"),
    "quantize": ("quantize", "quantize a float bundle over a calibration list, without a recipe"),
    "run": ("run_bundle", "run a bundle on the emulator over an input list, writing its outputs"),
    "info": ("info", "show what a bundle holds: layers, inputs, parameters, MACs, UDOs, records"),
    "export": ("export", "write a quantized bundle as a standard ONNX QDQ model (--qdq OUT.onnx)"),
    "prepare": ("prepare", "prepare one cache record from a bundle, without a recipe"),
    "quant-report": ("quant_report", "per-layer SQNR of a quantized bundle vs its float model"),
    "fleet": ("fleet", "per device and run of a recipe: the record it would load, or why not"),
    "plan-records": ("plan_records", "the smallest set of (arch, VTCM) records serving a fleet"),
    "init": ("init", "start a project from an ONNX model: op config, kernels stub and recipe"),
}

EPILOG = """\
'udo-build RECIPE' is short for 'udo-build build RECIPE'.
exit codes: 0 ok, 1 a build step failed, 2 a mistake in the input, 3 a bug of udo-build.
Run 'udo-build COMMAND --help' for a command's options."""


def _common(top: bool) -> argparse.ArgumentParser:
    """--json and --debug, accepted before and after the command. After it they do not reset
    what was given before it (their default there is SUPPRESS)."""
    import argparse

    from .common import HelpFormatter

    default: object = False if top else argparse.SUPPRESS
    common = argparse.ArgumentParser(add_help=False, formatter_class=HelpFormatter)
    common.add_argument("--json", action="store_true", default=default,
                        help="print one machine-readable JSON object on stdout")
    common.add_argument("--debug", action="store_true", default=default,
                        help="show tracebacks of internal errors")
    return common


def build_parser(commands: Sequence[str] | None = None, *,
                 listed: bool = True) -> argparse.ArgumentParser:
    """The parser of every command; with `commands`, only those get their arguments (the
    others are listed, with their summaries): a command's arguments cost its module's import
    and a few milliseconds, which a no-op build does not spend on the others. With
    `listed=False` the others are not even listed (a parser each, with gettext lookups: what
    `udo-build RECIPE` needs is the build command alone)."""
    import argparse

    from .common import HelpFormatter, RawFormatter

    parser = argparse.ArgumentParser(
        prog="udo-build", parents=[_common(top=True)],
        description="Declarative, incremental builds of neural networks with custom ops (UDOs) "
                    "for HTP NPUs.",
        epilog=EPILOG, formatter_class=RawFormatter,
    )
    parser.add_argument("--version", action="version", version=f"udo-build {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = _common(top=False)
    for name, (module, summary) in COMMANDS.items():
        if not listed and commands is not None and name not in commands:
            continue
        cmd = sub.add_parser(name, parents=[common], help=summary, description=summary,
                             formatter_class=HelpFormatter)
        cmd.set_defaults(module=module)
    _add_arguments(parser, COMMANDS if commands is None else commands, common)
    return parser


@functools.cache
def _parser(commands: tuple[str, ...] | None, *, listed: bool = True) -> argparse.ArgumentParser:
    """build_parser's parser, made once per process: parsing leaves a parser as it was, and a
    process that runs many commands (a test session, a conformance run: thousands) would
    otherwise spend a fifth of its time making parsers (each help text a gettext lookup)."""
    return build_parser(commands, listed=listed)


def _add_arguments(parser: argparse.ArgumentParser, names: Sequence[str],
                   common: argparse.ArgumentParser | None = None) -> None:
    common = common or _common(top=False)
    for name in names:
        _module(COMMANDS[name][0]).add_arguments(_commands(parser)[name], common)


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    import argparse

    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices


def _with_default_command(parser: argparse.ArgumentParser,
                          argv: list[str]) -> tuple[list[str], str | None]:
    """`udo-build RECIPE ...` means `udo-build build RECIPE ...`: when the first word that is
    neither an option nor an option's value is not a command, put `build` in front. Returns the
    arguments and the command they name (None when none)."""
    takes_value = {opt for action in _commands(parser)["build"]._actions if action.nargs != 0
                   for opt in action.option_strings}
    words = iter(argv)
    for word in words:
        if word == "--":
            break
        if word.startswith("-"):
            if word in takes_value:
                next(words, None)
            continue
        return (argv, word) if word in COMMANDS else (["build", *argv], "build")
    return argv, None


def _module(name: str):  # type: ignore[no-untyped-def]
    import importlib

    return importlib.import_module(f"{__name__}.{name}")


def main(argv: Sequence[str] | None = None, *, stdout: IO[str] | None = None,
         stderr: IO[str] | None = None, env: dict[str, str] | None = None) -> int:
    out = _escaping(stdout or sys.stdout)
    err = _escaping(stderr or sys.stderr)
    words = tuple(sys.argv[1:] if argv is None else argv)
    plain = plain_words(words)
    if plain is not None:  # a recorded no-op of these words, told before they are parsed
        code = _replayed(recorded_words(words), *plain, out, err, env)
        if code is not None:
            return code
    parser = _parser(("build",), listed=False)
    argv, command = _with_default_command(parser, list(words))
    if command != "build":  # every command listed; that one's arguments (all when none)
        parser = _parser((command,) if command else None)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args, extra = parser.parse_known_args(argv)
            if getattr(args, "targets", None) is not None:  # positionals after options
                args.targets += [a for a in extra if not a.startswith("-")]
                extra = [a for a in extra if a.startswith("-")]
            if extra:
                parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # argparse printed usage or help
        return EXIT_USER_ERROR if exc.code not in (0, None) else 0
    if not getattr(args, "module", None):
        parser.print_help(out)
        return EXIT_USER_ERROR
    args.command_line = recorded_words(words)  # a build's no-op record (builder/uptodate.py)
    if plain is None and args.module == "build":  # words not plain: parsed, then looked up
        code = _replayed(args.command_line, args.store, args.json, args.debug, out, err, env)
        if code is not None:
            return code
    rep = Reporter(out, err, choose_mode(out, args.json, env))
    return _running(rep, args.debug, err, lambda: int(_module(args.module).run(args, rep) or 0)) \
        or 0


def plain_words(words: Sequence[str]) -> tuple[str | None, bool, bool] | None:
    """(the store, --json, --debug) as `words` give them, when they may be a build's (they
    name a file, and no other command) and say so plainly: none is `--`, none abbreviates
    those options (argparse takes `--sto DIR` for `--store DIR`); None otherwise (the words
    are parsed)."""
    store, json, debug, named = None, False, False, False
    following = iter(words)
    for word in following:
        option = word.partition("=")[0]
        if word == "--" or word in COMMANDS and word != "build":
            return None
        if word == "--store":
            store = next(following, None)
            if store is None:
                return None
        elif option == "--store":
            store = word.partition("=")[2]
        elif word in ("--json", "--debug"):
            json, debug = json or word == "--json", debug or word == "--debug"
        elif option.startswith("--") and len(option) > 2 and any(
                name.startswith(option) for name in ("--store", "--json", "--debug")):
            return None
        named = named or not word.startswith("-") and word != "build"
    return (store, json, debug) if named else None


def recorded_words(words: Sequence[str]) -> tuple[str, ...]:
    """The words a build's no-op is recorded under: as given, less what changes only how it is
    told (--json, --debug) and a `build` in front (`udo-build RECIPE` is `udo-build build
    RECIPE`), so that those spellings share one record (each full no-op writes the report
    page again, which the other spellings' records would find changed)."""
    end = words.index("--") if "--" in words else len(words)
    kept = [w for w in words[:end] if w not in ("--json", "--debug")]
    return tuple(kept[1:] if kept[:1] == ["build"] else kept) + tuple(words[end:])


def _replayed(words: tuple[str, ...], store: str | None, json: bool, debug: bool,
              out: IO[str], err: IO[str], env: dict[str, str] | None) -> int | None:
    """The exit code of `udo-build WORDS` told from its no-op record; None when it must run."""
    from .build import told_from_record

    rep = Reporter(out, err, choose_mode(out, json, env))
    starting = interrupt.exits_at_once()
    code = _running(rep, debug, err, lambda: told_from_record(words, store, rep, debug=debug))
    if code is None and starting:  # no record: parsing again, nothing written yet
        interrupt.at_once()
    return code


def _running(rep: Reporter, debug: bool, err: IO[str],
             command: Callable[[], int | None]) -> int | None:
    """`command`'s exit code, or the one its error means (told through `rep`)."""
    try:
        interrupt.raising()  # KeyboardInterrupt from here: locks released, temporaries removed
        return command()
    except UserError as exc:
        for problem in exc.problems:
            rep.error(problem)
        rep.emit({"ok": False, "errors": [p.to_json() for p in exc.problems]})
        return EXIT_USER_ERROR
    except StepFailed as exc:
        rep.error(Problem(f"build step failed: {exc}"))
        rep.emit({"ok": False, "failed": {"step": exc.step, "message": str(exc),
                                          "inputs": exc.inputs}})
        return EXIT_STEP_FAILED
    except KeyboardInterrupt:
        return _interrupted(err)
    except BrokenPipeError:
        return 0
    except (OSError, UnicodeEncodeError) as exc:
        fault = environment_problem(exc) or unencodable_path(exc)
        if fault is None:
            return _internal(exc, debug, err)
        rep.error(fault)
        rep.emit({"ok": False, "errors": [fault.to_json()]})
        return EXIT_USER_ERROR
    except Exception as exc:
        if during_interrupt(exc):  # a Ctrl-C that Python wrapped: while a class was created
            return _interrupted(err)  # ("Error calling __set_name__"), or a file was closed
        return _internal(exc, debug, err)


def _escaping(stream: IO[str]) -> IO[str]:
    """`stream`, printing what its encoding lacks as escapes (`\\xe9`) instead of failing: an
    ASCII stdout (PYTHONIOENCODING=ascii, LC_ALL=C) and file names that are not UTF-8."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is not None and getattr(stream, "errors", None) != "backslashreplace":
        with contextlib.suppress(ValueError, OSError):
            reconfigure(errors="backslashreplace")
    return stream


def unencodable_path(exc: BaseException) -> Problem | None:
    """The problem a path that the file-system encoding of this locale cannot spell is (a
    recipe naming `prøj/` under LC_ALL=C and PYTHONUTF8=0); None for any other error."""
    encoding = sys.getfilesystemencoding()
    if not isinstance(exc, UnicodeEncodeError) or exc.encoding.replace("-", "") != \
            encoding.replace("-", "").lower() or encoding.lower().replace("-", "") == "utf8":
        return None
    return Problem(f"the path {exc.object!a} has characters that this locale's file-system "
                   f"encoding ({encoding}) cannot spell",
                   hint="run in a UTF-8 locale (LC_ALL=C.UTF-8) or with PYTHONUTF8=1")


def _internal(exc: Exception, debug: bool, err: IO[str]) -> int:
    """A bug of udo-build: say so, where it was raised, and how to report it."""
    print(f"udo-build failed: internal error: {type(exc).__name__}: {exc}", file=err)
    where = raised_at(exc)
    if where:  # one line always: a bug seen once cannot be rerun with --debug
        print(f"  raised at {where}", file=err)
    if debug:
        import traceback  # only here: it costs a no-op build milliseconds to import

        traceback.print_exc(file=err)
    else:
        print("this is a bug of udo-build, not of your input; rerun with --debug for the "
              "traceback and report it", file=err)
    return EXIT_INTERNAL


def raised_at(exc: BaseException) -> str:
    """Where `exc` was raised: "path:line in function" of its traceback's innermost frame
    (the path from the folder above udo_build's package when it is udo-build's own); "" when
    it has no traceback."""
    tb = exc.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    code = tb.tb_frame.f_code
    path = code.co_filename.replace(os.sep, "/")
    top = path.rfind("/udo_build/")
    return f"{path[top + 1:] if top >= 0 else path}:{tb.tb_lineno} in {code.co_name}"


def _interrupted(err: IO[str]) -> int:
    print(f"udo-build: {interrupt.MESSAGE}", file=err)
    return interrupt.EXIT_INTERRUPTED


def run() -> None:
    """Console-script entry point (and `python -m udo_build`)."""
    try:
        code = main()
    except KeyboardInterrupt:  # outside the command, e.g. while an error was printed
        code = _interrupted(sys.stderr)
    finally:
        interrupt.at_once()  # the interpreter's shutdown is never interrupted half-way
    if code == interrupt.EXIT_INTERRUPTED:
        interrupt.settle()
        interrupt.forget()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    import gc

    # the shutdown's collections skip the objects frozen here: a fresh clone's (350 modules)
    # took 70-90 ms of CPU at a load of 4-8, under 20 ms frozen
    gc.freeze()
    sys.exit(code)
