"""Kafka's ControllerApis: the admin API handlers, one module per API family, their per-resource
authorization, Envelope, and the answer to a request refused whole.
"""
