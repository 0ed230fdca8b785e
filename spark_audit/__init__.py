"""The audit: ZooKeeper against the KRaft metadata log, entity by entity, in Spark (docs/audit.md).

`rows` normalises a ClusterImage; `inputs` loads each input without Spark; `sources` are the PySpark
data sources; `diff` joins and classifies; `audit` is the job (`run_audit`, and a `__main__` for
spark-submit); `report` writes the HTML.
"""
