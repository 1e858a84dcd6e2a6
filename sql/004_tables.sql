-- Tables as relations (chandra_ocr tables / table_cells). Idempotent: macros and views are replaced.
--
-- kb_table_cells(doc_id, page_no, table_no): one row per grid position of one table, spans
--   expanded (a merged cell's text repeats over its area), with the column's name: its header
--   label, or colN when the label is empty, suffixed " (N)" when labels repeat.
--     FROM kb_table_cells('9f2c…', 1, 1) WHERE NOT is_header;
-- kb_table_rows(doc_id, page_no, table_no): one row per body row: the cells in column order as
--   a list, and a map column name → text.
--     SELECT r.record['Station'] AS station, r.record['Nitrate mg/L']::DOUBLE AS nitrate
--     FROM kb_table_rows('9f2c…', 1, 1) r;
-- One table with its header as column names (a PIVOT statement; columns sort by name):
--     PIVOT (SELECT "row", column_name, text FROM kb_table_cells('9f2c…', 1, 1) WHERE NOT is_header)
--     ON column_name USING first(text) GROUP BY "row" ORDER BY "row";
--   `chandra-ingest table --kb DIR DOC PAGE N` prints the same relation with the columns in
--   table order (or writes it as CSV/Parquet).
-- table_search: one row per table with its file, caption, header and all cell text, for
--   searching tables by header or content:
--     SELECT file_name, page_no, table_no, header FROM table_search
--     WHERE header_text ILIKE '%nitrate%' OR cell_text ILIKE '%Millbrook%';

CREATE OR REPLACE MACRO kb_table_cells(doc, page, tab) AS TABLE
WITH t AS (
    SELECT * FROM tables WHERE doc_id = doc AND page_no = page AND table_no = tab
),
cols AS (
    SELECT c.col, coalesce(nullif(trim(t.header[c.col + 1]), ''), 'col' || (c.col + 1)) AS base
    FROM t, (SELECT unnest(range(t.n_cols::BIGINT))::INTEGER AS col FROM t) c
),
names AS (
    SELECT col,
           CASE WHEN count(*) OVER (PARTITION BY base) > 1 THEN base || ' (' || (col + 1) || ')' ELSE base END
               AS column_name
    FROM cols
),
spread AS (
    SELECT (c."row" + r.dr)::INTEGER AS "row", (c.col + k.dc)::INTEGER AS col, c.text, c.is_header,
           c."row" AS cell_row, c.col AS cell_col, c.rowspan, c.colspan
    FROM table_cells c
    CROSS JOIN LATERAL (SELECT unnest(range(c.rowspan::BIGINT)) AS dr) r
    CROSS JOIN LATERAL (SELECT unnest(range(c.colspan::BIGINT)) AS dc) k
    WHERE c.doc_id = doc AND c.page_no = page AND c.table_no = tab
)
SELECT s."row", s.col, n.column_name, s.text, s.is_header, s.cell_row, s.cell_col, s.rowspan, s.colspan
FROM spread s JOIN names n USING (col)
WHERE s."row" < (SELECT n_rows FROM t)
ORDER BY s."row", s.col;

CREATE OR REPLACE MACRO kb_table_rows(doc, page, tab) AS TABLE
SELECT "row",
       list(text ORDER BY col) AS cells,
       map(list(column_name ORDER BY col), list(text ORDER BY col)) AS record
FROM kb_table_cells(doc, page, tab)
WHERE NOT is_header
GROUP BY "row"
ORDER BY "row";

CREATE OR REPLACE VIEW table_search AS
SELECT t.doc_id, d.file_name, t.page_no, t.table_no, t.source, t.n_rows, t.n_cols, t.caption, t.header,
       array_to_string(t.header, ' | ') AS header_text,
       coalesce(c.cell_text, '') AS cell_text,
       t.x0, t.y0, t.x1, t.y1
FROM tables t
JOIN documents d USING (doc_id)
LEFT JOIN (
    SELECT doc_id, page_no, table_no, string_agg(text, ' | ' ORDER BY "row", col) AS cell_text
    FROM table_cells GROUP BY ALL
) c USING (doc_id, page_no, table_no);
