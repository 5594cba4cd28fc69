"""The ``file_import`` capability: ``add_files`` (:mod:`.import_files`: params, plan, execute on the
steps of :class:`.engine.FileImportEngine`; its rules in :mod:`.source_rules`) and the rules of
``snapshot`` and ``migrate`` (:mod:`.table_creation`), whose runs create tables through the catalog
layer and so live in :mod:`procedures.spark.actions.session_table_import`."""
