-- The six dataset tables: the columns of the Parquet files under kb/parquet/<table>/ and of the
-- views of the same names in kb.duckdb. Keys are checked by the loader (it stages the rows in
-- these tables in an in-memory database); kb.duckdb's schema kb_shape has their empty shapes.
-- Coordinates: PDF points of the displayed page, origin top-left. Columns are only ever added (at
-- the end of a table); a Parquet file written before a column existed reads NULL there.

CREATE TABLE IF NOT EXISTS documents (
    doc_id            VARCHAR PRIMARY KEY,  -- sha256 of the original bytes
    source_uri        VARCHAR NOT NULL,
    file_name         VARCHAR NOT NULL,
    bytes             BIGINT NOT NULL,
    compressed_bytes  BIGINT,
    compress_method   VARCHAR,
    n_pages           INTEGER NOT NULL,
    status            VARCHAR NOT NULL,     -- ingested | partial | quarantined
    error             VARCHAR,              -- human-readable reason when not ingested
    pipeline_version  VARCHAR NOT NULL,
    engine            VARCHAR,
    model             VARCHAR,
    run_id            VARCHAR,
    first_seen        TIMESTAMPTZ NOT NULL,
    ingested_at       TIMESTAMPTZ NOT NULL
);

CREATE TABLE IF NOT EXISTS pages (
    doc_id          VARCHAR NOT NULL,
    page_no         INTEGER NOT NULL,       -- 1-based
    width_pt        DOUBLE NOT NULL,
    height_pt       DOUBLE NOT NULL,
    route           VARCHAR NOT NULL,       -- text | ocr
    route_reason    VARCHAR,
    engine          VARCHAR NOT NULL,
    model           VARCHAR,
    status          VARCHAR NOT NULL,       -- ok | fallback | failed
    attempts        INTEGER NOT NULL,
    finish_reason   VARCHAR,
    fallback_reason VARCHAR,
    error           VARCHAR,
    prompt_tokens   INTEGER NOT NULL,
    output_tokens   INTEGER NOT NULL,
    latency_ms      DOUBLE NOT NULL,
    markdown        VARCHAR NOT NULL,
    raw             VARCHAR,
    PRIMARY KEY (doc_id, page_no)
);

CREATE TABLE IF NOT EXISTS blocks (
    doc_id    VARCHAR NOT NULL,
    page_no   INTEGER NOT NULL,
    block_no  INTEGER NOT NULL,
    label     VARCHAR NOT NULL,
    x0        DOUBLE,
    y0        DOUBLE,
    x1        DOUBLE,
    y1        DOUBLE,
    text      VARCHAR NOT NULL,
    html      VARCHAR,
    level     INTEGER,
    PRIMARY KEY (doc_id, page_no, block_no)
);

CREATE TABLE IF NOT EXISTS tables (
    doc_id    VARCHAR NOT NULL,
    page_no   INTEGER NOT NULL,
    table_no  INTEGER NOT NULL,             -- 1-based within the page
    x0        DOUBLE,
    y0        DOUBLE,
    x1        DOUBLE,
    y1        DOUBLE,
    n_rows    INTEGER NOT NULL,
    n_cols    INTEGER NOT NULL,
    header    VARCHAR[] NOT NULL,
    source    VARCHAR NOT NULL,             -- html | native | markdown
    caption   VARCHAR,
    html      VARCHAR,
    header_rows INTEGER,                    -- leading header rows (the body rows follow); NULL: loaded before it was recorded
    stub_head VARCHAR,                      -- header of the row-label (first) column; '' blank; NULL: no row labels
    PRIMARY KEY (doc_id, page_no, table_no)
);

CREATE TABLE IF NOT EXISTS table_cells (
    doc_id     VARCHAR NOT NULL,
    page_no    INTEGER NOT NULL,
    table_no   INTEGER NOT NULL,
    "row"      INTEGER NOT NULL,            -- 0-based grid position of the cell's top-left
    col        INTEGER NOT NULL,
    rowspan    INTEGER NOT NULL,
    colspan    INTEGER NOT NULL,
    is_header  BOOLEAN NOT NULL,
    text       VARCHAR NOT NULL,
    header_level INTEGER,                   -- a header cell's header row, from 1 at the top; NULL in the body
    PRIMARY KEY (doc_id, page_no, table_no, "row", col)
);

CREATE TABLE IF NOT EXISTS chunks (
    chunk_id      VARCHAR PRIMARY KEY,      -- stable: same document content → same id
    doc_id        VARCHAR NOT NULL,
    chunk_no      INTEGER NOT NULL,
    kind          VARCHAR NOT NULL,         -- text | table
    text          VARCHAR NOT NULL,
    n_tokens      INTEGER NOT NULL,
    header_path   VARCHAR[] NOT NULL,
    page_start    INTEGER NOT NULL,
    page_end      INTEGER NOT NULL,
    bboxes        STRUCT(page_no INTEGER, x0 DOUBLE, y0 DOUBLE, x1 DOUBLE, y1 DOUBLE)[] NOT NULL,
    content_hash  VARCHAR NOT NULL,         -- sha256 of the indexed text (context, then text)
    updated_at    TIMESTAMPTZ NOT NULL,     -- when this chunk's content last changed (vector feed)
    context       VARCHAR                   -- what the chunk belongs to (document identity, section path),
                                            -- indexed and embedded before the text; NULL in rows loaded
                                            -- before the column existed
);
