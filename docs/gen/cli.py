"""Writes reference/cli.md from the ``sparkwire`` command's own argparse parser (``sparkwire.cli.build_parser``):
every subcommand, its description, and every option with its environment variable and default.

Run by mkdocs-gen-files at build time (mkdocs.yml), so the page cannot drift from ``sparkwire --help``."""

from __future__ import annotations

import argparse
import os
import re

import mkdocs_gen_files

# add_option reads each option's environment variable when the parser is built: build it without them, so
# the page shows the code's defaults rather than this shell's settings.
for name in [n for n in os.environ if n.startswith("SPARKWIRE_")]:
    del os.environ[name]

from sparkwire.cli import build_parser  # noqa: E402
from sparkwire.options import option_specs  # noqa: E402

# add_option appends "[env X; default Y]" (or "[--flag / --no-flag; env X=true|false; default Y]") to the help:
# the table has its own columns for both.
_SUFFIX = re.compile(r"\s*\[(--[a-z0-9-]+ / --no-[a-z0-9-]+; )?env SPARKWIRE_[A-Z0-9_]+(=true\|false)?; default .*\]$",
                     re.DOTALL)


def _rst_to_md(text: str) -> str:
    """The module docstrings use reStructuredText's double backticks; Markdown takes single ones."""
    return text.replace("``", "`")


def _cell(text: str) -> str:
    return _escape(" ".join(text.split()).replace("|", "\\|"))

def _escape(text: str) -> str:
    """``<`` and ``>`` outside code spans as entities, so that ``<master>`` shows rather than vanish as HTML."""
    parts = text.split("`")
    return "`".join(part if i % 2 else part.replace("<", "&lt;").replace(">", "&gt;") for i, part in enumerate(parts))



def _subcommands(parser: argparse.ArgumentParser) -> tuple[dict[str, argparse.ArgumentParser], dict[str, str]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return dict(action.choices), helps
    return {}, {}


def page() -> str:
    parser = build_parser()
    commands, helps = _subcommands(parser)
    lines = [
        "# CLI reference",
        "",
        "Generated from the `sparkwire` command's parser (`sparkwire.cli.build_parser`) when the site is built.",
        "Every option also reads the environment variable shown (what the Helm chart sets); a flag given on",
        "the command line wins. `sparkwire COMMAND --help` prints the same.",
        "",
        "```text",
        parser.format_usage().strip(),
        "```",
        "",
        "| command | what it does |",
        "|---|---|",
    ]
    lines += [f"| [`{name}`](#{name}) | {_cell(helps.get(name, ''))} |" for name in commands]
    for name, sub in commands.items():
        specs = {spec.flag: spec for spec in option_specs(sub)}
        lines += ["", f"## `sparkwire {name}` {{#{name}}}", "", _rst_to_md(helps.get(name, "")) + ".", ""]
        if sub.description:
            lines += [_escape(_rst_to_md(sub.description.strip())), ""]
        options = [a for a in sub._actions
                   if a.option_strings and a.dest != "help" and a.help != argparse.SUPPRESS]  # hidden: deprecated
        if not options:
            lines += ["This command takes no options here (it needs a source checkout).", ""]
            continue
        lines += ["| option | environment variable | default | description |", "|---|---|---|---|"]
        for action in options:
            flags = ", ".join(f"`{flag}`" for flag in action.option_strings)
            spec = specs.get(action.option_strings[0])
            env = f"`{spec.env}`" if spec else ""
            default = spec.default if spec else action.default
            shown = "" if default is None or default is argparse.SUPPRESS else f"`{default!r}`"
            description = _SUFFIX.sub("", action.help or "") if action.help else ""
            lines.append(f"| {flags} | {env} | {shown} | {_cell(_rst_to_md(description))} |")
    return "\n".join(lines) + "\n"


with mkdocs_gen_files.open("reference/cli.md", "w") as out:
    out.write(page())
