"""The field metadata kio's serializers read (`field(metadata=...)`), for the messages zk2kraft declares
itself because kio no longer ships them (`kio_admin_v0`, `zk_broker_messages`): one table of Kafka's
wire types, so each declaration names a type the same way."""

__all__ = ["BOOL", "ERROR_CODE", "INT8", "INT16", "INT32", "INT64", "STRING", "TIMEDELTA_I32", "UUID"]

INT8 = {"kafka_type": "int8"}
INT16 = {"kafka_type": "int16"}
INT32 = {"kafka_type": "int32"}
INT64 = {"kafka_type": "int64"}
BOOL = {"kafka_type": "bool"}
STRING = {"kafka_type": "string"}
UUID = {"kafka_type": "uuid"}
ERROR_CODE = {"kafka_type": "error_code"}
TIMEDELTA_I32 = {"kafka_type": "timedelta_i32"}
