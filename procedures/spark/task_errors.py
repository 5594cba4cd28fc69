"""Our typed errors back from Spark tasks.

An error a Python task raises reaches the driver wrapped: as a ``Py4JJavaError`` (an RDD action) or a
``PythonException`` (a DataFrame's Python function), whose text holds the task's Python traceback
inside Java's stack trace.  A caller of a procedure should see the same :class:`IcebergError` whether
a manifest was read on the driver or in a task, so :func:`typed_task_error` finds the last of our
errors in that text and rebuilds it (the Spark error stays attached as its cause).
"""

from __future__ import annotations

import re

from procedures import errors

__all__ = ["typed_task_error"]

# the last line of a Python traceback: "procedures.errors.InvalidMetadataError: <message>"
_RAISED = re.compile(r"^procedures\.errors\.(\w+): (.*)$", re.MULTILINE)
# the wrappers Spark raises on the driver for a failed job (by name: pyspark is not imported here)
_WRAPPERS = frozenset({"Py4JJavaError", "PythonException"})


def typed_task_error(error: BaseException) -> errors.IcebergError | None:
    """Our error a Spark task raised, rebuilt from the job failure ``error`` wrapping it (its
    message, with "(in a Spark task)"); None when ``error`` is not such a failure or names none."""
    if isinstance(error, errors.IcebergError) or not any(c.__name__ in _WRAPPERS for c in type(error).__mro__):
        return None
    try:
        text = str(error)
    except Exception:  # noqa: BLE001 -- a broken gateway cannot render the Java side; keep Spark's error
        return None
    found = _RAISED.findall(text)
    if not found:
        return None
    name, message = found[-1]
    cls = getattr(errors, name, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.IcebergError)):
        return None
    try:
        return cls(f"{message.strip()} (in a Spark task)")
    except TypeError:  # an error class whose constructor wants more than a message
        return None
