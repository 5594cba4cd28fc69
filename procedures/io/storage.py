"""Object-store filesystems configured from a catalog's properties, with Iceberg's property names.

A catalog configured for Java Iceberg (``spark.sql.catalog.<name>.s3.endpoint`` and friends) carries
its FileIO settings as catalog properties; :func:`filesystem_for` turns them into the matching
``pyarrow.fs`` filesystem:

* ``s3://``, ``s3a://`` and ``s3n://`` -> ``pyarrow.fs.S3FileSystem`` from ``s3.endpoint``,
  ``s3.access-key-id``, ``s3.secret-access-key``, ``s3.session-token``, ``s3.region`` and
  ``s3.path-style-access`` (:func:`s3_options`);
* ``gs://`` -> ``pyarrow.fs.GcsFileSystem`` from ``gcs.project-id``, ``gcs.oauth2.token``
  (with ``gcs.oauth2.token-expires-at``) and ``gcs.service.host`` (:func:`gcs_options`);
* ``hdfs://`` and ``viewfs://`` -> ``pyarrow.fs.FileSystem.from_uri`` as before.

Any other scheme, credentials missing for a configured endpoint, an endpoint that does not answer
and a bucket that does not exist raise :class:`~procedures.errors.StorageConfigError` naming the
property to set.  :func:`redacted` hides secret values for messages and reprs.
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any, Mapping
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs

from procedures.errors import StorageConfigError, is_secret_key, redact_properties

__all__ = [
    "S3_SCHEMES",
    "GCS_SCHEMES",
    "HADOOP_SCHEMES",
    "OBJECT_STORE_SCHEMES",
    "s3_options",
    "gcs_options",
    "filesystem_for",
    "check_bucket",
    "redacted",
    "is_secret_property",
]

S3_SCHEMES = ("s3", "s3a", "s3n")
GCS_SCHEMES = ("gs",)
HADOOP_SCHEMES = ("hdfs", "viewfs")
OBJECT_STORE_SCHEMES = S3_SCHEMES + GCS_SCHEMES
SUPPORTED_SCHEMES = ("file",) + S3_SCHEMES + GCS_SCHEMES + HADOOP_SCHEMES

S3_ENDPOINT = "s3.endpoint"
S3_ACCESS_KEY = "s3.access-key-id"
S3_SECRET_KEY = "s3.secret-access-key"
S3_SESSION_TOKEN = "s3.session-token"
S3_REGION = "s3.region"
S3_PATH_STYLE = "s3.path-style-access"
#: PyIceberg's spelling of the inverse switch; honoured when set
S3_FORCE_VIRTUAL = "s3.force-virtual-addressing"
S3_CONNECT_TIMEOUT = "s3.connect-timeout"
S3_REQUEST_TIMEOUT = "s3.request-timeout"
GCS_PROJECT = "gcs.project-id"
GCS_TOKEN = "gcs.oauth2.token"
GCS_TOKEN_EXPIRES = "gcs.oauth2.token-expires-at"
GCS_HOST = "gcs.service.host"
WAREHOUSE = "warehouse"

_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


def is_secret_property(key: str) -> bool:
    """Whether the value of property ``key`` must not be shown (secret keys, tokens, passwords)."""
    return is_secret_key(key)


def redacted(properties: Mapping[str, Any]) -> dict[str, Any]:
    """``properties`` with secret values replaced by ``***`` (:func:`procedures.errors.redact_properties`)."""
    return redact_properties(properties)


def _first(props: Mapping[str, str], *keys: str) -> str | None:
    for key in keys:
        value = props.get(key)
        if value is not None and str(value).strip() != "":
            return str(value).strip()
    return None


def _flag(props: Mapping[str, str], key: str) -> bool | None:
    value = props.get(key)
    if value is None or str(value).strip() == "":
        return None
    v = str(value).strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise StorageConfigError(f"{key}: expected true or false, got {value!r}", property=key)


def _seconds(props: Mapping[str, str], key: str) -> float | None:
    value = _first(props, key)
    if value is None:
        return None
    try:
        # Java gives these in milliseconds
        return float(value) / 1000.0
    except ValueError:
        raise StorageConfigError(f"{key}: expected milliseconds, got {value!r}", property=key) from None


def _endpoint(value: str, key: str) -> tuple[str, str]:
    """``(scheme, host[:port])`` of an endpoint given as ``http://host:port`` or ``host:port``."""
    if "://" not in value:
        return "https", value.rstrip("/")
    parts = urlsplit(value)
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.netloc:
        raise StorageConfigError(f"{key}: expected http://host[:port] or https://host[:port], got {value!r}",
                                 property=key)
    return scheme, parts.netloc


def _put(opts: dict[str, Any], **values: Any) -> None:
    """Set the options whose value is not None."""
    opts.update((k, v) for k, v in values.items() if v is not None)


def s3_options(props: Mapping[str, str]) -> dict[str, Any]:
    """Keyword arguments of ``pyarrow.fs.S3FileSystem`` for Iceberg's ``s3.*`` properties.

    With ``s3.endpoint`` set, ``s3.access-key-id`` and ``s3.secret-access-key`` are required (the
    AWS default credential chain would otherwise go looking for credentials elsewhere), or else
    both of ``AWS_ACCESS_KEY_ID`` and ``AWS_SECRET_ACCESS_KEY`` in the environment (with
    ``AWS_SESSION_TOKEN`` when set): a Spark Connect server hides every conf key that matches
    ``spark.redaction.regex`` from its clients, so there the secret cannot come from the catalog's
    conf.  A given ``s3.access-key-id`` without its secret (what a Connect client sees) takes the
    environment's secret when ``AWS_ACCESS_KEY_ID`` is that same key.  The region defaults to
    ``us-east-1`` so no region lookup leaves for AWS.
    """
    opts: dict[str, Any] = {}
    access = _first(props, S3_ACCESS_KEY, "client.access-key-id")
    secret = _first(props, S3_SECRET_KEY, "client.secret-access-key")
    token = _first(props, S3_SESSION_TOKEN, "client.session-token")
    region = _first(props, S3_REGION, "client.region")
    endpoint = _first(props, S3_ENDPOINT)
    if access is not None and secret is None:
        # Spark Connect shows a client s3.access-key-id but hides s3.secret-access-key: the
        # environment's secret completes the pair when its access key is the same one
        env_access, env_secret, env_token = _environment_keys()
        if env_access == access:
            secret, token = env_secret, token if token is not None else env_token
    if (access is None) != (secret is None):
        missing = S3_SECRET_KEY if secret is None else S3_ACCESS_KEY
        hint = (" (on Spark Connect the server hides s3.secret-access-key from its clients: set "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment)"
                if missing == S3_SECRET_KEY else "")
        raise StorageConfigError(f"S3 credentials are incomplete: set {missing} together with "
                                 f"{S3_ACCESS_KEY if missing == S3_SECRET_KEY else S3_SECRET_KEY}{hint}",
                                 property=missing)
    if token is not None and access is None:
        raise StorageConfigError(f"{S3_SESSION_TOKEN} is set without {S3_ACCESS_KEY} and {S3_SECRET_KEY}",
                                 property=S3_ACCESS_KEY)
    if endpoint is not None:
        if access is None:
            access, secret, token = _environment_keys()
        if access is None:
            raise StorageConfigError(
                f"{S3_ENDPOINT} is set ({endpoint}) but no credentials are: set {S3_ACCESS_KEY} and "
                f"{S3_SECRET_KEY} (as spark.sql.catalog.<name>.{S3_ACCESS_KEY} and "
                f".{S3_SECRET_KEY}), or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment "
                "(on Spark Connect the server hides conf keys matching spark.redaction.regex from its "
                "clients: there the environment is the way)", property=S3_ACCESS_KEY)
        scheme, host = _endpoint(endpoint, S3_ENDPOINT)
        opts["endpoint_override"] = host
        opts["scheme"] = scheme
        region = region or "us-east-1"
    _put(opts, access_key=access, secret_key=secret, session_token=token, region=region)
    path_style = _flag(props, S3_PATH_STYLE)
    virtual = _flag(props, S3_FORCE_VIRTUAL)
    if virtual is None:
        # Java's default is virtual-hosted addressing unless s3.path-style-access=true
        virtual = not path_style if path_style is not None else endpoint is None
    opts["force_virtual_addressing"] = virtual
    _put(opts, connect_timeout=_seconds(props, S3_CONNECT_TIMEOUT),
         request_timeout=_seconds(props, S3_REQUEST_TIMEOUT))
    return opts


def _environment_keys() -> tuple[str | None, str | None, str | None]:
    """``(access key, secret key, session token)`` from the AWS variables of the environment, when
    both keys are set (non-empty); else three Nones."""
    access = os.environ.get("AWS_ACCESS_KEY_ID") or None
    secret = os.environ.get("AWS_SECRET_ACCESS_KEY") or None
    if access is None or secret is None:
        return None, None, None
    return access, secret, os.environ.get("AWS_SESSION_TOKEN") or None


def gcs_options(props: Mapping[str, str]) -> dict[str, Any]:
    """Keyword arguments of ``pyarrow.fs.GcsFileSystem`` for Iceberg's ``gcs.*`` properties."""
    opts: dict[str, Any] = {}
    _put(opts, project_id=_first(props, GCS_PROJECT))
    token = _first(props, GCS_TOKEN)
    if token is not None:
        opts["access_token"] = token
        expires = _first(props, GCS_TOKEN_EXPIRES)
        if expires is None:
            when = _dt.datetime.now(_dt.timezone.utc) + _dt.timedelta(days=365)
        else:
            try:
                when = _dt.datetime.fromtimestamp(int(expires) / 1000.0, _dt.timezone.utc)
            except ValueError:
                raise StorageConfigError(f"{GCS_TOKEN_EXPIRES}: expected epoch milliseconds, got {expires!r}",
                                         property=GCS_TOKEN_EXPIRES) from None
        opts["credential_token_expiration"] = when
    host = _first(props, GCS_HOST)
    if host is not None:
        scheme, netloc = _endpoint(host, GCS_HOST)
        opts["endpoint_override"] = netloc
        opts["scheme"] = scheme
    return opts


def filesystem_for(path: str, props: Mapping[str, str]) -> pafs.FileSystem:
    """The ``pyarrow.fs`` filesystem for non-local ``path`` configured from ``props``."""
    scheme = urlsplit(path).scheme.lower()
    if scheme in S3_SCHEMES:
        options = s3_options(props)
        try:
            return pafs.S3FileSystem(**options)
        except (pa.ArrowInvalid, ValueError, TypeError) as e:
            raise StorageConfigError(f"Cannot configure S3 for {path!r}: {e}", property=S3_ENDPOINT,
                                     location=path) from e
    if scheme in GCS_SCHEMES:
        try:
            return pafs.GcsFileSystem(**gcs_options(props))
        except (pa.ArrowInvalid, ValueError, TypeError) as e:
            raise StorageConfigError(f"Cannot configure GCS for {path!r}: {e}", property=GCS_HOST,
                                     location=path) from e
    if scheme in HADOOP_SCHEMES:
        try:
            return pafs.FileSystem.from_uri(path)[0]
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, OSError) as e:
            raise StorageConfigError(f"Cannot open a filesystem for {path!r}: {e}", property=WAREHOUSE,
                                     location=path) from e
    raise StorageConfigError(
        f"No FileIO for scheme {scheme!r} in {path!r}: supported schemes are "
        f"{', '.join(s + '://' for s in SUPPORTED_SCHEMES)} and local paths; set the catalog's "
        f"{WAREHOUSE!r} property (or the table location) to one of them", property=WAREHOUSE, location=path)


def _endpoint_text(scheme: str, props: Mapping[str, str]) -> str:
    if scheme in S3_SCHEMES:
        return _first(props, S3_ENDPOINT) or "the AWS S3 endpoint"
    return _first(props, GCS_HOST) or "the Google Cloud Storage endpoint"


def check_bucket(fs: pafs.FileSystem, path: str, props: Mapping[str, str]) -> None:
    """Verify once per filesystem that the bucket of object-store ``path`` exists and answers.

    Raises :class:`StorageConfigError` naming ``s3.endpoint`` (unreachable), the credential
    properties (refused) or the bucket and ``warehouse`` (no such bucket); nothing is written.
    """
    parts = urlsplit(path)
    scheme, bucket = parts.scheme.lower(), parts.netloc
    if not bucket:
        raise StorageConfigError(f"{path!r} names no bucket: set {WAREHOUSE!r} to {scheme}://<bucket>/<path>",
                                 property=WAREHOUSE, location=path)
    where = _endpoint_text(scheme, props)
    endpoint_key = S3_ENDPOINT if scheme in S3_SCHEMES else GCS_HOST
    try:
        info = fs.get_file_info(bucket)
    except OSError as e:
        text = str(e)
        upper = text.upper()
        if any(m in upper for m in ("ACCESS_DENIED", "ACCESSDENIED", "INVALID_ACCESS_KEY", "SIGNATURE",
                                    "HTTP STATUS 403", "FORBIDDEN", "UNAUTHORIZED", "HTTP STATUS 401")):
            keys = (S3_ACCESS_KEY, S3_SECRET_KEY) if scheme in S3_SCHEMES else (GCS_TOKEN,)
            raise StorageConfigError(
                f"{where} refused the credentials for bucket {bucket!r}: check {' and '.join(keys)} ({text})",
                property=keys[0], location=path) from e
        raise StorageConfigError(
            f"Cannot reach {where} for {path!r}: check {endpoint_key} (and that the server runs) ({text})",
            property=endpoint_key, location=path) from e
    if info.type == pafs.FileType.NotFound:
        warehouse = _first(props, WAREHOUSE)
        now = f" (now {warehouse})" if warehouse else ""
        raise StorageConfigError(
            f"Bucket {bucket!r} does not exist at {where}: create it, or set the catalog's {WAREHOUSE!r} "
            f"property{now} to a location in an existing bucket", property=WAREHOUSE, location=path)
