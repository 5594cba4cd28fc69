"""Our errors raised in Spark tasks come back typed: typed_task_error reads the task's traceback out of
the job failure's text (no Spark needed: the wrappers are matched by class name)."""

from __future__ import annotations

import pytest

from procedures.errors import CommitFailedError, InvalidMetadataError, ValidationError
from procedures.spark.task_errors import typed_task_error

JOB_FAILURE = """An error occurred while calling z:org.apache.spark.api.python.PythonRDD.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 3.0 failed 1 times, most recent failure: Lost task 0.0 in stage 3.0 (TID 7) (192.0.2.2 executor driver): org.apache.spark.api.python.PythonException: Traceback (most recent call last):
  File "/work/main/procedures/spec/manifest.py", line 331, in _read_bytes
    raise InvalidMetadataError(f"cannot read file: {e}", location=path) from e
FileNotFoundError: [Errno 2] No such file or directory: '/wh/db/t/metadata/snap-1.avro'

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/work/main/procedures/core/gc/reachability.py", line 186, in fetch
procedures.errors.InvalidMetadataError: /wh/db/t/metadata/snap-1.avro: the manifest list of snapshot 1 is missing

\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator.handlePythonException(PythonRunner.scala:572)
\tat org.apache.spark.api.python.PythonRunner$$anon$3.read(PythonRunner.scala:784)
"""


class Py4JJavaError(Exception):
    """Stands for py4j's class: only the name is matched."""


class PythonException(Exception):
    """Stands for pyspark's DataFrame-side wrapper."""


@pytest.mark.parametrize("wrapper", [Py4JJavaError, PythonException])
def test_our_error_in_a_task_comes_back_typed(wrapper):
    typed = typed_task_error(wrapper(JOB_FAILURE))
    assert type(typed) is InvalidMetadataError
    assert str(typed) == "/wh/db/t/metadata/snap-1.avro: the manifest list of snapshot 1 is missing (in a Spark task)"


def test_the_last_of_our_errors_is_the_one_raised():
    text = JOB_FAILURE.replace("FileNotFoundError: [Errno 2]", "procedures.errors.ValidationError: first, then")
    assert type(typed_task_error(Py4JJavaError(text))) is InvalidMetadataError
    text = JOB_FAILURE.replace("procedures.errors.InvalidMetadataError", "procedures.errors.CommitFailedError")
    assert type(typed_task_error(Py4JJavaError(text))) is CommitFailedError


@pytest.mark.parametrize("error", [
    RuntimeError(JOB_FAILURE),  # not a Spark job failure
    Py4JJavaError(JOB_FAILURE.replace("procedures.errors.InvalidMetadataError: ", "ValueError: ")),  # not ours
    Py4JJavaError(JOB_FAILURE.replace("InvalidMetadataError", "NoSuchThing")),  # no such class of ours
    Py4JJavaError(JOB_FAILURE.replace("InvalidMetadataError", "annotations")),  # a name that is no error
    ValidationError("already typed"),
])
def test_other_failures_are_left_alone(error):
    assert typed_task_error(error) is None
