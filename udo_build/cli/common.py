"""What several commands share: the store and remote-cache options, the vendor tools' spellings
of options, input dimensions, the devices of a fleet, and sizes for people.

Not a command. It imports no other command module (only the reporter may be imported by it),
so the commands never import each other.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError

if TYPE_CHECKING:
    from ..builder.settings import RemoteRequest, RemoteSummary


class _TerminalWidth:
    """An argparse formatter that takes the terminal's width as shutil.get_terminal_size()
    gives it, without importing shutil: argparse makes a formatter for every argument it adds
    (to check its metavar), and shutil brings bz2, lzma and zlib along (milliseconds that a
    replayed no-op build would pay for help it never prints)."""

    def __init__(self, prog: str, indent_increment: int = 2, max_help_position: int = 24,
                 width: int | None = None, **kwargs: Any) -> None:
        width = terminal_columns() - 2 if width is None else width
        super().__init__(prog, indent_increment, max_help_position, width,  # type: ignore
                         **kwargs)


class HelpFormatter(_TerminalWidth, argparse.HelpFormatter):
    """argparse.HelpFormatter, its width found without shutil (see _TerminalWidth)."""


class RawFormatter(_TerminalWidth, argparse.RawDescriptionHelpFormatter):
    """argparse.RawDescriptionHelpFormatter, its width found without shutil."""


def terminal_columns() -> int:
    """The terminal's columns as shutil.get_terminal_size() says: $COLUMNS, else the size of
    the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


# the spellings the vendor tools use for the same option, accepted as aliases (long and short, as
# their --help lists them): qnn-net-run and snpe-net-run (--input_list, --output_dir),
# qnn-onnx-converter (--op_package_config, -opc; --input_list; --quantization_overrides),
# snpe-onnx-to-dlc (--udo_config_paths, -udo; --quantization_overrides)
VENDOR_SPELLINGS: dict[str, tuple[str, ...]] = {
    "--input-list": ("--input_list",),
    "--output-dir": ("--output_dir",),
    "--opdef": ("--op_package_config", "-opc", "--udo_config_paths", "-udo"),
    "--override-encodings": ("--quantization_overrides",),
}
# the converters' (qnn-onnx-converter, snpe-onnx-to-dlc): the model, the output, input dims
CONVERTER_SPELLINGS: dict[str, tuple[str, ...]] = {
    "model": ("--input_network", "-i"),
    "--out": ("--output_path", "-o"),
    "--input-dims": ("--input_dim", "-d"),
}
# the package generators' (qnn-op-package-generator, snpe-udo-package-generator)
GENERATOR_SPELLINGS: dict[str, tuple[str, ...]] = {
    "configs": ("--config_path", "-p"),
    "--out": ("--output_path", "-o"),
}


def spelled(name: str, *vendor: str) -> tuple[str, ...]:
    """The option strings of option `name`: it, then the vendor spellings of VENDOR_SPELLINGS
    and `vendor` (those of one command: the converters' --output_path for convert's --out)."""
    return (name, *VENDOR_SPELLINGS.get(name, ()), *vendor)


def add_config_paths(parser: argparse.ArgumentParser) -> None:
    """--opdef CONFIG [CONFIG ...], the vendor converters' form: one option takes several
    configs, and may be repeated (both add up)."""
    parser.add_argument(*spelled("--opdef"), metavar="CONFIG", nargs="+", action="extend",
                        default=[], help="op configs (XML or JSON) defining custom ops; several "
                                         "after one option, or the option repeated")


def add_strict_argument(parser: argparse.ArgumentParser, what: str) -> None:
    """--strict, as the vendor converters have it: what is only a warning refuses the step."""
    parser.add_argument("--strict", action="store_true",
                        help=f"refuse (exit 2) where a warning is given: {what}")


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="DIR",
                        help="the artifact store (default: $UDO_BUILD_STORE or ./store)")


def add_remote_arguments(parser: argparse.ArgumentParser, *, upload: bool,
                         download: bool = False) -> None:
    group = parser.add_argument_group("remote cache (see README 'Shared caches')")
    if download:
        group.add_argument("--download", choices=("all", "outputs", "minimal"),
                           help="what a remote hit downloads: every output of every cached "
                                "action (all), the bytes the output folder needs (outputs, the "
                                "default), or none (minimal: the build proves they are in the "
                                "remote and says what stays there; the default of --check, "
                                "--dry-run and --shard). An action that runs here downloads "
                                "its own inputs when it starts")
    group.add_argument("--remote", metavar="URL",
                       help="a shared cache speaking the Bazel HTTP protocol (nginx WebDAV, "
                            "bazel-remote); default: $UDO_BUILD_REMOTE or the config files")
    group.add_argument("--no-remote", action="store_true",
                       help="use no remote cache, whatever the config says")
    if upload:
        group.add_argument("--remote-upload", action="store_true", default=None,
                           help="upload what this build makes, signed with the signing key "
                                "(default: off, or 'upload' in the config)")
        group.add_argument("--ci", action="store_true",
                           help="a CI build: upload to the remote cache (as --remote-upload)")
    group.add_argument("--signing-key", metavar="FILE",
                       help="the private key that signs uploads (default: "
                            "$UDO_BUILD_SIGNING_KEY or 'signing_key' in the config)")
    group.add_argument("--trusted-key", metavar="KEY", action="append", default=[],
                       help="also accept entries signed by this public key (NAME:BASE64; "
                            "repeatable; added to $UDO_BUILD_TRUSTED_KEYS and 'trusted_keys')")


def remote_request(args: argparse.Namespace) -> RemoteRequest:
    """The remote-cache options as given; uploads are asked for by --ci or --remote-upload
    (else left to the config)."""
    from ..builder.settings import RemoteRequest

    upload = True if getattr(args, "ci", False) or getattr(args, "remote_upload", None) else None
    return RemoteRequest(url=args.remote, no_remote=args.no_remote, upload=upload,
                         signing_key=args.signing_key, trusted_keys=tuple(args.trusted_key))


def remote_line(summary: RemoteSummary) -> str:
    """One line for people: what the remote tier did in a build."""
    parts = [f"{summary.hits} hits", f"{summary.misses} misses"]
    if summary.bytes_downloaded:
        parts.append(f"{human_size(summary.bytes_downloaded)} downloaded")
    if summary.entries_uploaded or summary.bytes_uploaded:
        parts.append(f"{summary.entries_uploaded} entries "
                     f"({human_size(summary.bytes_uploaded)}) uploaded")
    rejected = sum(summary.rejected.values())
    if rejected:
        parts.append(f"{rejected} refused")
    state = "; disabled after failures" if summary.disabled else ""
    return f"remote cache {summary.url}: {', '.join(parts)}{state}"


def download_line(left: dict[str, Any]) -> str:
    """One line for people: what a build left in the remote only (--download)."""
    files = left["files_not_written"]
    shown = ", ".join(files[:3]) + (", ..." if len(files) > 3 else "")
    return (f"stays in the remote (--download {left['mode']}): the outputs of "
            f"{left['remote_only_actions']} actions, {human_size(left['remote_only_bytes'])}"
            + (f"; not in the output folder: {len(files)} files ({shown})" if files else ""))


def human_size(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def parse_dims(items: list[str]) -> dict[str, list[int]]:
    dims: dict[str, list[int]] = {}
    for item in items:
        name, sep, text = item.partition("=")
        try:
            values = [int(v) for v in text.split(",")]
        except ValueError:
            values = []
        if not sep or not name or not values or any(v < 1 for v in values):
            raise UserError(f"--input-dims {item!r} is not NAME=D0,D1,... with positive sizes")
        dims[name] = values
    return dims


def known_soc(name: str, option: str = "--soc") -> Any:
    """The SoC of the built-in table with this name (and a public VTCM size)."""
    from ..soc.table import builtin_socs

    socs = builtin_socs()
    soc = socs.get(name.lower())
    if soc is None or soc.vtcm_mb is None:
        known = ", ".join(n for n, s in socs.items() if s.vtcm_mb is not None)
        what = " is not a known SoC" if soc is None else ": its VTCM size is not public"
        raise UserError(f"{option} {name}{what}", hint=f"SoCs with a known VTCM size: {known}")
    return soc


def device_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--devices", metavar="SOC,SOC,...",
                        help="device SoCs, by name (see the SoC table in README)")
    parser.add_argument("--devices-file", metavar="FILE",
                        help="a YAML or JSON list of SoC names or {name, arch, vtcm_mb}")


def devices(args: argparse.Namespace, socs: dict[str, Any]) -> list[Any]:
    from ..soc.compat import Device

    entries: list[Any] = [d for d in (args.devices or "").split(",") if d.strip()]
    if args.devices_file:
        entries += _device_file(Path(args.devices_file))
    if not entries:
        raise UserError("no devices given", hint="pass --devices sm8550,sm8650 or "
                                                 "--devices-file FILE")
    out = []
    for entry in entries:
        if isinstance(entry, dict):
            try:
                out.append(Device(str(entry["name"]), str(entry["arch"]),
                                  float(entry["vtcm_mb"])))
            except (KeyError, TypeError, ValueError):
                raise UserError(f"device {entry!r} needs name, arch and vtcm_mb") from None
            continue
        soc = socs.get(str(entry).strip().lower())
        if soc is None or soc.vtcm_mb is None:
            known = ", ".join(n for n, s in socs.items() if s.vtcm_mb is not None)
            raise UserError(f"'{entry}' is not a SoC with a known VTCM size",
                            hint=f"known: {known}; or give {{name, arch, vtcm_mb}} in a "
                                 "--devices-file")
        out.append(Device(soc.name, soc.arch, soc.vtcm_mb))
    return out


def _device_file(path: Path) -> list[Any]:
    from ..source import MAX_YAML_BYTES, decode_text, load_yaml, read_limited

    data, _ = load_yaml(decode_text(read_limited(path, MAX_YAML_BYTES, "devices file"),
                                    str(path)), str(path))
    if isinstance(data, dict) and "devices" in data:
        data = data["devices"]
    if not isinstance(data, list):
        raise UserError("a devices file is a list of SoC names or {name, arch, vtcm_mb}",
                        file=path)
    return data
