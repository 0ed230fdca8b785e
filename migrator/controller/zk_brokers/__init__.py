"""The controller's side of ZK-mode brokers (KIP-866 phase 2): the propagator, one channel per broker,
LeaderAndIsr/UpdateMetadata/StopReplica and their codec, the inter-broker listener.
"""
