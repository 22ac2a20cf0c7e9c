"""The URL list: where it comes from, and what a URL must be to be sent to.

URLs arrive as a mounted plain file (what the pod sees), as the ConfigMap YAML itself (for
runs from the repository), as slow_cooker's `@file`, or as arguments. Every URL is checked
up front and a bad one is reported with the file and line it came from (runner.load.request
then makes each URL's request).
"""

from __future__ import annotations

import functools
import ipaddress
import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit

from runner.config.files import URL_LIST_LIMIT, read_bounded
from runner.config.targets import MAX_TURN, MAX_WEIGHT, Targets, turn_of
from runner.core import redact
from runner.core.errors import UsageError, shortened
from runner.core.numbers import whole_number

if TYPE_CHECKING:  # PyYAML loads only when a file may be a ConfigMap (_as_configmap)
    import yaml

# The ConfigMap data key holding the URL list; it is also the file name where it is mounted.
URLS_KEY = "urls.txt"

# What a URL may not hold; regular expressions, as a list may have hundreds of thousands of URLs.
_SPACE = re.compile(r"\s")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

# A bad URL quoted in a message: enough to find it on its line, not a whole 16 MiB line.
_SHOWN_URL_CHARS = 200

def load_url_file(path: str) -> list[str]:
    """The URLs in a plain list file or in a Kubernetes ConfigMap manifest."""
    return list(load_targets(path))


def load_targets(path: str) -> Targets:
    """The URLs, with their weights, in a plain list file or in a Kubernetes ConfigMap manifest."""
    text = _read_text(path)
    configmap = _as_configmap(text, path)
    if configmap is None:
        return parse_targets(text, path)
    value, first_line = configmap
    return parse_targets(value, path, first_line)


def urls_from_arguments(arguments: list[str]) -> list[str]:
    """URLs given on the command line; `@path` reads a list file, as slow_cooker does."""
    return list(targets_from_arguments(arguments))


def targets_from_arguments(arguments: list[str]) -> Targets:
    """URLs given on the command line, each optionally after its weight (`3 http://a/ http://b/`);
    `@path` reads a list file, as slow_cooker does, with the weights it gives."""
    urls: list[str] = []
    weights: list[int] = []
    weight: int | None = None
    for argument in arguments:
        if argument.startswith("@"):
            if weight is not None:
                raise UsageError(f"URL argument: weight {weight} is followed by a list file ({argument}), "
                                 "not a URL; give weights in the file")
            listed = load_targets(argument[1:])
            urls.extend(listed.urls)
            weights.extend(listed.weights or [1] * len(listed))
        elif weight is None and _weight_like(argument) and not _SPACE.search(argument):
            weight = check_weight(argument, "URL argument")
        else:
            entry_weight, url = parse_entry(argument, "URL argument")
            urls.append(url)
            weights.append(weight if weight is not None else entry_weight)
            weight = None
    if weight is not None:
        raise UsageError(f"URL argument: weight {weight} is not followed by a URL")
    return weighted_targets(urls, weights, "URL arguments")


def parse_url_lines(text: str, source: str, first_line: int | None = 1) -> list[str]:
    """One URL per line; blank lines and `#` comments ignored (see parse_targets)."""
    return list(parse_targets(text, source, first_line))


def parse_targets(text: str, source: str, first_line: int | None = 1) -> Targets:
    """One URL per line, optionally after its weight (`3 http://a/`); blank lines and `#` comments ignored.

    `first_line` is the file line number of the text's first line, so errors point into the
    file the user edits; None when lines cannot be mapped (a quoted YAML string).
    """
    urls, weights = [], []
    for offset, line in enumerate(text.splitlines()):
        entry = line.strip()
        if entry and not entry.startswith("#"):
            where = f"{source}:{first_line + offset}" if first_line is not None else source
            weight, url = parse_entry(entry, where)
            urls.append(url)
            weights.append(weight)
    if not urls:
        raise UsageError(f"{source}: no URLs (one per line; blank lines and # comments are ignored)")
    return weighted_targets(urls, weights, source)


# A weight where a URL could start: a URL starts with its scheme's letter, a weight with a digit
# (or what a number written wrongly starts with: a sign, a point).
_WEIGHT = re.compile(r"[+\-]?\.?[0-9]", re.ASCII)  # what reads as a number (1, -3, 1.5, .5): a weight, or a bad one
# ... unless it reads as a host: a colon, a slash or a second dot (127.0.0.1:8080/, 10.0.0.1).
_HOST = re.compile(r"[:/]|\..*\.")


def _weight_like(word: str) -> bool:
    """Whether `word` is meant as a weight (a good or a bad one), not as a URL.

    An IP address without its scheme (`127.0.0.1:8080/`) starts with a digit as a weight does:
    it was refused as `weight '127.0.0.1:8080/' is not allowed`, where `localhost:8080` got the
    line that says what is wrong, `is not an http:// or https:// URL`. Now both get that line.
    """
    return bool(_WEIGHT.match(word)) and not _HOST.search(word)


def parse_entry(entry: str, where: str) -> tuple[int, str]:
    """The weight (1 when none is given) and the URL of one line of a URL list, checked."""
    word, rest = (entry.split(None, 1) + [""])[:2]
    if rest and _weight_like(word):
        return check_weight(word, where), check_url(rest.strip(), where)
    return 1, check_url(entry, where)


def check_weight(word: str, where: str) -> int:
    """A URL's weight as written, checked against its bounds (runner.config.targets)."""
    weight = whole_number(word)
    if weight is None or word[0] in "+-" or not 1 <= weight <= MAX_WEIGHT:
        raise UsageError(f"{where}: weight {shortened(repr(word), 40)} is not allowed; a weight is a whole "
                         f"number from 1 to {MAX_WEIGHT}")
    return weight


def weighted_targets(urls: list[str], weights: list[int], source: str) -> Targets:
    """The URLs and their weights as one value; a weighted list whose wheel would be too long refused."""
    if len(set(weights)) <= 1:
        return Targets(tuple(urls))
    turn = turn_of(weights)
    if turn > MAX_TURN:
        raise UsageError(f"{source}: the weights make a turn of {turn} sends (their sum over their greatest "
                         f"common divisor); at most {MAX_TURN}: give smaller weights or fewer URLs")
    return Targets(tuple(urls), tuple(weights))


def check_url(url: str, where: str) -> str:
    """Return `url` if it is an http(s) URL with a host, else raise naming `where`."""
    problem = url_problem(url)
    if problem:
        raise UsageError(f"{where}: {shortened(repr(redact.url(url)), _SHOWN_URL_CHARS)} {problem}")
    return url


def url_problem(url: str) -> str:
    """What is wrong with `url` as an http(s) URL to send to, as a phrase to follow it; "" if nothing.

    Also the schema's check of the pushgateway URL, so both say the same about the same URL.
    """
    space = _SPACE.search(url)
    if space is not None:
        return _space_problem(space.group())
    if not url.isascii():
        return _not_ascii(url)
    control = _CONTROL.search(url)
    if control is not None:
        return f"contains a control character ({control.group()!r})"
    try:
        parts = urlsplit(url)
        port = parts.port  # raises ValueError on a bad port
    except ValueError as e:
        return f"is not a valid URL ({e})"
    if parts.scheme not in ("http", "https"):
        return "is not an http:// or https:// URL"
    host = parts.hostname
    if not host:
        return "has no host"
    if port == 0:
        return "is not allowed: the port must be from 1 to 65535"
    return _host_name_problem(host)


_SPACES = {" ": "a space", "\t": "a tab", "\r": "a line break (CR, \\r)", "\n": "a line break (LF, \\n)"}


def _space_problem(char: str) -> str:
    """What the white space found in a URL is: a CR/LF (a pasted line end) was called "a space"."""
    if char in _SPACES:
        return f"contains {_SPACES[char]}"
    if char.isascii():  # \x0b, \x0c, \x1c-\x1f: white space to Python, control characters to everyone else
        return f"contains a control character ({char!r})"
    return f"contains a space that is not ASCII (U+{ord(char):04X})"


def address_problem(address: str) -> str:
    """What is wrong with the host of a `host:port` the runner listens on or talks to (metricAddr,
    linkerdAdmin), as a phrase; "" if nothing. The form and the port are the schema's pattern's.

    A host that is no address and no name (`999.1.1.1`) passed validate, and the run then
    refused it when it tried to listen (`Name or service not known`).
    """
    host = address.rpartition(":")[0]
    if host.startswith("["):
        try:
            ipaddress.IPv6Address(host.strip("[]"))
        except ValueError:
            return f"{host.strip('[]')} is not an IPv6 address"
        return ""
    if host and all(label.isdigit() for label in host.split(".")):  # digits and dots: meant as IPv4
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            return f"{host} is not an IPv4 address (four numbers from 0 to 255, without leading zeros)"
        return ""
    problem = _host_name_problem(host) if host else ""
    return f"{host} {problem}" if problem else ""


# DNS's bounds on a name (RFC 1035): a label of at most 63 characters, a name of at most 253.
MAX_LABEL = 63
MAX_HOST_NAME = 253


def _host_name_problem(host: str) -> str:
    """What DNS, and so the IDNA codec that both clients pass a host name through, refuse in `host`.

    Such a name passed every check and then crashed the fast transport's first send (since retired) with
    `UnicodeError: encoding with 'idna' codec failed`; refused here, it is one line up front.
    """
    if ":" in host:  # an IPv6 address ([::1]), not a name
        return ""
    name = host.removesuffix(".")  # a final dot only says the name is absolute
    if len(name) > MAX_HOST_NAME:
        return f"has a host name of {len(name)} characters; DNS allows at most {MAX_HOST_NAME}"
    labels = name.split(".")
    if "" in labels:
        return "has an empty label in its host name (a dot first, or two in a row)"
    longest = max(labels, key=len)
    if len(longest) > MAX_LABEL:
        return (f"has a host name label of {len(longest)} characters ({shortened(longest, 20)}); "
                f"DNS allows at most {MAX_LABEL}")
    return ""


def _not_ascii(url: str) -> str:
    """Why a URL with a character beyond ASCII is refused, and how to write it in ASCII.

    The native engine sends a URL as written and could not send this one (every send would fail);
    httpx would encode it quietly, so one URL would be two requests. Refused, with the ASCII
    form to write instead.
    """
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:
        host = ""
    if not host.isascii():
        return f"is not ASCII: write the host name in its punycode form ({_punycode(host)})"
    char = next(ch for ch in url if not ch.isascii())
    try:
        encoded = f" ({char!r} is {quote(char.encode('utf-8', 'surrogateescape'), safe='')})"
    except UnicodeEncodeError:  # a lone surrogate: not a character, no encoding
        encoded = ""
    return f"is not ASCII: percent-encode the path and query{encoded}"


def _punycode(host: str) -> str:
    """The ASCII (IDNA) form of an international host name, or a pattern of it when there is none."""
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        return "xn--..."












def _read_text(path: str) -> str:
    data = read_bounded(path, URL_LIST_LIMIT, "a URL list")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}: cannot read: {e}") from None


def _as_configmap(text: str, path: str) -> tuple[str, int | None] | None:
    """The URL list and its first line number if `text` is a ConfigMap manifest, else None."""
    if not _NOT_A_PLAIN_LINE.search(text):
        return None  # YAML would read it as one string: no need to (24 s for a 16 MiB list)
    import yaml  # here: a run given its URLs as arguments or plain lines never loads PyYAML

    try:
        documents = list(yaml.compose_all(text, Loader=_bounded_loader()))
    except yaml.YAMLError as e:
        if _YAML_KEY.search(text):  # meant as a manifest (`apiVersion: v1`): its lines are no URLs to check
            raise UsageError(_invalid_yaml(path, e)) from None
        return None  # not YAML at all: a plain list
    except _TooDeep as e:
        raise UsageError(f"{path}:{e.line}: YAML nested more than {MAX_YAML_DEPTH} levels deep "
                         "(a URL ConfigMap needs 3)") from None
    mappings = [doc for doc in documents if isinstance(doc, yaml.MappingNode)]
    if not mappings:
        return None  # a plain list parses as one YAML string (or as several, split by ---)
    if len(documents) > 1:
        raise UsageError(f"{path}: {len(documents)} YAML documents; give the URL ConfigMap on its own")
    root = mappings[0]
    fields = {key.value: value for key, value in root.value if isinstance(key, yaml.ScalarNode)}
    kind = fields.get("kind")
    if kind is None or getattr(kind, "value", None) != "ConfigMap":
        raise UsageError(f"{path}: a YAML mapping but not a ConfigMap (expected kind: ConfigMap)")
    data = fields.get("data")
    if not isinstance(data, yaml.MappingNode) or not data.value:
        raise UsageError(f"{path}: the ConfigMap has no data")
    entries = {}
    for key, value in data.value:
        if not isinstance(key, yaml.ScalarNode):  # `? [a, b] : url`: a key YAML allows and no ConfigMap has
            raise UsageError(f"{path}:{key.start_mark.line + 1}: a ConfigMap's data keys are names, "
                             f"like {URLS_KEY}")
        entries[key.value] = value
    node = _pick_entry(entries, path)
    if not isinstance(node, yaml.ScalarNode):
        raise UsageError(f"{path}: data.{URLS_KEY} must be text, one URL per line")
    # A literal block (`|`) keeps lines as written; its text starts on the line after the `|`.
    first_line = node.start_mark.line + 2 if node.style == "|" else None
    return node.value, first_line


# A line that can be in YAML other than a plain (multi-line) string: one that is not blank, not
# a comment, and not a URL without spaces that does not end in ":" (`http://a/:` is a YAML key).
_NOT_A_PLAIN_LINE = re.compile(r"^(?![ \t]*(?:#[^\n]*|https?://\S*[^\s:])?[ \t\r]*$)", re.M)

# A line that starts a YAML mapping at the left margin, as a manifest's `apiVersion: v1` or `data:`
# do; a URL's `http:` is followed by `//`, never by a space or the line's end.
_YAML_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*[ \t]*:(?:[ \t]|$)", re.M)


def _invalid_yaml(path: str, error: yaml.YAMLError) -> str:
    """`urls.yaml:5: invalid YAML: ...`, at the line (and column) where PyYAML found the problem."""
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    where = f"{path}:{mark.line + 1}" if mark is not None else path
    column = f" (column {mark.column + 1})" if mark is not None else ""
    return (f"{where}: invalid YAML: {redact.printable(problem)}{column}; a URL list is a ConfigMap manifest "
            "or plain lines, one URL each")


# How deep a URL file's YAML may nest: a ConfigMap needs 3 (data, its key, the text). PyYAML
# composes recursively, so `[[[...` 100,000 deep was a RecursionError traceback.
MAX_YAML_DEPTH = 32


class _TooDeep(Exception):
    def __init__(self, line: int) -> None:
        super().__init__(line)
        self.line = line


@functools.cache
def _bounded_loader() -> Any:
    """The loader class, made once, the first time a file may be YAML."""
    import yaml

    class _BoundedLoader(yaml.SafeLoader):
        """PyYAML's safe loader, refusing nodes nested beyond MAX_YAML_DEPTH before it recurses into them."""

        _depth = 0

        def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
            self._depth += 1
            try:
                if self._depth > MAX_YAML_DEPTH:
                    raise _TooDeep(self.peek_event().start_mark.line + 1)
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1

    return _BoundedLoader


def _pick_entry(entries: dict[str, yaml.Node], path: str) -> yaml.Node:
    """The URL list: the key the pod reads, however many others there are.

    The CronJob mounts the ConfigMap's keys as files and reads the one named URLS_KEY; a
    ConfigMap whose only key had another name passed validate, and every run then failed
    without the file.
    """
    if URLS_KEY in entries:
        return entries[URLS_KEY]
    keys = "key" if len(entries) == 1 else "keys"
    raise UsageError(f"{path}: the ConfigMap has no key {URLS_KEY}, which is the file the soak pod reads (it has the "
                     f"{keys} {', '.join(sorted(entries))}); put the URLs under {URLS_KEY}")
