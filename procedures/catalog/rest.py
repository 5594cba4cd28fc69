"""The Iceberg REST catalog (``type=rest``), as Iceberg Java's ``RESTCatalog`` speaks it.

Configured with Iceberg's keys: ``uri`` (required), ``warehouse`` (sent to ``GET /v1/config``),
``prefix`` (else the server's), ``credential`` / ``token`` / ``oauth2-server-uri`` / ``scope``,
``header.<Name>`` and FileIO properties (``s3.endpoint``...).  ``GET /v1/config`` is asked once: its
``defaults`` sit under the user's properties and its ``overrides`` over them; its ``endpoints``, when
the server lists them, are checked before each call so that a missing one is a clear error.

Commits send what the shared transactional core computed: the table requirements (``assert-table-uuid``,
``assert-ref-snapshot-id`` for every ref the change moves, ...) and the metadata updates
(``add-snapshot``, ``set-snapshot-ref``, ``remove-snapshots``, ``set-statistics``...).  The server applies
them to its current metadata; a 409 is a lost race that the core's retry loop re-bases and replays, a
5xx or a timeout is :class:`~procedures.errors.CommitStateUnknownError` and nothing written is deleted.
A create is a staged create and a commit with ``assert-create`` and the updates that build the table
(the metadata, ids and uuid the core built are kept exactly).

Storage credentials the server vends (a LoadTableResult's ``config`` and ``storage-credentials``) configure
the table's FileIO, which Spark tasks receive with the table; ``header.X-Iceberg-Access-Delegation=
vended-credentials`` asks for them.  ``rest.sigv4-enabled`` (AWS request signing) is not supported.
"""

from __future__ import annotations

import logging
from typing import Any, Iterable, Mapping, Sequence
from urllib.parse import quote

from procedures.catalog.base import (
    Catalog,
    Identifier,
    IdentifierLike,
    NamespacePropertiesUpdate,
    Table,
    parse_identifier,
    parse_namespace,
)
from procedures.catalog.overlap import check_table_folders
from procedures.catalog.rest_client import RestClient, shared_client
from procedures.catalog.rest_messages import (
    commit_request,
    create_updates,
    namespace_path,
    table_identifier_json,
)
from procedures.core.kernel import updates as metadata_updates
from procedures.errors import (
    CatalogConfigError,
    CommitFailedError,
    IcebergError,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from procedures.io.fileio import FileIO
from procedures.spec.metadata import TableMetadata, metadata_from_dict
from procedures.spec.partitioning import spec_to_json
from procedures.spec.schema import schema_to_json
from procedures.spec.sorting import sort_order_to_json

__all__ = ["RestCatalog", "SNAPSHOT_LOADING_MODES", "DEFAULT_ENDPOINTS"]

log = logging.getLogger(__name__)

SNAPSHOT_LOADING_MODES = ("all", "refs")
#: what a server that lists no endpoints supports (the spec's defaults for v1)
DEFAULT_ENDPOINTS = frozenset({
    "GET /v1/{prefix}/namespaces", "POST /v1/{prefix}/namespaces", "GET /v1/{prefix}/namespaces/{namespace}",
    "DELETE /v1/{prefix}/namespaces/{namespace}", "POST /v1/{prefix}/namespaces/{namespace}/properties",
    "GET /v1/{prefix}/namespaces/{namespace}/tables", "POST /v1/{prefix}/namespaces/{namespace}/tables",
    "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "POST /v1/{prefix}/namespaces/{namespace}/tables/{table}",
    "DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}", "POST /v1/{prefix}/tables/rename",
    "POST /v1/{prefix}/namespaces/{namespace}/register",
})
_HEAD_NAMESPACE = "HEAD /v1/{prefix}/namespaces/{namespace}"
_HEAD_TABLE = "HEAD /v1/{prefix}/namespaces/{namespace}/tables/{table}"
_CREDENTIALS = "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}/credentials"


class RestCatalog(Catalog):
    """A catalog served over Iceberg's REST protocol."""

    def __init__(self, name: str, properties: Mapping[str, str]) -> None:
        props = dict(properties)
        uri = props.get("uri")
        if not uri:
            raise CatalogConfigError(f"rest catalog {name} has no uri; set spark.sql.catalog.{name}.uri "
                                     "(e.g. http://localhost:8181)")
        if str(props.get("rest.sigv4-enabled", "false")).strip().lower() == "true":
            raise CatalogConfigError(f"rest catalog {name}: rest.sigv4-enabled (AWS SigV4 request signing) is not "
                                     "supported; use an OAuth2 credential or token")
        client = shared_client(str(uri), props, catalog=name)
        config = self._config(client, props, name)
        merged = {**config.get("defaults", {}), **props, **config.get("overrides", {})}
        super().__init__(name, merged)
        self.client = client if merged.get("uri", uri) == uri else shared_client(merged["uri"], merged, catalog=name)
        self.prefix = str(merged.get("prefix") or "").strip("/")
        listed = config.get("endpoints")
        self.endpoints = frozenset(listed) if listed else DEFAULT_ENDPOINTS
        mode = str(merged.get("snapshot-loading-mode", "all")).lower()
        if mode not in SNAPSHOT_LOADING_MODES:
            raise CatalogConfigError(f"rest catalog {name}: snapshot-loading-mode must be all or refs, got {mode!r}")
        self.snapshot_loading_mode = mode
        warehouse = merged.get("warehouse")
        self.warehouse = str(warehouse) if warehouse and ("/" in str(warehouse)) else None

    @staticmethod
    def _config(client: RestClient, props: Mapping[str, str], name: str) -> dict:
        params = {"warehouse": props["warehouse"]} if props.get("warehouse") else None

        def unknown_warehouse(code: int, kind: str, message: str) -> IcebergError | None:
            if code in (400, 404) and params:
                return CatalogConfigError(f"rest catalog {name}: the server refused warehouse "
                                          f"{props['warehouse']!r} ({message}); check spark.sql.catalog.{name}.warehouse")
            return None

        return client.request("GET", "v1/config", params=params, on_error=unknown_warehouse) or {}

    # ------------------------------------------------------------------------------------ paths
    def _path(self, *parts: str) -> str:
        base = ["v1"] + ([self.prefix] if self.prefix else [])
        return "/".join(base + list(parts))

    def _require(self, endpoint: str) -> None:
        if endpoint not in self.endpoints:
            raise CatalogConfigError(f"rest catalog {self.name}: the server does not offer {endpoint}, which this "
                                     "operation needs")

    def _table_path(self, ident: Identifier) -> str:
        return self._path("namespaces", namespace_path(ident[:-1]), "tables", _quote(ident[-1]))

    # ------------------------------------------------------------------------------------ namespaces
    def create_namespace(self, namespace: IdentifierLike, properties: Mapping[str, str] | None = None) -> None:
        """``POST /namespaces``; NamespaceAlreadyExistsError when it exists."""
        ns = parse_namespace(namespace)
        self._require("POST /v1/{prefix}/namespaces")

        def exists(code: int, kind: str, message: str) -> IcebergError | None:
            return NamespaceAlreadyExistsError(f"Namespace {'.'.join(ns)} already exists") if code == 409 else None

        self.client.request("POST", self._path("namespaces"),
                            body={"namespace": list(ns), "properties": dict(properties or {})}, on_error=exists)

    def list_namespaces(self, parent: IdentifierLike = ()) -> list[Identifier]:
        """Namespaces directly below ``parent``, sorted (every page)."""
        ns = parse_namespace(parent) if parent else ()
        self._require("GET /v1/{prefix}/namespaces")
        params = {"parent": "\x1f".join(ns)} if ns else {}
        found = [tuple(n) for n in self._pages(self._path("namespaces"), params, "namespaces", _no_namespace(ns))]
        return sorted(found)

    def namespace_exists(self, namespace: IdentifierLike) -> bool:
        """Whether the namespace exists (``HEAD`` when offered, else a load)."""
        ns = parse_namespace(namespace)
        try:
            if _HEAD_NAMESPACE in self.endpoints:
                self.client.request("HEAD", self._path("namespaces", namespace_path(ns)), on_error=_no_namespace(ns))
            else:
                self.load_namespace_properties(ns)
        except NoSuchNamespaceError:
            return False
        return True

    def drop_namespace(self, namespace: IdentifierLike) -> None:
        """``DELETE /namespaces/{ns}``; NoSuchNamespaceError / NamespaceNotEmptyError."""
        ns = parse_namespace(namespace)
        self._require("DELETE /v1/{prefix}/namespaces/{namespace}")

        def errors(code: int, kind: str, message: str) -> IcebergError | None:
            if code == 404:
                return NoSuchNamespaceError(f"Namespace {'.'.join(ns)} does not exist")
            if code == 409:
                return NamespaceNotEmptyError(f"Namespace {'.'.join(ns)} is not empty")
            return None

        self.client.request("DELETE", self._path("namespaces", namespace_path(ns)), on_error=errors)

    def load_namespace_properties(self, namespace: IdentifierLike) -> dict[str, str]:
        """The namespace's properties."""
        ns = parse_namespace(namespace)
        self._require("GET /v1/{prefix}/namespaces/{namespace}")
        body = self.client.request("GET", self._path("namespaces", namespace_path(ns)), on_error=_no_namespace(ns))
        return dict((body or {}).get("properties") or {})

    def update_namespace_properties(self, namespace: IdentifierLike, removals: Iterable[str] = (),
                                    updates: Mapping[str, str] | None = None) -> NamespacePropertiesUpdate:
        """Remove and set namespace properties in one request."""
        ns = parse_namespace(namespace)
        self._require("POST /v1/{prefix}/namespaces/{namespace}/properties")
        body = self.client.request("POST", self._path("namespaces", namespace_path(ns), "properties"),
                                   body={"removals": list(removals), "updates": dict(updates or {})},
                                   on_error=_no_namespace(ns)) or {}
        return NamespacePropertiesUpdate(removed=tuple(body.get("removed") or ()), updated=tuple(body.get("updated") or ()),
                                         missing=tuple(body.get("missing") or ()))

    # ------------------------------------------------------------------------------------ tables
    def list_tables(self, namespace: IdentifierLike) -> list[Identifier]:
        """Tables of a namespace, sorted (every page)."""
        ns = parse_namespace(namespace)
        self._require("GET /v1/{prefix}/namespaces/{namespace}/tables")
        found = self._pages(self._path("namespaces", namespace_path(ns), "tables"), {}, "identifiers",
                            _no_namespace(ns))
        return sorted((*i.get("namespace", ()), i["name"]) for i in found)

    def load_table(self, identifier: IdentifierLike, *, snapshots: str | None = None) -> Table:
        """``GET .../tables/{table}`` with every snapshot (``snapshots=refs`` only when asked here or by
        ``snapshot-loading-mode``: maintenance needs them all, so the procedures never ask for refs)."""
        ident = parse_identifier(identifier)
        self._require("GET /v1/{prefix}/namespaces/{namespace}/tables/{table}")
        mode = snapshots or "all"
        if mode not in SNAPSHOT_LOADING_MODES:
            raise CatalogConfigError(f"snapshots must be all or refs, got {mode!r}")
        body = self.client.request("GET", self._table_path(ident), params={"snapshots": mode},
                                   on_error=_no_table(ident))
        return self._table(ident, body)

    def table_exists(self, identifier: IdentifierLike) -> bool:
        """Whether the table exists (``HEAD`` when offered, else a load)."""
        ident = parse_identifier(identifier)
        if _HEAD_TABLE not in self.endpoints:
            return super().table_exists(ident)
        try:
            self.client.request("HEAD", self._table_path(ident), on_error=_no_table(ident))
        except (NoSuchTableError, NoSuchNamespaceError):
            return False
        return True

    def default_table_location(self, identifier: IdentifierLike) -> str:
        """The namespace's ``location`` + table name, else where the server would put it (asked with a
        staged create, which creates nothing)."""
        ident = parse_identifier(identifier)
        ns_location = self.load_namespace_properties(ident[:-1]).get("location")
        if ns_location:
            return f"{ns_location.rstrip('/')}/{ident[-1]}"
        body = self.client.request("POST", self._path("namespaces", namespace_path(ident[:-1]), "tables"),
                                   body={"name": ident[-1], "schema": {"type": "struct", "schema-id": 0, "fields": []},
                                         "stage-create": True},
                                   on_error=_no_namespace(ident[:-1]))
        return str(body["metadata"]["location"])

    def create_table(self, identifier: IdentifierLike, metadata: TableMetadata) -> Table:
        """A staged create, then a commit of ``assert-create`` and the updates that build ``metadata``."""
        ident = parse_identifier(identifier)
        self._require("POST /v1/{prefix}/namespaces/{namespace}/tables")
        check_table_folders(self, ident, metadata, action=f"create table {'.'.join(ident)}")

        def exists(code: int, kind: str, message: str) -> IcebergError | None:
            if code == 409:
                return TableAlreadyExistsError(f"Table {'.'.join(ident)} already exists")
            return _no_namespace(ident[:-1])(code, kind, message)

        staged = {"name": ident[-1], "location": metadata.location, "schema": schema_to_json(metadata.schema()),
                  "partition-spec": spec_to_json(metadata.spec()),
                  "write-order": sort_order_to_json(metadata.sort_order()),
                  "stage-create": True, "properties": dict(metadata.properties)}
        self.client.request("POST", self._path("namespaces", namespace_path(ident[:-1]), "tables"), body=staged,
                            on_error=exists)
        request = commit_request(ident, [metadata_updates.AssertCreate()], create_updates(metadata), metadata.format_version)
        body = self.client.request("POST", self._table_path(ident), body=request, on_error=exists,
                                   commit=".".join(ident))
        return self._table(ident, body)

    def register_table(self, identifier: IdentifierLike, metadata_location: str) -> Table:
        """``POST .../register`` of an existing metadata file."""
        ident = parse_identifier(identifier)
        self._require("POST /v1/{prefix}/namespaces/{namespace}/register")

        def exists(code: int, kind: str, message: str) -> IcebergError | None:
            if code == 409:
                return TableAlreadyExistsError(f"Table {'.'.join(ident)} already exists")
            return _no_namespace(ident[:-1])(code, kind, message)

        body = self.client.request("POST", self._path("namespaces", namespace_path(ident[:-1]), "register"),
                                   body={"name": ident[-1], "metadata-location": metadata_location}, on_error=exists)
        return self._table(ident, body)

    def drop_table(self, identifier: IdentifierLike, purge: bool = False) -> None:
        """``DELETE .../tables/{table}``; with ``purge`` the server deletes the table's files
        (``purgeRequested=true``, as Iceberg Java's REST client asks)."""
        ident = parse_identifier(identifier)
        self._require("DELETE /v1/{prefix}/namespaces/{namespace}/tables/{table}")
        self.client.request("DELETE", self._table_path(ident), params={"purgeRequested": str(bool(purge)).lower()},
                            on_error=_no_table(ident))

    def rename_table(self, source: IdentifierLike, target: IdentifierLike) -> None:
        """``POST /tables/rename``."""
        src, dst = parse_identifier(source), parse_identifier(target)
        self._require("POST /v1/{prefix}/tables/rename")

        def errors(code: int, kind: str, message: str) -> IcebergError | None:
            if code == 409:
                return TableAlreadyExistsError(f"Table {'.'.join(dst)} already exists")
            if code == 404 and "Namespace" in kind:
                return NoSuchNamespaceError(message)
            if code == 404 and "Table" in kind:
                return NoSuchTableError(f"Table {'.'.join(src)} does not exist")
            return None

        self.client.request("POST", self._path("tables", "rename"),
                            body={"source": table_identifier_json(src), "destination": table_identifier_json(dst)},
                            on_error=errors)

    def commit_table(self, table: Table, base: TableMetadata, new: TableMetadata) -> Table:
        """A REST commit needs the change as updates: the core's transaction calls
        :meth:`commit_changes`; a bare metadata swap cannot be sent."""
        raise CommitFailedError(f"Cannot commit to {table.name} without its updates: commit through the "
                                "transaction (procedures.core.kernel.transaction.commit)", table=table.name, retryable=False)

    def commit_changes(self, table: Table, base: TableMetadata, new: TableMetadata,
                       updates: Sequence[metadata_updates.MetadataUpdate]) -> Table:
        """``POST .../tables/{table}`` with the requirements derived from ``base`` (every ref the change
        moves asserted at its head in ``base``) and ``updates``; the response is the new table."""
        ident = tuple(table.identifier)
        self._require("POST /v1/{prefix}/namespaces/{namespace}/tables/{table}")
        requirements = metadata_updates.requirements_for(base, list(updates), assert_every_ref=True)
        request = commit_request(ident, requirements, updates, new.format_version)
        body = self.client.request("POST", self._table_path(ident), body=request, on_error=_no_table(ident),
                                   commit=table.name)
        return self._table(ident, body)

    # ------------------------------------------------------------------------------------ helpers
    def _table(self, ident: Identifier, body: Mapping[str, Any]) -> Table:
        metadata = metadata_from_dict(body["metadata"])
        io_props = {**self.properties, **(body.get("config") or {})}
        credentials = body.get("storage-credentials") or ()
        if not credentials and _CREDENTIALS in self.endpoints:
            # a server that advertises the credentials endpoint may vend them only there
            found = self.client.request("GET", f"{self._table_path(ident)}/credentials", on_error=_no_table(ident))
            credentials = (found or {}).get("storage-credentials") or ()
        io_props.update(_credentials_for(metadata.location, credentials))
        io = FileIO(io_props) if io_props != self.properties else self.io
        return Table(ident, metadata, body.get("metadata-location"), io, self)

    def _pages(self, path: str, params: Mapping[str, str], key: str, on_error: Any) -> list[Any]:
        out: list[Any] = []
        token: str | None = None
        while True:
            query = dict(params)
            if token:
                query["pageToken"] = token
            body = self.client.request("GET", path, params=query or None, on_error=on_error) or {}
            out.extend(body.get(key) or [])
            token = body.get("next-page-token")
            if not token:
                return out


def _quote(segment: str) -> str:
    return quote(segment, safe="")


def _credentials_for(location: str, credentials: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The config of the vended credential with the longest prefix of ``location``."""
    best: Mapping[str, Any] | None = None
    for cred in credentials:
        prefix = str(cred.get("prefix") or "")
        if location.startswith(prefix) and (best is None or len(prefix) > len(str(best.get("prefix") or ""))):
            best = cred
    return {str(k): str(v) for k, v in (best or {}).get("config", {}).items()}


# A 404 names what is missing by its error type; a 404 of another type (an unknown route, prefix or
# warehouse) is a configuration problem and keeps the general error, which says so.
def _no_namespace(ns: Sequence[str]) -> Any:
    def error(code: int, kind: str, message: str) -> IcebergError | None:
        if code == 404 and "Namespace" in kind and ns:
            return NoSuchNamespaceError(f"Namespace {'.'.join(ns)} does not exist")
        return None

    return error


def _no_table(ident: Sequence[str]) -> Any:
    def error(code: int, kind: str, message: str) -> IcebergError | None:
        if code == 404 and "Namespace" in kind:
            return NoSuchNamespaceError(f"Namespace {'.'.join(ident[:-1])} does not exist")
        if code == 404 and "Table" in kind:
            return NoSuchTableError(f"Table {'.'.join(ident)} does not exist")
        return None

    return error
