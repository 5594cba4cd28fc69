"""Typed errors raised by the package.

Every error derives from :class:`IcebergError`; where a built-in exception is the natural
companion (``ValueError`` for bad input, ``LookupError`` for missing things) the error inherits
it too, so callers can catch either.  Errors carry the table, ids and attempt counts as
attributes so callers and tests can inspect them without parsing messages.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

__all__ = [
    "IcebergError",
    "ValidationError",
    "InvalidMetadataError",
    "UnsupportedFormatVersionError",
    "SchemaEvolutionError",
    "ExpressionError",
    "NotFoundError",
    "NoSuchTableError",
    "NoSuchNamespaceError",
    "NoSuchSnapshotError",
    "NoSuchRefError",
    "NoSuchProcedureError",
    "AlreadyExistsError",
    "TableAlreadyExistsError",
    "NamespaceAlreadyExistsError",
    "NamespaceNotEmptyError",
    "CommitError",
    "CommitFailedError",
    "CommitStateUnknownError",
    "CommitConflictError",
    "CatalogConfigError",
    "NoSuchCatalogError",
    "StorageConfigError",
    "MissingParameterError",
    "SqlSyntaxError",
    "UnsupportedStatementError",
    "DuplicateFilesError",
    "UnsupportedFileFormatError",
    "SparkEnvironmentError",
    "ScanPlanningError",
    "PythonWorkerError",
    "UnsupportedVersionError",
    "MissingDependencyError",
    "REDACTED",
    "is_secret_key",
    "redact_text",
    "redact_properties",
]


class IcebergError(Exception):
    """Root of every error this package raises on purpose."""


class ValidationError(IcebergError, ValueError):
    """Input, metadata or an operation was refused because it breaks a rule of the spec."""


class InvalidMetadataError(ValidationError):
    """A metadata, manifest or Puffin file is corrupt, truncated or breaks the spec.

    ``location`` names the file when one is known.
    """

    def __init__(self, message: str, *, location: str | None = None) -> None:
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class UnsupportedFormatVersionError(InvalidMetadataError):
    """The file uses a table format version this package cannot read or write."""


class SchemaEvolutionError(ValidationError):
    """A schema change that the spec does not allow (for example long -> int)."""


class ExpressionError(ValidationError):
    """A filter expression could not be parsed or bound; the message names the token or column."""


class NotFoundError(IcebergError, LookupError):
    """Something that was named does not exist."""


class NoSuchTableError(NotFoundError):
    """The table does not exist in the catalog."""


class NoSuchNamespaceError(NotFoundError):
    """The namespace does not exist in the catalog."""


class NoSuchSnapshotError(NotFoundError):
    """The snapshot id is not in the table's metadata."""


class NoSuchRefError(NotFoundError):
    """The branch or tag is not in the table's metadata."""


class NoSuchProcedureError(NotFoundError):
    """No procedure is registered under that name."""


class AlreadyExistsError(IcebergError):
    """Something that should be new already exists."""


class TableAlreadyExistsError(AlreadyExistsError):
    """A table with that identifier already exists."""


class NamespaceAlreadyExistsError(AlreadyExistsError):
    """A namespace with that name already exists."""


class NamespaceNotEmptyError(IcebergError):
    """The namespace still holds tables and cannot be dropped."""


class CommitError(IcebergError):
    """Base of the two commit outcomes that are not success."""


class CommitFailedError(CommitError):
    """The commit was rejected and nothing of it is visible; files it wrote were cleaned up.

    Retryable conflicts are retried by the transaction before this is raised.
    """

    def __init__(
        self, message: str, *, table: str | None = None, attempts: int | None = None, retryable: bool = True
    ) -> None:
        self.table = table
        self.attempts = attempts
        #: False when retrying cannot help (a concurrent commit broke what the change relied on)
        self.retryable = retryable
        super().__init__(message)


class CommitConflictError(ValidationError):
    """A concurrent commit changed files or rows that a row-level change (DELETE, UPDATE, MERGE) read,
    as the table's ``write.<op>.isolation-level`` defines a conflict; nothing of the change is
    visible and the table is as the other writer left it.  Rerun the statement on the new snapshot."""


class CommitStateUnknownError(CommitError):
    """The catalog may or may not have applied the commit; nothing was deleted.

    Check the table's current metadata before retrying: the commit may already be visible.
    """

    def __init__(self, message: str, *, table: str | None = None, cause: BaseException | None = None) -> None:
        self.table = table
        self.cause = cause
        super().__init__(message)


#: what shows instead of a secret in messages, reprs and logs
REDACTED = "***"
#: a property key holding any of these (case-insensitive) holds a secret: passwords, secret and
#: access keys, tokens, credentials (s3.secret-access-key, s3.session-token, client.secret, ...)
SECRET_KEY_MARKERS = ("password", "passwd", "secret", "token", "credential", "access-key", "accesskey",
                      "account-key", "private-key")
# ``scheme://user:password@host``: the password runs to the authority's last '@' (it may hold '/')
_URI_USERINFO = re.compile(r"(://[^\s:/@'\"]*):[^\s'\"]*@")
# ``key=value`` in a uri query (``?password=p&...``), a JDBC ``;key=value`` list or a libpq conninfo
_KEY_VALUE = re.compile(r"(^|[?&;,\s(])([A-Za-z][\w.\-]*)=([^&;,\s'\")]*)")


def is_secret_key(key: Any) -> bool:
    """Whether the value of property or uri parameter ``key`` must not be shown."""
    k = str(key).lower()
    return any(m in k for m in SECRET_KEY_MARKERS)


def redact_text(text: Any) -> str:
    """``text`` (a uri, a conninfo, a message quoting one) with passwords and secret parameters
    replaced by ``***``: ``jdbc:postgresql://u:***@h/db``, ``...?user=u&password=***``."""
    shown = _URI_USERINFO.sub(lambda m: f"{m.group(1)}:{REDACTED}@", str(text))
    return _KEY_VALUE.sub(
        lambda m: f"{m.group(1)}{m.group(2)}={REDACTED}" if is_secret_key(m.group(2)) else m.group(0), shown)


def redact_properties(properties: Mapping[Any, Any]) -> dict[Any, Any]:
    """``properties`` for showing: secret keys' values replaced by ``***``, passwords inside other
    values (a catalog ``uri``) masked with :func:`redact_text`."""
    return {k: REDACTED if is_secret_key(k) else (redact_text(v) if isinstance(v, str) else v)
            for k, v in properties.items()}


class CatalogConfigError(ValidationError):
    """A catalog is configured wrongly (unknown type, malformed uri, bad property value).

    The message quotes configuration, so passwords and secrets in it are masked (:func:`redact_text`).
    """

    def __init__(self, message: Any = "") -> None:
        super().__init__(redact_text(message))


class StorageConfigError(CatalogConfigError):
    """The storage a catalog or table points at is configured wrongly or cannot be used: an unknown
    scheme, missing credentials, an endpoint that does not answer, a bucket that does not exist.

    ``property`` names the catalog property to set (``s3.endpoint``, ``warehouse``, ...) and
    ``location`` the path that was being resolved, when known.
    """

    def __init__(self, message: str, *, property: str | None = None, location: str | None = None) -> None:
        self.property = property
        self.location = location
        super().__init__(message)


class NoSuchCatalogError(CatalogConfigError):
    """A catalog name that is not configured as one of ours; ``configured`` lists the ones that are."""

    def __init__(self, message: str, *, catalog: str | None = None, configured: list[str] | None = None) -> None:
        self.catalog = catalog
        self.configured = list(configured or [])
        super().__init__(message)


class MissingParameterError(ValidationError):
    """A procedure was called without a required parameter (``procedure``, ``parameters`` name them)."""

    def __init__(self, message: str, *, procedure: str | None = None, parameters: list[str] | None = None) -> None:
        self.procedure = procedure
        self.parameters = list(parameters or [])
        super().__init__(message)


class SparkEnvironmentError(IcebergError, RuntimeError):
    """The Spark set-up cannot run this package; the message names the setting to change."""


class ScanPlanningError(IcebergError, RuntimeError):
    """A Spark job planning a scan returned results that do not cover its manifests exactly once;
    ``table`` names the table, ``missing`` and ``repeated`` list the manifest positions concerned."""

    def __init__(self, message: str, *, table: str | None = None, missing: list[int] | None = None,
                 repeated: list[int] | None = None) -> None:
        self.table = table
        self.missing = list(missing or [])
        self.repeated = list(repeated or [])
        super().__init__(message)


class PythonWorkerError(SparkEnvironmentError):
    """Spark's Python workers run a Python other than the driver's (another minor version, or one
    without this package); ``worker`` and ``driver`` describe both sides when known."""

    def __init__(self, message: str, *, worker: dict | None = None, driver: dict | None = None) -> None:
        self.worker = worker
        self.driver = driver
        super().__init__(message)


class UnsupportedVersionError(SparkEnvironmentError):
    """pyspark, Java or Python is outside the versions this package supports (``component``,
    ``version`` and ``supported`` say which)."""

    def __init__(self, message: str, *, component: str | None = None, version: str | None = None,
                 supported: str | None = None) -> None:
        self.component = component
        self.version = version
        self.supported = supported
        super().__init__(message)


class MissingDependencyError(IcebergError, ImportError):
    """An optional extra this call needs is not installed; the message names the ``pip install``."""


class SqlSyntaxError(ValidationError):
    """A SQL statement could not be parsed; ``line``/``column`` (1-based) and ``token`` locate it."""

    def __init__(self, message: str, *, line: int | None = None, column: int | None = None,
                 token: str | None = None) -> None:
        self.line = line
        self.column = column
        self.token = token
        super().__init__(message)


class UnsupportedStatementError(ValidationError):
    """A SQL statement names a table of our catalogs but is not one the SQL front end runs on them; the
    message lists the statements it does run."""


class DuplicateFilesError(ValidationError):
    """Files to add are already live in the target table (``paths`` lists up to ten of them)."""

    def __init__(self, message: str, *, paths: list[str] | None = None) -> None:
        self.paths = list(paths or [])
        super().__init__(message)


class UnsupportedFileFormatError(ValidationError):
    """A data file format this package cannot read or import (``file_format`` names it)."""

    def __init__(self, message: str, *, file_format: str | None = None) -> None:
        self.file_format = file_format
        super().__init__(message)
