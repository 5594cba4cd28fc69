"""The ``table_stats`` capability: ``compute_table_stats`` (:mod:`.column_sketches`: NDV sketches in a
Puffin file) and ``compute_partition_stats`` (:mod:`.partition_counts`: per-partition counts from the
manifests), each ``Params`` -> ``plan(metadata, params)`` -> ``execute(table, plan, engine)`` on the
steps of :class:`.engine.TableStatsEngine`; :mod:`.statistics_files` holds what both share (the
snapshot to compute for, file paths, the commit operation registering a file)."""
