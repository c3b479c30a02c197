"""The simulated cluster's certificates: a throw-away CA, the server's certificate, client certificates.

    ca = authority()                               # one CA per process (made on first use, EC P-256)
    ca.pem                                         # the CA certificate (PEM bytes) for certificate-authority(-data)
    ctx = server_context(("127.0.0.1", "localhost"))  # the API server's TLS: asks for (optional) client certificates
    cert, key = ca.issue_client("alice", ["dev"])  # a client certificate: CN is the user, O the groups
    ca.client_context()                            # a client SSLContext trusting the CA (tests' raw HTTP)

Like kube-apiserver, the server asks for a client certificate but does not require one, and judges it
itself (authentication in auth.py): an expired certificate is a 401, not a failed handshake. Keys never
touch a disk longer than it takes OpenSSL to read them (an anonymous memfd where there is one).
"""
from __future__ import annotations

import contextlib
import datetime
import ipaddress
import os
import ssl
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# OpenSSL's X509_V_FLAG_NO_CHECK_TIME: the handshake takes an expired client certificate so that the
# authenticator can answer 401 for it, as kube-apiserver's x509 authenticator does.
_NO_CHECK_TIME = 0x200000
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")

_lock = threading.Lock()
_authority: "Authority | None" = None
_server_contexts: dict[tuple[str, ...], ssl.SSLContext] = {}


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def _alt_names(hosts: Iterable[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            names.append(x509.DNSName(host))
    return names


@dataclass
class Authority:
    """A CA: its certificate (PEM) and what it signs."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @classmethod
    def create(cls, name: str = "gputui-sim-ca") -> "Authority":
        key = _key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = _now()
        cert = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=3650))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                                         key_encipherment=False, data_encipherment=False, key_agreement=False,
                                         encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @property
    def pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def _issue(self, subject: x509.Name, usage: x509.ObjectIdentifier, hosts: Iterable[str] = (),
               not_before: datetime.datetime | None = None, not_after: datetime.datetime | None = None) -> tuple[bytes, bytes]:
        key = _key()
        now = _now()
        builder = (
            x509.CertificateBuilder().subject_name(subject).issuer_name(self.cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before or now - datetime.timedelta(minutes=5))
            .not_valid_after(not_after or now + datetime.timedelta(days=365))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()), critical=False)
        )
        names = _alt_names(hosts)
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)

    def issue_server(self, hosts: Iterable[str]) -> tuple[bytes, bytes]:
        hosts = list(hosts)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, hosts[0] if hosts else "gputui-sim")])
        return self._issue(subject, ExtendedKeyUsageOID.SERVER_AUTH, hosts)

    def issue_client(self, user: str, groups: Iterable[str] = (), *, not_before: datetime.datetime | None = None,
                     not_after: datetime.datetime | None = None) -> tuple[bytes, bytes]:
        """A client certificate and its key (PEM): the CN is the user, each O a group (as kube-apiserver reads them)."""
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, g) for g in groups]
        subject = x509.Name([*attributes, x509.NameAttribute(NameOID.COMMON_NAME, user)])
        return self._issue(subject, ExtendedKeyUsageOID.CLIENT_AUTH, not_before=not_before, not_after=not_after)

    def client_context(self) -> ssl.SSLContext:
        """An SSLContext that trusts this CA (for raw HTTP clients in tests)."""
        context = ssl.create_default_context(cadata=self.pem.decode())
        return context


def authority() -> Authority:
    """The process's CA, made once (every simulated cluster of a process shares it)."""
    global _authority
    with _lock:
        if _authority is None:
            _authority = Authority.create()
        return _authority


@contextlib.contextmanager
def _readable(data: bytes) -> Iterator[str]:
    """A path OpenSSL can read `data` from, gone when the block ends."""
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None:
        fd = memfd("gputui-sim-key", getattr(os, "MFD_CLOEXEC", 0))
        try:
            with open(fd, "wb", closefd=False) as file:  # every byte, or an OSError
                file.write(data)
            yield f"/proc/self/fd/{fd}"
        finally:
            os.close(fd)
        return
    fd, path = tempfile.mkstemp(prefix="gputui-sim-")
    try:
        with open(fd, "wb") as file:  # closed however the write ends (a full disk)
            file.write(data)
        yield path
    finally:
        os.unlink(path)


def server_context(hosts: Iterable[str] = LOOPBACK_NAMES) -> ssl.SSLContext:
    """The API server's TLS context for these host names and addresses (made once per set, per process)."""
    names = tuple(dict.fromkeys([*hosts]))
    with _lock:
        cached = _server_contexts.get(names)
    if cached is not None:
        return cached
    ca = authority()
    cert, key = ca.issue_server(names)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    with _readable(cert + ca.pem) as cert_path, _readable(key) as key_path:
        context.load_cert_chain(cert_path, key_path)
    context.load_verify_locations(cadata=ca.pem.decode())
    context.verify_mode = ssl.CERT_OPTIONAL  # a client certificate is one way in, not the only one
    context.verify_flags |= _NO_CHECK_TIME  # expiry is judged by the authenticator (a 401, as kube-apiserver)
    with _lock:
        _server_contexts.setdefault(names, context)
        return _server_contexts[names]
