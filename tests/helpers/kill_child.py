"""A procedure run in a child process, for the SIGKILL tests of ``tests/spark/test_kill_anywhere.py``.

``python -m tests.helpers.kill_child '<json>'`` with ``{"proc", "table", "kwargs", "conf", "plan",
"plan_file", "spark": null | "<master>"}``: installs the fault plan (whose action is usually
``"kill"``) on this driver and, through the Spark local property, in every Python task, then runs the
procedure through :func:`procedures.frontend.runner.run` on our catalog ``ours``.  Without
``spark`` the procedure runs on the driver alone (no JVM: a child starts in a second).  Exit status 0
means the procedure completed; a process killed at its point ends with -SIGKILL.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys

from procedures.core.kernel import fault_points
from procedures.core.kernel.fault_points import FaultPlan
from procedures.frontend import runner


def _session(master: str):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(master).appName("kill-child")
             .config("spark.ui.enabled", "false")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.default.parallelism", "2")
             .config("spark.sql.session.timeZone", "UTC")
             .config("spark.pyspark.python", sys.executable)
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _value(v):
    # timestamps travel as {"ts": epoch seconds}
    if isinstance(v, dict) and set(v) == {"ts"}:
        return dt.datetime.fromtimestamp(v["ts"], dt.timezone.utc)
    return v


def main(spec: dict) -> None:
    spark = _session(spec["spark"]) if spec.get("spark") else None
    plan = FaultPlan.from_json(json.dumps(spec["plan"]))
    with open(spec["plan_file"], "w", encoding="utf-8") as f:
        f.write(plan.to_json())
    fault_points.install(plan.injector("driver"))
    if spark is not None:
        spark.sparkContext.setLocalProperty(fault_points.PLAN_PROPERTY, spec["plan_file"])
    kwargs = {k: _value(v) for k, v in spec["kwargs"].items()}
    runner.run(spec["proc"], kwargs={"table": spec["table"], **kwargs}, catalog="ours", conf=spec["conf"],
               spark=spark)
    if spark is not None:
        spark.stop()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
