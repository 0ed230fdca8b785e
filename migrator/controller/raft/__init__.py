"""Kafka's Raft (KRaft) parts of the controller: the quorum's leader side and its voter side."""
