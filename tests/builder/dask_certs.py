"""Throwaway TLS material for the Dask tests: a CA, and a certificate it signs for 127.0.0.1
(server and client use, as Dask's mutual TLS wants), written as PEM files."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Certs:
    ca: Path
    cert: Path
    key: Path

    def scheduler_args(self) -> tuple[str, ...]:
        return ("--tls-ca-file", str(self.ca), "--tls-cert", str(self.cert),
                "--tls-key", str(self.key))

    def client_config(self) -> dict[str, str]:
        return {"distributed.comm.tls.ca-file": str(self.ca),
                "distributed.comm.tls.client.cert": str(self.cert),
                "distributed.comm.tls.client.key": str(self.key)}


def _name(text: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make_certs(folder: Path, name: str = "udo-build-test") -> Certs:
    folder.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(_name(f"{name} CA"))
          .issuer_name(_name(f"{name} CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(_name(name)).issuer_name(ca.subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]),
                critical=False)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                  ExtendedKeyUsageOID.CLIENT_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    found = Certs(folder / "ca.pem", folder / "cert.pem", folder / "key.pem")
    found.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    found.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    found.key.write_bytes(_pem_key(key))
    found.key.chmod(0o600)
    return found
