"""The configuration schema: the single source of truth for names, types, ranges, defaults.

`schema.json` ships inside the package. This module loads it, reads the defaults out of it,
and turns jsonschema's findings into the one-line messages users see: where (JSON path or
flag), the bad value, and what is allowed.

jsonschema (with referencing, attrs and the metaschemas it reads) costs about a fifth of a
one-request run's instructions to import and build, so it is loaded only for a layer the
schema's plain keywords cannot judge alone (_plainly_valid): a layer of a few flags of a
type, an enum, bounds or a duration in its range (`--engine native`, `--interval 10s`, ab's
-n, -c and -t) is accepted without it; any other layer, and any value those keywords refuse,
goes to jsonschema, whose error is the one reported, so every message is what it was.
"""

from __future__ import annotations

import functools
import json
import math
import os
import re
from collections import deque
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import urlsplit

from runner.core import redact
from runner.core.durations import DURATION_HINT, MAX_NS, DurationError, DurationRangeError, parse_duration
from runner.core.errors import UsageError, shortened

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator, FormatChecker, ValidationError


def _is_positive_duration(value: object) -> bool:
    """A Go duration greater than zero (an interval or timeout of 0 means nothing).

    One too long for Go is well written: x-durationRange says what is allowed instead.
    """
    if not isinstance(value, str):
        return True  # the type keyword reports non-strings
    try:
        return parse_duration(value) > 0
    except DurationRangeError:
        return True


def _is_duration(value: object) -> bool:
    """A Go duration, 0 included: for a limit whose 0s means none (maxConnectionAge).

    As with positive-duration, one too long for Go is x-durationRange's to report.
    """
    if isinstance(value, str):
        try:
            parse_duration(value)
        except DurationRangeError:
            pass
    return True


def _duration_range(validator: Any, bounds: list[str], instance: Any, _schema: Any) -> Iterator[ValidationError]:
    """`x-durationRange: [low, high]`: a duration setting's bounds, as Go durations, both included.

    An interval of 1us made a run that printed 27,024 lines in 5 s and never saw SIGTERM;
    9999999999999999999h overflowed what the event loop's timers hold. Values that are not
    durations at all are the format keyword's to report.
    """
    from jsonschema import ValidationError

    if not isinstance(instance, str):
        return
    try:
        ns = parse_duration(instance)
    except DurationRangeError:
        ns = MAX_NS + 1
    except DurationError:
        return
    if _outside(ns, bounds):
        yield ValidationError(f"{instance!r} is not from {bounds[0]} to {bounds[1]}")


def _outside(ns: int, bounds: list[str]) -> bool:
    """Whether a duration of `ns` lies outside x-durationRange's [low, high]. 0 never does: whether
    a setting takes 0 is its format's to say (positive-duration does not, duration does)."""
    low, high = bounds
    return bool(ns) and not parse_duration(low) <= ns <= parse_duration(high)


def _is_threshold(value: object) -> bool:
    """A rule thresholds.py can read; its ThresholdError says what is wrong with one it cannot."""
    # The format checks load their parsers when they run: the schema alone (every command's --help,
    # a layer _plainly_valid) needs none of them.
    from runner.config.rules import parse_rule

    if isinstance(value, str):
        parse_rule(value)
    return True


class UrlError(ValueError):
    """What is wrong with a URL, as a phrase to follow it (see targets.url_problem)."""


def _is_http_url(value: object) -> bool:
    """A URL the runner itself talks to (the Pushgateway): checked as a target URL is, and more.

    A bad one would not stop the run but fail every push, one line each; a password in it
    would be printed with each of those lines.
    """
    from runner.config.urls import url_problem

    if isinstance(value, str) and value:
        problem = url_problem(value) or _server_url_problem(value)
        if problem:
            raise UrlError(problem)
    return True


def _server_url_problem(url: str) -> str:
    """What a target URL may have but a server's URL may not; `url` is a valid http(s) URL."""
    parts = urlsplit(url)
    if "@" in parts.netloc:
        return "is not allowed: user names and passwords in the URL are not supported"
    return ""


class StoreUrlError(ValueError):
    """What is wrong with a resultsStore URL, as a phrase to follow it (see storeurl.store_url_problem)."""


def _is_store_url(value: object) -> bool:
    """A store the runner can write its records to: file:///DIR or s3://BUCKET/PREFIX."""
    from runner.config.storeurl import store_url_problem

    if isinstance(value, str) and value:
        problem = store_url_problem(value)
        if problem:
            raise StoreUrlError(problem)
    return True


class AddressError(ValueError):
    """What is wrong with a host:port's host, as a phrase (see urls.address_problem)."""


def _is_host_port(value: object) -> bool:
    """An address whose host is an IP address or a host name (the pattern checks the form and the port)."""
    from runner.config.urls import address_problem

    if isinstance(value, str) and value:
        problem = address_problem(value)
        if problem:
            raise AddressError(problem)
    return True


def _is_file_path(value: object) -> bool:
    """A path the system can take: JSON can spell a lone surrogate (\\ud800), which no file name holds.

    Opening such a path raises UnicodeEncodeError, a traceback instead of a line.
    """
    if isinstance(value, str):
        os.fsencode(value)
    return True


@functools.cache
def schema() -> dict[str, Any]:
    """The packaged JSON Schema, parsed once.

    Read beside this module, as the package is installed (as files: its C extensions cannot load
    from a zip); importlib.resources would load zipfile, tempfile and shutil for it on every run.
    """
    with open(os.path.join(os.path.dirname(__file__), "schema.json"), encoding="utf-8") as file:
        text = file.read()
    return json.loads(text)


def _is_finite_number(checker: Any, instance: object) -> bool:
    """A JSON number. Python's json also reads NaN and Infinity; NaN would pass every bound."""
    from jsonschema import Draft202012Validator

    number = Draft202012Validator.TYPE_CHECKER.is_type(instance, "number")
    return number and math.isfinite(instance)  # type: ignore[arg-type]


@functools.cache
def _end_anchored(pattern: str) -> re.Pattern[str]:
    """`pattern` with its final `$` meaning the end of the text, as in JSON Schema (ECMA-262).

    Python's `$` also matches before a final newline, which would let "GET\\n" or a header
    value ending in a line break through.
    """
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _pattern(validator: Any, pattern: str, instance: Any, _schema: Any) -> Iterator[ValidationError]:
    from jsonschema import ValidationError

    if validator.is_type(instance, "string") and not _end_anchored(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _formats() -> tuple[tuple[str, Callable[[object], bool], type[Exception]], ...]:
    """The formats the schema names, each with its check and the error that says what is wrong with a value."""
    from runner.config.rules import ThresholdError

    return (
        ("positive-duration", _is_positive_duration, DurationError),
        ("duration", _is_duration, DurationError),
        ("threshold", _is_threshold, ThresholdError),
        ("http-url", _is_http_url, UrlError),
        ("store-url", _is_store_url, StoreUrlError),
        ("host-port", _is_host_port, AddressError),
        ("file-path", _is_file_path, UnicodeError))


def _format_checker() -> FormatChecker:
    """jsonschema's checker for _formats()."""
    from jsonschema import FormatChecker

    checker = FormatChecker(formats=())
    for name, check, raises in _formats():
        checker.checks(name, raises=raises)(check)
    return checker


@functools.cache
def _validator() -> Draft202012Validator:
    """jsonschema's validator for the schema, with its formats and keywords: made once, when first needed."""
    from jsonschema import Draft202012Validator, validators

    extended = validators.extend(
        Draft202012Validator,
        {"pattern": _pattern, "x-durationRange": _duration_range},
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine("number", _is_finite_number),
    )
    return cast("Draft202012Validator", extended(schema(), format_checker=_format_checker()))


# What a setting's own schema may say for its values to be judged by _plain_value: its type, an
# enum of strings, inclusive bounds, a duration format with its range, and words for people. A
# setting with any other keyword (another format, a pattern, items) is left to jsonschema.
_PLAIN_KEYWORDS = frozenset({"type", "enum", "minimum", "maximum", "description", "default", "x-allowed",
                             "format", "x-durationRange"})
# The formats _plain_value judges, with their checks: the durations, which it judges as jsonschema
# does, by the format's check and then _outside.
_PLAIN_FORMATS = {"positive-duration": _is_positive_duration, "duration": _is_duration}
# What the schema's top may say for a layer to be judged key by key: any other keyword there is
# jsonschema's alone. Its `not` names the keys that are judged together (iterations and duration).
_PLAIN_ROOT = frozenset({"$schema", "$id", "title", "description", "type", "additionalProperties", "not",
                         "x-allowed", "properties"})


@functools.cache
def _plain_settings() -> dict[str, dict[str, Any]]:
    """The settings whose values _plain_value can judge alone, each with its schema; {} if none can."""
    root = schema()
    if not root.keys() <= _PLAIN_ROOT or root.get("type") != "object" or root.get("additionalProperties") is not False \
            or _joint_keys() is None:
        return {}
    return {name: spec for name, spec in root["properties"].items()
            if spec.keys() <= _PLAIN_KEYWORDS and _plain_kind(spec)}


@functools.cache
def _joint_keys() -> frozenset[str] | None:
    """The keys the schema's `not` judges together (iterations and duration): a layer that has them
    all is jsonschema's to judge. None if the `not` says more than which keys and their values."""
    joint = schema().get("not", {})
    if not joint.keys() <= {"required", "properties"} or not joint.get("required"):
        return None if joint else frozenset()
    return frozenset(joint["required"]) if set(joint.get("properties", {})) <= set(joint["required"]) else None


def _plain_kind(spec: dict[str, Any]) -> bool:
    """Whether a setting's values are told by a type _PLAIN_TYPES knows, or by an enum of strings alone,
    and by a format only if it is one _PLAIN_FORMATS knows, with its range (and only with it)."""
    if ("format" in spec or "x-durationRange" in spec) and not (
            spec.get("format") in _PLAIN_FORMATS and spec.get("type") == "string" and "x-durationRange" in spec):
        return False
    kind = spec.get("type")
    if kind is None:
        return isinstance(spec.get("enum"), list) and all(isinstance(v, str) for v in spec["enum"])
    return isinstance(kind, str) and kind in _PLAIN_TYPES


def _is_number(value: object) -> bool:
    """A JSON number as the schema's number type takes it: finite (an int of any size is)."""
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))


_PLAIN_TYPES: dict[str, Callable[[object], bool]] = {
    "string": lambda value: isinstance(value, str),
    "boolean": lambda value: isinstance(value, bool),
    "integer": lambda value: isinstance(value, int) and not isinstance(value, bool),  # 5.0 is jsonschema's to judge
    "number": _is_number,
}


def _plain_value(spec: dict[str, Any], value: object) -> bool:
    """Whether `value` is, by `spec`'s type, enum and bounds, one the schema accepts (False: let jsonschema say)."""
    if "type" in spec and not _PLAIN_TYPES[spec["type"]](value):
        return False
    if "enum" in spec and not (isinstance(value, str) and value in spec["enum"]):
        return False
    if "minimum" in spec and not (_is_number(value) and value >= spec["minimum"]):
        return False
    if "maximum" in spec and not (_is_number(value) and value <= spec["maximum"]):
        return False
    return "format" not in spec or _plain_duration(spec, value)


def _plain_duration(spec: dict[str, Any], value: object) -> bool:
    """Whether `value` passes the setting's format and x-durationRange, by the checks jsonschema
    runs for them: the format's and _outside (`value` is a string: the type was checked first)."""
    text = cast(str, value)
    try:
        return _PLAIN_FORMATS[spec["format"]](text) and not _outside(parse_duration(text), spec["x-durationRange"])
    except DurationError:  # misspelt, or longer than Go holds: jsonschema's message says which
        return False


def _plainly_valid(data: Any) -> bool:
    """Whether every key of `data` is a setting whose value _plain_value accepts: then jsonschema
    would find nothing either, and need not be loaded. False whenever in doubt."""
    if not isinstance(data, dict):
        return False
    plain = _plain_settings()
    joint = _joint_keys()
    return not (joint and joint <= data.keys()) and \
        all(isinstance(key, str) and key in plain and _plain_value(plain[key], value) for key, value in data.items())


def settings_names() -> list[str]:
    """Every setting's name, in schema order (`$schema` is an editor hint, not a setting)."""
    return [name for name in schema()["properties"] if name != "$schema"]


def defaults() -> dict[str, Any]:
    """Each setting's default, as the schema states it; settings without one are absent."""
    props = schema()["properties"]
    return {name: props[name]["default"] for name in settings_names() if "default" in props[name]}


def validate(data: Any, where: Callable[[ValidationError], str]) -> None:
    """Raise UsageError naming the most relevant problem in `data`, if there is one.

    `where` says where a value came from (a JSON path in a file, or a command-line flag),
    so one schema serves both the config file and the command line.
    """
    if _plainly_valid(data):
        return
    from jsonschema.exceptions import best_match

    error = best_match(_validator().iter_errors(data))
    if error is not None:
        error = _rooted(_branch_error(error))
        raise UsageError(f"{where(error)}: {_explain(error)}")


def json_path_in(source: str) -> Callable[[ValidationError], str]:
    """A `where` for a config file: `configuration.json: $.qps`."""
    return lambda error: f"{source}: {error.json_path}"


def _branch_error(error: ValidationError) -> ValidationError:
    """For `anyOf`, report the error of the branch the value was evidently meant for.

    `{"file": 3}` as a body was meant to be the file form; saying "must be a string or
    an object" would hide that only `file` is wrong.
    """
    if error.validator != "anyOf":
        return error
    meant = [e for e in error.context or [] if e.validator != "type" and len(e.relative_schema_path) > 1]
    if not meant:
        return error
    from jsonschema.exceptions import best_match

    return _branch_error(best_match(meant))


def _rooted(error: ValidationError) -> ValidationError:
    """`error` with its paths counted from the top of the data, as every `where` reads them.

    An `anyOf` branch's error has paths relative to the branch: a `where` reading `error.path`
    found none for a header value (`flags:`) or only the inner key (`--fromEnv`, `--file`).
    """
    if error.parent is None:
        return error
    from jsonschema import ValidationError

    rooted = ValidationError.create_from(error)
    rooted.parent = None
    rooted.path = rooted.relative_path = deque(error.absolute_path)
    rooted.schema_path = rooted.relative_schema_path = deque(error.absolute_schema_path)
    return rooted


def subschema(error: ValidationError) -> dict[str, Any]:
    """The part of the schema an error is about (jsonschema types it loosely: it may be unset)."""
    return error.schema if isinstance(error.schema, dict) else {}


def _explain(error: ValidationError) -> str:
    """What is wrong and what is allowed, for one jsonschema error."""
    # jsonschema types these as possibly unset; on an error from validation they are always set.
    validator, spec = str(error.validator), subschema(error)
    bound, value = cast(Any, error.validator_value), cast(Any, error.instance)
    if validator == "additionalProperties":
        return _unknown_key(value, spec.get("properties", {}))
    if validator == "required":
        missing = [key for key in bound if key not in value]
        return f'missing key "{missing[0]}"'
    allowed = spec.get("x-allowed")
    if validator == "not" and allowed:
        return allowed
    if validator == "format" and bound in ("http-url", "store-url") and error.cause is not None:
        return f"{_show(error)} {error.cause}"
    if validator == "format" and bound == "host-port" and error.cause is not None:
        return f"{_show(error)} is not allowed: {error.cause}"
    if validator in ("not", "anyOf", "pattern", "propertyNames", "format", "x-durationRange") and allowed:
        return f"{_show(error)} is not allowed; must be {allowed}"
    rule = _RULES.get(validator)
    if rule is not None:
        return f"{_show(error)} is not allowed; must be {rule(bound)}"
    if validator == "format" and bound == "threshold" and error.cause is not None:
        return f"{_show(error)} is not allowed; {error.cause}"
    if validator == "format":
        return f"{_show(error)} is not allowed; must be {DURATION_HINT}, greater than 0"
    return f"{_show(error)} is not allowed: {error.message}"


_TYPE_NAMES = {
    "number": "a number",
    "integer": "a whole number",
    "boolean": "true or false",
    "string": "a string",
    "object": "an object",
    "array": "a list",
}
_RULES: dict[str, Callable[[Any], str]] = {
    "type": lambda t: _TYPE_NAMES.get(t, str(t)) if isinstance(t, str) else " or ".join(map(str, t)),
    "minimum": lambda b: f"at least {b}",
    "maximum": lambda b: f"at most {b}",
    "exclusiveMinimum": lambda b: f"greater than {b}",
    "exclusiveMaximum": lambda b: f"less than {b}",
    "enum": lambda b: "one of " + ", ".join(json.dumps(v) for v in b),
    "minLength": lambda b: "non-empty" if b == 1 else f"at least {b} characters",
    "pattern": lambda b: f"text matching {b}",
    "maxLength": lambda b: f"at most {b} characters",
    "x-durationRange": lambda b: f"from {b[0]} to {b[1]}",
    "minItems": lambda b: f"a list of at least {b}",
    "maxItems": lambda b: f"a list of at most {b}",
}


def _unknown_key(obj: dict[str, Any], known: dict[str, Any]) -> str:
    """Name the first unknown key and the known key it most likely misspells."""
    unknown = [key for key in obj if key not in known]
    key = unknown[0]
    import difflib  # only a mistake needs it, not a run's start

    close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
    if not close:
        close = [k for k in known if k.lower() == key.lower()]
    hint = f' (did you mean "{close[0]}"?)' if close else ""
    return f'unknown key "{key}"{hint}'


_SHOWN_CHARS = 60  # a bad value quoted in a message


def _show(error: ValidationError) -> str:
    """The bad value as JSON, shortened, and hidden when it is a header's value (maybe a secret);
    a URL's secrets too (runner/core/redact.py)."""
    path = error.absolute_path
    if error.validator != "propertyNames" and len(path) == 2 and path[0] == "headers":
        return "the value"
    instance = error.instance
    if subschema(error).get("format") == "http-url" and isinstance(instance, str):
        instance = redact.url(instance)
    text = shortened(json.dumps(instance, ensure_ascii=False), _SHOWN_CHARS)
    return text.encode("utf-8", "backslashreplace").decode("utf-8")  # a lone surrogate as \\ud800, printable
