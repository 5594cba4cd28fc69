"""Where a scan reads its data manifests (procedures.spark.scan_planning.reads_manifests_in_tasks):
on the driver unless there are both many manifests and many files in them, or the GC's driver
limits are passed; a manifest list without file counts keeps the count rule."""

from __future__ import annotations

from procedures.core.gc import reachability as R
from procedures.core.kernel.scan import listed_entries
from procedures.spark import scan_planning as SP
from procedures.spec.manifest.model import ManifestFile


def _manifests(count: int, files: int | None, length: int = 1000) -> list[ManifestFile]:
    others = None if files is None else 0
    return [ManifestFile(f"/m{i}.avro", length, 0, added_files_count=files, existing_files_count=others,
                         deleted_files_count=others) for i in range(count)]


def test_listed_entries_adds_the_three_counts_and_is_none_when_one_is_missing():
    m = ManifestFile("/a.avro", 1, 0, added_files_count=2, existing_files_count=3, deleted_files_count=4)
    assert listed_entries([m, m]) == 18
    assert listed_entries([]) == 0
    assert listed_entries([m, ManifestFile("/b.avro", 1, 0, added_files_count=1)]) is None


def test_many_small_manifests_stay_on_the_driver(monkeypatch):
    monkeypatch.setattr(SP, "DRIVER_MAX_SCAN_MANIFESTS", 200)
    monkeypatch.setattr(SP, "DRIVER_MAX_SCAN_ENTRIES", 20_000)
    assert not SP.reads_manifests_in_tasks(_manifests(1000, 1))  # 1,000 files: faster on the driver
    assert not SP.reads_manifests_in_tasks(_manifests(201, 99))  # 19,899 files
    assert SP.reads_manifests_in_tasks(_manifests(201, 100))  # 20,100 files in 201 manifests
    assert not SP.reads_manifests_in_tasks(_manifests(200, 1000))  # not more than 200 manifests


def test_unknown_counts_keep_the_manifest_count_rule(monkeypatch):
    monkeypatch.setattr(SP, "DRIVER_MAX_SCAN_MANIFESTS", 200)
    assert not SP.reads_manifests_in_tasks(_manifests(200, None))
    assert SP.reads_manifests_in_tasks(_manifests(201, None))


def test_the_gc_driver_limits_still_send_a_scan_to_the_executors(monkeypatch):
    monkeypatch.setattr(R, "DRIVER_MAX_MANIFEST_BYTES", 10_000)
    assert not SP.reads_manifests_in_tasks(_manifests(10, 1, length=1000))
    assert SP.reads_manifests_in_tasks(_manifests(11, 1, length=1000))  # 11,000 bytes of manifests
    assert not R.use_spark(None, _manifests(11, 1, length=1000))  # without a session, never a job
