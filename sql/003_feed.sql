-- Vector feed (chandra_ocr/feed.py): how far each feed has exported. Idempotent.
-- A feed's next export holds the chunks whose updated_at, and the tombstones whose deleted_at,
-- lie after `watermark`; the row is replaced only after the export's outbox file is written.

CREATE TABLE IF NOT EXISTS feed_watermarks (
    feed         VARCHAR PRIMARY KEY,      -- e.g. 'vector'
    watermark    TIMESTAMPTZ NOT NULL,     -- latest change (updated_at / deleted_at) already exported
    export_no    INTEGER NOT NULL,         -- number of the last export: outbox/<feed>-<export_no>.parquet
    file         VARCHAR NOT NULL,         -- that file's path
    exported_at  TIMESTAMPTZ NOT NULL,
    upserts      BIGINT NOT NULL,
    deletes      BIGINT NOT NULL
);
