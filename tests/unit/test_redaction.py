"""Secrets never reach a message, a repr or a log line: passwords in catalog uris (``u:p@`` and
``?password=``), secret properties (``jdbc.password``, ``s3.secret-access-key``, tokens, ...)."""

from __future__ import annotations

import logging

import pytest

from procedures.catalog.config import load_catalog
from procedures.catalog.jdbc import JdbcCatalog, parse_jdbc_uri
from procedures.errors import (
    CatalogConfigError, StorageConfigError, is_secret_key, redact_properties, redact_text,
)
from procedures.framework.context import open_catalog
from procedures.frontend import runner
from procedures.io.fileio import FileIO

SECRET = "Hunter2-s3cr3t"


@pytest.mark.parametrize("uri", [
    f"jdbc:postgresql://alice:{SECRET}@db.example",              # no database
    f"jdbc:postgresql://alice:{SECRET}@db.example:99999/iceberg",  # bad port
    f"jdbc:postgresql://db.example?user=alice&password={SECRET}",  # no database, password in the query
    f"jdbc:mysql://alice:{SECRET}@db.example/iceberg",           # unsupported dialect
    f"jdbc:mysql://db.example/iceberg?user=alice&password={SECRET}",
    f"postgresql+psycopg://alice:{SECRET}@/iceberg",            # no host
])
def test_jdbc_uri_errors_hide_the_password(uri):
    with pytest.raises(CatalogConfigError) as err:
        parse_jdbc_uri(uri)
    assert SECRET not in str(err.value)
    assert "***" in str(err.value)
    # through the catalog configuration and the procedure runner, which wrap the message again
    conf = {"spark.sql.catalog.pg.type": "jdbc", "spark.sql.catalog.pg.uri": uri}
    with pytest.raises(CatalogConfigError) as err:
        load_catalog("pg", conf)
    assert SECRET not in str(err.value)
    with pytest.raises(CatalogConfigError) as err:
        open_catalog("pg", conf)
    assert SECRET not in str(err.value)
    with pytest.raises(CatalogConfigError) as err:
        runner.run("ancestors_of", kwargs={"table": "pg.db.t"}, conf=conf, lenient=True)
    assert SECRET not in str(err.value)


def test_a_secret_property_of_the_wrong_type_is_not_shown():
    conf = {"spark.sql.catalog.c.type": "hadoop", "spark.sql.catalog.c.warehouse": "/tmp/w",
            "spark.sql.catalog.c.s3.secret-access-key": [SECRET]}
    with pytest.raises(CatalogConfigError, match=r"s3.secret-access-key: expected a string value, got list \*\*\*"):
        load_catalog("c", conf)


def test_reprs_hide_passwords(tmp_path):
    uri = f"jdbc:sqlite:{tmp_path}/catalog.db?user=alice&password={SECRET}"
    cat = JdbcCatalog("j", uri, str(tmp_path / "wh"))
    assert SECRET not in repr(cat) and "password=***" in repr(cat)
    parsed = parse_jdbc_uri(f"jdbc:postgresql://alice:{SECRET}@h:5432/db")
    assert parsed.password == SECRET and SECRET not in repr(parsed)
    io = FileIO({"uri": f"jdbc:postgresql://alice:{SECRET}@h/db", "jdbc.password": SECRET,
                 "s3.secret-access-key": SECRET, "s3.session-token": SECRET, "client.secret": SECRET,
                 "s3.access-key-id": SECRET, "warehouse": "/w"})
    assert SECRET not in repr(io) and "'warehouse': '/w'" in repr(io)


def test_errors_built_from_configuration_are_redacted(caplog):
    # every CatalogConfigError (and StorageConfigError) masks what it quotes, whoever raises it
    for cls in (CatalogConfigError, StorageConfigError):
        e = cls(f"Cannot open the metastore thrift://u:{SECRET}@h:9083 (jdbc:derby:;password={SECRET})")
        assert SECRET not in str(e)
    with caplog.at_level(logging.ERROR):
        logging.getLogger("procedures.test").error("%s", CatalogConfigError(f"x ?password={SECRET}"))
    assert SECRET not in caplog.text


@pytest.mark.parametrize("text, shown", [
    ("jdbc:postgresql://u:p@h/db", "jdbc:postgresql://u:***@h/db"),
    ("jdbc:postgresql://u:p/w@x@h:5432/db?sslmode=require", "jdbc:postgresql://u:***@h:5432/db?sslmode=require"),
    ("jdbc:postgresql://h/db?user=u&password=p&ssl=true", "jdbc:postgresql://h/db?user=u&password=***&ssl=true"),
    ("host=h port=5432 dbname=d password=p user=u", "host=h port=5432 dbname=d password=*** user=u"),
    ("jdbc:sqlserver://h;user=u;password=p;db=x", "jdbc:sqlserver://h;user=u;password=***;db=x"),
    ("jdbc:sqlite:/tmp/a.db", "jdbc:sqlite:/tmp/a.db"),
    ("s3://bucket/p/x.parquet", "s3://bucket/p/x.parquet"),
    ("http://minio:9000", "http://minio:9000"),
])
def test_redact_text(text, shown):
    assert redact_text(text) == shown


def test_secret_keys():
    for key in ("password", "jdbc.password", "s3.secret-access-key", "s3.session-token", "s3.access-key-id",
                "client.secret", "adls.sas-token", "gcs.oauth2.token", "credential", "AWS_SECRET_ACCESS_KEY"):
        assert is_secret_key(key), key
    for key in ("uri", "warehouse", "s3.endpoint", "jdbc.user", "type"):
        assert not is_secret_key(key), key
    assert redact_properties({"uri": "jdbc:postgresql://u:p@h/db", "password": "p", "type": "jdbc"}) == {
        "uri": "jdbc:postgresql://u:***@h/db", "password": "***", "type": "jdbc"}
