"""The listeners' authentication and authorization counters for Prometheus, under the names of Kafka's
SocketServer metrics (``kafka.server:type=socket-server-metrics,listener=<l>``:
``successful-authentication-total``, ``failed-authentication-total``, ``successful-reauthentication-total``,
``failed-reauthentication-total``) plus the refusals by reason, the requests the ACLs denied and the
Envelopes by outcome.

Every ListenerSecurity of the process registers itself (weakly); a scrape sums what they counted.
"""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily

from migrator.controller.security.listener_security import ListenerSecurity

__all__ = ["ListenerCollector", "track"]

_LIVE: weakref.WeakSet[ListenerSecurity] = weakref.WeakSet()

PREFIX = "kafka_server_socket_server_metrics_"
#: refusal reasons that are failed (re-)authentications in Kafka's sense
_FAILED_AUTH = {
    "tls_handshake",
    "tls_principal",
    "sasl_authentication_failed",
    "unsupported_sasl_mechanism",
    "illegal_sasl_state",
    "malformed_sasl",
    "sasl_version",
    "sasl_on_non_sasl_listener",
}


def track(security: ListenerSecurity) -> None:
    _LIVE.add(security)


class ListenerCollector:
    """A prometheus_client collector over every live listener's counters (no secret is ever counted)."""

    def collect(self) -> Iterator[Any]:
        ok = CounterMetricFamily(
            PREFIX + "successful_authentication", "Successful authentications", labels=["listener"]
        )
        failed = CounterMetricFamily(
            PREFIX + "failed_authentication", "Failed authentications (TLS or SASL)", labels=["listener"]
        )
        reok = CounterMetricFamily(
            PREFIX + "successful_reauthentication",
            "Successful re-authentications (KIP-368)",
            labels=["listener"],
        )
        refail = CounterMetricFamily(
            PREFIX + "failed_reauthentication", "Failed re-authentications (KIP-368)", labels=["listener"]
        )
        refused = CounterMetricFamily(
            "zk2kraft_listener_refused",
            "Connections or requests refused, by reason",
            labels=["listener", "reason"],
        )
        envelopes = CounterMetricFamily(
            "zk2kraft_listener_envelopes",
            "Envelopes (forwarded requests) by outcome: forwarded, or the envelope's error",
            labels=["listener", "result"],
        )
        auth: dict[str, Counter[str]] = {}
        refusals: dict[str, Counter[str]] = {}
        forwards: dict[str, Counter[str]] = {}
        for sec in list(_LIVE):  # listeners of the same name (restarted) add up
            auth.setdefault(sec.name, Counter()).update(sec.authenticated)
            refusals.setdefault(sec.name, Counter()).update(sec.refused)
            forwards.setdefault(sec.name, Counter()).update(sec.envelopes)
        for name in sorted(auth):
            got, lost = auth[name], refusals[name]
            ok.add_metric([name], got["authenticated"])
            reok.add_metric([name], got["reauthenticated"])
            failed.add_metric([name], sum(n for r, n in lost.items() if r in _FAILED_AUTH))
            refail.add_metric([name], lost["reauthentication_failed"])
            for reason, n in sorted(lost.items()):
                refused.add_metric([name, reason], n)
            for result, n in sorted(forwards[name].items()):
                envelopes.add_metric([name, result], n)
        yield from (ok, failed, reok, refail, refused, envelopes)
