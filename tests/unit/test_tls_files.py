"""runner/load/tls.py: the TLS context from the settings, and one clear line for each unusable file.

The certificates are the test session's own (tests/support/certs.py); the same context serves both
transports, so these run once. tests/integration/test_tls.py runs them against real servers.
"""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from runner.core.errors import UsageError
from runner.load.failures import causes, os_failure
from runner.load.tls import client_context
from runner.load.transport import TransportOptions
from tests.support.certs import Pki


def bad_file_cases(pki: Pki, tmp: Path) -> list[tuple[dict[str, str | bool], str]]:
    not_pem = tmp / "not.pem"
    not_pem.write_text("not a certificate\n")
    directory = tmp / "dir"
    directory.mkdir(exist_ok=True)
    return [
        ({"ca_bundle": str(tmp / "missing.pem")}, f"caBundle: {tmp / 'missing.pem'}: no such file"),
        ({"ca_bundle": str(directory)}, f"caBundle: {directory}: cannot read: Is a directory"),
        ({"ca_bundle": str(not_pem)}, f"caBundle: {not_pem}: no PEM certificate in it"),
        ({"ca_bundle": str(pki.server_key)}, f"caBundle: {pki.server_key}: no PEM certificate in it"),
        ({"client_cert": str(not_pem)}, f"clientCert: {not_pem}: no PEM certificate in it"),
        ({"client_cert": str(tmp / "missing.pem")}, f"clientCert: {tmp / 'missing.pem'}: no such file"),
        ({"client_cert": str(pki.client_cert)},
         f"clientCert: {pki.client_cert}: no PEM private key in it (give the key's own file as clientKey)"),
        ({"client_cert": str(pki.client_cert), "client_key": str(pki.other_key)},
         f"clientKey: {pki.other_key}: not the key of clientCert {pki.client_cert}"),
        ({"client_cert": str(pki.client_cert), "client_key": str(pki.client_key_encrypted)},
         f"clientKey: {pki.client_key_encrypted}: the key is encrypted; give it unencrypted "
         "(openssl pkey -in KEY -out PLAIN.pem)"),
        ({"client_key": str(pki.client_key)}, "clientKey: needs clientCert, the certificate the key belongs to"),
    ]


def options(**fields: str | bool) -> TransportOptions:
    return TransportOptions(timeout_ns=10**9, no_reuse=False, compress=False, max_connections=1,
                            **fields)  # type: ignore[arg-type]


def test_each_unusable_file_is_named_with_its_setting(pki: Pki, tmp_path: Path) -> None:
    for fields, message in bad_file_cases(pki, tmp_path):
        with pytest.raises(UsageError) as caught:
            client_context(options(**fields))
        assert str(caught.value) == message, fields


def test_usable_files_make_a_verifying_context(pki: Pki) -> None:
    context = client_context(options(ca_bundle=str(pki.ca), client_cert=str(pki.client_cert),
                                     client_key=str(pki.client_key)))
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "soak test CA"),),)]
    default = client_context(options())
    assert default.verify_mode == ssl.CERT_REQUIRED and len(default.get_ca_certs()) > 100  # certifi's


def test_insecure_verifies_nothing(pki: Pki) -> None:
    context = client_context(options(insecure=True))
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname


def test_insecure_with_a_bundle_still_checks_the_bundle_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="caBundle: .*gone.pem: no such file"):
        client_context(options(ca_bundle=str(tmp_path / "gone.pem"), insecure=True))


# --- how TLS failures are named (runner/load/failures.py) ------------------------------------------------


def test_a_tls_failure_is_named_in_a_few_words() -> None:
    verify = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: "
                                             "unable to get local issuer certificate (_ssl.c:1006)")
    verify.reason = "CERTIFICATE_VERIFY_FAILED"
    verify.verify_message = "unable to get local issuer certificate"
    assert os_failure(causes(verify)) == ("tls", "tls: certificate verify failed: unable to get local issuer certificate")
    alert = ssl.SSLError(1, "[SSL: TLSV13_ALERT_CERTIFICATE_REQUIRED] tlsv13 alert certificate required (_ssl.c:2580)")
    alert.reason = "TLSV13_ALERT_CERTIFICATE_REQUIRED"
    assert os_failure(causes(alert)) == ("tls", "tls: tlsv13 alert certificate required")


def test_a_tls_stream_that_lost_its_connection_is_named_by_how_it_was_lost() -> None:
    """SSLWantReadError has no reason: the connection under TLS went away, and the reset says how."""
    lost = ssl.SSLWantReadError(2, "The operation did not complete (read) (_ssl.c:2580)")
    lost.__context__ = ConnectionResetError(104, "Connection reset by peer")
    assert os_failure(causes(lost)) == ("reset", "connection reset by peer")
    assert os_failure(causes(ssl.SSLWantReadError(2, "The operation did not complete (read) (_ssl.c:2580)"))) is None
