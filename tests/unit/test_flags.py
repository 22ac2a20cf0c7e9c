"""How `--help` lists the settings: every one in exactly one group, and a bench's hidden ones real."""

from __future__ import annotations

from runner.config.abflags import AB_FLAGS, BENCH_HIDES
from runner.config.flags import COMMON_SETTINGS, SETTING_GROUPS
from runner.config.schema import settings_names


def test_every_setting_is_in_exactly_one_group_of_the_help() -> None:
    """A setting in no group would have no line in `--help` (add_setting_arguments offers only those grouped)."""
    grouped = [*COMMON_SETTINGS, *(name for _, names in SETTING_GROUPS for name in names)]
    assert sorted(grouped) == sorted(settings_names())
    assert len({title for title, _ in SETTING_GROUPS}) == len(SETTING_GROUPS)


def test_a_bench_hides_settings_only_and_keeps_its_headers() -> None:
    assert BENCH_HIDES <= set(settings_names())
    assert "headers" not in BENCH_HIDES and set(AB_FLAGS) - {"headers"} <= BENCH_HIDES  # -H is ab's flag too
