"""Every setting is documented in docs/operations.md's settings table, under its environment name."""

from __future__ import annotations

from pathlib import Path

from app.settings import Settings

OPERATIONS = (Path(__file__).resolve().parent.parent / "docs" / "operations.md").read_text()


def test_every_setting_is_in_the_operations_table() -> None:
    rows = [line for line in OPERATIONS.splitlines() if line.startswith("| `")]
    for name, field in Settings.model_fields.items():
        env = f"HPCSCHED_{name.upper()}"
        row = next((r for r in rows if f"`{env}`" in r), None)
        assert row is not None, f"{env} is missing from the settings table of docs/operations.md"
        if field.default is not None and not isinstance(field.default, bool):
            assert str(field.default) in row.replace(",", ""), f"{env}: default {field.default} not shown"
