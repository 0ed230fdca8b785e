"""The CLI reference (docs/cli.md), generated from the click commands so it cannot drift from them.

    .venv/bin/python -m cli.reference > docs/cli.md

`tests/test_docs_cli.py` fails when docs/cli.md differs from what this prints.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator

import click

HEADER = """# zk2kraft command-line reference

Generated from the click commands by `python -m cli.reference > docs/cli.md`; do not edit by hand
(`tests/test_docs_cli.py` fails when this file and the commands differ). Every command also answers
`--help`. Exit codes: 0 ok · 1 findings · 2 bad usage or input · 3 unreachable · 4 fenced or locked.
"""


def _commands(group: click.Group, prefix: str) -> Iterator[tuple[str, click.Command]]:
    ctx = click.Context(group, info_name=prefix)
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        if cmd is None or cmd.hidden:
            continue
        path = f"{prefix} {name}"
        yield path, cmd
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, path)


def _option_row(param: click.Parameter, ctx: click.Context) -> str | None:
    if not isinstance(param, click.Option) or param.hidden:
        return None
    names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
    if param.is_flag:
        kind = "flag"
    else:
        kind = param.make_metavar(ctx)  # what --help shows: the metavar, or a Choice's [a|b|c]
    if param.multiple:
        kind += " (repeatable)"
    kind = kind.replace("|", "\\|")
    default = ""
    if isinstance(param.show_default, str):  # e.g. the fixtures' defaults, resolved later in code
        default = f"`{param.show_default}`"
    elif param.show_default is not False:
        value = param.get_default(ctx, call=False)
        # click 8.3 marks "no default" with a sentinel object rather than None
        unset = value in (None, "", ()) or value is False or type(value).__name__ == "Sentinel"
        if not unset and not callable(value):
            default = f"`{value}`"
    env = param.envvar if isinstance(param.envvar, str) else ", ".join(param.envvar or [])
    helptext = " ".join((param.help or "").split()).replace("|", "\\|")
    if param.required:
        helptext = "**required.** " + helptext
    return f"| {names} | {kind} | {default} | {f'`{env}`' if env else ''} | {helptext} |"


def _usage(cmd: click.Command, path: str) -> str:
    ctx = click.Context(cmd, info_name=path)
    pieces = cmd.collect_usage_pieces(ctx)
    return f"{path} {' '.join(pieces)}".strip()


def render(root: click.Group, name: str = "zk2kraft") -> str:
    out = [HEADER]
    entries = [(name, root), *_commands(root, name)]
    out.append("## Commands\n")
    for path, _ in entries[1:]:
        anchor = path.replace(" ", "-")
        out.append(f"- [`{path}`](#{anchor})")
    out.append("")
    for path, cmd in entries:
        out.append(f"## {path}\n" if path != name else f"## {name} (global options)\n")
        out.append("```\n" + _usage(cmd, path) + "\n```\n")
        if cmd.help:
            out.append(_help_text(cmd.help) + "\n")
        ctx = click.Context(cmd, info_name=path)
        rows = [r for r in (_option_row(p, ctx) for p in cmd.params) if r]
        args = [p for p in cmd.params if isinstance(p, click.Argument)]
        if args:
            out.append("Arguments: " + ", ".join(f"`{a.human_readable_name}`" for a in args) + "\n")
        if rows:
            out.append("| option | value | default | environment | description |")
            out.append("| --- | --- | --- | --- | --- |")
            out.extend(rows)
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def _help_text(text: str) -> str:
    """Click's help with its \\b (no-rewrap) blocks shown as code blocks."""
    lines = text.strip("\n").splitlines()
    out: list[str] = []
    in_block = False
    for line in lines:
        stripped = line.strip()
        if stripped == "\b":
            if in_block:
                out.append("```")
            out.append("```")
            in_block = True
            continue
        if in_block and not stripped:
            out.append("```")
            in_block = False
            out.append("")
            continue
        out.append(line.strip() if not in_block else line.rstrip())
    if in_block:
        out.append("```")
    return "\n".join(out)


def main() -> None:
    from cli.main import _register
    from cli.main import main as root

    _register()
    sys.stdout.write(render(root))


if __name__ == "__main__":
    main()
