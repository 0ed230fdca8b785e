"""Certificates for TLS tests (made by openssl for each run): see zk_fixtures.tls_certs."""

from zk_fixtures.tls_certs import Certs, ExpiredCerts, make_certs, make_expired

__all__ = ["Certs", "ExpiredCerts", "make_certs", "make_expired"]
