"""The commit kernel: what every capability shares.

Table metadata and its builder, the updates and requirements of a change, the transaction with its
optimistic-concurrency retry, the snapshot producer and the snapshot operations built on it, scan
planning, the typed table properties, and the table-location rules (paths, ownership, overlap) that
keep one table's maintenance inside its own folder.  Capabilities (``procedures.core.gc``,
``procedures.core.rewrite_data``, ...) build on the kernel and never on each other's internals.
"""
