"""README stays true: its settings table is the schema's, its quick start is what CI runs.

Run `python tests/test_readme.py` to rewrite the settings table from runner/schema.json.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from runner.config.schema import schema, settings_names  # noqa: E402
from runner.load.result import ERROR_KINDS  # noqa: E402

README = REPO / "README.md"
TABLE = re.compile(r"(<!-- settings-table:[^\n]*-->\n)(.*?)(<!-- end settings-table -->)", re.S)


def type_text(spec: dict[str, Any]) -> str:
    """A setting's type and range in words, from its schema."""
    if "enum" in spec:
        return "one of " + ", ".join(f"`{v}`" for v in spec["enum"])
    if "anyOf" in spec:
        return " or ".join(branch["type"] for branch in spec["anyOf"])
    if spec.get("format") == "positive-duration":
        low, high = spec["x-durationRange"]
        return f"duration, {low} to {high}"
    bounds = [
        f"{sign} {spec[key]}"
        for key, sign in (("exclusiveMinimum", ">"), ("minimum", ">="), ("exclusiveMaximum", "<"), ("maximum", "<="))
        if key in spec
    ]
    if "maxLength" in spec:
        bounds.append(f"at most {spec['maxLength']} characters")
    return ", ".join([spec["type"], *bounds])


def default_text(spec: dict[str, Any]) -> str:
    if "default" not in spec:
        return "none"
    value = spec["default"]
    return f"`{json.dumps(value) if value in ('', {}) or isinstance(value, bool) else value}`"


def settings_table() -> str:
    props = schema()["properties"]
    rows = ["| setting | type | default | meaning |", "|---|---|---|---|"]
    for name in settings_names():
        spec = props[name]
        rows.append(f"| `{name}` | {type_text(spec)} | {default_text(spec)} | {spec['description']} |")
    return "\n".join(rows) + "\n"


def quickstart() -> list[str]:
    block = README.read_text().split("<!-- quickstart", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    return block.strip().splitlines()


def test_settings_table_is_the_schemas() -> None:
    found = TABLE.search(README.read_text())
    assert found, "README has no settings table markers"
    assert found.group(2) == settings_table(), "README's settings table is stale: run python tests/test_readme.py"


def test_quick_start_is_two_commands_a_soak_and_the_tests() -> None:
    soak, tests = quickstart()
    assert soak == "pip install . && soak demo"
    assert tests.endswith("python -m pytest")


def test_ci_runs_the_quick_starts_test_command() -> None:
    ci = (REPO / ".ci" / "run").read_text()
    assert "quickstart" in ci and "pytest" in ci


def test_error_kinds_are_documented() -> None:
    text = README.read_text()
    documented = re.search(r"failures by kind: (.*?) \|", text)
    assert documented
    assert re.findall(r"`(\w+)`", documented.group(1)) == list(ERROR_KINDS)


if __name__ == "__main__":
    text = README.read_text()
    README.write_text(TABLE.sub(lambda m: m.group(1) + settings_table() + m.group(3), text))
    print("README settings table rewritten")
