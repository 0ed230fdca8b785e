"""Kafka's control managers: what a change may be and the records it becomes.

Topics and placement, reassignment, configs and their defaults, ACL and quota rules, SCRAM: decisions
only, no I/O.
"""
