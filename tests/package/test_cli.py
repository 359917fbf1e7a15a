"""`udo-build package CONFIG ... --backend B --out DIR`: plain and --json, through the same
action and store; a user's edits survive a regeneration unless --force; clear errors."""

from __future__ import annotations

import io
import json
from pathlib import Path

from udo_build.cli import main

from .helpers import SOFTPLUS, SWISH, VENDOR


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def _package(tmp_path: Path, *extra: str, configs: tuple[Path, ...] = (SOFTPLUS, SWISH)
             ) -> tuple[int, str, str]:
    return cli("package", *map(str, configs), "--out", str(tmp_path / "out"),
               "--store", str(tmp_path / "store"), *extra)


def test_plain_then_json_from_the_cache(tmp_path: Path) -> None:
    code, out, err = _package(tmp_path, "--backend", "HTP", "--arch", "v73", "--backend", "cpu")
    assert (code, err) == (0, "")
    assert f"SoftplusPackage (HTP, built) -> {tmp_path}/out/HTP/SoftplusPackage" in out
    assert "  targets  htp_x86, htp_v73, htp_aarch64\n" in out
    assert "  ops      Softplus, Swish\n" in out
    folder = tmp_path / "out/HTP/SoftplusPackage"
    assert (folder / "src/ops/Softplus.cpp").is_file()
    assert (folder / "emulator/SoftplusPackage_kernels.py").is_file()  # no kernels given
    assert (tmp_path / "out/CPU/SoftplusPackage/makefiles/Makefile.linux-x86_64").is_file()

    code, out, err = _package(tmp_path, "--backend", "HTP", "--arch", "v73", "--backend", "CPU",
                              "--json")
    doc = json.loads(out)
    assert (code, err, doc["ok"]) == (0, "", True)
    htp, cpu = doc["packages"]
    assert (htp["package"], htp["status"], htp["written"]) == ("SoftplusPackage", "cached", [])
    assert htp["unchanged"] == htp["files"] == 9 and cpu["backend"] == "CPU"
    assert htp["targets"] == ["htp_x86", "htp_v73", "htp_aarch64"]


def test_edits_survive_unless_forced(tmp_path: Path) -> None:
    assert _package(tmp_path, "--backend", "HTP", "--arch", "v73")[0] == 0
    kernel = tmp_path / "out/HTP/SoftplusPackage/src/ops/Softplus.cpp"
    kernel.write_text(kernel.read_text() + "// my kernel\n")
    code, out, err = _package(tmp_path, "--backend", "HTP", "--arch", "v75")
    assert code == 2 and out == ""
    assert f"error: {kernel}: this file differs from what udo-build generated last" in err
    makefile = (tmp_path / "out/HTP/SoftplusPackage/Makefile").read_text()
    assert "htp_v73" in makefile and "htp_v75" not in makefile  # nothing was written
    code, out, _ = _package(tmp_path, "--backend", "HTP", "--arch", "v75", "--force", "--json")
    assert code == 0 and "src/ops/Softplus.cpp" in json.loads(out)["packages"][0]["written"]
    assert "// my kernel" not in kernel.read_text()


def test_a_package_that_loses_an_op_removes_its_untouched_files(tmp_path: Path) -> None:
    assert _package(tmp_path, "--backend", "CPU")[0] == 0
    code, out, _ = _package(tmp_path, "--backend", "CPU", "--json", configs=(SOFTPLUS,))
    row = json.loads(out)["packages"][0]
    assert code == 0 and "src/ops/Swish.cpp" in row["removed"]
    assert not (tmp_path / "out/CPU/SoftplusPackage/config/swish.json").exists()


def test_errors(tmp_path: Path) -> None:
    code, _, err = _package(tmp_path, "--backend", "HTP", configs=(tmp_path / "none.xml",))
    assert code == 2 and "none.xml: no such op config" in err
    code, _, err = _package(tmp_path, "--backend", "HTP", "--arch", "v66")
    assert code == 2 and "--arch: the HTP starts at v68" in err
    code, _, err = _package(tmp_path, "--backend", "DSP", configs=(SOFTPLUS,))
    assert code == 2 and "the DSP package needs a dsp arch" in err
    bad = tmp_path / "bad.xml"
    bad.write_text(VENDOR.read_text().replace("<Default>-3</Default>", "<Default>x</Default>"))
    code, out, err = _package(tmp_path, "--backend", "CPU", "--json", configs=(bad,))
    assert code == 2 and json.loads(out)["ok"] is False
    assert f"{bad}:" in err and "steps" in err
    assert not (tmp_path / "out").exists()


LLAMA = Path(__file__).parents[1] / "opdef/data/vendor/llama_package_htp.xml"


def test_mllm_llama_package_generates_whole_with_one_warning_for_ropesimple(
        tmp_path: Path) -> None:
    # RoPESimple's tensors are BACKEND_SPECIFIC with no HTP supplement: the vendor's generator
    # types them float; so does udo-build, saying so once, naming the op and the backend
    code, out, err = _package(tmp_path, "--backend", "HTP", "--arch", "v73", "--json",
                              configs=(LLAMA,))
    doc = json.loads(out)
    assert (code, doc["ok"]) == (0, True), err
    (package,) = doc["packages"]
    assert len(package["ops"]) == 17 and "RoPESimple" in package["ops"]
    typed = [w for w in doc["warnings"] if "BACKEND_SPECIFIC" in w["message"]]
    assert [(w["field"], w["message"].split(";")[0]) for w in typed] == [
        ("OpDef[RoPESimple]", "op RoPESimple: BACKEND_SPECIFIC with no datatype for backend HTP")]
    source = tmp_path / "out/HTP/LLaMAPackage/src/ops/RoPESimple.cpp"
    assert "GraphStatus roPESimpleImpl(PlainFloatTensor& out_0," in source.read_text()
