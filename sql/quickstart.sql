-- Quickstart for iceberg-procedures: run from the repository root with
--
--     procedures-sql -f sql/quickstart.sql
--
-- Catalog `local` is the embedded default (a SQLite-backed JDBC catalog under ./warehouse; see
-- spark-conf/spark-defaults.conf).  Spark cannot see our catalogs, so the console itself runs
-- CREATE NAMESPACE / CREATE TABLE / DROP TABLE / INSERT INTO / SELECT on `local.*` tables; every CALL
-- runs one of our procedures.  The script is re-runnable: it starts from a fresh table.

CREATE NAMESPACE IF NOT EXISTS local.db;
DROP TABLE IF EXISTS local.db.events PURGE;

CREATE TABLE local.db.events (
    id       bigint NOT NULL,
    category string,
    ts       timestamp
) USING iceberg
PARTITIONED BY (days(ts))
TBLPROPERTIES ('format-version' = '2');

-- three small commits: three snapshots and several small files
INSERT INTO local.db.events VALUES
    (1, 'click', TIMESTAMP '2024-01-01 10:00:00'),
    (2, 'view',  TIMESTAMP '2024-01-02 11:00:00');
INSERT INTO local.db.events VALUES (3, 'click', TIMESTAMP '2024-01-02 12:00:00');
INSERT INTO local.db.events VALUES (4, 'view',  TIMESTAMP '2024-01-02 13:00:00');

-- remember the good state in a branch (fast_forward creates a missing branch)
CALL local.system.fast_forward(table => 'db.events', branch => 'audited', to => 'main');

-- a bad write ...
INSERT INTO local.db.events VALUES (5, 'oops', TIMESTAMP '1970-01-01 00:00:00');
SELECT category, count(*) AS events FROM local.db.events GROUP BY category ORDER BY category;

-- ... undone by pointing main back at the audited snapshot
CALL local.system.ancestors_of('db.events');
CALL local.system.set_current_snapshot(table => 'db.events', ref => 'audited');

-- compact the small files of each day, then drop the snapshots nobody needs any more
CALL local.system.rewrite_data_files(table => 'db.events', options => map('min-input-files', '2'));
CALL local.system.expire_snapshots(table => 'db.events', older_than => TIMESTAMP '2999-01-01 00:00:00', retain_last => 1);

SELECT * FROM local.db.events ORDER BY id;
