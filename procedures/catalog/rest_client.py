"""HTTP for the REST catalog, on ``requests``: authentication (a static bearer token, or OAuth2 client
credentials with the token refreshed before it expires), extra headers, retries with backoff on
429/503, and the protocol's error responses turned into our typed errors.

Secrets (``credential``, ``token``, the tokens the server issues) never reach a message or a log: the
errors name the property to fix, not its value.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from procedures.errors import (
    AlreadyExistsError,
    CatalogConfigError,
    CommitFailedError,
    CommitStateUnknownError,
    IcebergError,
    MissingDependencyError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
    ValidationError,
    redact_text,
)

__all__ = ["RestAuthError", "RestClient", "OAuth2Token", "shared_client", "CONNECT_TIMEOUT_S", "READ_TIMEOUT_S"]

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 120.0
#: retries of a request answered 429 or 503 (the server did not process it), with backoff
UNAVAILABLE_RETRIES = 5
#: refresh an OAuth2 token this long before it expires
REFRESH_MARGIN_S = 60.0
#: the codes after which a commit's outcome cannot be known (the spec's rule: keep the files)
UNKNOWN_COMMIT_CODES = frozenset({500, 502, 504})


class RestAuthError(CatalogConfigError):
    """The REST catalog refused our credentials (401) or the operation (403)."""


def _requests() -> Any:
    try:
        import requests  # noqa: PLC0415 -- a runtime dependency, loaded when a REST catalog is opened
    except ImportError as e:  # pragma: no cover -- declared in pyproject
        raise MissingDependencyError("the REST catalog needs requests: pip install requests") from e
    return requests


@dataclass
class OAuth2Token:
    """An access token and when it expires (monotonic seconds; None: never)."""

    value: str
    expires_at: float | None

    def fresh(self, now: float) -> bool:
        """Whether the token is good for at least :data:`REFRESH_MARGIN_S` more seconds."""
        return self.expires_at is None or now < self.expires_at - REFRESH_MARGIN_S


class RestClient:
    """Requests to one REST catalog server (``uri``, e.g. ``http://host:8181``), authenticated as the
    catalog properties say: ``token`` (a static bearer token), ``credential`` (``client_id:secret``
    or a secret alone, exchanged at ``oauth2-server-uri``, default ``<uri>/v1/oauth/tokens``, for a
    token with ``scope``, default ``catalog``), ``header.<Name>`` (extra headers on every request)."""

    def __init__(self, uri: str, properties: Mapping[str, str], *, catalog: str) -> None:
        self.uri = uri.rstrip("/")
        self.catalog = catalog
        self._http = _requests().Session()
        self._http.headers.update({"Content-Type": "application/json", "Accept": "application/json",
                                   "User-Agent": "iceberg-procedures"})
        for key, value in properties.items():
            if key.startswith("header."):
                self._http.headers[key[len("header."):]] = str(value)
        self._static_token = properties.get("token")
        self._credential = properties.get("credential")
        self._token_uri = properties.get("oauth2-server-uri") or f"{self.uri}/v1/oauth/tokens"
        self._scope = properties.get("scope", "catalog")
        self._token: OAuth2Token | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------------------------------ auth
    def _fetch_token(self) -> OAuth2Token:
        client_id, _, secret = str(self._credential).rpartition(":")
        form = {"grant_type": "client_credentials", "client_secret": secret, "scope": self._scope}
        if client_id:
            form["client_id"] = client_id
        requests = _requests()
        try:
            response = requests.post(self._token_uri, data=form, timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S),
                                     headers={"Accept": "application/json"})
        except requests.RequestException as e:
            raise CatalogConfigError(f"REST catalog {self.catalog}: cannot reach the OAuth2 token endpoint "
                                     f"{self._token_uri} ({type(e).__name__}); check oauth2-server-uri") from None
        if response.status_code != 200:
            raise RestAuthError(f"REST catalog {self.catalog}: the OAuth2 token endpoint refused the client "
                                f"credentials (HTTP {response.status_code}); check the catalog's credential "
                                "(client_id:client_secret) and scope")
        body = response.json()
        token = body.get("access_token")
        if not token:
            raise RestAuthError(f"REST catalog {self.catalog}: the OAuth2 token endpoint returned no access_token")
        expires_in = body.get("expires_in")
        expires_at = time.monotonic() + float(expires_in) if expires_in else None
        return OAuth2Token(str(token), expires_at)

    def _authorization(self, *, renew: bool = False) -> str | None:
        if self._credential:
            with self._lock:
                if renew or self._token is None or not self._token.fresh(time.monotonic()):
                    self._token = self._fetch_token()
                return f"Bearer {self._token.value}"
        if self._static_token:
            return f"Bearer {self._static_token}"
        return None

    # ------------------------------------------------------------------------------------ requests
    def request(self, method: str, path: str, *, body: Any = None, params: Mapping[str, str] | None = None,
                on_error: Callable[[int, str, str], IcebergError | None] | None = None,
                commit: str | None = None) -> Any:
        """``method`` ``<uri>/<path>``; returns the decoded JSON body (None for an empty one).

        ``on_error(code, type, message)`` may turn an error response into a specific typed error (else
        the general mapping applies).  ``commit`` names the table when the request is a commit: a
        server error, a timeout or a lost connection is then :class:`CommitStateUnknownError`, since
        the change may have landed."""
        requests = _requests()
        url = f"{self.uri}/{path.lstrip('/')}"
        renewed = False
        attempt = 0
        while True:
            headers = {}
            auth = self._authorization()
            if auth:
                headers["Authorization"] = auth
            try:
                response = self._http.request(method, url, json=body, params=params, headers=headers,
                                              timeout=(CONNECT_TIMEOUT_S, READ_TIMEOUT_S))
            except requests.ConnectTimeout:
                if commit:
                    raise CommitFailedError(f"Cannot commit to {commit}: REST catalog {self.catalog} at {self.uri} "
                                            "did not accept a connection", table=commit) from None
                raise CatalogConfigError(f"REST catalog {self.catalog}: cannot connect to {self.uri} (timed out); "
                                         "check the catalog's uri and that the server is running") from None
            except requests.ConnectionError as e:
                if commit and not _refused(e):
                    raise CommitStateUnknownError(
                        f"Cannot tell whether the commit to {commit} happened: the connection to REST catalog "
                        f"{self.catalog} failed ({type(e).__name__}); reload the table to see", table=commit) from None
                if commit:
                    raise CommitFailedError(f"Cannot commit to {commit}: REST catalog {self.catalog} at {self.uri} "
                                            "refused the connection", table=commit) from None
                raise CatalogConfigError(f"REST catalog {self.catalog}: cannot connect to {self.uri} "
                                         f"({_reason(e)}); check the catalog's uri and that the server is running") from None
            except requests.Timeout:
                if commit:
                    raise CommitStateUnknownError(
                        f"Cannot tell whether the commit to {commit} happened: REST catalog {self.catalog} did not "
                        f"answer within {READ_TIMEOUT_S:.0f} s; reload the table to see", table=commit) from None
                raise CatalogConfigError(f"REST catalog {self.catalog}: {self.uri} did not answer within "
                                         f"{READ_TIMEOUT_S:.0f} s") from None
            code = response.status_code
            if code == 401 and self._credential and not renewed:
                renewed = True
                self._authorization(renew=True)
                continue
            if code in (429, 503) and attempt < UNAVAILABLE_RETRIES:
                attempt += 1
                wait = _retry_after(response) or min(10.0, 0.2 * 2 ** attempt) * (0.5 + random.random() / 2)
                log.info("REST catalog %s answered %d to %s %s; retry %d in %.1f s", self.catalog, code, method,
                         path, attempt, wait)
                time.sleep(wait)
                continue
            if code < 300:
                return response.json() if response.content else None
            raise self._error(response, on_error, commit)

    def _error(self, response: Any, on_error: Callable[[int, str, str], IcebergError | None] | None,
               commit: str | None) -> IcebergError:
        code = response.status_code
        kind, message = _error_body(response)
        message = redact_text(message)
        if on_error is not None:
            specific = on_error(code, kind, message)
            if specific is not None:
                return specific
        if commit:
            if code == 409:
                return CommitFailedError(f"Cannot commit to {commit}: {message}", table=commit, retryable=True)
            if code in UNKNOWN_COMMIT_CODES or code in (429, 503) or code >= 500:
                return CommitStateUnknownError(
                    f"Cannot tell whether the commit to {commit} happened: REST catalog {self.catalog} answered "
                    f"HTTP {code} ({kind}: {message}); reload the table to see whether the change landed",
                    table=commit)
        if code == 401:
            return RestAuthError(f"REST catalog {self.catalog}: not authorized ({message}); set the catalog's "
                                 "credential (OAuth2 client_id:client_secret) or token")
        if code == 403:
            return RestAuthError(f"REST catalog {self.catalog}: forbidden ({message}); the credential or token "
                                 "lacks the privilege for this operation")
        if code == 404:
            if kind == "NoSuchNamespaceException":
                return NoSuchNamespaceError(message)
            if kind == "NoSuchTableException":
                return NoSuchTableError(message)
            return CatalogConfigError(f"REST catalog {self.catalog}: {response.request.method} "
                                      f"{response.url} not found ({message}); check the uri, prefix and warehouse")
        if code == 409:
            if kind == "NamespaceNotEmptyException":
                return NamespaceNotEmptyError(message)
            return AlreadyExistsError(message)
        if code in (400, 422):
            return ValidationError(f"REST catalog {self.catalog} refused the request: {message}")
        if code in (405, 406, 501):
            return CatalogConfigError(f"REST catalog {self.catalog} does not support {response.request.method} "
                                      f"{_path_only(response.url)} ({message})")
        return IcebergError(f"REST catalog {self.catalog} failed: HTTP {code} ({kind}: {message})")

    def close(self) -> None:
        """Close the HTTP connections."""
        self._http.close()


#: the properties that decide who a client talks to and as whom (a client is shared only when all match)
_CLIENT_KEYS = ("token", "credential", "oauth2-server-uri", "scope")
_SHARED: dict[tuple, RestClient] = {}
_SHARED_LOCK = threading.Lock()


def shared_client(uri: str, properties: Mapping[str, str], *, catalog: str) -> RestClient:
    """The process's client for ``uri`` with these credentials and headers: every procedure call opens
    its catalog afresh, and sharing the client keeps its connections and its OAuth2 token (refreshed
    before expiry) instead of asking the token endpoint on every call."""
    identity = tuple((k, str(properties.get(k))) for k in _CLIENT_KEYS) + tuple(
        sorted((k, str(v)) for k, v in properties.items() if k.startswith("header.")))
    key = (uri.rstrip("/"), catalog, identity)
    with _SHARED_LOCK:
        client = _SHARED.get(key)
        if client is None:
            client = _SHARED[key] = RestClient(uri, properties, catalog=catalog)
        return client


def _error_body(response: Any) -> tuple[str, str]:
    try:
        body = response.json()
    except ValueError:
        return "HTTP", (response.text or "").strip()[:300] or response.reason or ""
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict):
        return str(error.get("type") or "HTTP"), str(error.get("message") or "")
    if isinstance(body, dict) and "error_description" in body:  # an OAuth2 error
        return str(body.get("error")), str(body.get("error_description"))
    return "HTTP", str(body)[:300]


def _retry_after(response: Any) -> float | None:
    value = response.headers.get("Retry-After")
    try:
        return min(30.0, max(0.0, float(value))) if value else None
    except ValueError:
        return None


def _refused(error: BaseException) -> bool:
    """Whether a connection error happened before anything was sent (refused, unresolvable host)."""
    text = repr(error)
    return any(s in text for s in ("Connection refused", "NewConnectionError", "Name or service not known",
                                   "nodename nor servname", "Failed to resolve"))


def _reason(error: BaseException) -> str:
    text = repr(error)
    for marker in ("Connection refused", "Name or service not known", "Failed to resolve", "timed out"):
        if marker in text:
            return marker.lower()
    return type(error).__name__


def _path_only(url: str) -> str:
    return url.split("?", 1)[0]


