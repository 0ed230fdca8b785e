"""A flood of Raft fetchers in their own process, against the controller's listener.

Hundreds of observers long-poll at the log's end (each append wakes all of them), a few connections send
invalid fetches as fast as the controller answers (another topic, a negative offset, epochs from the
future and the past, the leader's own replica id, bytes that are no request), and one address opens more
connections than `max.connections.per.ip` allows. Tests run it beside real brokers to show that none of
this holds up the controller's other work. Sources are distinct loopback addresses (127.0.0.2-4), so the
per-IP limit applies to the flood and not to the brokers on 127.0.0.1.

Prints ``ready`` once every long poller is parked; on a stdin line ``until <offset>`` (or EOF) it waits
for every poller to have fetched up to that offset, stops, and prints one JSON line: the error codes each
kind of invalid fetch got, the long pollers' last offsets, and the connections the server refused.

Usage: python -m zk_fixtures.raft_flood --leader HOST:PORT [--pollers N] [--invalid M] [--extra K]
"""

from __future__ import annotations

import argparse
import datetime
import json
import selectors
import socket
import struct
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from typing import Any

from zk_fixtures.kraft_broker import _FETCH_REQ, _FETCH_RESP, METADATA_TOPIC_ID, _Conn

__all__ = ["main"]

POLLERS_FROM, INVALID_FROM, EXTRA_FROM = "127.0.0.2", "127.0.0.3", "127.0.0.4"
KINDS = ("other_topic", "negative_offset", "future_epoch", "past_epoch", "leader_id", "garbage")


def _connect(leader: tuple[str, int], source: str) -> _Conn:
    conn = _Conn.__new__(_Conn)
    conn.sock = socket.create_connection(leader, timeout=30, source_address=(source, 0))
    conn.client_id = "raft-flood"
    conn.cid = 0
    return conn


def fetch(
    replica: int,
    offset: int,
    last_epoch: int,
    leader_epoch: int,
    max_wait_ms: int = 0,
    max_bytes: int = 1 << 20,
    topic_id: uuid.UUID = METADATA_TOPIC_ID,
) -> Any:
    part = _FETCH_REQ.FetchPartition(
        partition=0,
        current_leader_epoch=leader_epoch,
        fetch_offset=offset,
        last_fetched_epoch=last_epoch,
        log_start_offset=-1,
        partition_max_bytes=max_bytes,
        replica_directory_id=uuid.UUID(int=replica + 7),
    )
    return _FETCH_REQ.FetchRequest(
        replica_state=_FETCH_REQ.ReplicaState(replica_id=replica, replica_epoch=-1),
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=1,
        max_bytes=max_bytes,
        topics=(_FETCH_REQ.FetchTopic(topic_id=topic_id, partitions=(part,)),),
        forgotten_topics_data=(),
    )


def _codes(resp: Any) -> tuple[int, int]:
    """(top-level error code, partition error code or 0)."""
    parts = resp.responses[0].partitions if resp.responses else ()
    return int(resp.error_code), int(parts[0].error_code) if parts else 0


class Flood:
    def __init__(self, leader: tuple[str, int], pollers: int, invalid: int, extra: int) -> None:
        self.leader = leader
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.codes: dict[str, Counter[str]] = {k: Counter() for k in KINDS}
        self.poller_offsets: dict[int, int] = {}
        self.poller_errors: list[str] = []
        self.parked = threading.Semaphore(0)
        self.extra_refused = 0
        self.extra = extra
        self.threads = [
            threading.Thread(target=self._poll, args=(2000 + i,), daemon=True) for i in range(pollers)
        ]
        self.threads += [
            threading.Thread(target=self._invalid, args=(i,), daemon=True) for i in range(invalid)
        ]
        self.n_pollers = pollers
        self.idle: list[socket.socket] = []

    def _position(self, conn: _Conn, replica: int) -> tuple[int, int]:
        """(high watermark, leader epoch): where a poller parks."""
        resp = conn.call(fetch(replica, 0, 0, 0, max_bytes=1), _FETCH_RESP.FetchResponse)
        part = resp.responses[0].partitions[0]
        epoch = int(part.current_leader.leader_epoch)
        resp = conn.call(fetch(replica, 0, 0, epoch, max_bytes=1), _FETCH_RESP.FetchResponse)
        return int(resp.responses[0].partitions[0].high_watermark), epoch

    def _poll(self, replica: int) -> None:
        try:
            conn = _connect(self.leader, POLLERS_FROM)
            hw, epoch = self._position(conn, replica)
            self.parked.release()
            while not self.stop.is_set():
                resp = conn.call(fetch(replica, hw, epoch, epoch, max_wait_ms=500), _FETCH_RESP.FetchResponse)
                top, err = _codes(resp)
                part = resp.responses[0].partitions[0]
                if top or err:
                    if int(part.current_leader.leader_epoch) != epoch:  # a new epoch: park again
                        hw, epoch = self._position(conn, replica)
                        continue
                    raise RuntimeError(f"poller {replica}: error {top}/{err}")
                hw = max(hw, int(part.high_watermark))
                with self.lock:
                    self.poller_offsets[replica] = hw
            conn.close()
        except Exception as e:  # reported, and the test fails on it
            with self.lock:
                self.poller_errors.append(f"{replica}: {type(e).__name__}: {e}")
            self.parked.release()

    def _invalid(self, i: int) -> None:
        conn: _Conn | None = None
        n = 0
        epoch = 0
        while not self.stop.is_set():
            kind = KINDS[(i + n) % len(KINDS)]
            n += 1
            try:
                if conn is None:
                    conn = _connect(self.leader, INVALID_FROM)
                    resp = conn.call(fetch(3000 + i, 0, 0, 0, max_bytes=1), _FETCH_RESP.FetchResponse)
                    epoch = int(resp.responses[0].partitions[0].current_leader.leader_epoch)
                if kind == "garbage":
                    conn.sock.sendall(
                        struct.pack(">i", 12) + struct.pack(">hhi", 1, 17, n) + b"\xff\xff\xff\xff"
                    )
                    got = conn.sock.recv(4)
                    with self.lock:
                        self.codes[kind]["closed" if not got else "answered"] += 1
                    conn.close()
                    conn = None
                    continue
                req = self._bad_fetch(kind, 3000 + i, epoch)
                top, err = _codes(conn.call(req, _FETCH_RESP.FetchResponse))
                with self.lock:
                    self.codes[kind][f"{top}/{err}"] += 1
            except (OSError, ConnectionError) as e:
                with self.lock:
                    self.codes[kind][f"conn:{type(e).__name__}"] += 1
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()

    leader_id = -1

    def _bad_fetch(self, kind: str, replica: int, epoch: int) -> Any:
        if kind == "other_topic":
            return fetch(replica, 0, 0, epoch, topic_id=uuid.uuid4())
        if kind == "negative_offset":
            return fetch(replica, -5, 0, epoch)
        if kind == "future_epoch":
            return fetch(replica, 0, 0, epoch + 7)
        if kind == "past_epoch":
            return fetch(replica, 0, 0, epoch - 1)
        return fetch(self.leader_id, 0, 0, epoch)  # "leader_id": the leader's own id from another node

    def start(self) -> None:
        for th in self.threads:
            th.start()
        for _ in range(self.n_pollers):
            self.parked.acquire()
        for _ in range(self.extra):  # more than max.connections.per.ip from one address
            try:
                self.idle.append(
                    socket.create_connection(self.leader, timeout=5, source_address=(EXTRA_FROM, 0))
                )
            except OSError:
                self.extra_refused += 1

    def wait_for(self, offset: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                done = (
                    len(self.poller_offsets) == self.n_pollers and min(self.poller_offsets.values()) >= offset
                )
            if done or self.poller_errors:
                return
            time.sleep(0.02)

    def finish(self) -> dict[str, Any]:
        refused = self.extra_refused
        with selectors.DefaultSelector() as sel:  # the ones the server closed read EOF at once
            for sk in self.idle:
                sel.register(sk, selectors.EVENT_READ)
            for key, _ in sel.select(timeout=2.0):
                sk = key.fileobj
                assert isinstance(sk, socket.socket)
                try:
                    refused += sk.recv(1) == b""
                except OSError:
                    refused += 1
        for sk in self.idle:
            sk.close()
        self.stop.set()
        for th in self.threads:
            th.join(10)
        with self.lock:
            return {
                "codes": {k: dict(v) for k, v in self.codes.items()},
                "poller_offsets": sorted(self.poller_offsets.values()),
                "poller_errors": self.poller_errors[:10],
                "extra_refused": refused,
            }


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="raft_flood")
    ap.add_argument("--leader", required=True, help="host:port of the controller listener")
    ap.add_argument("--leader-id", type=int, required=True, help="the controller's node id")
    ap.add_argument("--pollers", type=int, default=200)
    ap.add_argument("--invalid", type=int, default=12)
    ap.add_argument("--extra", type=int, default=0)
    args = ap.parse_args(argv)
    host, _, port = args.leader.rpartition(":")
    flood = Flood((host, int(port)), args.pollers, args.invalid, args.extra)
    flood.leader_id = args.leader_id
    t = time.monotonic()
    flood.start()
    print(f"ready {time.monotonic() - t:.2f}", flush=True)
    line = sys.stdin.readline()  # "until <offset>": stop once every poller has fetched up to it
    if line.startswith("until "):
        flood.wait_for(int(line.split()[1]), 30.0)
    print(json.dumps(flood.finish()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
