"""The REST protocol's JSON of our updates and requirements (procedures.catalog.rest_messages)."""

from __future__ import annotations

import pytest

from procedures.catalog.rest_messages import (
    commit_request,
    create_updates,
    namespace_path,
    requirement_to_json,
    update_to_json,
)
from procedures.core.kernel import updates as U
from procedures.core.kernel.builder import new_table_metadata
from procedures.spec.schema import Schema
from procedures.spec.snapshots import SnapshotRef, SnapshotRefType
from procedures.spec.types import LONG, NestedField

SCHEMA = Schema((NestedField(1, "id", LONG, True),))


def _md():
    md, _ = new_table_metadata(schema=SCHEMA, location="/wh/db/t", properties={"k": "v"})
    return md


def test_every_update_type_has_its_action():
    md = _md()
    ref = SnapshotRef(5, SnapshotRefType.BRANCH)
    samples = {
        U.AssignUUID("u"): "assign-uuid", U.UpgradeFormatVersion(2): "upgrade-format-version",
        U.AddSchema(SCHEMA, 1): "add-schema", U.SetCurrentSchema(-1): "set-current-schema",
        U.AddPartitionSpec(md.spec()): "add-spec", U.SetDefaultSpec(-1): "set-default-spec",
        U.AddSortOrder(md.sort_order()): "add-sort-order", U.SetDefaultSortOrder(0): "set-default-sort-order",
        U.RemoveSnapshots((1, 2)): "remove-snapshots", U.SetSnapshotRef("main", ref): "set-snapshot-ref",
        U.RemoveSnapshotRef("b"): "remove-snapshot-ref", U.SetLocation("/x"): "set-location",
        U.SetProperties((("a", "1"),)): "set-properties", U.RemoveProperties(("a",)): "remove-properties",
        U.RemoveStatistics(3): "remove-statistics", U.RemovePartitionStatistics(3): "remove-partition-statistics",
        U.RemovePartitionSpecs((1,)): "remove-partition-specs", U.RemoveSchemas((1,)): "remove-schemas",
    }
    for update, action in samples.items():
        assert update_to_json(update, 2)["action"] == action
    ref_json = update_to_json(U.SetSnapshotRef("main", ref), 2)
    assert ref_json["ref-name"] == "main" and ref_json["snapshot-id"] == 5 and ref_json["type"] == "branch"
    assert update_to_json(U.SetProperties((("a", "1"),)), 2)["updates"] == {"a": "1"}


def test_requirements_json():
    assert requirement_to_json(U.AssertCreate()) == {"type": "assert-create"}
    assert requirement_to_json(U.AssertRefSnapshotId("main", None)) == {
        "type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": None}
    assert requirement_to_json(U.AssertCurrentSchemaId(3))["current-schema-id"] == 3
    assert requirement_to_json(U.AssertDefaultSpecId(1))["default-spec-id"] == 1
    assert requirement_to_json(U.AssertDefaultSortOrderId(0))["default-sort-order-id"] == 0


def test_every_ref_asserted_for_rest_only():
    md = _md()
    move = U.SetSnapshotRef("main", SnapshotRef(9, SnapshotRefType.BRANCH), None, assert_head=False)
    plain = U.requirements_for(md, [move])
    strict = U.requirements_for(md, [move], assert_every_ref=True)
    assert not any(isinstance(r, U.AssertRefSnapshotId) for r in plain)
    assert U.AssertRefSnapshotId("main", None) in strict


def test_create_updates_rebuild_the_metadata():
    md = _md()
    updates = create_updates(md)
    actions = [update_to_json(u, md.format_version)["action"] for u in updates]
    assert actions[:2] == ["assign-uuid", "upgrade-format-version"]
    assert {"add-schema", "set-current-schema", "add-spec", "set-default-spec", "add-sort-order",
            "set-default-sort-order", "set-location", "set-properties"} <= set(actions)
    body = commit_request(("db", "t"), [U.AssertCreate()], updates, md.format_version)
    assert body["identifier"] == {"namespace": ["db"], "name": "t"}
    assert body["requirements"] == [{"type": "assert-create"}]


@pytest.mark.parametrize("levels,expected", [(("a",), "a"), (("a", "b"), "a%1Fb"), (("a b/c",), "a%20b%2Fc")])
def test_namespace_in_a_path(levels, expected):
    assert namespace_path(levels) == expected
