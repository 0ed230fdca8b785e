"""docs/architecture.md matches the code: every module is listed, and imports only point down."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ["migrator", "state_machine", "spark_audit", "zk_fixtures", "cli"]

#: lowest first; a module may import from its own layer and those below (docs/architecture.md)
LAYERS: list[list[str]] = [
    [
        "migrator.errors",
        "migrator.model",
        "migrator.properties",
        "migrator.secrets",
        "migrator.stop",
        "migrator.bulk",
        "migrator.lock_rule",
    ],
    ["migrator.kraft", "migrator.zk", "state_machine"],
    ["migrator.migration", "migrator.controller", "migrator.metrics", "migrator.results", "migrator.target"],
    ["spark_audit", "zk_fixtures"],
    ["migrator.commands"],
    ["cli"],
]


def layer_of(module: str) -> int | None:
    best: tuple[int, int] | None = None
    for i, prefixes in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and (best is None or len(p) > best[1]):
                best = (i, len(p))
    return None if best is None else best[0]


def modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for f in (ROOT / pkg).rglob("*.py"):
            name = ".".join(f.relative_to(ROOT).with_suffix("").parts)
            if name.endswith(".__init__"):
                continue
            out[name] = f
    return out


def imports_of(path: Path) -> list[str]:
    """Every absolute import of a module, at the top or inside a function."""
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
    return out


def test_every_module_is_in_a_layer_and_imports_point_down():
    upward = []
    for name, path in modules().items():
        own = layer_of(name)
        assert own is not None, f"{name} belongs to no layer: add it to docs/architecture.md and LAYERS"
        for target in imports_of(path):
            theirs = layer_of(target)
            if theirs is not None and theirs > own:
                upward.append(f"{name} imports {target}")
    assert not upward, "imports against the layering in docs/architecture.md:\n" + "\n".join(upward)


def test_architecture_doc_lists_every_module():
    doc = (ROOT / "docs" / "architecture.md").read_text()
    missing = [name for name in modules() if f"`{name}`" not in doc]
    assert not missing, f"docs/architecture.md does not list: {missing}"


#: All `cli` may import of the project besides itself: it renders, the API does the work (issue 12).
CLI_MAY_IMPORT = ("migrator.commands", "migrator.results", "migrator.errors", "migrator.stop", "zk_fixtures")


def test_cli_imports_only_the_api():
    reached = []
    for name, path in modules().items():
        if not name.startswith("cli."):
            continue
        for target in imports_of(path):
            top = target.split(".")[0]
            if top not in PACKAGES or top == "cli" or target == "migrator":
                continue  # third-party, cli itself, or `from migrator import commands, results, ...`
            if not any(target == p or target.startswith(p + ".") for p in CLI_MAY_IMPORT):
                reached.append(f"{name} imports {target}")
    assert not reached, "cli reaches past the API (migrator.commands):\n" + "\n".join(reached)


def test_cli_from_migrator_imports_name_only_the_api():
    """`from migrator import X` in cli names only the modules cli may use."""
    allowed = {p.split(".")[1] for p in CLI_MAY_IMPORT if p.startswith("migrator.")}
    reached = []
    for name, path in modules().items():
        if not name.startswith("cli."):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "migrator" and node.level == 0:
                reached += [f"{name} imports migrator.{a.name}" for a in node.names if a.name not in allowed]
    assert not reached, "\n".join(reached)


#: the migration modules that reach ZooKeeper only through `zk.migration_client` (issue 12); the others
#: under `migrator.migration` still import `zk` modules of their own (docs/architecture.md names them)
ZK_THROUGH_CLIENT = ("migrator.migration",)
ZK_ALLOWED = {"migrator.zk.migration_client", "migrator.zk.paths"}


def _imports(path: Path) -> list[str]:
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append(node.module)
            if node.module == "migrator.zk":  # `from migrator.zk import paths`: the module is the name
                out[-1:] = [f"migrator.zk.{a.name}" for a in node.names]
    return out


def test_the_migration_reaches_zookeeper_only_through_the_migration_client():
    checked = [
        (name, path)
        for name, path in modules().items()
        if any(name == p or name.startswith(p + ".") for p in ZK_THROUGH_CLIENT)
    ]
    assert len(checked) > 5, "the driver and its steps were not found"
    bad = [
        f"{name} imports {target}"
        for name, path in checked
        for target in _imports(path)
        if (target == "migrator.zk" or target.startswith("migrator.zk.")) and target not in ZK_ALLOWED
    ]
    assert not bad, "the migration reaches ZooKeeper only through zk.migration_client:\n" + "\n".join(bad)
