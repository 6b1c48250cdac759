"""The certificates ``fleet up`` serves the fleet API with, so that kubectl sends the token at all.

kubectl (client-go) never sends bearer tokens to an ``http://`` server (kubernetes/kubectl#744):
against a plain-HTTP fleet API every request would be anonymous and answered 401. So each run
makes a private CA (its certificate goes into the kubeconfig as ``certificate-authority-data``)
and a server certificate for the listen address, ``localhost`` and ``127.0.0.1``, and starts
``fleet api --tls-cert-file --tls-private-key-file`` with them. In production the same flags
take the platform's own certificate.
"""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

__all__ = ["Certificates", "make_certificates"]

_VALID: Final = datetime.timedelta(days=30)


@dataclass(frozen=True)
class Certificates:
    """PEM bytes: the run's CA certificate, and the server's certificate and key."""

    ca: bytes
    cert: bytes
    key: bytes

    @property
    def ca_data(self) -> str:
        """The CA as a kubeconfig's ``certificate-authority-data``."""
        return base64.b64encode(self.ca).decode()

    def write(self, directory: Path) -> tuple[Path, Path]:
        """The server certificate and key as files for ``fleet api`` (the key readable by us only)."""
        directory.mkdir(parents=True, exist_ok=True)
        cert, key = directory / "fleet-api.crt", directory / "fleet-api.key"
        cert.write_bytes(self.cert)
        key.unlink(missing_ok=True)
        key.touch(mode=0o600)
        key.write_bytes(self.key)
        return cert, key


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def make_certificates(host: str) -> Certificates:
    """A fresh CA and a server certificate for ``host`` (and ``localhost``, ``127.0.0.1``)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    usage = x509.KeyUsage(
        digital_signature=True, content_commitment=False, key_encipherment=False,
        data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
        encipher_only=False, decipher_only=False,
    )  # fmt: skip
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("fleet up local CA"))
        .issuer_name(_name("fleet up local CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALID)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(usage, critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    loopback = ipaddress.ip_address("127.0.0.1")
    names: list[x509.GeneralName] = [x509.DNSName("localhost"), x509.IPAddress(loopback)]
    try:
        address = ipaddress.ip_address(host)
        if address != loopback:
            names.append(x509.IPAddress(address))
    except ValueError:
        names.append(x509.DNSName(host))
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("fleet-api"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + _VALID)
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return Certificates(
        ca=ca.public_bytes(serialization.Encoding.PEM),
        cert=cert.public_bytes(serialization.Encoding.PEM),
        key=key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ),
    )
