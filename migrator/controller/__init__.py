"""The Kafka controller of the migration, in rooms that mirror Kafka's parts (docs/architecture.md).

`service` makes decisions durable, `core` decides the broker lifecycle; `protocol`, `network`,
`security`, `apis`, `managers`, `raft`, `zk_brokers` and `client` hold the rest, one kind of change each.
"""
