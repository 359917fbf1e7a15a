"""Trust in shared action-cache entries: ed25519 signatures and the keys a reader trusts.

The Nix binary-cache model. A writer (CI) holds a private key and signs every entry it uploads;
a reader accepts an entry only when it is signed by a key listed in its `trusted_keys`. Blobs
need no signature: they are named by the sha256 of their bytes and verified on every read, so a
signed entry pins all of them.

Key formats (one line each, as Nix's):

    public   <name>:<base64 of the 32-byte ed25519 public key>
    private  <name>:<base64 of the 32-byte seed>    (a Nix secret key, seed + public, works too)

An entry on the remote is an envelope around the ActionResult JSON:

    {"schema": "udo-build/signed-action-result", "version": 1, "result": {...},
     "signer": "<public key line>", "signature": "<base64 ed25519 signature>"}

The signature is over the canonical JSON of {"schema", "version", "result"}: the result and the
key it is filed under (`result.key`), so an entry moved to another key is refused as well.

Signatures are checked through the OpenSSL that Python's hashlib links (`ctypes`: about 6 ms to
import, against 25-90 ms for cryptography's bindings, which a fresh checkout paid before its
first entry was read): the very EVP calls cryptography makes for an Ed25519 key
(EVP_PKEY_new_raw_public_key, EVP_DigestVerifyInit, EVP_DigestVerify). Where that OpenSSL cannot
be reached so (a hashlib without it, an OpenSSL before 1.1.1), `cryptography` checks them;
it signs and makes keys, imported only then.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...canonical import canonical_json
from ..ac import ActionResult, unsafe_publish

ENVELOPE_SCHEMA = "udo-build/signed-action-result"
ENVELOPE_VERSION = 1
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")

# Why an entry was refused (the counters of `store stats` use these names).
UNSIGNED = "unsigned"
UNTRUSTED = "untrusted key"
BAD_SIGNATURE = "bad signature"
MALFORMED = "malformed"
WRONG_KEY = "wrong action key"
CORRUPT_BLOB = "corrupt blob"
REJECTIONS = (UNSIGNED, UNTRUSTED, BAD_SIGNATURE, MALFORMED, WRONG_KEY, CORRUPT_BLOB)


@dataclass(frozen=True)
class PublicKey:
    """A named Ed25519 public key that verifies signed entries."""

    name: str
    raw: bytes  # 32 bytes

    @property
    def line(self) -> str:
        return f"{self.name}:{base64.b64encode(self.raw).decode()}"

    def verify(self, signature: bytes, message: bytes) -> bool:
        checked = openssl_verify(self.raw, signature, message)
        if checked is not None:
            return checked
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

        try:
            Ed25519PublicKey.from_public_bytes(self.raw).verify(signature, message)
        except (InvalidSignature, ValueError):
            return False
        return True


ED25519 = 1087  # OpenSSL's NID_ED25519 (EVP_PKEY_ED25519)
_libcrypto: list[Any] = []  # the OpenSSL functions, once looked up (None: not to be had)


def openssl_verify(raw: bytes, signature: bytes, message: bytes) -> bool | None:
    """Whether `signature` is the Ed25519 signature of `message` by the public key `raw`,
    checked by OpenSSL's libcrypto; None when it cannot say (the caller asks cryptography)."""
    lib = _libcrypto[0] if _libcrypto else _load_libcrypto()
    if lib is None or len(raw) != 32:
        return None
    key = lib.EVP_PKEY_new_raw_public_key(ED25519, None, raw, len(raw))
    if not key:
        lib.ERR_clear_error()
        return None
    context = lib.EVP_MD_CTX_new()
    try:
        found = -1
        if context and lib.EVP_DigestVerifyInit(context, None, None, None, key) == 1:
            found = lib.EVP_DigestVerify(context, signature, len(signature), message,
                                         len(message))
    finally:
        lib.EVP_MD_CTX_free(context)
        lib.EVP_PKEY_free(key)
    if found != 1:
        lib.ERR_clear_error()  # a refusal leaves errors queued for the thread's next caller
    return found == 1 if found in (0, 1) else None


def _load_libcrypto() -> Any:
    """The libcrypto functions `openssl_verify` calls, through the library hashlib links."""
    lib: Any = None
    try:
        import _hashlib
        import ctypes

        lib = ctypes.CDLL(_hashlib.__file__)
        ptr, size, num = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int
        for name, answer, args in (
                ("EVP_PKEY_new_raw_public_key", ptr, (num, ptr, ctypes.c_char_p, size)),
                ("EVP_PKEY_free", None, (ptr,)), ("EVP_MD_CTX_new", ptr, ()),
                ("EVP_MD_CTX_free", None, (ptr,)), ("ERR_clear_error", None, ()),
                ("EVP_DigestVerifyInit", num, (ptr, ptr, ptr, ptr, ptr)),
                ("EVP_DigestVerify", num, (ptr, ctypes.c_char_p, size, ctypes.c_char_p, size))):
            function = getattr(lib, name)
            function.restype, function.argtypes = answer, args
    except (ImportError, OSError, AttributeError):
        lib = None
    _libcrypto[:] = [lib]
    return lib


@dataclass(frozen=True)
class SigningKey:
    """A named Ed25519 private key (its 32-byte seed) that signs entries."""

    name: str
    seed: bytes  # 32 bytes

    @property
    def line(self) -> str:
        return f"{self.name}:{base64.b64encode(self.seed).decode()}"

    def _key(self) -> Any:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        return Ed25519PrivateKey.from_private_bytes(self.seed)

    def public(self) -> PublicKey:
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        raw = self._key().public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return PublicKey(self.name, raw)

    def sign(self, message: bytes) -> bytes:
        return bytes(self._key().sign(message))


def generate(name: str) -> SigningKey:
    if not NAME.fullmatch(name):
        raise ValueError(f"a key name is letters, digits and . _ @ + - (at most 64), not {name!r}")
    import os

    return SigningKey(name, os.urandom(32))


def _split(line: str, what: str, sizes: tuple[int, ...]) -> tuple[str, bytes]:
    name, sep, data = line.strip().partition(":")
    if not sep or not NAME.fullmatch(name):
        raise ValueError(f"a {what} is NAME:BASE64 (as printed by 'udo-build key generate'), "
                         f"not {_preview(line)!r}")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(f"the {what} {name!r} is not valid base64") from None
    if len(raw) not in sizes:
        raise ValueError(f"the {what} {name!r} has {len(raw)} bytes, not "
                         + " or ".join(map(str, sizes)))
    return name, raw


def parse_public_key(line: str) -> PublicKey:
    name, raw = _split(line, "public key", (32,))
    return PublicKey(name, raw)


def parse_signing_key(text: str) -> SigningKey:
    name, raw = _split(text, "private key", (32, 64))
    return SigningKey(name, raw[:32])


def _preview(text: str) -> str:
    text = text.strip()
    return text if len(text) <= 24 else text[:20] + "..."


# -- entries --------------------------------------------------------------------------------------

def _message(result: dict[str, Any]) -> bytes:
    return canonical_json({"schema": ENVELOPE_SCHEMA, "version": ENVELOPE_VERSION,
                           "result": result})


def sign_entry(result: ActionResult, key: SigningKey, public: PublicKey | None = None) -> bytes:
    """The bytes to upload to /ac/<key>: the result in a signed envelope."""
    doc = result.to_json()
    public = public or key.public()
    envelope = {"schema": ENVELOPE_SCHEMA, "version": ENVELOPE_VERSION, "result": doc,
                "signer": public.line,
                "signature": base64.b64encode(key.sign(_message(doc))).decode()}
    return canonical_json(envelope)


@dataclass(frozen=True)
class Verdict:
    """What verifying a remote entry found: the result, or why it was rejected."""

    result: ActionResult | None
    rejected: str | None = None  # one of REJECTIONS
    detail: str = ""


def open_entry(data: bytes, key: str | None, trusted: dict[bytes, PublicKey]) -> Verdict:
    """The result an uploaded entry holds, if it is signed by a trusted key and filed under the
    right action key; else why it is refused. Never raises on bad input. `key` None: an entry
    found through an index key (see `tier`), made for whatever action key it says; the caller
    compares that key with the one it computed before using the result."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return Verdict(None, MALFORMED, "not JSON")
    if not isinstance(doc, dict):
        return Verdict(None, MALFORMED, "not a JSON object")
    if "signature" not in doc or "signer" not in doc:
        return Verdict(None, UNSIGNED, "no signature")
    if doc.get("schema") != ENVELOPE_SCHEMA or doc.get("version") != ENVELOPE_VERSION:
        return Verdict(None, MALFORMED, "not a signed udo-build entry")
    signer, signature, result = doc["signer"], doc["signature"], doc.get("result")
    try:
        public = parse_public_key(str(signer))
        raw_signature = base64.b64decode(str(signature), validate=True)
    except (ValueError, binascii.Error) as exc:
        return Verdict(None, MALFORMED, str(exc))
    if trusted.get(public.raw) is None:
        return Verdict(None, UNTRUSTED, f"signed by {_preview(public.line)}")
    try:
        message = _message(result)
    except (TypeError, ValueError):
        return Verdict(None, MALFORMED, "the result is not plain JSON")
    if len(raw_signature) != 64 or not public.verify(raw_signature, message):
        return Verdict(None, BAD_SIGNATURE, f"not signed by {public.name}'s key as it says")
    parsed = ActionResult.from_json(result)
    if parsed is None:  # a signature never makes an unsafe publish path acceptable
        return Verdict(None, MALFORMED, unsafe_publish(result)
                       or "a signed document that is not an action result")
    if key is not None and parsed.key != key:
        return Verdict(None, WRONG_KEY, f"filed under {key[:12]} but made for {parsed.key[:12]}")
    return Verdict(parsed)


def trusted_set(keys: list[PublicKey]) -> dict[bytes, PublicKey]:
    return {k.raw: k for k in keys}


def load_signing_key(path: Path) -> SigningKey:
    """The private key in a file (as written by `udo-build key generate`)."""
    from ...errors import UserError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError("the signing key file does not exist", file=str(path),
                        hint="create one with 'udo-build key generate --out FILE'") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"the signing key cannot be read: {getattr(exc, 'strerror', exc)}",
                        file=str(path)) from None
    try:
        return parse_signing_key(text)
    except ValueError as exc:
        raise UserError(str(exc), file=str(path)) from None
