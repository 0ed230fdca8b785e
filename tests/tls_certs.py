"""Certificates for TLS tests (made by openssl for each run): see zk_fixtures.tls_certs."""

from zk_fixtures.tls_certs import Certs, make_certs

__all__ = ["Certs", "make_certs"]
