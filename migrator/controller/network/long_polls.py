"""Parked Raft fetches on one selector thread, as Kafka's fetch purgatory keeps them off its handlers.

A KRaft broker (an observer of `__cluster_metadata`) is almost always in a long poll: it fetches, gets
the records of the last append, and fetches again at the new end, which waits for the next append.
With a thread per connection, every append woke one thread per observer, twice (the answer, then the
next request), and those hundreds of wake-ups fought the controller's own threads for the GIL: with
100 observers attached, AlterPartition throughput fell to 0.59 of what it was without them.

Here the listener hands a connection whose Fetch would wait to this one thread. It answers the parked
fetch when the high watermark moves (`LogView.subscribe`), its MaxWaitMs is up or the leader closes,
then reads the connection's next request itself: another Fetch is answered or parked again on the same
thread; anything else (SASL re-authentication, any other API, a response too big to send at once) gives
the connection back to a thread of the listener, with the bytes already read, in order.
"""

from __future__ import annotations

import logging
import queue
import selectors
import socket
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from migrator.controller.raft.raft_leader import FETCH, LongPoll
from migrator.controller.security.sasl_session import Accept

__all__ = ["LongPolls", "Parked"]

log = logging.getLogger("zk2kraft.controller.long_polls")

_SIZE = struct.Struct(">i")
_KEY = struct.Struct(">h")
_WOULD_BLOCK = (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError)


@dataclass(slots=True)
class Parked:
    """A connection this thread holds: its security state, bytes read but not yet a whole request, and
    the Fetch it is waiting to answer (None while it waits for the next request)."""

    sock: socket.socket
    ip: str
    sec: Any  # listener_security.ConnectionSecurity
    poll: LongPoll | None
    inbuf: bytearray = field(default_factory=bytearray)
    active: float = field(default_factory=time.monotonic)  # last request or answer
    frame_from: float = 0.0  # when the incomplete request in ``inbuf`` began


class LongPolls:
    """The listener's parked fetches; ``server`` is the `ControllerServer` whose connections they are.

    The server provides ``raft``, ``max_request_bytes``, ``idle_timeout_s``, ``request_timeout_s``, ``timed_out``,
    ``resume(sock, ip, sec, inbuf, unsent)`` (a thread takes the connection back) and
    ``release(sock, ip, why)`` (closed: forget it, and say why unless ``why`` is empty)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.raft = server.raft
        self._sel = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        self._woken = False  # a byte is in the pipe, or the loop has yet to look at the state
        self._adopted: queue.SimpleQueue[Parked] = queue.SimpleQueue()
        self._held: dict[socket.socket, Parked] = {}
        self._stopping = False
        self.parked_total = 0  # fetches that waited here (all time)
        self.resumed_total = 0  # connections given back to a listener thread
        #: the longest the loop sleeps: idle and half-sent connections are looked at least this often
        #: (an append or an adoption wakes it at once)
        self.tick_s = 1.0
        self.thread = threading.Thread(target=self._run, name="zk2kraft-long-polls", daemon=True)
        self.raft.view.subscribe(self.wake)

    # -- from other threads ------------------------------------------------------------------------

    def start(self) -> None:
        self.thread.start()

    def adopt(self, sock: socket.socket, ip: str, sec: Any, poll: LongPoll, inbuf: bytes = b"") -> None:
        """Take over ``sock`` from its listener thread (which returns without closing it); ``inbuf`` is
        what the client sent after the parked Fetch, answered after it."""
        self._adopted.put(Parked(sock, ip, sec, poll, bytearray(inbuf)))
        self.wake()

    def wake(self) -> None:
        """An append, an adoption or a close: cheap and non-blocking (one byte until the loop drains it)."""
        if not self._woken:
            self._woken = True
            try:
                self._wake_w.send(b"\x00")
            except OSError:
                pass

    def stop(self) -> None:
        self._stopping = True
        self.wake()
        if self.thread.is_alive():
            self.thread.join(timeout=5)

    @property
    def waiting(self) -> int:
        return sum(1 for p in list(self._held.values()) if p.poll is not None)

    # -- the thread ------------------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping:
                events = self._sel.select(self._timeout())
                for key, _ in events:
                    if key.data is None:
                        self._drain_wake()
                    else:
                        self._readable(key.data)
                self._take_adopted()
                self._complete_ready()
                self._expire()
        except Exception as e:  # never silently: the parked connections would hang
            log.error("the long-poll thread failed: %s: %s", type(e).__name__, e)
        finally:
            if self.raft.closing:
                self._complete_ready()  # the leader is closing: what waits is answered now
            for p in list(self._held.values()):
                self._close(p, "")
            while not self._adopted.empty():
                self._close(self._adopted.get(), "")
            self._sel.close()
            self._wake_r.close()
            self._wake_w.close()

    def _timeout(self) -> float:
        now = time.monotonic()
        soonest = now + self.tick_s
        for p in self._held.values():
            if p.poll is not None:
                soonest = min(soonest, p.poll.deadline)
        return max(0.0, soonest - now)

    def _drain_wake(self) -> None:
        try:
            while self._wake_r.recv(4096):
                pass
        except _WOULD_BLOCK:
            pass
        # After reading, not before: a wake that found the flag still set made its change before this
        # line, and this loop looks at every change after it; cleared first, a byte sent meanwhile
        # would be read here and leave the flag set with nothing in the pipe, and every later wake lost.
        self._woken = False

    def _take_adopted(self) -> None:
        while not self._adopted.empty():
            p = self._adopted.get()
            try:
                p.sock.setblocking(False)
                self._sel.register(p.sock, selectors.EVENT_READ, p)
            except (OSError, ValueError):  # closed while it was handed over (the listener is stopping)
                self._close(p, "")
                continue
            self._held[p.sock] = p
            self.parked_total += 1
            self._readable(p)  # TLS may hold decrypted bytes the selector cannot see

    def _complete_ready(self) -> None:
        for p in list(self._held.values()):
            if p.poll is None:
                continue
            answer = self.raft.complete_framed(p.poll)
            if answer is None:
                continue
            if not answer:
                self._close(p, "a Raft Fetch could not be answered")
                continue
            p.poll = None
            p.active = time.monotonic()
            if self._send(p, answer):
                self._readable(p)  # what came meanwhile, some perhaps only in TLS's buffer

    def _readable(self, p: Parked) -> None:
        if p.sock not in self._held:
            return
        try:
            while True:
                chunk = p.sock.recv(1 << 16)
                if not chunk:
                    self._close(p, "")
                    return
                if not p.inbuf:
                    p.frame_from = time.monotonic()
                p.inbuf += chunk
        except _WOULD_BLOCK:
            pass
        except OSError:
            self._close(p, "")
            return
        if p.poll is None:
            self._serve_buffered(p)

    def _serve_buffered(self, p: Parked) -> None:
        """Answer the whole requests in ``inbuf`` that are Raft Fetches, until one parks or is not one."""
        server = self.server
        while p.poll is None and len(p.inbuf) >= 4:
            (size,) = _SIZE.unpack_from(p.inbuf, 0)
            if size < 8 or size > server.max_request_bytes:
                self._close(p, f"a request frame of {size} bytes (limit {server.max_request_bytes})")
                return
            if len(p.inbuf) < 4 + size:
                return
            frame = bytes(p.inbuf[4 : 4 + size])
            if _KEY.unpack_from(frame, 0)[0] != FETCH or p.sec.accept(FETCH) is not Accept.SERVE:
                self._resume(p, b"")  # the listener's thread answers it, with everything it says
                return
            if p.sec.authorize(FETCH):
                self._close(p, f"apiKey {FETCH} not authorized for {p.sec.principal}")
                return
            del p.inbuf[: 4 + size]
            p.frame_from = time.monotonic()
            answer = self.raft.answer(frame, park=True)
            if answer is None:
                self._close(p, "")  # the leader logged why (a malformed or unsupported Fetch)
                return
            p.active = time.monotonic()
            if isinstance(answer, LongPoll):
                p.poll = answer
                self.parked_total += 1
                return
            if not self._send(p, answer):
                return

    def _send(self, p: Parked, data: bytes) -> bool:
        """Send what the socket takes now; the rest goes back to a listener thread (a catch-up answer
        bigger than the socket's buffer). False once the connection is no longer this thread's."""
        view = memoryview(data)
        try:
            while view:
                sent = p.sock.send(view)
                view = view[sent:]
        except _WOULD_BLOCK:
            self._resume(p, bytes(view))
            return False
        except OSError:
            self._close(p, "")
            return False
        return True

    def _expire(self) -> None:
        now = time.monotonic()
        server = self.server
        for p in list(self._held.values()):
            if p.poll is not None:
                continue
            late = (
                now - p.frame_from > server.request_timeout_s
                if p.inbuf
                else now - p.active > server.idle_timeout_s
            )
            if late:
                self._close(p, server.timed_out)

    # -- giving connections up ---------------------------------------------------------------------------

    def _forget(self, p: Parked) -> None:
        self._held.pop(p.sock, None)
        try:
            self._sel.unregister(p.sock)
        except (KeyError, ValueError, OSError):
            pass

    def _resume(self, p: Parked, unsent: bytes) -> None:
        self._forget(p)
        self.resumed_total += 1
        try:
            p.sock.setblocking(True)
        except OSError:
            self.server.release(p.sock, p.ip, "")
            return
        self.server.resume(p.sock, p.ip, p.sec, bytes(p.inbuf), unsent)

    def _close(self, p: Parked, why: str) -> None:
        self._forget(p)
        self.server.release(p.sock, p.ip, why)
