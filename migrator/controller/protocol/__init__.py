"""Kafka's wire protocol: frames and headers, the served apiKeys and versions, kio glue and the schemas
kio lacks, error codes.
"""
