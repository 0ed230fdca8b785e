"""Every top-level command, collected in one place so `main` stays free of feature imports."""

from __future__ import annotations

import importlib

import click

# (module, attribute) of each command group or command; modules are imported lazily by `run`.
_COMMANDS = [
    ("cli.zk_cmds", "zk"),
    ("cli.fixtures_cmds", "fixtures"),
    ("cli.check_cmd", "check"),
    ("cli.log_cmds", "log"),
    ("cli.demo_cmd", "demo"),
    ("cli.lifecycle_cmds", "plan"),
    ("cli.migrate_cmd", "migrate"),
    ("cli.status_cmd", "status"),
    ("cli.admin_cmds", "admin"),
    ("cli.lifecycle_cmds", "finalize"),
    ("cli.lifecycle_cmds", "rollback"),
    ("cli.controller_cmds", "controller"),
    ("cli.audit_cmd", "audit"),
]


def all_commands() -> list[click.Command]:
    out = []
    for module, attr in _COMMANDS:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as e:
            if e.name == module:
                continue
            raise
        out.append(getattr(mod, attr))
    return out
