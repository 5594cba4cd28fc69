-- Scheduled maintenance of one table, decided by the table's own state: report its health, then run
-- only the procedures it needs (plan_maintenance picks them from the findings, with arguments taken
-- from the table's properties and Iceberg Java's defaults), then report again.
--
--     procedures-sql -f sql/plan_maintenance.sql
--
-- The table is the quickstart's `local.db.events` (run sql/quickstart.sql first); change the name,
-- or point `local` at your catalog with --properties-file / --conf spark.sql.catalog.local.*.
-- Run it from cron or any scheduler: a failed statement stops the run with exit code 1; a failed step of
-- the plan is reported in its row (status, error), the later steps are not started, and the run exits with 1.
-- `procedures-sql plan local.db.events --execute` runs the middle step alone.

-- 1. what is wrong (read-only; include_orphans lists the table location, which costs time on big tables)
CALL local.system.table_health(table => 'db.events', include_orphans => true);

-- 2. run the planned calls in order; each row says what its procedure did (none for a maintained table)
CALL local.system.plan_maintenance(table => 'db.events', execute => true);

-- 3. what is left: info findings at most
CALL local.system.table_health(table => 'db.events');
