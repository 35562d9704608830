package sqlstore

// postgresSQL is PostgreSQL's SQL: the statements of queries.go, with
// their '?' numbered $1, $2, …, and these parts.
var postgresSQL = newQueries(sqlParts{
	numbered: true,
	createMigrationsTable: `CREATE TABLE IF NOT EXISTS schema_migrations (
			version       BIGINT NOT NULL PRIMARY KEY,
			name          TEXT   NOT NULL,
			applied_at_ms BIGINT NOT NULL
		)`,
	// A session advisory lock keyed by the schema (lockPostgresMigrations).
	currentSchema:     `SELECT current_schema()`,
	lockMigrations:    `SELECT pg_try_advisory_lock($1)`,
	unlockMigrations:  `SELECT pg_advisory_unlock($1)`,
	forUpdate:         ` FOR UPDATE`,
	skipLocked:        ` FOR UPDATE SKIP LOCKED`,
	upsertEntry:       ` ON CONFLICT (id) DO UPDATE SET reservation_id = CASE WHEN excluded.reservation_id = '' THEN lottery_entries.reservation_id ELSE excluded.reservation_id END`,
	ignoreDuplicateID: ` ON CONFLICT (id) DO NOTHING`,
	keepFirst:         ` ON CONFLICT DO NOTHING`,
	keepLaterPace:     ` ON CONFLICT (sale_id) DO UPDATE SET admitted = excluded.admitted, at_ms = excluded.at_ms, rate = excluded.rate WHERE excluded.at_ms >= queue_paces.at_ms`,
	byteOrder:         ` COLLATE "C"`,
	// A NUMERIC sum would turn the whole UNION's column into NUMERIC.
	heldSum: `CAST(SUM(qty) AS BIGINT)`,
	// One seek of orders_sale_user_idx per buyer, whatever the planner
	// believes of the table: with user_id IN (…) it chose, on a sale's
	// orders analyzed while few, to scan every order of the sale and
	// filter, once per batch, so a sale's writes slowed down as it sold
	// (30 ms a batch at 25,600 orders).
	heldByBuyer: `SELECT 4, b.user_id, h.held, 0, 0, 0, '' FROM unnest(CAST(%[2]s AS text[])) AS b(user_id)
		CROSS JOIN LATERAL (SELECT CAST(SUM(qty) AS BIGINT) AS held FROM orders
			WHERE sale_id = %[1]s AND user_id = b.user_id AND status <> 'cancelled') AS h
		WHERE h.held IS NOT NULL`,
	insertPlacedArrays: `INSERT INTO orders (` + orderInsertColumns + `)
		SELECT 'o-' || r, r, $1, u, q, a, 'ordered', $2, ra, $3, $4, NULLIF(k, '')
		FROM unnest(CAST($5 AS text[]), CAST($6 AS text[]), CAST($7 AS bigint[]), CAST($8 AS bigint[]), CAST($9 AS bigint[]),
			CAST($10 AS text[]))
			AS t(r, u, q, a, ra, k)`,
})
