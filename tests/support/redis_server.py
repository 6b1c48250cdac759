"""A private ``redis-server`` for the integration lane: free loopback port, AOF on, kill -9.

The crash and persistence tests need a Redis they may kill without touching anyone else's, so
each :class:`RedisServer` owns a temporary directory and a port. ``appendfsync always`` makes
every acknowledged write durable, which is what the crash tests assert about (``appendfsync``
says otherwise for a test that wants the cheaper setting); ``replicaof`` makes one a replica of
another on this host.

A server may also demand a password (``requirepass``) and speak TLS only (``tls=True``: a CA,
a server and a client certificate made for it in its directory, ``--tls-auth-clients yes``, the
plain port off); :attr:`RedisServer.url` then carries both as redis-py reads them
(``rediss://:PASSWORD@127.0.0.1:PORT/0?ssl_ca_certs=...&ssl_certfile=...``). A ``redis-server``
built without TLS refuses to start so: :class:`TLSUnsupported` says it, with its log.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from urllib.parse import quote, urlencode

import redis
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.support.net import free_port, wait_for_port

__all__ = ["REDIS_SERVER", "RedisServer", "TLSUnsupported", "make_tls_files"]

REDIS_SERVER = shutil.which("redis-server")


class TLSUnsupported(RuntimeError):
    """This redis-server cannot serve TLS (built without it); the message holds its log."""


def _certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    issuer: x509.Certificate | None,
    issuer_key: ec.EllipticCurvePrivateKey,
    *,
    ca: bool = False,
    usage: x509.ObjectIdentifier | None = None,
) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer.subject if issuer is not None else name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=0 if ca else None), critical=True)
    )
    if usage is not None:
        builder = builder.add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
    if usage == ExtendedKeyUsageOID.SERVER_AUTH:
        names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def make_tls_files(directory: Path) -> dict[str, Path]:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, as PEM files:
    ``ca``, ``server-cert``, ``server-key``, ``client-cert``, ``client-key``."""
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("redis test CA", ca_key, None, ca_key, ca=True)
    files = {"ca": directory / "ca.crt"}
    files["ca"].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    for role, usage in (
        ("server", ExtendedKeyUsageOID.SERVER_AUTH),
        ("client", ExtendedKeyUsageOID.CLIENT_AUTH),
    ):
        key = ec.generate_private_key(ec.SECP256R1())
        cert = _certificate(f"redis {role}", key, ca, ca_key, usage=usage)
        files[f"{role}-cert"] = directory / f"{role}.crt"
        files[f"{role}-key"] = directory / f"{role}.key"
        files[f"{role}-cert"].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        files[f"{role}-key"].write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        files[f"{role}-key"].chmod(0o600)
    return files


class RedisServer:
    """One ``redis-server`` process that can be killed and restarted on the same port and data."""

    def __init__(
        self,
        directory: Path,
        *,
        appendonly: bool = True,
        password: str | None = None,
        tls: bool = False,
        appendfsync: str = "always",
        replicaof: int | None = None,
    ) -> None:
        if REDIS_SERVER is None:
            raise RuntimeError("redis-server is not installed")
        self.directory = directory
        self.port = free_port()
        self.appendonly = appendonly
        self.appendfsync = appendfsync
        #: The port of a primary on this host this server replicates (None: a primary itself).
        self.replicaof = replicaof
        self.password = password
        self.tls = make_tls_files(directory / "tls") if tls else None
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """The URL every role is given: password and TLS options included."""
        scheme = "rediss" if self.tls else "redis"
        auth = f":{quote(self.password, safe='')}@" if self.password else ""
        query = ""
        if self.tls:
            query = "?" + urlencode(
                {
                    "ssl_cert_reqs": "required",
                    "ssl_ca_certs": str(self.tls["ca"]),
                    "ssl_certfile": str(self.tls["client-cert"]),
                    "ssl_keyfile": str(self.tls["client-key"]),
                },
                safe="/",
            )
        return f"{scheme}://{auth}127.0.0.1:{self.port}/0{query}"

    def client(self, **kwargs: object) -> redis.Redis:
        if self.password is not None:
            kwargs.setdefault("password", self.password)
        if self.tls:
            kwargs.update(
                ssl=True,
                ssl_cert_reqs="required",
                ssl_ca_certs=str(self.tls["ca"]),
                ssl_certfile=str(self.tls["client-cert"]),
                ssl_keyfile=str(self.tls["client-key"]),
            )
        return redis.Redis(host="127.0.0.1", port=self.port, **kwargs)  # type: ignore[arg-type]

    def start(self) -> None:
        assert REDIS_SERVER is not None
        args = [
            REDIS_SERVER,
            "--bind", "127.0.0.1",
            "--dir", str(self.directory),
            "--save", "",
            "--appendonly", "yes" if self.appendonly else "no",
            "--appendfsync", self.appendfsync,
            "--daemonize", "no",
            "--logfile", str(self.directory / "redis.log"),
        ]  # fmt: skip
        if self.replicaof is not None:
            args += ["--replicaof", "127.0.0.1", str(self.replicaof)]
        if self.password is not None:
            args += ["--requirepass", self.password]
        if self.tls:
            args += [
                "--port", "0",
                "--tls-port", str(self.port),
                "--tls-cert-file", str(self.tls["server-cert"]),
                "--tls-key-file", str(self.tls["server-key"]),
                "--tls-ca-cert-file", str(self.tls["ca"]),
                "--tls-auth-clients", "yes",
            ]  # fmt: skip
        else:
            args += ["--port", str(self.port)]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            wait_for_port(self.port)
        except TimeoutError:
            self._started_badly()
            raise
        deadline = time.monotonic() + 10
        while True:  # AOF loading answers LOADING until done
            try:
                client = self.client()
                try:
                    client.ping()
                finally:
                    client.close()
                return
            except redis.exceptions.BusyLoadingError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def _started_badly(self) -> None:
        """The server never listened: say why (TLS not built in gets its own exception)."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.kill9()
            return
        stderr = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        log = self.directory / "redis.log"
        text = stderr + (log.read_text(errors="replace") if log.exists() else "")
        self.proc = None
        if self.tls and "TLS" in text:
            raise TLSUnsupported(f"redis-server cannot serve TLS here:\n{text}")

    def kill9(self) -> None:
        """Crash the server: SIGKILL, no shutdown save."""
        if self.proc is not None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
            self.proc = None

    def restart(self) -> None:
        self.kill9()
        self.start()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill9()
            self.proc = None
