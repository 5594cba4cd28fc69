"""Catalogs: the ``Catalog`` contract, the ``hadoop`` and ``jdbc`` catalogs, and configuration."""

from procedures.catalog.base import (
    Catalog,
    Identifier,
    NamespacePropertiesUpdate,
    Table,
    identifier_to_string,
    parse_identifier,
    parse_namespace,
)
from procedures.catalog.config import catalog_names, default_catalog_name, load_catalog, resolve_identifier
from procedures.catalog.hadoop import HadoopCatalog
from procedures.catalog.jdbc import JdbcCatalog

__all__ = [
    "Catalog",
    "Identifier",
    "NamespacePropertiesUpdate",
    "Table",
    "HadoopCatalog",
    "JdbcCatalog",
    "load_catalog",
    "resolve_identifier",
    "catalog_names",
    "default_catalog_name",
    "identifier_to_string",
    "parse_identifier",
    "parse_namespace",
]
