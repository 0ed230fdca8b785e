"""Who may talk and do what: JAAS, SASL (PLAIN, SCRAM) on both sides, TLS principals, Kafka's
StandardAuthorizer and the ACL each API needs.
"""
