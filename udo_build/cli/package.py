"""`udo-build package CONFIG [CONFIG ...] --backend HTP [--arch v73 ...] --out DIR`: generate op
packages from op configs without a recipe, through the same `opdef` and `package` actions (and
store) as a recipe build (see udo_build/builder/generate.py); each package lands in
DIR/<BACKEND>/<PackageName>/.

A package folder is updated in place: files a user changed since udo-build wrote them are never
overwritten unless --force.
"""

from __future__ import annotations

import argparse

from ..errors import UserError
from ..opdef.vocab import BACKENDS, DSP_ARCHS
from .common import GENERATOR_SPELLINGS, add_store_arguments, spelled
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("configs", metavar="CONFIG", nargs="*",
                        help="op configs (XML OpDefCollection or SNPE JSON UDO config); or "
                             "--config_path/-p CONFIG ..., as the vendor's generators")
    parser.add_argument(*GENERATOR_SPELLINGS["configs"], dest="config_path", metavar="CONFIG",
                        nargs="+", action="extend", default=[], help=argparse.SUPPRESS)
    parser.add_argument("--backend", action="append", required=True, type=str.upper,
                        choices=BACKENDS, help="generate for this backend (repeatable)")
    parser.add_argument("--arch", action="append", default=[], type=str.lower,
                        choices=DSP_ARCHS, help="a dsp arch to build for (repeatable; DSP and "
                        "HTP; default: the configs' dsp_arch_types)")
    parser.add_argument(*spelled("--out", *GENERATOR_SPELLINGS["--out"]), metavar="DIR",
                        required=True,
                        help="the folder the packages are written to, one subfolder each")
    parser.add_argument("--force", action="store_true",
                        help="overwrite files changed since udo-build generated them")
    add_store_arguments(parser)


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..builder.generate import PackageRequest, generate_packages

    configs = [*args.configs, *args.config_path]
    if not configs:
        raise UserError("no op config given", hint="give CONFIG ... (or -p/--config_path CONFIG)")
    request = PackageRequest(tuple(configs), tuple(args.backend), tuple(args.arch),
                             args.out, force=args.force, store=args.store)
    report = generate_packages(request, rep)
    rows = [p.to_json() for p in report.packages]
    if rep.mode == "json":
        rep.emit({"ok": True, "packages": rows,
                  "warnings": [w.to_json() for w in report.warnings]})
        return 0
    for row in rows:
        rep.heading(f"{row['package']} ({row['backend']}, {row['status']}) -> {row['folder']}")
        facts = [("ops", ", ".join(row["ops"])), ("targets", ", ".join(row["targets"])),
                 ("files", f"{row['files']}: {len(row['written'])} written, "
                           f"{row['unchanged']} unchanged, {len(row['removed'])} removed")]
        if row["kept"]:
            facts.append(("kept", ", ".join(row["kept"]) + " (no longer generated, but changed)"))
        rep.facts(facts)
    return 0
