"""Manifests with no live entries, against Iceberg Java 1.10.2 (issue 31): Java's merging commits
keep a parent's manifest only while it has added or existing entries (or was written by the
commit itself), so a delete manifest whose only entry is DELETED is dropped by the next append.
The sequence is Java's ``TestExpireSnapshotsProcedure.testExpireDeleteFiles``, run through ours
(``procedures.sql``) on one twin and through Java's SQL on the other.
"""

from __future__ import annotations

import pytest

import procedures
from procedures.core.kernel.snapshot_producer import snapshot_manifests
from procedures.spec.manifest.model import ManifestContent
from tests.helpers.catalogs import ours_on_java_warehouse

pytestmark = [pytest.mark.spark, pytest.mark.java]

FUTURE = "TIMESTAMP '2999-01-01 00:00:00'"


@pytest.fixture(scope="module")
def ours(spark, java_warehouse):
    return ours_on_java_warehouse(spark, java_warehouse)


def _run(spark, catalog: str, sql: str) -> list[tuple]:
    df = spark.sql(sql) if catalog == "jcat" else procedures.sql(spark, sql)
    return [tuple(r) for r in df.collect()]


def _manifest_kinds(ours, name: str) -> list[tuple]:
    t = ours.load_table(("db", name))
    return sorted((int(m.content), m.added_files_count, m.existing_files_count, m.deleted_files_count)
                  for m in snapshot_manifests(t.io, t.metadata.current_snapshot()))


def test_expire_delete_files_sequence_matches_java(spark, ours):
    outputs = {}
    for catalog, name in (("ours", "c31_expire_o"), ("jcat", "c31_expire_j")):
        spark.sql(f"DROP TABLE IF EXISTS jcat.db.{name}")
        spark.sql(f"CREATE TABLE jcat.db.{name} (id bigint NOT NULL, data string) USING iceberg TBLPROPERTIES "
                  "('format-version'='2', 'write.delete.mode'='merge-on-read')")
        spark.createDataFrame([(1, "a"), (2, "b"), (3, "c"), (4, "d")], "id bigint, data string") \
            .coalesce(1).writeTo(f"jcat.db.{name}").append()
        spark.sql(f"DELETE FROM jcat.db.{name} WHERE id = 1")
        _run(spark, catalog, f"CALL {catalog}.system.rewrite_data_files(table => 'db.{name}', options => "
                             "map('delete-file-threshold', '1', 'use-starting-sequence-number', 'false'))")
        if catalog == "jcat":
            spark.sql(f"INSERT INTO jcat.db.{name} VALUES (5, 'e')")
            spark.sql(f"INSERT INTO jcat.db.{name} VALUES (6, 'f')")
        else:
            procedures.sql(spark, f"INSERT INTO ours.db.{name} VALUES (5, 'e')")
            procedures.sql(spark, f"INSERT INTO ours.db.{name} VALUES (6, 'f')")
        outputs[catalog] = _manifest_kinds(ours, name)
    assert outputs["ours"] == outputs["jcat"]
    # the rewrite's manifest holding only the replaced file's DELETED entry is gone after the appends
    assert not any(kind == int(ManifestContent.DATA) and added == existing == 0 for kind, added, existing, _ in outputs["jcat"])
    got = _run(spark, "ours", f"CALL ours.system.expire_snapshots(older_than => {FUTURE}, table => 'db.c31_expire_o')")
    want = _run(spark, "jcat", f"CALL jcat.system.expire_snapshots(older_than => {FUTURE}, table => 'db.c31_expire_j')")
    assert got == want
