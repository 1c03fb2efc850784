// SPDX-License-Identifier: Apache-2.0
/*
 * The SQLite store (embedded default).  WAL mode: one writer connection
 * (ingest, retention) and a small pool of reader connections, so queries
 * run while a batch is written.  Schema in docs/server.md: the record
 * tables come from server/store/schema.h; stacks are deduplicated by id in
 * stacks/stack_frames, every row table points at its batch (ON DELETE
 * CASCADE: retention deletes batches) and, for per-process rows, at a
 * process instance (node, pid, start time).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lib/clock.h"
#include "server/store/sqlite.h"

#define SCHEMA_VERSION "1"

/* Added after the first release: older databases gain it at open. */
#define PROCESS_EXIT_COL "exit_ns INTEGER NOT NULL DEFAULT 0"

/* The tables that are the store's own; the record tables follow from the
 * schema (make_schema). */
static const char SCHEMA[] =
	"CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);"
	"CREATE TABLE IF NOT EXISTS batches("
	" id INTEGER PRIMARY KEY, batch_id BLOB NOT NULL UNIQUE, node TEXT NOT NULL,"
	" agent_version TEXT, agent_run_id BLOB, seq INTEGER, start_ns INTEGER, end_ns INTEGER,"
	" received_ns INTEGER, clock_source INTEGER, clock_error_ns INTEGER, freq_hz INTEGER,"
	" wire_bytes INTEGER, cpu_samples INTEGER, drops INTEGER);"
	"CREATE INDEX IF NOT EXISTS batches_time ON batches(end_ns);"
	"CREATE INDEX IF NOT EXISTS batches_node ON batches(node, end_ns);"
	"CREATE TABLE IF NOT EXISTS processes("
	" id INTEGER PRIMARY KEY, node TEXT NOT NULL, pid INTEGER NOT NULL,"
	" start_time_ns INTEGER NOT NULL, ppid INTEGER, comm TEXT, cmdline TEXT, cgroup TEXT,"
	" container TEXT, pod TEXT, job TEXT, has_rank INTEGER, rank INTEGER,"
	" local_rank INTEGER, world_size INTEGER, first_ns INTEGER, last_ns INTEGER,"
	" " PROCESS_EXIT_COL ", UNIQUE(node, pid, start_time_ns));"
	"CREATE INDEX IF NOT EXISTS processes_job ON processes(job, rank);"
	"CREATE TABLE IF NOT EXISTS stacks(id INTEGER PRIMARY KEY, nframes INTEGER);"
	"CREATE TABLE IF NOT EXISTS stack_frames("
	" stack_id INTEGER NOT NULL, depth INTEGER NOT NULL, kind INTEGER, flags INTEGER,"
	" func TEXT, file TEXT, line INTEGER, module TEXT, build_id TEXT, addr INTEGER,"
	" PRIMARY KEY(stack_id, depth)) WITHOUT ROWID;";

/* Every record table's rows point at their batch and, per process, at the
 * process instance. */
#define BATCH_REF "batch INTEGER NOT NULL REFERENCES batches(id) ON DELETE CASCADE"
#define PROC_REF "process INTEGER NOT NULL REFERENCES processes(id)"

int sqlite_store__table_ddl(const struct store_table *t, char *buf, size_t size)
{
	char cols[1024], index[256] = "";
	size_t n = store_table__columns(t, STORE_SQLITE, 1, cols, sizeof(cols));
	int len;

	if (n >= sizeof(cols))
		return -E2BIG;
	if (t->index) { /* "NAME(COLS)" */
		const char *paren = strchr(t->index, '(');

		snprintf(index, sizeof(index), "CREATE INDEX IF NOT EXISTS %s_%.*s ON %s%s;",
			 t->name, (int)(paren - t->index), t->index, t->name, paren);
	}
	len = snprintf(buf, size, "CREATE TABLE IF NOT EXISTS %s(" BATCH_REF "%s, %s);%s", t->name,
		       t->per_process ? ", " PROC_REF : "", cols, index);
	return len < 0 || (size_t)len >= size ? -E2BIG : 0;
}

static int make_schema(sqlite3 *db)
{
	char ddl[2048];

	if (sqlite3_exec(db, SCHEMA, NULL, NULL, NULL) != SQLITE_OK)
		return -EIO;
	for (int t = 0; t < STORE_NTABLES; t++) {
		if (STORE_TABLES[t].sqlite_apart)
			continue;
		if (sqlite_store__table_ddl(&STORE_TABLES[t], ddl, sizeof(ddl)) ||
		    sqlite3_exec(db, ddl, NULL, NULL, NULL) != SQLITE_OK)
			return -EIO;
	}
	return 0;
}

/* "INSERT INTO t(batch, process, COLS) VALUES(?,...)": batch, process
 * (per process), columns.  The columns are named: a column added to an
 * older database (add_missing_columns) comes last in its table, wherever
 * the schema has it. */
static int make_inserts(struct sqlite_store *s)
{
	for (int t = 0; t < STORE_NTABLES; t++) {
		const struct store_table *tb = &STORE_TABLES[t];
		size_t n = 1 + (size_t)tb->per_process + store_table__ncolumns(tb, STORE_SQLITE);
		size_t cols = store_table__columns(tb, STORE_SQLITE, 0, NULL, 0);
		size_t size = strlen(tb->name) + cols + 64 + 2 * n;
		char *sql;
		size_t len;

		if (tb->sqlite_apart)
			continue;
		sql = malloc(size);
		if (!sql)
			return -ENOMEM;
		len = (size_t)snprintf(sql, size, "INSERT INTO %s(batch%s, ", tb->name,
				       tb->per_process ? ", process" : "");
		len += store_table__columns(tb, STORE_SQLITE, 0, sql + len, size - len);
		len += (size_t)snprintf(sql + len, size - len, ") VALUES(");
		for (size_t i = 0; i < n; i++)
			len += (size_t)snprintf(sql + len, size - len, i ? ",?" : "?");
		snprintf(sql + len, size - len, ")");
		s->insert_sql[t] = sql;
	}
	return 0;
}

/* Drops the stacks no remaining row refers to (every table with a stack
 * column). */
static int drop_dead_stacks(sqlite3 *db)
{
	char sql[4096];
	size_t len =
		(size_t)snprintf(sql, sizeof(sql),
				 "CREATE TEMP TABLE IF NOT EXISTS live(id INTEGER PRIMARY KEY);"
				 "DELETE FROM live;");

	for (int t = 0; t < STORE_NTABLES && len < sizeof(sql); t++)
		if (store_table__has_stacks(&STORE_TABLES[t]))
			len += (size_t)snprintf(
				sql + len, sizeof(sql) - len,
				"INSERT OR IGNORE INTO live SELECT stack_id FROM %s;",
				STORE_TABLES[t].name);
	if (len < sizeof(sql))
		len += (size_t)snprintf(sql + len, sizeof(sql) - len,
					"DELETE FROM stack_frames WHERE stack_id NOT IN live;"
					"DELETE FROM stacks WHERE id NOT IN live;");
	if (len >= sizeof(sql))
		return -E2BIG;
	return sqlite3_exec(db, sql, NULL, NULL, NULL) == SQLITE_OK ? 0 : -EIO;
}

static void set_err(char *err, size_t errsz, const char *what, sqlite3 *db)
{
	snprintf(err, errsz, "sqlite: %s: %s", what, db ? sqlite3_errmsg(db) : "out of memory");
}

/*
 * A database made by an older server lacks the columns of the fields added
 * since (CudaAlloc.level: cuda_allocs.level), and CREATE TABLE IF NOT
 * EXISTS leaves an existing table as it is: every schema column a table
 * lacks is added (ALTER TABLE ADD COLUMN: its rows read as records without
 * the field would), logged and counted.  In one write transaction, so two
 * servers opening one file do not both add a column.
 */
static int add_missing_columns(struct sqlite_store *s, char *err, size_t errsz)
{
	sqlite3 *db = s->writer.db;
	sqlite3_stmt *has = NULL;
	int rc = 0;

	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2", -1, &has,
			       NULL) != SQLITE_OK)
		rc = -EIO;
	/* The store's own processes table: exit_ns (a replicated server's
	 * hang detection reads exits back) */
	if (!rc) {
		sqlite3_bind_text(has, 1, "processes", -1, SQLITE_STATIC);
		sqlite3_bind_text(has, 2, "exit_ns", -1, SQLITE_STATIC);
		switch (sqlite3_step(has)) {
		case SQLITE_ROW:
			break;
		case SQLITE_DONE:
			if (sqlite3_exec(db, "ALTER TABLE processes ADD " PROCESS_EXIT_COL, NULL,
					 NULL, NULL) != SQLITE_OK)
				rc = -EIO;
			else
				store_counts__column_added(&s->counts, "sqlite", "processes",
							   PROCESS_EXIT_COL);
			break;
		default:
			rc = -EIO;
		}
	}
	for (int t = 0; !rc && t < STORE_NTABLES; t++) {
		const struct store_table *tb = &STORE_TABLES[t];

		for (size_t i = 0; !rc && !tb->sqlite_apart && i < tb->ncols; i++) {
			const char *name = store_column__name(&tb->cols[i], STORE_SQLITE);
			char col[256], sql[512];
			int step;

			if (!name)
				continue;
			sqlite3_reset(has);
			sqlite3_bind_text(has, 1, tb->name, -1, SQLITE_STATIC);
			sqlite3_bind_text(has, 2, name, -1, SQLITE_STATIC);
			step = sqlite3_step(has);
			if (step == SQLITE_ROW)
				continue;
			if (step != SQLITE_DONE) {
				rc = -EIO;
				break;
			}
			rc = store_column__add_ddl(tb, &tb->cols[i], STORE_SQLITE, col,
						   sizeof(col));
			if (!rc &&
			    (size_t)snprintf(sql, sizeof(sql), "ALTER TABLE %s ADD COLUMN %s",
					     tb->name, col) >= sizeof(sql))
				rc = -E2BIG;
			if (!rc && sqlite3_exec(db, sql, NULL, NULL, NULL) != SQLITE_OK)
				rc = -EIO;
			if (!rc)
				store_counts__column_added(&s->counts, "sqlite", tb->name, col);
		}
	}
	if (rc)
		set_err(err, errsz, "adding the columns an older database lacks", db);
	sqlite3_finalize(has);
	sqlite3_exec(db, rc ? "ROLLBACK" : "COMMIT", NULL, NULL, NULL);
	return rc;
}

/*
 * sync: the writer's synchronous level.  FULL (the default) syncs the WAL at
 * every commit, so a batch the server acknowledged (and the agent then
 * deleted from its spool) survives a host crash or power loss; NORMAL
 * syncs only at checkpoints: a killed server loses nothing either, a
 * crashed host may lose the last commits (0.13 against 0.69 ms a commit
 * measured here, docs/server.md).
 */
/* sqlite3_progress_handler: nonzero interrupts the statement.  Runs on the
 * thread holding the reader, whose bounds store__read_over() reads. */
static int read_over(void *arg)
{
	struct sq_conn *c = arg;

	return store__read_over(&c->next_check_ns);
}

static int conn_open(struct sq_conn *c, const char *path, int writer, const char *sync, char *err,
		     size_t errsz)
{
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (writer ? SQLITE_OPEN_CREATE : 0);
	char pragmas[256];

	snprintf(pragmas, sizeof(pragmas),
		 "PRAGMA journal_mode=WAL; PRAGMA synchronous=%s;"
		 "PRAGMA foreign_keys=ON; PRAGMA busy_timeout=10000;"
		 "PRAGMA cache_size=-16384;",
		 sync);
	if (sqlite3_open_v2(path, &c->db, flags, NULL) != SQLITE_OK) {
		set_err(err, errsz, path, c->db);
		return -EIO;
	}
	if (sqlite3_exec(c->db, pragmas, NULL, NULL, NULL) != SQLITE_OK ||
	    (writer && make_schema(c->db))) {
		set_err(err, errsz, "schema", c->db);
		return -EIO;
	}
	if (!writer) /* every 1000 virtual machine steps: a few microseconds */
		sqlite3_progress_handler(c->db, 1000, read_over, c);
	pthread_mutex_init(&c->lock, NULL);
	return 0;
}

struct sq_conn *sq_reader(struct sqlite_store *s)
{
	unsigned start = __atomic_fetch_add(&s->next_reader, 1, __ATOMIC_RELAXED);

	for (unsigned i = 0; i < SQ_NREADERS; i++) {
		struct sq_conn *c = &s->readers[(start + i) % SQ_NREADERS];

		if (!pthread_mutex_trylock(&c->lock)) {
			c->next_check_ns = 0;
			return c;
		}
	}
	struct sq_conn *c = &s->readers[start % SQ_NREADERS];
	pthread_mutex_lock(&c->lock);
	c->next_check_ns = 0;
	return c;
}

int sq_retain(struct store *base, uint64_t before_ns, uint64_t *deleted)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	sqlite3 *db = s->writer.db;
	sqlite3_stmt *st = NULL;
	int err = 0, n = 0;

	pthread_mutex_lock(&s->writer.lock);
	if (sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK ||
	    sqlite3_prepare_v2(db, "DELETE FROM batches WHERE end_ns < ?", -1, &st, NULL) !=
		    SQLITE_OK) {
		err = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, sq_i64(before_ns));
	if (sqlite3_step(st) != SQLITE_DONE) {
		err = -EIO;
		goto out;
	}
	n = sqlite3_changes(db);
	sqlite3_finalize(st);
	st = NULL;
	/* Then what no remaining row refers to: processes, stacks. */
	if (sqlite3_prepare_v2(db, "DELETE FROM processes WHERE last_ns < ?", -1, &st, NULL) !=
	    SQLITE_OK) {
		err = -EIO;
		goto out;
	}
	sqlite3_bind_int64(st, 1, sq_i64(before_ns));
	if (sqlite3_step(st) != SQLITE_DONE)
		err = -EIO;
	if (!err && n)
		err = drop_dead_stacks(db);
out:
	sqlite3_finalize(st);
	sqlite3_exec(db, err ? "ROLLBACK" : "COMMIT", NULL, NULL, NULL);
	pthread_mutex_unlock(&s->writer.lock);
	if (!err) {
		store_counts__retained(&s->counts, (uint64_t)n);
		if (deleted)
			*deleted = (uint64_t)n;
	}
	return err;
}

static int count_row(void *ctx, sqlite3_stmt *st)
{
	struct store_sizes *z = ctx;

	z->stacks = sq_col_u64(st, 0);
	z->cpu_rows = sq_col_u64(st, 1);
	z->event_rows = sq_col_u64(st, 2);
	return 0;
}

int sq_sizes(struct store *base, struct store_sizes *out)
{
	struct sqlite_store *s = (struct sqlite_store *)base;
	struct sq_conn *c = sq_reader(s);
	sqlite3_stmt *st;
	struct stat sb;
	int err;

	memset(out, 0, sizeof(*out));
	if (sqlite3_prepare_v2(c->db,
			       "SELECT (SELECT COUNT(*) FROM stacks), (SELECT COUNT(*) FROM "
			       "cpu_samples), (SELECT COUNT(*) FROM nccl_collectives) + (SELECT "
			       "COUNT(*) FROM cuda_transfers)",
			       -1, &st, NULL) == SQLITE_OK)
		err = sq_run(st, count_row, out);
	else
		err = -EIO;
	pthread_mutex_unlock(&c->lock);
	if (!stat(s->path, &sb))
		out->bytes_on_disk = (uint64_t)sb.st_size;
	return err;
}

int sq_stats(struct store *base, struct store_stats *out)
{
	struct sqlite_store *s = (struct sqlite_store *)base;

	memset(out, 0, sizeof(*out));
	store_counts__read(&s->counts, out);
	return 0;
}

void sq_close(struct store *base)
{
	struct sqlite_store *s = (struct sqlite_store *)base;

	for (int i = 0; i < SQ_NREADERS; i++) {
		if (s->readers[i].db) {
			sqlite3_close_v2(s->readers[i].db);
			pthread_mutex_destroy(&s->readers[i].lock);
		}
	}
	for (int i = 0; i < SQ_MAX_STMTS; i++)
		sqlite3_finalize(s->stmts[i].st);
	if (s->writer.db) {
		sqlite3_close_v2(s->writer.db);
		pthread_mutex_destroy(&s->writer.lock);
	}
	store_counts__fini(&s->counts);
	for (int i = 0; i < STORE_NTABLES; i++)
		free(s->insert_sql[i]);
	free(s->path);
	free(s);
}

size_t store_sqlite__path_len(const char *spec)
{
	const char *q = strrchr(spec, '?');

	return q && !strchr(q, '/') ? (size_t)(q - spec) : strlen(spec); /* '?' in a dir name */
}

/*
 * PATH, or PATH?sync=full|normal: the file (s->path, malloc'd) and the
 * writer's synchronous level in *sync.  -EINVAL (said in err) for another
 * option.
 */
static int parse_spec(struct sqlite_store *s, const char *spec, const char **sync, char *err,
		      size_t errsz)
{
	size_t len = store_sqlite__path_len(spec);
	const char *q = spec[len] ? spec + len : NULL;

	/* The readers open the path apart from the writer: each would get
	 * an empty database of its own, and every query would answer none. */
	if (!len || (len == 8 && !memcmp(spec, ":memory:", 8))) {
		snprintf(err, errsz,
			 "sqlite: \"%.*s\": want a file path (its readers and writer share it; "
			 "an in-memory database would not be shared)",
			 (int)len, spec);
		return -EINVAL;
	}
	*sync = "FULL";
	if (q) {
		if (!strcmp(q, "?sync=normal"))
			*sync = "NORMAL";
		else if (strcmp(q, "?sync=full")) {
			snprintf(err, errsz,
				 "sqlite: unknown option \"%s\": want ?sync=full or ?sync=normal",
				 q);
			return -EINVAL;
		}
	}
	s->path = strndup(spec, len);
	if (!s->path) {
		snprintf(err, errsz, "out of memory");
		return -ENOMEM;
	}
	return 0;
}

struct store *store_sqlite__open(const char *spec, char *err, size_t errsz)
{
	struct sqlite_store *s = calloc(1, sizeof(*s));
	const char *sync;

	if (!s) {
		snprintf(err, errsz, "out of memory");
		errno = ENOMEM;
		return NULL;
	}
	s->base.ops = &sqlite_store_ops;
	store_counts__init(&s->counts);
	if (parse_spec(s, spec, &sync, err, errsz)) {
		free(s);
		errno = EINVAL;
		return NULL;
	}
	if (make_inserts(s) || conn_open(&s->writer, s->path, 1, sync, err, errsz) ||
	    add_missing_columns(s, err, errsz))
		goto fail;
	sqlite3_exec(s->writer.db,
		     "INSERT OR IGNORE INTO meta VALUES('schema_version', '" SCHEMA_VERSION "')",
		     NULL, NULL, NULL);
	for (int i = 0; i < SQ_NREADERS; i++)
		if (conn_open(&s->readers[i], s->path, 0, sync, err, errsz))
			goto fail;
	return &s->base;
fail:
	sq_close(&s->base);
	errno = EIO;
	return NULL;
}
