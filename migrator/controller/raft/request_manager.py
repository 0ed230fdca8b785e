"""One request in flight per peer, its timeout and the backoff after a failure: Kafka 3.9's
RequestManager, which the voter asks before it sends anything.

A peer is ready, awaiting the answer to one correlation id (until `controller.quorum.request.timeout.ms`
passes), or backing off (`controller.quorum.retry.backoff.ms`) after an answer it could not use. Any
epoch change forgets every peer's state (``reset_all``), so an answer to an older epoch's request is no
longer expected and is dropped.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RequestManager"]


@dataclass(slots=True)
class _Peer:
    awaiting: bool = False
    last_send_ms: int = 0
    last_fail_ms: int = 0
    inflight: int | None = None


class RequestManager:
    def __init__(self, retry_backoff_ms: int, request_timeout_ms: int) -> None:
        self.retry_backoff_ms = retry_backoff_ms
        self.request_timeout_ms = request_timeout_ms
        self._peers: dict[int, _Peer] = {}

    def _timed_out(self, p: _Peer, now_ms: int) -> bool:
        return p.awaiting and now_ms >= p.last_send_ms + self.request_timeout_ms

    def _backoff_done(self, p: _Peer, now_ms: int) -> bool:
        return not p.awaiting and now_ms >= p.last_fail_ms + self.retry_backoff_ms

    def is_ready(self, peer: int, now_ms: int) -> bool:
        p = self._peers.get(peer)
        if p is None:
            return True
        if self._timed_out(p, now_ms) or self._backoff_done(p, now_ms):
            del self._peers[peer]
            return True
        return False

    def is_backing_off(self, peer: int, now_ms: int) -> bool:
        p = self._peers.get(peer)
        return p is not None and not p.awaiting and not self._backoff_done(p, now_ms)

    def remaining_ms(self, peer: int, now_ms: int) -> int:
        """Until the in-flight request times out or the backoff ends (0: ready)."""
        p = self._peers.get(peer)
        if p is None:
            return 0
        end = (
            p.last_send_ms + self.request_timeout_ms if p.awaiting else p.last_fail_ms + self.retry_backoff_ms
        )
        return max(0, end - now_ms)

    def has_request_timed_out(self, peer: int, now_ms: int) -> bool:
        p = self._peers.get(peer)
        return p is not None and self._timed_out(p, now_ms)

    def on_sent(self, peer: int, correlation_id: int, now_ms: int) -> None:
        self._peers[peer] = _Peer(awaiting=True, last_send_ms=now_ms, inflight=correlation_id)

    def is_expected(self, peer: int, correlation_id: int) -> bool:
        p = self._peers.get(peer)
        return p is not None and p.awaiting and p.inflight == correlation_id

    def on_result(self, peer: int, correlation_id: int, success: bool, now_ms: int) -> None:
        """An expected answer: ready again if it was used, else back off before the next try."""
        if not self.is_expected(peer, correlation_id):
            return
        if success:
            del self._peers[peer]
        else:
            self._peers[peer] = _Peer(awaiting=False, last_fail_ms=now_ms)

    def reset(self, peer: int) -> None:
        self._peers.pop(peer, None)

    def reset_all(self) -> None:
        self._peers.clear()
