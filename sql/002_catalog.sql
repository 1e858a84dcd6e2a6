-- The catalog: tables kept inside kb.duckdb itself (small: one row per run, file or changed chunk).
-- Idempotent; applied by every writer before it publishes a new kb.duckdb.

-- Chunks that disappeared when their document was re-ingested or removed (vector feed deletes).
CREATE TABLE IF NOT EXISTS chunk_tombstones (
    chunk_id    VARCHAR PRIMARY KEY,
    doc_id      VARCHAR NOT NULL,
    deleted_at  TIMESTAMPTZ NOT NULL
);

-- One row per pipeline run that loaded something: throughput and the engine's paging values.
CREATE TABLE IF NOT EXISTS runs (
    run_id       VARCHAR PRIMARY KEY,
    started_at   TIMESTAMPTZ NOT NULL,
    finished_at  TIMESTAMPTZ NOT NULL,
    n_documents  INTEGER NOT NULL,
    n_pages      INTEGER NOT NULL,
    metrics      JSON NOT NULL              -- pages/s, tokens/s, paging values, KV capacity, ...
);

-- The Parquet files that hold the dataset tables' rows: kb/parquet/<table_name>/<file>. Every
-- write session that adds rows writes one file per table (generation `gen`); compaction replaces
-- small files by larger ones (store/compact.py).
CREATE TABLE IF NOT EXISTS kb_files (
    table_name  VARCHAR NOT NULL,
    file        VARCHAR NOT NULL,          -- file name inside kb/parquet/<table_name>/
    gen         BIGINT NOT NULL,           -- write generation that made the file
    n_rows      BIGINT NOT NULL,
    bytes       BIGINT NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (table_name, file)
);

-- Documents re-ingested or forgotten at generation `gen`: their rows in files of an older
-- generation no longer count (the views leave them out) until compaction rewrites those files.
CREATE TABLE IF NOT EXISTS kb_superseded (
    doc_id  VARCHAR PRIMARY KEY,
    gen     BIGINT NOT NULL
);

-- Files that compaction replaced: gone from kb/parquet/, still under kb/snapshots/ (the paths the
-- views of an older kb.duckdb read) until `retired_at` is a day old.
CREATE TABLE IF NOT EXISTS kb_retired (
    table_name  VARCHAR NOT NULL,
    file        VARCHAR NOT NULL,
    retired_at  TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (table_name, file)
);

-- The knowledge-base folder (absolute) whose files the views name: a reader that finds kb.duckdb in
-- another folder (moved or copied) reads the files beside it instead (store/duckdb_store.py connect).
CREATE TABLE IF NOT EXISTS kb_location (
    root  VARCHAR NOT NULL
);

-- sha256 of the sql/*.sql files last applied (store/schema.py sql_digest): writers skip them when equal.
CREATE TABLE IF NOT EXISTS kb_schema (
    digest  VARCHAR NOT NULL
);
