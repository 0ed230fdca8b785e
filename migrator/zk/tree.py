"""A raw, read-only view of a ZooKeeper subtree: what the bulk reader returns and the layout decodes.

Keeping the raw bytes and stats apart from their meaning lets one reader serve the migration, `check`
and the audit, and lets the layout be tested without a server.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class ZNode:
    path: str
    data: bytes | None  # None for null data (Kafka's Java client creates parent znodes so)
    version: int = 0
    czxid: int = 0
    mzxid: int = 0
    ephemeral_owner: int = 0
    num_children: int = 0
    data_length: int = 0
    pzxid: int = 0  # zxid of the last change to the child list


@dataclass(slots=True)
class ZkTree(Mapping[str, ZNode]):
    """Nodes by absolute path (relative to the client's chroot), plus each parent's child names."""

    nodes: dict[str, ZNode] = field(default_factory=dict)
    children: dict[str, list[str]] = field(default_factory=dict)
    max_zxid: int = 0
    # bytes of each parent's getChildren reply as a Java client would receive it
    children_reply_bytes: dict[str, int] = field(default_factory=dict)
    # True when every node and child list was read at one zxid (`read_zxid`): a snapshot of the tree
    consistent: bool = False
    read_zxid: int = 0

    def __getitem__(self, path: str) -> ZNode:
        return self.nodes[path]

    def __iter__(self) -> Iterator[str]:
        return iter(self.nodes)

    def __len__(self) -> int:
        return len(self.nodes)

    def data(self, path: str) -> bytes | None:
        node = self.nodes.get(path)
        return None if node is None else node.data

    def child_names(self, path: str) -> list[str]:
        return self.children.get(path, [])

    def add(self, node: ZNode, children: list[str] | None = None) -> None:
        self.nodes[node.path] = node
        if children is not None:
            self.children[node.path] = children
        newest = max(node.mzxid, node.pzxid)
        if newest > self.max_zxid:
            self.max_zxid = newest


def join(parent: str, child: str) -> str:
    return ("" if parent == "/" else parent) + "/" + child
