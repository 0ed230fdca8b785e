"""The KRaft leader's side of __cluster_metadata: Fetch, FetchSnapshot, DescribeQuorum, Vote and the
quorum epochs.
"""
