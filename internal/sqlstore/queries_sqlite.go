package sqlstore

// sqliteSQL is SQLite's SQL: the statements of queries.go with these parts.
var sqliteSQL = newQueries(sqlParts{
	createMigrationsTable: `CREATE TABLE IF NOT EXISTS schema_migrations (
			version       INTEGER NOT NULL PRIMARY KEY,
			name          TEXT    NOT NULL,
			applied_at_ms INTEGER NOT NULL
		) STRICT`,
	// No migration lock: every transaction of the write pool begins
	// IMMEDIATE, taking the database's write lock up front (sqliteDialect).
	//
	// No row locks either, for the same reason: a locking read is a plain
	// read.
	forUpdate:         ``,
	skipLocked:        ``,
	upsertEntry:       ` ON CONFLICT (id) DO UPDATE SET reservation_id = CASE WHEN excluded.reservation_id = '' THEN lottery_entries.reservation_id ELSE excluded.reservation_id END`,
	ignoreDuplicateID: ` ON CONFLICT (id) DO NOTHING`,
	keepFirst:         ` ON CONFLICT DO NOTHING`,
	keepLaterPace:     ` ON CONFLICT (sale_id) DO UPDATE SET admitted = excluded.admitted, at_ms = excluded.at_ms, rate = excluded.rate WHERE excluded.at_ms >= queue_paces.at_ms`,
	// A keyset page walks the primary key: + keeps the planner off the
	// sale_id and status indexes.
	noIndex: `+`,
	heldSum: `SUM(qty)`,
})
