"""`udo-build quantize BUNDLE (--input-list LIST | --sequences FILE [--cache NAME=VALUE ...])
[--quantizer tf|enhanced|symmetric]
[--act-bitwidth 8|16] [--weights-bitwidth 4|8|16] [--bias-bitwidth 8|32] [--per-channel]
[--weights-block-size N [--lpbq]] [--override-encodings FILE] [--float-fallback]
[--kernels FILE ...] [--out Q.udb]`: quantize a float bundle without a recipe, the vendor's
standalone step (snpe-dlc-quantize, qairt-quantizer). The quantized bundle is written from its
parts in the store a piece at a time (an LLM's is gigabytes), each file whole or not at all.
An LLM with a KV cache calibrates over token id sequences instead of an input list
(`--sequences`, the recipe's quantize.sequences; `--cache` names its cache inputs and outputs
as the recipe's quantize.cache): the same `sequence-feeds` action makes the calibration inputs.

It runs the same `quantize` action as a recipe's `quantize:` section, through the store
(udo_build.builder.kinds.quantize): for the same float bundle, list, files, kernels and settings
the action's key is the recipe's, so the quantized bundle is byte-identical to the recipe's (and
one build's result serves the other). Beside Q.udb it writes Q.encodings.json (AIMET format),
as a recipe publishes `<model>_quantized.udb` and `<model>_quantized.encodings.json`. Without
--out the bundle goes to `<BUNDLE stem>_quantized.udb` beside BUNDLE (the vendor's default).

The vendor tools' spellings are accepted for the same options: --input_dlc, --input_list,
--output_dlc, --act_bitwidth/--act_bw, --weights_bitwidth/--weights_bw, --bias_bitwidth/--bias_bw,
--act_quantizer (the quantizer picks activation ranges; weights are always symmetric),
--use_enhanced_quantizer, --use_per_channel_quantization/--axis_quant, --quantization_overrides
(the converters' AIMET encodings file), --float_fallback. The option helper `_option` below is
local to this command (cli/common.py holds the spellings several commands share).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError, display_path
from .common import RawFormatter, add_store_arguments, spelled
from .reporter import Reporter

if TYPE_CHECKING:
    from ..builder.plan import Plan
    from ..quant.settings import QuantizeSettings

QUANTIZERS = ("tf", "enhanced", "symmetric")
CACHE_NAMES = ("input_ids", "position_ids", "attention_mask", "logits", "past", "present",
               "masked")  # udo_build.runtime.generate.CacheIO's fields
BUNDLE_SUFFIX = ".udb"
ENCODINGS_SUFFIX = ".encodings.json"


def _option(parser: argparse.ArgumentParser | Any, name: str, *vendor: str,
            **kwargs: Any) -> None:
    """An option under its udo-build name, its shared vendor spellings and `vendor`."""
    parser.add_argument(*spelled(name, *vendor), **kwargs)


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.formatter_class = RawFormatter
    parser.description = (
        "Quantize a float bundle (from 'udo-build convert', or a recipe's model/<name>.udb)\n"
        "over a calibration input list (or an LLM's token sequences), through the same\n"
        "actions and store as a recipe's quantize step: the same bundle, inputs, kernels and\n"
        "settings give the same bytes.")
    parser.epilog = (
        "writes Q.udb and Q.encodings.json beside it (AIMET encodings).\n"
        "example:\n  udo-build quantize out/model/net.udb --input_list data/calib.txt "
        "--quantizer enhanced \\\n      --use_per_channel_quantization --kernels ops/kernels.py "
        "--out net_quantized.udb\n"
        "  udo-build quantize out/model/llama.udb --sequences data/tokens.txt \\\n"
        "      --cache past=past_{kind}_{layer} --cache present=present_{kind}_{layer} \\\n"
        "      --act-bitwidth 16 --per-channel --kernels ops/kernels.py")
    parser.add_argument("bundle", metavar="BUNDLE", nargs="?",
                        help="the float bundle (.udb) to quantize (or --input_dlc BUNDLE)")
    parser.add_argument("--input_dlc", metavar="BUNDLE", dest="input_dlc",
                        help=argparse.SUPPRESS)
    calibration = parser.add_mutually_exclusive_group(required=True)
    _option(calibration, "--input-list", metavar="LIST",
            help="the calibration inputs: an SNPE input list (raw float32 or .npy files)")
    calibration.add_argument(
        "--sequences", metavar="FILE",
        help="an LLM's calibration instead: token id sequences, one per line, each prefilled "
             "through the float model with its own KV cache (a recipe's quantize.sequences)")
    parser.add_argument("--cache", metavar="NAME=VALUE", action="append", default=[],
                        help="with --sequences: a name of the model's cache inputs and outputs "
                             f"({', '.join(CACHE_NAMES)}; e.g. past=past_{{kind}}_{{layer}}), "
                             "as a recipe's quantize.cache; repeatable")
    _option(parser, "--out", "--output_dlc", metavar="Q.udb",
            help="the quantized bundle to write; Q.encodings.json goes beside it (default: "
                 "<BUNDLE stem>_quantized.udb beside BUNDLE)")
    _settings_arguments(parser)
    _option(parser, "--kernels", metavar="FILE", action="append", default=[],
            help="numpy kernels of the custom ops (calibration runs them); repeatable, as the "
                 "recipe's `kernels:`")
    parser.add_argument("--strict", action="store_true",
                        help="refuse override encodings that name tensors the model lacks "
                             "(exit 2; without it, a warning names them)")
    parser.add_argument("--report-inputs", type=int, default=1, metavar="N",
                        help="measure each layer's SQNR over the first N calibration inputs "
                             "(0: none; default 1, as a recipe)")
    add_store_arguments(parser)


def _settings_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("quantizer settings (a recipe's quantize: fields)")
    _option(group, "--quantizer", "--act_quantizer", choices=QUANTIZERS, default="tf",
            help="how activation ranges are chosen: tf (min/max, default), enhanced (a range "
                 "search minimizing the error), symmetric")
    group.add_argument("--use_enhanced_quantizer", dest="quantizer", action="store_const",
                       const="enhanced", default="tf",
                       help="the vendor's flag for --quantizer enhanced")
    _option(group, "--act-bitwidth", "--act_bitwidth", "--act_bw", type=int, choices=(8, 16),
            default=8, help="activation bits (default 8)")
    _option(group, "--weights-bitwidth", "--weights_bitwidth", "--weights_bw", type=int,
            choices=(4, 8, 16), default=8, help="weight bits, symmetric (default 8)")
    _option(group, "--bias-bitwidth", "--bias_bitwidth", "--bias_bw", type=int,
            choices=(8, 32), default=32, help="bias bits (default 32)")
    _option(group, "--per-channel", "--use_per_channel_quantization", "--axis_quant",
            action="store_true", help="one weight scale per output channel")
    _option(group, "--weights-block-size", metavar="N", type=int, default=0,
            help="weights per block of N values along their input axis (an LLM's 4-bit "
                 "weights: 32, 64, ...; default 0: per channel or per tensor)")
    _option(group, "--lpbq", action="store_true",
            help="the blocks' scales as LPBQ: a float per channel times a small integer per "
                 "block (needs --weights-block-size)")
    _option(group, "--override-encodings", "--quantization_overrides", metavar="FILE",
            help="AIMET encodings that override the calibrated ones (a recipe's "
                 "override_encodings)")
    _option(group, "--float-fallback", "--float_fallback", action="store_true",
            help="no calibrated encodings: only the overrides are used, every other tensor "
                 "stays float (needs --override-encodings)")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..quant.settings import QuantizeSettings

    bundle = _bundle_path(args)
    out = Path(args.out) if args.out else bundle.with_name(f"{bundle.stem}_quantized"
                                                          f"{BUNDLE_SUFFIX}")
    if out.suffix != BUNDLE_SUFFIX:
        raise UserError(f"the quantized bundle's name ends in {out.suffix or 'nothing'}",
                        field="--out", hint=f"name it Q{BUNDLE_SUFFIX} (Q{ENCODINGS_SUFFIX} is "
                                            "written beside it)")
    encodings = out.with_name(out.name[:-len(BUNDLE_SUFFIX)] + ENCODINGS_SUFFIX)
    _check_out(bundle, out)
    if args.float_fallback and not args.override_encodings:
        raise UserError("--float-fallback keeps only the override encodings, and none are given",
                        field="--float-fallback", hint="give --override-encodings FILE")
    if args.report_inputs < 0:
        raise UserError(f"--report-inputs {args.report_inputs} is negative",
                        field="--report-inputs", hint="0 (none) or more inputs")
    if args.weights_block_size < 0 or (args.lpbq and not args.weights_block_size):
        raise UserError("--lpbq needs blocks" if args.lpbq and args.weights_block_size == 0
                        else f"--weights-block-size {args.weights_block_size} is negative",
                        field="--lpbq" if args.weights_block_size == 0 else
                        "--weights-block-size", hint="--weights-block-size N (N > 0, a divisor "
                                                     "of the weights' input axis)")
    settings = QuantizeSettings(args.act_bitwidth, args.weights_bitwidth, args.bias_bitwidth,
                                args.per_channel, args.quantizer, args.float_fallback,
                                args.report_inputs, args.weights_block_size, args.lpbq)
    calibration = _calibration(args)
    _check_float(bundle)
    plan = quantize_plan(bundle, calibration, settings,
                         Path(args.override_encodings) if args.override_encodings else None,
                         [Path(k) for k in args.kernels])
    status, description = _run(plan, args, rep, out, encodings)
    if rep.mode == "json":
        rep.emit({"ok": True, "bundle": display_path(out), "encodings": display_path(encodings),
                  "status": status, "description": description,
                  "settings": settings.to_params()})
        return 0
    rep.line(f"{status}: {description}")
    rep.line(f"wrote {display_path(out)} and {display_path(encodings)}")
    return 0


def _bundle_path(args: argparse.Namespace) -> Path:
    if args.bundle and args.input_dlc and args.bundle != args.input_dlc:
        raise UserError(f"two bundles given: {args.bundle} and --input_dlc {args.input_dlc}",
                        field="BUNDLE", hint="give one")
    given = args.bundle or args.input_dlc
    if not given:
        raise UserError("no bundle to quantize", field="BUNDLE",
                        hint="udo-build quantize BUNDLE --input-list LIST (BUNDLE from "
                             "'udo-build convert')")
    path = Path(given)
    if not path.is_file():
        raise UserError("no such bundle", file=path, field="BUNDLE",
                        hint="convert the model first: udo-build convert MODEL.onnx --out B.udb")
    return path


def _calibration(args: argparse.Namespace) -> Path | tuple[Path, dict[str, Any]]:
    """The input list, or (the sequences file, the cache names as a recipe's quantize.cache
    gives them: `masked` a number, the others text)."""
    if args.sequences is None:
        if args.cache:
            raise UserError("--cache names the cache of token sequences, but there are none",
                            field="--cache", hint="calibrate over --sequences FILE, or drop "
                                                  "--cache")
        return Path(args.input_list)
    cache: dict[str, Any] = {}
    for given in args.cache:
        name, sep, value = given.partition("=")
        if not sep or name not in CACHE_NAMES or name in cache:
            raise UserError(f"--cache {given!r} is not NAME=VALUE with a name of "
                            f"{', '.join(CACHE_NAMES)}" if name not in cache else
                            f"--cache names {name} twice", field="--cache",
                            hint="e.g. --cache past=past_{kind}_{layer} --cache "
                                 "present=present_{kind}_{layer}")
        cache[name] = _number(value, given) if name == "masked" else value
    return Path(args.sequences), dict(sorted(cache.items()))


def _number(text: str, given: str) -> float | int:
    """`masked` as YAML reads it in a recipe: an integer stays one (the same action key)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise UserError(f"--cache {given!r}: masked is a number (the additive mask's value "
                        "for a position not attended)", field="--cache") from None


def _check_float(path: Path) -> None:
    """The bundle reads as a float bundle (the action would say so later, less directly)."""
    from ..ir.qmodel import ENCODINGS_PART
    from ..model.op_check import load_checked_bundle

    if ENCODINGS_PART in load_checked_bundle(path).parts:
        raise UserError("the bundle is already quantized (it holds encodings)", file=path,
                        field="BUNDLE", hint="quantize the float bundle that 'udo-build "
                                             "convert' or a recipe's convert step wrote")


def quantize_plan(bundle: Path, calibration: Path | tuple[Path, dict[str, Any]],
                  settings: QuantizeSettings, overrides: Path | None,
                  kernels: list[Path]) -> Plan:
    """One `quantize` action with the inputs a recipe's quantize gets, under the same names:
    the float bundle, the calibration (an input list and each file it names, or the feeds a
    `sequence-feeds` action makes of token sequences, planned as a recipe plans it), the
    overrides, the kernels files (keyed by their code, as a recipe keys them)."""
    from ..builder.plan import Dep, Input, Plan, PlannedAction, Source
    from ..recipe import Recipe

    sequences = calibration[0] if isinstance(calibration, tuple) else None
    for path, field in [(calibration if sequences is None else sequences,
                         "--input-list" if sequences is None else "--sequences"),
                        (overrides, "--override-encodings"),
                        *((k, "--kernels") for k in kernels)]:
        if path is not None and not path.is_file():
            raise UserError("no such file", file=path, field=field)
    code: dict[str, Input] = {f"kernels[{i}]": Source(p.resolve(), digest="python")
                              for i, p in enumerate(dict.fromkeys(kernels))}
    where = bundle.resolve()
    plan = Plan(Recipe(where, where.parent, "quantize"))
    plan.add(PlannedAction("bundle", "bundle-file", {}, {"file": Source(where)},
                           "store the float bundle as convert does"))
    inputs, over = _calibration_inputs(plan, calibration, code)
    inputs = {"bundle": Dep("bundle", "bundle"), **inputs}
    if overrides is not None:
        inputs["override_encodings"] = Source(overrides.resolve())
    plan.add(PlannedAction("quantize", "quantize", settings.to_params(), {**inputs, **code},
                           f"quantize with {settings.quantizer} over {over}"))
    return plan


def _calibration_inputs(plan: Plan, calibration: Path | tuple[Path, dict[str, Any]],
                        code: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """(quantize's calibration inputs, what they are in words), as builder.plan's
    `_calibration` plans a recipe's (token sequences through the same `plan_sequence_feeds`)."""
    from ..builder.plan import Dep, Source, plan_sequence_feeds
    from ..model.input_list import parse_input_list

    if not isinstance(calibration, tuple):
        parsed = parse_input_list(calibration.resolve())
        return {"input_list": Source(calibration.resolve()),
                **{f"input_list.files[{i}]": Source(p.resolve())
                   for i, p in enumerate(parsed.files())}}, f"{len(parsed.inferences)} inputs"
    sequences, cache = calibration
    return plan_sequence_feeds(plan, Dep("bundle", "bundle"), sequences.resolve(), cache, code)


def _unknown_overrides(names: tuple[str, ...], args: argparse.Namespace, rep: Reporter) -> None:
    """Override encodings naming tensors the model lacks: a warning, a refusal under --strict
    (before anything is written)."""
    from ..builder.kinds.quantize import unknown_message
    from ..errors import Problem

    message, hint = unknown_message(names, display_path(Path(args.override_encodings)))
    if args.strict:
        raise UserError(message, file=args.override_encodings, field="--override-encodings",
                        hint=hint)
    rep.warning(Problem(message, file=args.override_encodings, field="--override-encodings",
                        hint=hint))


def _run(plan: Plan, args: argparse.Namespace, rep: Reporter, out: Path,
         encodings: Path) -> tuple[str, str]:
    """Run the plan, say (or refuse, under --strict) the override encodings naming tensors the
    model lacks, then write its outputs: (built | cached, the action's description)."""
    from ..builder.engine import Options
    from ..builder.kinds.quantize import override_unknown
    from ..builder.session import opened_store, run_plan

    with opened_store(args.store) as store, store.build_lock():
        state = run_plan(store, plan, Options(jobs=1), rep)["quantize"]
        if state.error is not None:
            raise state.error  # a UserError (exit 2), StepFailed (1), or a bug (3)
        result = state.result
        assert result is not None
        unknown = override_unknown(store, state)
        if unknown:
            _unknown_overrides(unknown, args, rep)  # before anything is written
        _write(store, result.outputs["bundle"], out, result.outputs["encodings"], encodings)
        return state.status, result.description


def _write(store: Any, bundle: Any, out: Path, encodings: Any, path: Path) -> None:
    """The quantized bundle (a file of parts, streamed to its file: an LLM's is gigabytes) and
    its encodings, each written whole or not at all; the encodings read first, so that a
    missing one leaves neither."""
    from ..atomic import write_atomic
    from ..store.parts import parse_layout, write_file

    data = store.cas.get(encodings.digest)
    stored = store.cas.get(bundle.digest)  # the bundle's layout (a tree), or its bytes
    layout = parse_layout(stored) if stored is not None and bundle.type == "tree" else None
    if data is None or stored is None or (layout is None and bundle.type == "tree"):
        _lost()
    if layout is None:
        write_atomic(out, stored, readonly=False)  # type: ignore[arg-type]
    elif not write_file(store.cas, layout, out, readonly=False):
        _lost()
    write_atomic(path, data, readonly=False)  # type: ignore[arg-type]


def _lost() -> None:
    raise UserError("the quantized bundle is missing from the store",
                    hint="run 'udo-build store verify --repair' and quantize again")


def _check_out(bundle: Path, out: Path) -> None:
    if not out.parent.is_dir():
        raise UserError("the folder to write the quantized bundle into does not exist",
                        file=out.parent, field="--out", hint="create it, or name another")
    if out.resolve() == bundle.resolve():
        raise UserError("--out names the float bundle being quantized", file=out,
                        field="--out", hint="name the quantized bundle Q.udb, e.g. "
                                            f"{bundle.stem}_quantized{BUNDLE_SUFFIX}")


