-- Nightly maintenance of one table, in the order Iceberg's maintenance guide recommends:
-- compact data files, compact manifests, expire old snapshots, then remove orphan files.
--
--     procedures-sql -f sql/nightly_maintenance.sql
--
-- The table is the quickstart's `local.db.events` (run sql/quickstart.sql first); change the name,
-- or point `local` at your catalog with --properties-file / --conf spark.sql.catalog.local.*.
-- Every statement is a CALL of one of our procedures; the first failure stops the run (exit code 1).

-- 1. bin-pack small data files (only groups of at least two files are rewritten)
CALL local.system.rewrite_data_files(table => 'db.events', options => map('min-input-files', '2'));

-- 2. cluster manifests by partition
CALL local.system.rewrite_manifests(table => 'db.events');

-- 3. expire snapshots older than the table's history.expire.max-snapshot-age-ms (default 5 days),
--    keeping at least the 5 newest of every branch, and delete the files only they referenced
CALL local.system.expire_snapshots(table => 'db.events', retain_last => 5);

-- 4. delete files under the table location that no metadata references and that are older than
--    3 days (the default; never lower this below the longest-running write)
CALL local.system.remove_orphan_files(table => 'db.events');

-- what is left: the current lineage
CALL local.system.ancestors_of('db.events');
