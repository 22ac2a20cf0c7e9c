"""Which engine sends a run (runner/run/build.py's engine_for, on runner.load.native.engine.refusal's
answer): the native one never drops a setting.

Every ClientSpec and Pacing field is either one the native engine honours (HONOURS) or
one whose non-default value refuses it, named; a field added later (backendHeader, say) is
refused until someone teaches the C engine it and lists it.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from runner.config.schema import schema, settings_names
from runner.config.settings import ClientSpec, Pacing, Settings, merge, settings_from
from runner.core.errors import UsageError
from runner.load.native import engine as native
from runner.load.native.engine import HONOURS, REFUSES, module, setting_name
from runner.load.request import build_requests
from runner.load.shards import ALONE
from runner.run.build import engine_for, options_for

URLS = ["http://127.0.0.1:8080/"]
needs_native = pytest.mark.skipif(module() is None, reason="the native engine is not built here")


def settings(**config: Any) -> Settings:
    return settings_from(merge({"qps": 10, **config}))


def refusal(s: Settings, urls: list[str] = URLS) -> str | None:
    return native.refusal(s, build_requests(s, urls), options_for(s, ALONE))


OTHER = {"transport": "httpx", "engine": "python", "mode": "bench", "load_model": "open"}  # the Literal fields


def changed(name: str, value: Any) -> Any:
    """Some value other than `value`, of its type, that the field may hold."""
    if name in OTHER:
        return OTHER[name]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return value * 2
    if isinstance(value, str):
        return value + "x"
    if isinstance(value, tuple):  # stages
        return ((60 * 10**9, 10.0),)
    return 1 if value is None else None


@needs_native
@pytest.mark.parametrize(("group", "name"), [("client", f.name) for f in dataclasses.fields(ClientSpec)]
                         + [("pace", f.name) for f in dataclasses.fields(Pacing)])
def test_every_setting_is_honoured_by_the_native_engine_or_refuses_it(group: str, name: str) -> None:
    base = settings()
    assert refusal(base) is None
    part = getattr(base, group)
    other = dataclasses.replace(base, **{group: dataclasses.replace(part, **{name: changed(name, getattr(part, name))})})
    found = refusal(other)
    if name in HONOURS:
        assert found is None, (name, found)
    else:
        assert found, name


def test_a_setting_the_native_engine_does_not_know_is_refused_by_its_configured_name(
        monkeypatch: pytest.MonkeyPatch) -> None:
    base = settings()
    # A field ClientSpec may get later: what the rule does with one.
    spec = dataclasses.make_dataclass("Spec", [*((f.name, f.type) for f in dataclasses.fields(ClientSpec)),
                                               ("dns_cache", str)], frozen=True)
    own = {f.name: getattr(base.client, f.name) for f in dataclasses.fields(ClientSpec)}
    default, client = spec(**own, dns_cache=""), spec(**own, dns_cache="off")
    real = native.settings_from
    monkeypatch.setattr(native, "settings_from", lambda merged: dataclasses.replace(real(merged), client=default))
    assert refusal(dataclasses.replace(base, client=client)) == "dnsCache (not in the native engine)"
    if module() is not None:
        assert refusal(dataclasses.replace(base, client=default)) is None


@needs_native
def test_backends_and_urls_counted_apart_take_the_native_engine() -> None:
    """The native engine counts backends and each URL apart as the Python engine does (issue 22):
    a backendHeader, a list of URLs and weights no longer refuse it."""
    assert refusal(settings(backendHeader="X-Soak-Backend")) is None
    two = ["http://127.0.0.1:8080/a", "http://127.0.0.1:8080/b"]
    assert refusal(settings(), two) is None
    assert refusal(settings(backendHeader="X-Soak-Backend"), two) is None
    assert refusal(settings(), [URLS[0], URLS[0]]) is None


@needs_native
@pytest.mark.parametrize("header", ["Server", "content-length", "Connection", "Transfer-Encoding", "Upgrade",
                                    "Content-Encoding", "Proxy-Connection"])
def test_a_backend_header_the_native_parser_reads_itself_takes_the_native_engine(header: str) -> None:
    """response.c keeps any backendHeader, those among the names it reads for its own ends (its
    NAMES) too (issue 34): they once sent the run on the Python engine."""
    assert refusal(settings(backendHeader=header)) is None


@needs_native
def test_compress_and_body_hashing_take_the_native_engine() -> None:
    """The native engine inflates and hashes bodies as the Python engine does (issue 34): compress
    and hashSampleRate once sent the run on the Python engine."""
    assert refusal(settings(compress=True)) is None
    assert refusal(settings(hashSampleRate=0.5, hashValue=7)) is None
    assert refusal(settings(compress=True, hashSampleRate=1, hashValue=7, backendHeader="Content-Length")) is None


@pytest.mark.parametrize(("config", "why"), [
    ({"transport": "httpx"}, "the httpx transport"),
    ({"transport": "httpx", "http2": True}, "the httpx transport"),
    ({"http2": True}, "HTTP/2"),  # the default transport: `auto` sends it on the Python engine, on httpx
])
def test_what_the_native_engine_does_not_do_is_named(config: dict[str, Any], why: str) -> None:
    assert refusal(settings(**config)) == why


@needs_native
def test_engine_native_for_a_run_it_cannot_send_is_refused_in_one_line() -> None:
    s = settings(engine="native", transport="httpx")
    with pytest.raises(UsageError) as refused:
        engine_for(s, build_requests(s, URLS), options_for(s, ALONE))
    assert str(refused.value) == ("engine: native cannot send this run: the httpx transport; "
                                  "use engine: auto or python")


@needs_native
def test_auto_takes_the_native_engine_where_it_can_and_says_why_not_elsewhere() -> None:
    plain, httpx = settings(warmup="2s"), settings(transport="httpx")
    assert engine_for(plain, build_requests(plain, URLS), options_for(plain, ALONE)).name == "native"
    chosen = engine_for(httpx, build_requests(httpx, URLS), options_for(httpx, ALONE))
    assert (chosen.name, chosen.why) == ("python", "the httpx transport")
    python = settings(engine="python")
    assert engine_for(python, build_requests(python, URLS), options_for(python, ALONE)).name == "python"


@needs_native
def test_an_https_run_takes_the_native_engine_with_every_tls_setting() -> None:
    """TLS was the Python engine's: now tls.c makes the native engine's client, files and all
    (checked when the transport is made, not here), unless the engine was built without OpenSSL."""
    https = ["https://127.0.0.1:8443/", "https://127.0.0.1:8444/x"]
    tls = settings(caBundle="/ca.pem", clientCert="/client.pem", clientKey="/client.key", insecure=True)
    engine = module()
    assert engine is not None
    expected = None if engine.TLS else refusal(settings(), https)
    assert refusal(tls, https) == expected and (expected is None or expected.startswith("TLS ("))


def test_every_setting_a_refusal_can_name_is_named_as_the_configuration_spells_it() -> None:
    """A refusal named `warmupNs`, a field's name, where the configuration and the flag say `warmup`."""
    names = set(settings_names())
    for group in (Pacing, ClientSpec):
        for field in dataclasses.fields(group):
            if field.name not in HONOURS and field.name not in REFUSES:
                assert setting_name(field.name) in names, field.name
    assert setting_name("warmup_ns") == "warmup" and setting_name("max_in_flight") == "maxInFlight"


@needs_native
def test_a_warmup_takes_the_native_engine() -> None:
    """Issue 34: a warm-up is sent by an engine of its own whose clients hand their connections on to
    the run's, in C (NativeEngine.give_to): it refused the native engine before."""
    assert refusal(settings(warmup="2s")) is None
    assert refusal(settings(warmup="2s", stages=[{"duration": "10s", "qps": 20}])) is None


def test_the_engine_settings_description_names_every_setting_the_native_engine_refuses() -> None:
    """docs/configuration.md's engine row (the schema's description) listed TLS, HTTP/2, compress ... but
    not stages nor warmup, which refuse the native engine as well."""
    description = schema()["properties"]["engine"]["description"].lower()
    for group in (ClientSpec, Pacing):
        for field in dataclasses.fields(group):
            if field.name in HONOURS:
                continue
            named = REFUSES.get(field.name, "{name}").format(value=OTHER.get(field.name), name=setting_name(field.name))
            assert named.split(" (")[0].lower() in description, field.name


@needs_native
def test_stages_take_the_native_engine_unless_their_due_times_would_be_too_many() -> None:
    """Issue 34: a ramp is handed over as its due times (Ramp.due_times), one per send it makes due;
    beyond MAX_RAMP_SENDS of them the Python engine sends it, and the refusal says how many."""
    assert refusal(settings(stages=[{"duration": "1h", "qps": 250}])) is None  # 450,000 sends
    too_many = settings(stages=[{"duration": "1h", "qps": 1000}])  # 1,800,000
    assert refusal(too_many) == "stages that make more than 1,000,000 sends due (these make 1,800,000)"
