"""Threshold rules: what a healthy run is, as rules like "p99 < 50ms". Pure: reading them.

The language is the one people already write in k6 thresholds and Prometheus alerts: a
metric, a comparison and a number with its unit, one rule per string.

    p99 < 50ms      p999 <= 0.2s      max < 1s          mean < 800us      p(95) < 20ms
    goal% >= 99     errors% <= 0.1    failed% <= 0.1%   bad% <= 0         skipped% <= 1
    4xx% <= 1       5xx% == 0         401% == 0         2xx% >= 99.9
    rate >= 95/s    backends >= 10

A status rule (`4xx%`, `401%`) measures a share of the responses, not of the sends: a failed send
has no status. `==` states a percentage at its end, 0 or 100 (`5xx% == 0`: none), and is judged
as `<= 0` or `>= 100`; a measured latency or rate is never exactly one value.

A rule is judged on the whole run (`thresholds`) or on every interval (`intervalThresholds`).
A latency rule may name a phase of the responses' time (PHASES): `connect.p99 < 5ms`, `ttfb.p50 < 50ms`.
A run rule may be scoped to one URL, as k6 scopes a threshold by tag: `p99{url=/checkout} < 200ms`
is judged on the sends to the URLs whose path (or whole URL) is /checkout only. This module
reads rules; runner.stats.thresholds measures them on a run, runner.config.targets finds the
URLs a scope names.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from runner.core import units
from runner.core.errors import UsageError
from runner.core.lazymethods import dataclass
from runner.core.measures import BACKENDS_KEPT, PHASES  # a latency rule may name a phase: `connect.p99 < 5ms`
from runner.core.percentiles import PERCENTILES

# Latencies: percentile (None for max and mean) of the responses' latencies.
LATENCIES: dict[str, float | None] = {**{key: p.rank for key, p in PERCENTILES.items()}, "max": None, "mean": None}
# Percentages of a span's sends, 0 to 100.
PERCENTAGES = ("goal%", "errors%", "failed%", "bad%", "skipped%")
# Shares of the responses by status (the summary's statusCodes), as the metrics' status_class
# labels them: a class, `4xx%` (400 to 499), or one status, `401%`. A final status is 200 or more:
# a 1xx is interim, never counted as a response (and a 101 fails). STATUS_CLASSES are HTTP's; a
# status up to 999, and its class (`9xx%`), is read too, as servers send them (LinkedIn's 999).
STATUS_CLASSES = ("2xx%", "3xx%", "4xx%", "5xx%")
_STATUS = re.compile(r"^([2-9])(xx|\d\d)%\Z", re.ASCII)
RATE = "rate"
# How many backends answered (backendHeader): a count, with no unit. `backends >= 10` fails a run
# that did not reach ten of a Service's pods.
BACKENDS = "backends"
METRICS = (*LATENCIES, *PERCENTAGES, RATE, BACKENDS)

# The units a latency rule may be written in: Go's, up to seconds.
TIME_UNITS = {unit: units.TIME_UNITS[unit] for unit in ("ns", "us", "µs", "ms", "s")}
RATE_UNITS = ("", "/s", "req/s", "rps")
OPERATORS = ("<", "<=", ">", ">=")
SCOPES = ("run", "interval")

# Numbers in ASCII digits only (re.ASCII: `\d` would match every script's digits, `p99 < ١ms`).
_RULE = re.compile(r"^(?P<metric>[^<>=!\s{]+)(?:\s*\{(?P<scope>[^}]*)\})?"
                   r"\s*(?P<op>[<>=!]=?)\s*(?P<value>\d+(?:\.\d*)?|\.\d+)\s*(?P<unit>\S*)\Z", re.ASCII)
_PERCENTILE = re.compile(r"^p\(?(\d+(?:\.\d+)?)\)?\Z", re.ASCII)  # p99, p(99), p99.9, p(99.9)
_EXAMPLES = 'like "p99 < 50ms", "goal% >= 99" or "errors% <= 0.1"'
_LIST = (f"{' '.join(LATENCIES)} (latencies), {' '.join(PERCENTAGES)} (percentages of the sends), "
         f"{' '.join(STATUS_CLASSES)} or one status like 401% (percentages of the responses), {RATE} (req/s) "
         f"or {BACKENDS} (how many answered)")


class ThresholdError(ValueError):
    """A rule that cannot be read; str() says why and what would be allowed, in one line."""


@dataclass(frozen=True)
class Rule:
    """One threshold: `metric op limit`, the limit in the metric's base unit (ns, %, req/s)."""

    text: str  # as written, spaces tidied: what the lines, the summary and the metrics show
    metric: str  # one of METRICS, or a status rule's (`4xx%`, `401%`: status_codes)
    op: str  # one of OPERATORS, as judged: a rule written with == has the bound it states (_equal_as_bound)
    limit: float
    unit: str  # the unit the rule was written in, for showing measured values: ms, %, req/s, ...
    scope: str = "run"  # run: judged on the whole run; interval: on every interval
    url: str | None = None  # `{url=...}`: judged on the sends to the URLs this names (targets.matching)
    phase: str | None = None  # `connect.p99`: judged on this phase (PHASES) of the responses, not their latency

    def holds(self, measured: float) -> bool:
        limit = self.limit
        if self.op == "<":
            return measured < limit
        if self.op == "<=":
            return measured <= limit
        if self.op == ">":
            return measured > limit
        return measured >= limit

    def can_hold(self, low: float, high: float) -> bool:
        """Whether some final value between `low` and `high` would keep the rule."""
        return self.holds(low) if self.op in ("<", "<=") else self.holds(high)

    def show(self, measured: float) -> str:
        """A measured value: a latency in the unit that shows its precision (`2.913ms` for a
        rule in seconds, not `0.003s`), `99.5%`, `98.2 req/s`."""
        if self.metric in LATENCIES:
            return units.time_text(measured)
        if self.metric == RATE:
            return number(measured) + " req/s"
        if self.metric == BACKENDS:
            least = "at least " if measured >= BACKENDS_KEPT else ""  # more were not counted by name
            return least + number(measured) + (" backend" if measured == 1 else " backends")
        return number(measured) + "%"

    def in_unit(self, measured: float) -> float:
        """A measured value as a number in the rule's unit, for the JSON summary."""
        if self.metric in LATENCIES:
            return round(measured / TIME_UNITS[self.unit], 6)
        return round(measured, 6)


def number(x: float) -> str:
    """A figure to three decimals without trailing zeros; small ones to three significant digits."""
    text = f"{x:.3f}".rstrip("0").rstrip(".")
    if text in ("0", "-0") and x:
        decimals = 2 - math.floor(math.log10(abs(x)))
        text = f"{x:.{decimals}f}".rstrip("0").rstrip(".")
    return text


def parse_rule(text: str, scope: str = "run") -> Rule:
    """The rule a string states; ThresholdError says what is wrong with one that states none,
    or with one that states a rule no run could keep, or none could break."""
    tidy = " ".join(str(text).split())
    found = _RULE.match(tidy)
    if not found:
        raise ThresholdError(f"must be a metric, a comparison and a number, {_EXAMPLES}")
    phase, metric = _phase(found["metric"])
    rule = _read(tidy, found, scope, metric)
    _check_can_break_and_hold(rule)
    if phase is not None:
        if rule.metric not in LATENCIES:
            raise ThresholdError(f"{phase} is a phase of the responses' time: name one of its latencies, "
                                 f'{" ".join(LATENCIES)}, like "{phase}.p99 < 5ms"')
        if found["scope"] is not None:
            raise ThresholdError(f"a phase rule is judged on the whole run's responses: {phase} is not timed per "
                                 "URL; leave out the {url=...} scope")
        rule = replace(rule, phase=phase)
    if found["scope"] is not None:
        rule = replace(rule, url=_url_scope(found["scope"], rule.metric))
    return rule


def status_codes(metric: str) -> range | None:
    """The statuses a status rule counts (`4xx%`: 400 to 499, `401%`: 401 alone); None for any other metric.

    The one reading of a status metric's name: runner.stats.thresholds measures it by this."""
    found = _STATUS.match(metric)
    if found is None:
        return None
    if found[2] == "xx":
        low = int(found[1]) * 100
        return range(low, low + 100)
    code = int(found[0][:3])
    return range(code, code + 1)


def is_percentage(metric: str) -> bool:
    """Whether a metric is a percentage, of the sends (PERCENTAGES) or of the responses (a status rule)."""
    return metric in PERCENTAGES or status_codes(metric) is not None


def _phase(word: str) -> tuple[str | None, str]:
    """A metric's phase, if it names one (`connect.p99`), and the metric itself. A dot in a
    percentile (`p99.9`) names none; an unknown name before a dot is refused, with the phases."""
    name, dot, rest = word.partition(".")
    if not dot or _PERCENTILE.match(word.lower()):
        return None, word
    if name.lower() not in PHASES:
        raise ThresholdError(f'unknown phase "{name}": the phases are {" ".join(PHASES)}, like "connect.p99 < 5ms"')
    return name.lower(), rest


# What a scope may measure: the sends made to a URL. Sends are due, and skipped, for the whole
# run, not for one URL (a client skips its next send whichever URL it was for).
_RUN_ONLY = ("goal%", "skipped%")
_SCOPE = re.compile(r"""^url\s*=\s*(?:"(?P<dq>[^"]+)"|'(?P<sq>[^']+)'|(?P<bare>[^"'\s]+))\Z""")


def _url_scope(text: str, metric: str) -> str:
    """The URL (a path, or a whole URL) a rule's `{url=...}` names."""
    found = _SCOPE.match(text.strip())
    if not found:
        raise ThresholdError(f'a rule is scoped to one URL by its path or whole URL, like "p99{{url=/checkout}} '
                             f'< 200ms"; not {{{text}}}')
    if metric in _RUN_ONLY:
        raise ThresholdError(f"{metric} is the run's, not a URL's: sends are due and skipped for the whole run; "
                             "scope a latency, errors%, failed%, bad%, a status (4xx%, 401%) or rate")
    return found["dq"] or found["sq"] or found["bare"]


def _read(tidy: str, found: re.Match[str], scope: str, word: str) -> Rule:
    """The rule of a string that has a rule's shape (`word`: its metric, without a phase): its metric,
    comparison and limit in base units."""
    metric = _metric(word)
    value, unit = float(found["value"]), found["unit"]
    op = found["op"]
    if op == "==":
        op = _equal_as_bound(metric, value)
    elif op not in OPERATORS:
        raise ThresholdError(f'the comparison must be <, <=, >, >= or == (== only for a percentage at 0 or 100: '
                             f'"5xx% == 0"), {_EXAMPLES}')
    if metric in LATENCIES:
        return Rule(tidy, metric, op, value * _time_unit(metric, unit), "us" if unit == "µs" else unit, scope)
    if metric == RATE:
        if unit not in RATE_UNITS:
            raise ThresholdError(f'rate is in requests per second: write a number like "rate >= 95" or '
                                 f'"rate >= 95/s", without "{unit}"')
        return Rule(tidy, metric, op, value, "req/s", scope)
    if metric == BACKENDS:
        if unit or not value.is_integer():
            raise ThresholdError('backends counts the backends that answered: write a whole number without a unit, '
                                 'like "backends >= 10"')
        return Rule(tidy, metric, op, value, "", scope)
    if unit not in ("", "%"):
        raise ThresholdError(f'{metric} is a percentage: write a number like "{metric} <= 0.1" or '
                             f'"{metric} <= 0.1%", without "{unit}"')
    if not word.endswith("%") and unit != "%":  # `errors <= 1`: one error, or 1%?
        of = "responses" if status_codes(metric) else "sends"
        raise ThresholdError(f'{word} without % could be a count or a percentage; rules measure '
                             f'percentages of the {of}: write "{metric} {found["op"]} {found["value"]}"')
    return Rule(tidy, metric, op, value, "%", scope)


def _equal_as_bound(metric: str, value: float) -> str:
    """The comparison `metric == value` states: a percentage at 0 is at most 0 (`5xx% == 0`: no 5xx),
    at 100 at least 100. Any other value is refused: a measured figure is never exactly it, and a
    rule that holds only there would break on a rounding."""
    if is_percentage(metric) and value in (0, 100):
        return "<=" if value == 0 else ">="
    if is_percentage(metric):
        raise ThresholdError(f'== is for a percentage at 0 or 100 ("{metric} == 0": none); {metric} is seldom exactly '
                             f"{number(value)}%: use <, <=, > or >=")
    if metric == BACKENDS:
        raise ThresholdError(f'== is for a percentage at 0 or 100; say which way backends may not go: '
                             f'"backends >= {number(value)}" or "backends <= {number(value)}"')
    raise ThresholdError(f'{metric} is measured, never exactly one value: use <, <=, > or >= (== is for a percentage '
                         'at 0 or 100, like "5xx% == 0")')


# What each kind of metric can measure, from low to high: a percentage of sends, a latency, a rate.
_PERCENT_RANGE = (0.0, 100.0, "a percentage, from 0 to 100")
_RANGES = {**{m: _PERCENT_RANGE for m in PERCENTAGES},
           **{m: (0.0, math.inf, "a latency, never below 0") for m in LATENCIES},
           RATE: (0.0, math.inf, "in requests per second, never below 0"),
           BACKENDS: (0.0, math.inf, "a count of backends, never below 0")}


def _check_can_break_and_hold(rule: Rule) -> None:
    """Refuse a rule that no measured value could keep (`skipped% > 100`, `max < 0ns`), or none could
    break (`goal% <= 100`): either says nothing about the run, and is most likely a typo."""
    low, high, words = _RANGES.get(rule.metric, _PERCENT_RANGE)  # a status rule is a percentage
    if not rule.can_hold(low, high):
        raise ThresholdError(f"{rule.metric} is {words}, so this rule can never hold")
    if rule.holds(high if rule.op in ("<", "<=") else low):
        raise ThresholdError(f"{rule.metric} is {words}, so this rule always holds and checks nothing")


def _metric(word: str) -> str:
    """The metric a rule names: p(99) and p99.9 are p99 and p999; errors is errors%, 4XX is 4xx%."""
    name = word.lower()
    percentile = _PERCENTILE.match(name)
    if percentile:
        name = "p" + percentile[1].replace(".", "")
    if is_percentage(name + "%"):
        name += "%"
    if name == "status":  # k6 and Prometheus users write status{401}: say how this language writes it
        raise ThresholdError('a status is judged as its share of the responses, written like "401% == 0" or '
                             '"4xx% <= 1" (with {url=...} after the % for one URL)')
    if name not in METRICS and status_codes(name) is None:
        raise ThresholdError(f'unknown metric "{word}": the metrics are {_LIST}')
    return name


def _time_unit(metric: str, unit: str) -> int:
    if not unit:
        raise ThresholdError(f'{metric} is a latency: give its unit, ns, us, ms or s, like "{metric} < 50ms"')
    if unit not in TIME_UNITS:
        raise ThresholdError(f'"{unit}" is not a unit of time: {metric} takes ns, us, ms or s')
    return TIME_UNITS[unit]


def rules_for(run: list[str], interval: list[str], mode: str, backend_header: str = "") -> tuple[Rule, ...]:
    """The rules of validated thresholds and intervalThresholds settings, run rules first.

    A bench has no rate to reach and so no goal: a goal% rule there could only ever fail. A
    backends rule counts backends by the backendHeader: without one, no backend is ever counted.
    """
    rules = (*(parse_rule(text, "run") for text in run), *(parse_rule(text, "interval") for text in interval))
    for rule in rules:
        if rule.url is not None and rule.scope == "interval":
            raise UsageError(f'intervalThresholds: "{rule.text}" is not allowed: a rule scoped to a URL is judged '
                             "on the whole run; put it in thresholds")
        setting = "thresholds" if rule.scope == "run" else "intervalThresholds"
        if rule.metric == "goal%" and mode == "bench":
            raise UsageError(f'{setting}: "{rule.text}" is not allowed in bench mode, which has no rate to reach '
                             "and so no goal")
        if rule.metric == BACKENDS and not backend_header:
            raise UsageError(f'{setting}: "{rule.text}" needs backendHeader, the response header that names the '
                             "backend that answered (the pallet's nginx sends X-Soak-Backend)")
        if rule.metric == BACKENDS and rule.holds(BACKENDS_KEPT) != rule.holds(math.inf):
            raise UsageError(f'{setting}: "{rule.text}" is not allowed: backends are counted by name up to '
                             f'{BACKENDS_KEPT} and beyond that only as "at least {BACKENDS_KEPT}", so this rule '
                             f"could not be judged: >= and < take a number up to {BACKENDS_KEPT}, > and <= up to "
                             f"{BACKENDS_KEPT - 1}")
    return rules
