"""Our Kafka clients of the controller: the blocking client brokers and the simulator use, and
`zk2kraft admin`'s (where it finds the controller, how it logs in, each change as a Kafka request).
"""
