"""Table and partition statistics: the engine-free halves of ``compute_table_stats`` and
``compute_partition_stats`` (column choice, the commit operation, partition counts from manifests)."""
