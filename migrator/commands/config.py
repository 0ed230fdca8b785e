"""Files that configure a command: a Kafka properties file (`--config`) and brokers' `server.properties`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from migrator.controller.managers.topic_defaults import TopicDefaults
from migrator.controller.network.listener_config import set_default_properties as set_listener_properties
from migrator.controller.zk_brokers.inter_broker import inter_broker_config
from migrator.errors import BadInputError, ZkKraftError
from migrator.kraft.retention import RetentionConfig, set_default_config
from migrator.migration.broker_config import BrokerConfigFile
from migrator.properties import read_properties
from migrator.target import option_defaults


def load_config(config_path: str) -> dict[str, Any]:
    """A controller.properties as option defaults (`Target.option_defaults`, plus `listeners`).

    Kafka's snapshot and retention settings apply to every log this process opens for writing, and
    the TLS/SASL/ACL settings to the listeners it serves: both are set here, for the process.
    """
    try:
        props = read_properties(config_path)
    except BadInputError as e:
        raise BadInputError(f"--config: {e}") from None
    try:
        inter_broker_config(props)  # checked at start, as Kafka checks it (used once the copy commits)
        set_default_config(RetentionConfig.from_properties(props))
    except BadInputError as e:
        raise BadInputError(f"--config: {e}") from None
    try:
        TopicDefaults.from_properties(props)  # read again by the controller; a bad one refuses the start
    except BadInputError as e:
        raise BadInputError(f"--config: {e}") from None
    set_listener_properties(props)  # TLS/SASL/ACL settings of listeners this process serves
    values = option_defaults(props)
    if props.get("listeners", "").strip():
        values["listeners"] = props["listeners"].strip()
    return values


def load_broker_configs(directory: str) -> list[BrokerConfigFile]:
    """Every `*.properties` file of a directory; a missing or empty directory is bad input (exit 2)."""
    base = Path(directory)
    if not base.is_dir():
        raise BadInputError(f"--broker-config {directory}: not a directory")
    files = sorted(p for p in base.iterdir() if p.name.endswith(".properties") and p.is_file())
    if not files:
        raise BadInputError(f"--broker-config {directory}: no *.properties files in it")
    out = []
    for p in files:
        try:
            with open(p, "rb"):
                pass
            props = read_properties(str(p))
        except OSError as e:
            raise BadInputError(f"--broker-config: cannot read {p}: {e.strerror}") from None
        except UnicodeDecodeError as e:
            raise BadInputError(f"--broker-config: {p} is not UTF-8 text (byte offset {e.start})") from None
        except ZkKraftError:
            raise BadInputError(f"--broker-config: cannot read {p}") from None
        out.append(BrokerConfigFile(str(p), props))
    return out
