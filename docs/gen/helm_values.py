"""Writes reference/helm-values.md from charts/sparkwire/values.yaml: every key its helm-docs style
``# --`` comment documents, with its type and default, through the same code that keeps the values table of
charts/sparkwire/README.md current (tests/chart/values_doc.py, checked by tests/chart/test_docs.py).

Run by mkdocs-gen-files at build time (mkdocs.yml)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import mkdocs_gen_files

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("sparkwire_values_doc", ROOT / "tests" / "chart" / "values_doc.py")
assert _spec is not None and _spec.loader is not None
values_doc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(values_doc)


def _escape(text: str) -> str:
    """``<`` and ``>`` outside code spans as entities, so that ``<master>`` shows rather than vanish as HTML."""
    parts = text.split("`")
    return "`".join(part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;") for i, part in enumerate(parts))

PAGE = f"""# Helm values reference

Generated from `charts/sparkwire/values.yaml` when the site is built: each key documented there by a
`# --` comment right above it (helm-docs style), with its type and default. The chart's schema
(`charts/sparkwire/values.schema.json`) refuses values of the wrong type. How the chart is put together, and
guides for each part: `charts/sparkwire/README.md` and [Deploying on Kubernetes](../kubernetes.md).

{_escape(values_doc.table())}
"""

with mkdocs_gen_files.open("reference/helm-values.md", "w") as out:
    out.write(PAGE)
