"""The client side of TLS: one SSLContext per run, made from the settings before any load.

Both engines verify servers by default, against certifi's Mozilla bundle (httpx's own
default), so a run reads the same whichever client made it. A file named in the settings
that cannot be used is the user's to fix: one line naming the setting and the path, before
anything is sent. A certificate that fails at run time is a send failure of kind `tls`,
counted like any other (runner/load/failures.py).
"""

from __future__ import annotations

import ssl

from runner.config.files import TLS_FILE_LIMIT, read_bounded
from runner.core.errors import UsageError
from runner.load.failures import VERIFY_FAILED, tls_text, tls_texts
from runner.load.native.records import TlsClient
from runner.load.transport import TransportOptions

INSECURE_WARNING = "warning: insecure: HTTPS certificates and host names are not verified"

_CERTIFICATE = "-----BEGIN CERTIFICATE-----"
_KEY = "PRIVATE KEY-----"
_ENCRYPTED = ("-----BEGIN ENCRYPTED PRIVATE KEY-----", "Proc-Type: 4,ENCRYPTED")


def ca_file(options: TransportOptions) -> str:
    """The CAs servers are verified against: caBundle, else certifi's Mozilla bundle."""
    if options.ca_bundle:
        return options.ca_bundle
    import certifi  # only where a context is made: a run without https makes none

    return str(certifi.where())


def client_context(options: TransportOptions) -> ssl.SSLContext:
    """The context every HTTPS connection of the run uses; UsageError if a file is unusable."""
    if options.ca_bundle:
        context = _with_ca_bundle(options.ca_bundle)  # the file checked first, so a bad one is named
    else:
        context = ssl.create_default_context(cafile=ca_file(options))
    if options.client_cert or options.client_key:
        _load_client_certificate(context, options.client_cert, options.client_key)
    if options.insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def run_context(options: TransportOptions) -> ssl.SSLContext | None:
    """The run's context if it makes one, made now (before any load, whichever engine sends, so a
    bad file stops the run with its one line); None for a run with no https URL and no TLS file
    named: loading certifi's CA bundle costs more instructions than the rest of a one-request
    run's start (OpenSSL 3 decodes each certificate)."""
    if options.https or options.ca_bundle or options.client_cert or options.client_key:
        return client_context(options)
    return None


def native_client(options: TransportOptions) -> TlsClient:
    """The native engine's TLS client, as client_context makes Python's (runner/load/native/tls.h):
    the same files (checked by client_context first, which names a bad one), Python's default
    cipher list for TLS 1.2, and the texts its failures are named by (failures.tls_texts)."""
    return TlsClient(
        ca_file=ca_file(options), cert_file=options.client_cert, key_file=options.client_key,
        insecure=options.insecure, ciphers=getattr(ssl, "_DEFAULT_CIPHERS", ""),
        verify_failed=tls_text(VERIFY_FAILED), reasons=tls_texts(),
    )


def _with_ca_bundle(path: str) -> ssl.SSLContext:
    """A context that trusts exactly the CAs in `path`, as curl's --cacert does."""
    if _CERTIFICATE not in _read("caBundle", path):
        raise UsageError(f"caBundle: {path}: no PEM certificate in it")
    try:
        return ssl.create_default_context(cafile=path)
    except ssl.SSLError as e:
        raise UsageError(f"caBundle: {path}: not a usable PEM CA bundle ({_reason(e)})") from None


def _load_client_certificate(context: ssl.SSLContext, cert: str, key: str) -> None:
    """Present `cert` (with `key`, or the key in cert's own file) to servers that ask for one.

    The files are looked at first, so the message can say which file is wrong and how;
    OpenSSL alone would say "PEM lib" for most of these.
    """
    if not cert:
        raise UsageError("clientKey: needs clientCert, the certificate the key belongs to")
    cert_text = _read("clientCert", cert)
    if _CERTIFICATE not in cert_text:
        raise UsageError(f"clientCert: {cert}: no PEM certificate in it")
    key_setting, key_path = ("clientKey", key) if key else ("clientCert", cert)
    key_text = _read("clientKey", key) if key else cert_text
    if any(marker in key_text for marker in _ENCRYPTED):
        raise UsageError(f"{key_setting}: {key_path}: the key is encrypted; give it unencrypted "
                         "(openssl pkey -in KEY -out PLAIN.pem)")
    if _KEY not in key_text:
        hint = "" if key else " (give the key's own file as clientKey)"
        raise UsageError(f"{key_setting}: {key_path}: no PEM private key in it{hint}")
    try:
        context.load_cert_chain(cert, key or None, password=_no_password)
    except ssl.SSLError as e:
        if e.reason == "KEY_VALUES_MISMATCH":
            raise UsageError(f"{key_setting}: {key_path}: not the key of clientCert {cert}") from None
        raise UsageError(f"clientCert: {cert}: cannot be used ({_reason(e)})") from None


def _read(setting: str, path: str) -> str:
    """The file's text, read as every input is (a regular file, within a bound); errors name `setting`."""
    try:
        return read_bounded(path, TLS_FILE_LIMIT, "a TLS file").decode("latin-1")
    except UsageError as e:
        raise UsageError(f"{setting}: {e}") from None


def _no_password() -> bytes:
    """Never prompt on a terminal for a key's password: a pod has no one to type it."""
    raise UsageError("an encrypted key is not supported")


def _reason(error: ssl.SSLError) -> str:
    return (error.reason or str(error)).lower().replace("_", " ")
