"""The one family of user-facing errors; the CLI prints the message and exits with the code.

Exit codes (DESIGN.md): 0 ok, 1 findings, 2 bad usage or input, 3 cannot reach ZooKeeper or the log,
4 fenced or conflicting writer.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_BAD_INPUT = 2
EXIT_UNREACHABLE = 3
EXIT_FENCED = 4


class ZkKraftError(Exception):
    """Base of every error an operator can cause or fix; never shown with a traceback."""

    exit_code = EXIT_BAD_INPUT


class BadInputError(ZkKraftError):
    """Malformed znode JSON, a corrupt file, a wrong flag: names what and where."""

    exit_code = EXIT_BAD_INPUT


class UnreachableError(ZkKraftError):
    """ZooKeeper or the log directory cannot be reached or opened."""

    exit_code = EXIT_UNREACHABLE


class PermissionDeniedError(UnreachableError):
    """ZooKeeper refused access (auth failed or no ACL permission) on a named path."""


class FencedError(ZkKraftError):
    """A newer controller holds ZooKeeper, or another writer holds the log."""

    exit_code = EXIT_FENCED


class FindingsError(ZkKraftError):
    """The command ran but found blockers or mismatches."""

    exit_code = EXIT_FINDINGS
