"""Kafka's Raft (KRaft) parts of the controller: the single leader's Fetch, FetchSnapshot and
DescribeQuorum, and the voter side of a quorum (Vote, BeginQuorumEpoch, EndQuorumEpoch).
"""
