"""One Java-properties parser: `--config`/`--broker-config` files and `meta.properties` read alike."""

from __future__ import annotations

from pathlib import Path

from migrator.kraft import dirfiles
from migrator.properties import parse_properties, read_properties

TEXT = (
    "# written by Properties.store\n! comment\nnode.id=3000\ncluster.id: MkU3OEVBNTcwNTJENDM2Qg\n"
    "rules=RULE\\\\.x\nlisteners=CONTROLLER://:9093,\\\n    SSL://:9094\nflag\n"
)
EXPECTED = {
    "node.id": "3000",
    "cluster.id": "MkU3OEVBNTcwNTJENDM2Qg",
    "rules": "RULE\\.x",
    "listeners": "CONTROLLER://:9093,SSL://:9094",
    "flag": "",
}


def test_config_files_and_meta_properties_share_one_parser(tmp_path: Path) -> None:
    assert dirfiles.parse_properties is parse_properties
    assert parse_properties(TEXT) == EXPECTED
    path = tmp_path / "server.properties"
    path.write_text(TEXT)
    assert read_properties(str(path)) == EXPECTED
    meta = tmp_path / "meta.properties"
    meta.write_text("version=1\nnode.id=3000\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\n")
    read = dirfiles.read_meta_properties(meta)
    assert (read.version, read.node_id, read.cluster_id) == (1, 3000, "MkU3OEVBNTcwNTJENDM2Qg")
