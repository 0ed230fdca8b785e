"""A raw, read-only view of a ZooKeeper subtree: what the bulk reader returns and the layout decodes.

Keeping the raw bytes and stats apart from their meaning lets one reader serve the migration, `check`
and the audit, and lets the layout be tested without a server.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields
from typing import Any


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


ZNODE_FIELDS = (
    "path",
    "data",
    "version",
    "czxid",
    "mzxid",
    "ephemeral_owner",
    "num_children",
    "data_length",
    "pzxid",
)


class _ZNodeTwin:
    """ZNode's slot layout without its frozen-dataclass machinery, filled by plain attribute stores."""

    __slots__ = ZNODE_FIELDS

    def __init__(
        self,
        path: str,
        data: bytes | None,
        version: int,
        czxid: int,
        mzxid: int,
        ephemeral_owner: int,
        num_children: int,
        data_length: int,
        pzxid: int,
    ) -> None:
        self.path = path
        self.data = data
        self.version = version
        self.czxid = czxid
        self.mzxid = mzxid
        self.ephemeral_owner = ephemeral_owner
        self.num_children = num_children
        self.data_length = data_length
        self.pzxid = pzxid


def _twin_if_it_works() -> type[_ZNodeTwin] | None:
    """The twin when re-labelling it gives a true ZNode (same slots, equal to the constructor's), else None."""
    if (
        tuple(f.name for f in fields(ZNode)) != ZNODE_FIELDS
        or getattr(ZNode, "__slots__", None) != ZNODE_FIELDS
    ):
        return None
    probe = ("/", b"", 1, 2, 3, 4, 5, 6, 7)
    try:
        node: Any = _ZNodeTwin(*probe)
        node.__class__ = ZNode
    except TypeError:
        return None
    return _ZNodeTwin if node == ZNode(*probe) and type(node) is ZNode else None


#: The one way around ZNode's frozen __init__ (~2 µs, most of a 400k-znode read) for the readers' hot
#: loops: `node = ZNODE_TWIN(<fields in order>); node.__class__ = ZNode` (CPython allows `__class__`
#: assignment between classes of identical slot layout; the object is then a ZNode in every respect),
#: or `ZNode(...)` when this is None. `make_znode` wraps it for callers outside a hot loop.
ZNODE_TWIN = _twin_if_it_works()


def make_znode(
    path: str,
    data: bytes | None,
    version: int,
    czxid: int,
    mzxid: int,
    ephemeral_owner: int,
    num_children: int,
    data_length: int,
    pzxid: int,
) -> ZNode:
    """A ZNode from its fields in order, the fast way when it works."""
    if ZNODE_TWIN is None:
        return ZNode(path, data, version, czxid, mzxid, ephemeral_owner, num_children, data_length, pzxid)
    node: Any = ZNODE_TWIN(
        path, data, version, czxid, mzxid, ephemeral_owner, num_children, data_length, pzxid
    )
    node.__class__ = ZNode
    return node  # type: ignore[no-any-return]


def join(parent: str, child: str) -> str:
    return ("" if parent == "/" else parent) + "/" + child
