"""What a run would do, in words: the output of `soak validate`. Pure text, no I/O.

Users validate on a laptop what a pod will run, so this spells out the rate per client,
when the run stops, and where each header comes from, without sending anything and
without printing any secret.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from runner.config.schema import defaults
from runner.config.settings import Settings
from runner.config.storeurl import STORE_WAIT_S, parse_store_url, s3_endpoint
from runner.config.targets import Targets, as_targets
from runner.core import redact
from runner.core.durations import format_duration
from runner.load.model import model_of, ramp_of, schedule_of, warmup_rate
from runner.load.shards import ALONE, INDEX_ENV, Shard
from runner.report.slowcooker import WARMUP_MARK, format_rate, rate_text
from runner.stats.figures import BACKENDS_SHOWN, NO_BACKEND, OTHER_BACKENDS

_LISTED_URLS = 5  # a shard's own URLs named one by one; the rest counted


def describe(settings: Settings, urls: Sequence[str], environ: Mapping[str, str], shard: Shard = ALONE) -> list[str]:
    """Lines saying what a run with these settings would do; `shard`: this process's part of it."""
    s = settings
    lines = [_rate_line(s) if model_of(s.pace).paced else _bench_line(s)]
    if not shard.alone:
        lines[0] = "the whole run " + lines[0]
    lines += _stages(s)
    lines += _targets(as_targets(urls))
    lines.append(_stop_rule(s))
    lines += _warmup(s)
    lines += _split(s, shard, urls, environ)
    lines.append(
        f"timeout {format_duration(s.client.timeout_ns)}, "
        f"{_reuse(s)}, "
        f"compression {'on' if s.client.compress else 'off'}, latency in {s.report.latency_unit}"
    )
    lines += _lifetime(s) + _backends(s) + _protocol(s) + _linkerd(s)
    lines += _headers(s, environ) + _userinfo(urls)
    lines.append(_body(s))
    if s.report.hash_sample_rate:
        percent = format_rate(round(s.report.hash_sample_rate * 100, 6))
        lines.append(f"checks the FNV-1a hash of {percent}% of bodies against {s.report.hash_value}")
    lines.append(_outputs(s))
    lines += _judged(s) + _metrics(s) + _results(s, shard, environ)
    store = parse_store_url(s.results.store) if s.results.store else None
    endpoint = s3_endpoint(environ) if store is not None and store.scheme == "s3" else ""
    reached = (s.metrics.pushgateway, s.metrics.remote_write, s.metrics.otlp, endpoint)  # what the runner talks to
    lines += _network_policy([*urls, *(url for url in reached if url)])
    return lines


def _results(s: Settings, shard: Shard, environ: Mapping[str, str]) -> list[str]:
    """Where the run's record goes (resultsStore), and for a split run who merges the shards' records."""
    if not s.results.store:
        return []
    store = parse_store_url(s.results.store)
    run = s.results.run or "named by its start time"
    where = f"runs/{s.results.job}/{s.results.run or '<start>-<random>'}/"
    if store.scheme == "s3":
        endpoint = s3_endpoint(environ)
        region = environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or "us-east-1"
        reached = (f"at {redact.url(endpoint)} (AWS_ENDPOINT_URL)" if endpoint else
                   f"at AWS ({region}), outside the cluster: the pallet's NetworkPolicy blocks it until you add "
                   "its rule (docs/results-store.md)")
        lines = [f"keeps the run's record in the S3 bucket {store.bucket} {reached}, under {store.prefix}{where} "
                 f"(run {run}, job {s.results.job}), credentials from the environment"]
    else:
        lines = [f"keeps the run's record in the directory {store.path}, under {where} (run {run}, "
                 f"job {s.results.job})"]
    lines[0] += ", with an entry in its index for `soak history`; a store that is down or slow costs the run at most " \
                f"{STORE_WAIT_S:g}s, never its exit code"
    if s.split.shards > 1:
        wait = s.results.merge_wait_ns
        lines.append(f"each shard keeps its own record there; the one that finds all {s.split.shards} merges them into "
                     "the run's record and verdict" + (f" (after waiting {format_duration(wait)} for the others, the "
                     "lowest-numbered shard present merges what there is, naming the missing: exit code 5)" if wait
                     else " (a shard missing: soak merge STORE?run=NAME)"))
    return lines


def _targets(targets: Targets) -> list[str]:
    """Each URL, and the split of the sends between them (runner.config.targets: the wheel)."""
    if not targets.weighted:
        lines = [f"  to {redact.url(url)}" for url in targets]
        if len(targets) > 1:
            lines.append(f"  each URL gets every {_ordinal(len(targets))} request")
        return lines
    lines = [f"  to {redact.url(url)} (weight {weight}: {format_rate(round(share * 100, 2))}% of the requests)"
             for url, weight, share in zip(targets, targets.weights, targets.shares(), strict=True)]
    lines.append(f"  the weights split every {len(targets.wheel)} requests, in smooth weighted round robin "
                 "(as nginx's upstream weights): each URL within one request of its share at any moment")
    return lines


def _split(s: Settings, shard: Shard, urls: Sequence[str], environ: Mapping[str, str]) -> list[str]:
    """What this process sends of a run split over shards (pods) and local workers, and when it starts.

    `soak validate` in a pod (or with JOB_COMPLETION_INDEX set by hand) must say what that
    pod will do, not only what the run does: its share, its URLs, and its wait for the
    boundary the shards start on together.
    """
    if shard.alone:
        return []
    pod, lines = shard.pod(), []
    if pod.count > 1:
        found = f"--shard {pod.index}" if s.split.shard is not None else f"{INDEX_ENV}={environ.get(INDEX_ENV, '0')}"
        lines.append(f"split over {pod.count} shards (pods) that together send the whole run; "
                     "soak merge adds up their logs")
        lines.append(f"this process: shard {pod.index} of {pod.count} ({found}), sends {_share(s, pod)}")
        lines += _own_urls(pod, urls)
    if shard.workers > 1:
        whole = "this shard's part" if pod.count > 1 else "the run"
        parts = [Shard(pod.index, pod.count, w, shard.workers) for w in range(shard.workers)]
        clients = [str(part.share(s.pace.concurrency)) for part in parts]
        lines.append(f"{whole} is split over {shard.workers} local worker processes of "
                     f"{format_rate(round(s.pace.qps / parts[0].stride, 3))} req/s each, with "
                     f"{', '.join(clients[:-1])} and {clients[-1]} clients")
    if pod.count > 1:
        interval = format_duration(s.pace.interval_ns)
        lines.append(f"waits for the next interval boundary (a multiple of {interval} on the wall clock) to start, "
                     f"as every shard does: up to {interval} after it is started")
    return lines


def planned_sends(s: Settings, part: Shard) -> int | None:
    """The sends a part of the run makes by its planned end, as its schedule makes them due;
    None without a schedule (a bench) or a planned end."""
    pace = s.pace
    if not model_of(pace).paced or pace.run_ns is None:
        return None
    return schedule_of(pace, part, 0).planned_sends()


def _share(s: Settings, part: Shard) -> str:
    """A part's rate, clients and requests, against the whole run's."""
    clients = part.share(s.pace.concurrency)
    text = (f"{format_rate(round(s.pace.qps / part.stride, 3))} of the {format_rate(s.pace.qps)} {s.request.method} "
            f"req/s with {clients} of the {s.pace.concurrency} clients")
    whole, own = planned_sends(s, ALONE), planned_sends(s, part)
    if whole is not None and own is not None:
        text += f", {own} of the {whole} requests"
    if s.pace.total_requests:
        text += f"; stops after {part.share(s.pace.total_requests)} of the {s.pace.total_requests} requests"
    return text


def _own_urls(part: Shard, urls: Sequence[str]) -> list[str]:
    """The URLs a part sends to: send n goes to the URL at place n mod the wheel's length
    (runner.config.targets), and a part sends every stride-th send from its offset, so a stride
    sharing a factor with the wheel's length skips some."""
    own = part.urls(as_targets(urls).wheel)
    if len(own) == len(urls):
        return ["  to every URL"] if len(urls) > 1 else []
    shown = [f"    {redact.url(urls[i])}" for i in own[:_LISTED_URLS]]
    more = [f"    ... and {len(own) - _LISTED_URLS} more"] if len(own) > _LISTED_URLS else []
    return [f"  to {len(own)} of the {len(urls)} URLs only:", *shown, *more]


def _judged(s: Settings) -> list[str]:
    """The thresholds the run will be judged by, and whether it stops early when one is lost."""
    lines = [f"threshold ({rule.scope}): {rule.text}" for rule in s.thresholds.rules]
    if s.thresholds.rules:
        early = "; stops as soon as one can no longer be met" if s.thresholds.abort else ""
        lines.append(f"exit code 3 if any threshold is broken{early}")
    if s.thresholds.stop_at_broken:
        lines.append("capacity search: stops at the end of the first interval that breaks an interval rule, and "
                     "reports the rate of the last interval that kept them all (lastGoodRate)")
    return lines


def _metrics(s: Settings) -> list[str]:
    lines = []
    if s.metrics.addr:
        where = f"port {s.metrics.addr[1:]} of every interface" if s.metrics.addr.startswith(":") else s.metrics.addr
        lines.append(f"serves Prometheus metrics on {where} (GET /metrics) while it runs")
    if s.metrics.pushgateway:
        lines.append(f"pushes metrics to the Pushgateway {redact.url(s.metrics.pushgateway)} after every interval "
                     f"and at the end (job {s.metrics.job})")
    if s.metrics.remote_write:
        lines.append(f"writes metrics to the remote write receiver {redact.url(s.metrics.remote_write)} after every "
                     f"interval and at the end, the latency also as native histograms (job {s.metrics.job})")
    if s.metrics.otlp:
        lines.append(f"sends metrics over OTLP/HTTP to {redact.url(s.metrics.otlp)} after every interval and at the "
                     f"end (service.name {s.metrics.job})")
    return lines


def _stages(s: Settings) -> list[str]:
    """Each stage of a ramp: from what rate to what, for how long, and the sends it makes due."""
    ramp = ramp_of(s.pace)
    if ramp is None:
        return []
    lines, begin, before = [], 0, 0.0
    for number, (duration, qps) in enumerate(s.pace.stages, 1):
        sends = format_rate(round(float(ramp.sends_between(begin, begin + duration)), 3))
        shape = (f"{format_rate(qps)} req/s for" if qps == before else
                 f"{format_rate(before)} -> {format_rate(qps)} req/s over")
        lines.append(f"  stage {number}: {shape} {format_duration(duration)} ({sends} requests)")
        begin, before = begin + duration, qps
    return lines


def _warmup(s: Settings) -> list[str]:
    if not s.pace.warmup_ns:
        return []
    return [f"first warms up for {format_duration(s.pace.warmup_ns)} at {format_rate(warmup_rate(s.pace))} req/s: "
            f"its lines marked \"{WARMUP_MARK.strip()}\", its results reported apart (the summary's warmup), "
            "never judged"]


def _rate_line(s: Settings) -> str:
    per_client = format_rate(round(s.pace.qps / s.pace.concurrency, 3))
    clients = f"{s.pace.concurrency} client{'s' if s.pace.concurrency != 1 else ''} at {per_client} req/s each"
    if s.pace.stages:
        clients = clients.replace(" at ", " at up to ")
    if s.pace.load_model == "closed":
        model = f"closed model: {clients}, one request in flight per client"
    else:
        model = f"open model: {clients}, at most {s.pace.max_in_flight} in flight"
    sends = f"would send {rate_text(s.pace.qps, s.request.method, len(s.pace.stages))} ({model})"
    if s.pace.stages:
        return f"{sends}, each ramping linearly from the one before (the first from 0):"
    return sends


def _bench_line(s: Settings) -> str:
    clients = f"{s.pace.concurrency} client{'s' if s.pace.concurrency != 1 else ''}"
    return (f"would benchmark with {s.request.method} requests, like ab: {clients}, each sending its next request "
            f"as soon as the last is answered (no rate limit)")


def _ordinal(n: int) -> str:
    """2nd, 3rd, 4th, 11th, 21st."""
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _stop_rule(s: Settings) -> str:
    interval = format_duration(s.pace.interval_ns)
    if s.pace.stages:
        assert s.pace.run_ns is not None
        rule = f"for {format_duration(s.pace.run_ns)} (the stages' sum), one line every {interval}"
    elif s.pace.duration_ns is not None:
        rule = f"for {format_duration(s.pace.duration_ns)}, one line every {interval}"
    elif s.pace.iterations:
        whole = format_duration(s.pace.iterations * s.pace.interval_ns)
        rule = f"for {s.pace.iterations} intervals of {interval} ({whole})"
    else:
        rule = f"until stopped, one line every {interval}"
    if (planned := planned_sends(s, ALONE)) is not None:
        rule += f", {planned} requests in all"
    if s.pace.total_requests:
        rule += f"; stops after {s.pace.total_requests} requests"
    return rule


def _reuse(s: Settings) -> str:
    if s.client.no_reuse:
        return "a new connection per request"
    limited = s.client.max_requests_per_connection or s.client.max_connection_age_ns
    return f"keep-alive (one connection per client{' at a time' if limited else ''})"


def _lifetime(s: Settings) -> list[str]:
    """When connections end and new ones begin (runner.load.transport.Lifetime), if they do."""
    count, age = s.client.max_requests_per_connection, s.client.max_connection_age_ns
    if not count and not age:
        return []
    if s.client.no_reuse:
        given = " and ".join(name for name, value in (("maxRequestsPerConnection", count), ("maxConnectionAge", age))
                             if value)
        return [f"{given}: no effect, as noReuse opens a new connection for every request"]
    ends = ([f"its {_ordinal(count)} request"] if count > 1 else ["its first request"] if count else []) + (
        [f"its first request sent at {format_duration(age)} old"] if age else [])
    which = ", whichever comes first" if count and age else ""
    planned = planned_sends(s, ALONE)
    many = f"; at least {planned // count} connections over the run" if count and planned else ""
    return [f"a connection ends after {' or '.join(ends)}{which}: that request says Connection: close and the next "
            "send dials anew (behind a load balancer or a Service: a new pick of backend; a host name is looked "
            f"up again, its addresses dialled in turn){many}"]


def _backends(s: Settings) -> list[str]:
    """Which backends answered, counted by the backendHeader; and what keep-alive alone lets a run reach."""
    header = s.report.backend_header
    if not header:
        return []
    lines = [f"counts responses by the backend named in their {header} header (the first {BACKENDS_SHOWN} by "
             f'count by name, the rest as "{OTHER_BACKENDS}"; without the header: "{NO_BACKEND}"); a # iter line says '
             "when an interval reached fewer backends than the one before"]
    limited = s.client.max_requests_per_connection or s.client.max_connection_age_ns
    if not limited and not s.client.no_reuse:
        clients = s.pace.concurrency
        lines.append(f"with keep-alive and no maxRequestsPerConnection or maxConnectionAge, each client keeps the "
                     f"backend its first connection reached: behind a Service, at most {clients} "
                     f"backend{'s' if clients != 1 else ''} answer")
    return lines


def _protocol(s: Settings) -> list[str]:
    """HTTP/2 and TLS, when they differ from HTTP/1.1 with verification against the public CAs."""
    lines = ["HTTP/2 on every connection (prior knowledge over http, ALPN over https)"] if s.client.http2 else []
    if s.client.insecure:
        lines.append("https: certificates and host names NOT verified (insecure)")
    elif s.client.ca_bundle:
        lines.append(f"https: servers verified against the CAs in {s.client.ca_bundle}")
    if s.client.client_cert:
        key = f" with the key in {s.client.client_key}" if s.client.client_key else ""
        lines.append(f"https: presents the client certificate {s.client.client_cert}{key}")
    return lines


def _linkerd(s: Settings) -> list[str]:
    lines = []
    if s.linkerd.wait:
        lines.append(f"waits up to {format_duration(s.linkerd.wait_timeout_ns)} for the Linkerd proxy "
                     f"(GET http://{s.linkerd.admin}/ready) before the first send")
    if s.linkerd.shutdown:
        lines.append(f"asks the Linkerd proxy to shut down at the end (POST http://{s.linkerd.admin}/shutdown)")
    return lines


def _headers(s: Settings, environ: Mapping[str, str]) -> list[str]:
    lines = []
    for name, value in s.request.headers.items():
        if isinstance(value, dict):
            var = value["fromEnv"]
            state = "set here" if environ.get(var) else "NOT set here"
            lines.append(f"header {name}: <from environment variable {var}, {state}>")
        else:
            lines.append(f"header {name}: {s.effective['headers'][name]}")  # credentials hidden
    if s.request.host:
        lines.append(f"header Host: {s.request.host}")
    return lines


def _userinfo(urls: Sequence[str]) -> list[str]:
    """Credentials in URLs are sent as a header (targets.build_requests): say so, never what they are."""
    with_userinfo = sum(1 for url in urls if "@" in urlsplit(url).netloc)
    if not with_userinfo:
        return []
    which = "the URL's" if len(urls) == 1 else f"each URL's ({with_userinfo} of {len(urls)} have one)"
    return [f"header Authorization: Basic <hidden> (from {which} user name and password)"]


def _body(s: Settings) -> str:
    if isinstance(s.request.body, dict):
        return f"body: the contents of {s.request.body['file']}"
    return f"body: {len(s.request.body.encode())} bytes" if s.request.body else "body: none"


def _outputs(s: Settings) -> str:
    paced = model_of(s.pace).paced
    parts = ["interval lines on stdout" if paced else "ab's report on stdout"]
    if not s.report.no_latency_summary:
        parts.append("a JSON summary on stdout")
    parts.append("failures on stderr" if paced else "progress and failures on stderr")
    if s.report.report_latencies_csv:
        parts.append(f"latency CSV to {s.report.report_latencies_csv}")
    if s.report.junit:
        parts.append(f"JUnit XML to {s.report.junit}")
    if s.report.termination_message_path and s.report.termination_message_path != defaults()["terminationMessagePath"]:
        parts.append(f"the verdict to {s.report.termination_message_path}")  # the default: a pod's, when in one
    return "output: " + ", ".join(parts)


# What a run's processes take as their cgroup counts it: each one's resident anonymous memory, and
# the interpreter's and libraries' files once for all (docs/scale-out.md, "Processes: local workers":
# measured in the image, metrics on, 26 MiB in one process, then 26 MiB more a worker). Rounded up:
# validate holds `workers` against it, and a run never refuses on an estimate.
PROCESS_MIB = 28  # one process: the interpreter, the runner, its clients and metrics (measured 24-27 MiB)
SHARED_MIB = 16  # the interpreter's and libraries' files, counted once (14.5 MiB a process maps)
TRACKER_MIB = 7  # with workers: multiprocessing's resource tracker (measured 6.3 MiB)


def memory_needed_mib(workers: int) -> int:
    """About how much memory a run of `workers` local workers takes: the parent and each worker."""
    return SHARED_MIB + PROCESS_MIB + (TRACKER_MIB + workers * PROCESS_MIB if workers > 1 else 0)


def workers_that_fit(limit_bytes: int) -> int:
    """The most local workers whose run fits in `limit_bytes` (1: one process, 0: not even that)."""
    limit_mib = limit_bytes / 2**20
    if limit_mib < memory_needed_mib(1):
        return 0
    return max(1, int((limit_mib - SHARED_MIB - PROCESS_MIB - TRACKER_MIB) // PROCESS_MIB))


def memory_line(workers: int, limit_bytes: int | None) -> str | None:
    """What validate says of the run's memory against the limit it runs under; None when it has none."""
    if limit_bytes is None:
        return None
    need, limit = memory_needed_mib(workers), f"{limit_bytes / 2**20:.0f} MiB"
    what = f"{workers} workers and their parent need" if workers > 1 else "the run needs"
    if need <= limit_bytes / 2**20:
        return f"memory: {what} about {need} MiB, within the {limit} this runs under (its cgroup's limit)"
    fit = workers_that_fit(limit_bytes)
    advice = f"at most {fit} workers fit, or raise the limit" if fit > 1 else \
        "run it in one process (workers: 1), or raise the limit" if fit else "raise the limit"
    return (f"memory: {what} about {need} MiB, MORE than the {limit} this runs under (its cgroup's limit): "
            f"the kernel would kill the run (OOMKilled); {advice}")


# The pallet's NetworkPolicy for the soak pods: DNS, and TCP to any pod of the cluster. A Service's
# address is translated to its pods' before the network plugin judges it, so every in-cluster
# Service passes; a host outside the cluster does not. docs/deploy.md, "Network policies".
POLICY_FILE = "manifests/soak/networkpolicy.yaml"
_SHOWN_HOSTS = 5  # hosts outside the cluster given their rule one by one; the rest counted


def cluster_guess(host: str) -> str | None:
    """Why the pallet's NetworkPolicy may block `host` (a URL's, lower case), as a phrase to follow it;
    None where it lets it through: a Service's name, a pod's, or the pod itself.

    Offline, so by the name's form only: a cluster resolves `<service>`, `<service>.<namespace>`
    and `<service>.<namespace>.svc[.<cluster domain>]`; a name of another form, or a public
    address, is most likely outside. A private address may be a pod's or a Service's, or not.
    """
    name = host.strip("[]").removesuffix(".")
    try:
        address = ipaddress.ip_address(name)
    except ValueError:
        labels = name.split(".")
        # "svc" third: a Service (<service>.<namespace>.svc...), or fourth: a pod of a headless one
        if len(labels) == 1 or "svc" in labels[2:4] or name.endswith(".cluster.local") or labels[-1] == "localhost":
            return None
        if len(labels) == 2:
            return "may be outside the cluster (unless it is a Service written <service>.<namespace>)"
        return ("looks outside the cluster (a Service is <service>, <service>.<namespace> or "
                "<service>.<namespace>.svc.cluster.local)")
    if address.is_loopback:
        return None  # the pod itself: no policy applies
    if address.is_global:
        return "is a public address, most likely outside the cluster"
    return ("may be outside the cluster (a private address: a pod's or a Service's passes, a node's or another "
            "host's not)")


def _network_policy(urls: Sequence[str]) -> list[str]:
    """What the pallet's NetworkPolicy would block of these URLs (the pushgateway's too), each host
    with the egress rule that allows it, ready to paste into the policy's `egress:` list."""
    found: dict[tuple[str, int], str] = {}
    for url in urls:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower()
        port = parts.port or (443 if parts.scheme == "https" else 80)
        why = cluster_guess(host)
        if why is not None:
            found.setdefault((host, port), why)
    if not found:
        return []
    lines = [f"network policy: the pallet's NetworkPolicy ({POLICY_FILE}) lets the soak reach DNS and the "
             "cluster's pods only; where a network plugin enforces it, requests to a host outside the cluster fail "
             "unless you add its rule under the policy's egress:"]
    for (host, port), why in list(found.items())[:_SHOWN_HOSTS]:
        lines.append(f"  {host} {why}:")
        lines += [f"    {line}" for line in egress_rule(host, port)]
    if len(found) > _SHOWN_HOSTS:
        more = len(found) - _SHOWN_HOSTS
        lines.append(f"  ... and {more} more {'host' if more == 1 else 'hosts'} that may be outside the cluster")
    return lines


def egress_rule(host: str, port: int) -> list[str]:
    """The egress rule, as lines of YAML, that lets the soak reach `host` (its addresses) on `port`."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:  # its addresses are the resolver's to say: a placeholder, and what to put there
        to = f"- to: [{{ipBlock: {{cidr: <address>/32}}}}]  # one for each address {host} has; 0.0.0.0/0: any"
    else:
        to = f"- to: [{{ipBlock: {{cidr: {address}/{address.max_prefixlen}}}}}]"
    return [to, f"  ports: [{{port: {port}, protocol: TCP}}]"]
