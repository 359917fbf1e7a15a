"""Signatures checked through OpenSSL's libcrypto (store/remote/trust.py `openssl_verify`):
the verdict cryptography gives on every kind of signature, good and bad, and a reader that
checks entries without importing cryptography."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from udo_build.store.remote.trust import PublicKey, generate, openssl_verify

L = 2**252 + 27742317777372353535851937790883648493  # the order of Ed25519's base point


def by_cryptography(raw: bytes, signature: bytes, message: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, message)
    except (InvalidSignature, ValueError):
        return False
    return True


def cases() -> list[tuple[str, bytes, bytes, bytes]]:
    key, other = generate("a"), generate("b")
    raw = key.public().raw
    message = b'{"schema":"udo-build/signed-action-result","version":1}'
    good = key.sign(message)
    s = int.from_bytes(good[32:], "little")
    flipped = bytearray(good)
    flipped[5] ^= 1
    return [
        ("good", raw, good, message),
        ("empty message", raw, key.sign(b""), b""),
        ("long message", raw, key.sign(message * 5000), message * 5000),
        ("another message", raw, good, message + b" "),
        ("another key", other.public().raw, good, message),
        ("a bit flipped", raw, bytes(flipped), message),
        ("S + L (not canonical)", raw, good[:32] + (s + L).to_bytes(32, "little"), message),
        ("zeros", raw, bytes(64), message),
        ("key of zeros", bytes(32), good, message),
        ("key not on the curve", bytes([2]) + bytes(31), good, message),
        ("key of ones", b"\xff" * 32, good, message),
        ("random", os.urandom(32), os.urandom(64), message),
    ]


@pytest.mark.parametrize("name,raw,signature,message", cases(),
                         ids=[case[0] for case in cases()])
def test_openssl_gives_cryptographys_verdict(name: str, raw: bytes, signature: bytes,
                                            message: bytes) -> None:
    expected = by_cryptography(raw, signature, message)
    assert (name in ("good", "empty message", "long message")) == expected
    assert openssl_verify(raw, signature, message) is expected
    assert PublicKey("a", raw).verify(signature, message) is expected


def test_a_reader_checks_entries_without_cryptography(tmp_path: Path) -> None:
    """cryptography's bindings cost a fresh checkout 25-90 ms to import before its first
    entry was read; its verdicts come from the same OpenSSL calls."""
    key = generate("ci")
    code = (
        "import sys\n"
        "from udo_build.store.ac import ActionResult, Output\n"
        "from udo_build.store.remote.trust import open_entry, parse_public_key\n"
        f"public = parse_public_key({key.public().line!r})\n"
        "data = open(sys.argv[1], 'rb').read()\n"
        "verdict = open_entry(data, 'ab' * 32, {public.raw: public})\n"
        "assert verdict.result is not None, verdict\n"
        "tampered = data.replace(b'a record', b'A record')\n"
        "assert open_entry(tampered, 'ab' * 32, {public.raw: public}).rejected == 'bad signature'\n"
        "print(sorted(m for m in sys.modules if m.startswith('cryptography')))\n")
    from udo_build.store.ac import ActionResult, Output
    from udo_build.store.remote.trust import sign_entry

    entry = tmp_path / "entry"
    entry.write_bytes(sign_entry(ActionResult("ab" * 32, "prepare", "a record",
                                              {"record": Output("cd" * 32, 5)}), key))
    root = Path(__file__).resolve().parents[2]
    found = subprocess.run([sys.executable, "-c", code, str(entry)], capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": str(root)})
    assert found.returncode == 0, found.stderr
    assert found.stdout.strip() == "[]"
