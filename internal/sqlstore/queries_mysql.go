package sqlstore

// mysqlLockName is the GET_LOCK name that serialises migrations of one
// database. Lock names are server-wide and at most 64 characters.
const mysqlLockName = `LEFT(CONCAT('seckill_migrate:', DATABASE()), 64)`

// mysqlSQL is MySQL's and MariaDB's SQL: the statements of queries.go with
// these parts.
var mysqlSQL = newQueries(sqlParts{
	createMigrationsTable: `CREATE TABLE IF NOT EXISTS schema_migrations (
			version       BIGINT       NOT NULL PRIMARY KEY,
			name          VARCHAR(255) NOT NULL,
			applied_at_ms BIGINT       NOT NULL
		) ENGINE = InnoDB DEFAULT CHARACTER SET utf8mb4`,
	// Waits up to 2 s a call, so that a cancelled context is noticed
	// between calls (lockMySQLMigrations).
	lockMigrations:   `SELECT GET_LOCK(` + mysqlLockName + `, 2)`,
	unlockMigrations: `DO RELEASE_LOCK(` + mysqlLockName + `)`,
	// Locking reads (FOR UPDATE) read the latest committed row, whatever
	// the transaction's snapshot.
	forUpdate:         ` FOR UPDATE`,
	skipLocked:        ` FOR UPDATE SKIP LOCKED`,
	upsertEntry:       ` ON DUPLICATE KEY UPDATE reservation_id = IF(VALUES(reservation_id) = '', reservation_id, VALUES(reservation_id))`,
	ignoreDuplicateID: ` ON DUPLICATE KEY UPDATE id = id`,
	keepFirst:         ` ON DUPLICATE KEY UPDATE sale_id = sale_id`,
	// at_ms last: the IFs before it compare with the row's old at_ms.
	keepLaterPace: ` ON DUPLICATE KEY UPDATE admitted = IF(VALUES(at_ms) >= at_ms, VALUES(admitted), admitted), rate = IF(VALUES(at_ms) >= at_ms, VALUES(rate), rate), at_ms = GREATEST(at_ms, VALUES(at_ms))`,
	primaryKey:    ` FORCE INDEX (PRIMARY)`,
	heldSum:       `SUM(qty)`,
})
