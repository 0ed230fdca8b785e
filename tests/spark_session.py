"""The test run's one SparkSession (local[2]), shared by every audit test module.

Each module declares a `spark` fixture that returns `get()`; the cache makes it one session per
process, started on first use: the JVM start and the first Python data source query are paid once.
"""

from __future__ import annotations

import os
import sys
from functools import lru_cache
from typing import Any

MASTER = "local[2]"


@lru_cache(maxsize=1)
def get() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from spark_audit import session

    spark = session.get_session(MASTER).spark
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    return spark
