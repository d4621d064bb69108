"""The values table of charts/sparkwire/README.md, built from values.yaml's helm-docs style comments
(``# -- description`` right above a key documents it and everything under it).

    .venv/bin/python tests/chart/values_doc.py      # rewrite the table in the README

tests/chart/test_docs.py fails when the README's table is not what this produces."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "sparkwire"
VALUES = CHART / "values.yaml"
README = CHART / "README.md"
BEGIN, END = "<!-- values-table:begin -->", "<!-- values-table:end -->"

_KEY = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z0-9_.-]+|\"[^\"]+\"):(\s|$)")


def documented() -> dict[str, str]:
    """{dotted.key: description} for every key with a ``# --`` comment block right above it."""
    docs: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    pending: list[str] | None = None
    list_owner_indent: int | None = None
    for line in VALUES.read_text().splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if not stripped:
            pending = None
            continue
        if stripped.startswith("#"):
            text = stripped.lstrip("#").strip()
            if stripped.startswith("# --"):
                pending = [stripped[4:].strip()]
            elif pending is not None:
                pending.append(text)
            continue
        if list_owner_indent is not None:
            if indent > list_owner_indent:
                continue  # inside a list value
            list_owner_indent = None
        if stripped.startswith("- "):
            list_owner_indent = stack[-1][0] if stack else 0
            continue
        match = _KEY.match(line)
        if not match:
            pending = None
            continue
        while stack and stack[-1][0] >= indent:
            stack.pop()
        stack.append((indent, match["key"].strip('"')))
        if pending is not None:
            docs[".".join(key for _, key in stack)] = " ".join(pending)
        pending = None
    return docs


def leaf_paths(node: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the values a user sets: scalars, lists and empty maps."""
    if isinstance(node, dict) and node:
        return [p for key, value in node.items() for p in leaf_paths(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")]


def value_at(values: dict[str, Any], path: str) -> Any:
    node: Any = values
    for key in path.split("."):
        node = node[key]
    return node


def _type(value: Any) -> str:
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list", dict: "object"}.get(
        type(value), "string")


def table() -> str:
    values = yaml.safe_load(VALUES.read_text())
    rows = ["| Key | Type | Default | Description |", "|-----|------|---------|-------------|"]
    for key, description in documented().items():
        default = json.dumps(value_at(values, key), separators=(",", ":"))
        rows.append(f"| `{key}` | {_type(value_at(values, key))} | `{default}` | {description.replace('|', '/')} |")
    return "\n".join(rows)


def readme_with_table(readme: str) -> str:
    head, rest = readme.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table()}\n{END}{tail}"


if __name__ == "__main__":
    README.write_text(readme_with_table(README.read_text()))
    sys.exit(0)
