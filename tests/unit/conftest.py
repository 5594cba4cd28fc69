"""Unit-test fixtures."""

from __future__ import annotations

import os

import pytest

import procedures.spec.avro_schemas as avro_schemas
import procedures.spec.manifest.manifest_list as manifest_list
import procedures.spec.manifest.reader as manifest_reader


@pytest.fixture(autouse=True)
def fresh_manifest_read_caches():
    """Under ``.ci/mutation.sh`` (``PROCEDURES_MUTATION=1``): every test starts with empty read-plan
    caches.  mutmut runs for a mutant only the tests that reached the mutated function in its first
    run; with the caches kept across tests, only the first test of each manifest schema builds its
    read plan, so a mutant in the plan builders would be tried against that one test alone."""
    if os.environ.get("PROCEDURES_MUTATION") == "1":
        manifest_reader._SKIM_PLANS.clear()
        manifest_reader._LAYOUTS.clear()
        manifest_list._LIST_READERS.clear()
        avro_schemas._stripped_schema_text.cache_clear()
    yield
