"""A throwaway PKI for the TLS tests: a CA, a server certificate for 127.0.0.1 and localhost,
a client certificate, and a second CA that signed neither (for "wrong bundle" cases); and server
certificates that must not verify: one expired, one self-signed, one for another host name.

Made fresh for each test session with the `cryptography` package, so no certificate is
kept in the repository to expire. Keys are ECDSA P-256: quick to make, and nginx, OpenSSL
and Python's ssl all take them.
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_DAY = datetime.timedelta(days=1)


@dataclass(frozen=True)
class Pki:
    """Paths of the PEM files; each key file holds its certificate's key, unencrypted."""

    ca: Path
    other_ca: Path  # a CA that signed nothing used here
    server_cert: Path  # for 127.0.0.1 and localhost, signed by `ca`
    server_key: Path
    client_cert: Path  # CN=soak-client, signed by `ca`
    client_key: Path
    client_combined: Path  # the client certificate and its key in one file
    client_key_encrypted: Path  # the client key, encrypted with a password
    other_key: Path  # a key that belongs to no certificate here
    expired_cert: Path  # for 127.0.0.1, signed by `ca`, expired yesterday
    expired_key: Path
    self_signed_cert: Path  # for 127.0.0.1, signed by its own key
    self_signed_key: Path
    other_host_cert: Path  # signed by `ca`, for other.test only
    other_host_key: Path


def make_pki(directory: Path) -> Pki:
    """Write the files into `directory` and return their paths."""
    ca_key, ca_cert = _ca("soak test CA")
    _, other_ca_cert = _ca("another CA")
    server_key, server_cert = _leaf(ca_key, ca_cert, "127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH,
                                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")])
    client_key, client_cert = _leaf(ca_key, ca_cert, "soak-client", ExtendedKeyUsageOID.CLIENT_AUTH, [])
    loopback = [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    expired_key, expired_cert = _leaf(ca_key, ca_cert, "127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH, loopback,
                                      expired=True)
    self_key = ec.generate_private_key(ec.SECP256R1())
    _, self_signed = _leaf(self_key, _self_issuer(self_key), "127.0.0.1", ExtendedKeyUsageOID.SERVER_AUTH, loopback,
                           key=self_key)
    other_key, other_cert = _leaf(ca_key, ca_cert, "other.test", ExtendedKeyUsageOID.SERVER_AUTH,
                                  [x509.DNSName("other.test")])
    pki = Pki(*(directory / name for name in (
        "ca.pem", "other-ca.pem", "server.pem", "server.key", "client.pem", "client.key", "client-combined.pem",
        "client-encrypted.key", "other.key", "expired.pem", "expired.key", "self-signed.pem", "self-signed.key",
        "other-host.pem", "other-host.key")))
    pki.ca.write_bytes(_pem(ca_cert))
    pki.other_ca.write_bytes(_pem(other_ca_cert))
    pki.server_cert.write_bytes(_pem(server_cert))
    pki.server_key.write_bytes(_key_pem(server_key))
    pki.client_cert.write_bytes(_pem(client_cert))
    pki.client_key.write_bytes(_key_pem(client_key))
    pki.client_combined.write_bytes(_pem(client_cert) + _key_pem(client_key))
    pki.client_key_encrypted.write_bytes(client_key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"secret")))
    pki.other_key.write_bytes(_key_pem(ec.generate_private_key(ec.SECP256R1())))
    for cert_path, key_path, cert, key in ((pki.expired_cert, pki.expired_key, expired_cert, expired_key),
                                           (pki.self_signed_cert, pki.self_signed_key, self_signed, self_key),
                                           (pki.other_host_cert, pki.other_host_key, other_cert, other_key)):
        cert_path.write_bytes(_pem(cert))
        key_path.write_bytes(_key_pem(key))
    return pki


def _self_issuer(key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    """A stand-in issuer whose subject is the leaf's own name: the leaf then signs itself."""
    now = datetime.datetime.now(datetime.UTC)
    return (x509.CertificateBuilder().subject_name(_name("127.0.0.1")).issuer_name(_name("127.0.0.1"))
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - _DAY).not_valid_after(now + _DAY).sign(key, hashes.SHA256()))


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _ca(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name)).issuer_name(_name(common_name))
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - _DAY).not_valid_after(now + 30 * _DAY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(ca_key: ec.EllipticCurvePrivateKey, ca_cert: x509.Certificate, common_name: str,
          usage: x509.ObjectIdentifier, names: list[x509.GeneralName], *, expired: bool = False,
          key: ec.EllipticCurvePrivateKey | None = None) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = key or ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name)).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - (10 if expired else 1) * _DAY).not_valid_after(now - _DAY if expired else now + 30 * _DAY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if names:
        builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())
