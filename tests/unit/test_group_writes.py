"""procedures.spark.group_writes without Spark: how many attempts a task gets, and errors that must
travel from a task to the driver."""

from __future__ import annotations

import pickle

import pytest

from procedures.errors import IcebergError
from procedures.spark import group_writes


class _Conf:
    def __init__(self, values: dict) -> None:
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


class _Session:
    """What task_attempts reads of a session: its conf (``spark.conf``, classic and Connect alike)."""

    def __init__(self, master: str, conf: dict | None = None) -> None:
        self.conf = _Conf({"spark.master": master, **(conf or {})})


class _RefusingConf:
    def get(self, key: str, default: str | None = None) -> str | None:
        raise RuntimeError(f"{key} is a static conf")  # as a Connect server may answer


@pytest.mark.parametrize("master, conf, attempts", [
    ("local", {}, 1),
    ("local[2]", {"spark.task.maxFailures": "8"}, 1),  # local[N] ignores the setting, as Spark does
    ("local[*]", {}, 1),
    ("local[2,4]", {}, 4),
    ("local[*, 3]", {}, 3),
    ("spark://host:7077", {}, 4),
    ("yarn", {"spark.task.maxFailures": "2"}, 2),
    ("local-cluster[2,1,1024]", {"spark.task.maxFailures": "5"}, 5),
])
def test_task_attempts_follow_spark_scheduler(master, conf, attempts):
    assert group_writes.task_attempts(_Session(master, conf)) == attempts


def test_task_attempts_default_when_the_conf_refuses():
    session = _Session("local")
    session.conf = _RefusingConf()
    assert group_writes.task_attempts(session) == 4  # Spark's spark.task.maxFailures default


class _Unpicklable(Exception):
    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")


def test_outcome_errors_survive_the_trip_to_the_driver():
    kept = group_writes.GroupOutcome(3, error=FileNotFoundError("gone.parquet"))
    assert isinstance(pickle.loads(pickle.dumps(kept)).error, FileNotFoundError)
    # an exception whose constructor does not take its args back cannot be unpickled: described instead
    with pytest.raises(TypeError):
        pickle.loads(pickle.dumps(_Unpicklable("a", "b")))
    described = group_writes.portable_error(_Unpicklable("a", "b"))
    assert isinstance(described, IcebergError) and "_Unpicklable: a: b" in str(described)
    same = ValueError("x")
    assert group_writes.portable_error(same) is same


def test_task_attempts_are_read_once_per_application():
    """Both keys are static, and on Spark Connect each read is a round trip: one application's
    sessions read them once; a stand-in without an application id is read every time."""
    reads = []

    class CountingConf(_Conf):
        def get(self, key: str, default: str | None = None) -> str | None:
            reads.append(key)
            return super().get(key, default)

    session = _Session("local[2,3]")
    session.conf = CountingConf({"spark.master": "local[2,3]", "spark.app.id": "app-task-attempts-1"})
    assert group_writes.task_attempts(session) == 3
    assert group_writes.task_attempts(session) == 3
    assert reads.count("spark.master") == 1
    stand_in = _Session("local[2,2]")
    assert group_writes.task_attempts(stand_in) == 2
    stand_in.conf = _Conf({"spark.master": "local[2,5]"})
    assert group_writes.task_attempts(stand_in) == 5
