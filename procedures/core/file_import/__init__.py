"""The ``file_import`` capability: ``add_files`` (:mod:`.import_files`: params, plan, execute on the
steps of :class:`.file_import_engine.FileImportEngine`; its rules in :mod:`.source_rules`) and
``snapshot`` / ``migrate`` (:mod:`.session_import`, on the same engine protocol; their rules in
:mod:`.table_creation`)."""
