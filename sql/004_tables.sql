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
-- table_continuations: a table that goes on from the previous page — it starts its page's content
--   (running headers and footers aside), a table with as many columns ends the page before, and
--   it has no header of its own or the same header repeated. Parts stay separate tables (each
--   page's rows as extracted), linked here:
--     SELECT * FROM table_continuations WHERE doc_id = '9f2c…';
-- table_parts: every table with the first part of the table it belongs to and its part number
--   (1 for a table that continues nothing).
-- kb_linked_table_rows(doc_id, page_no, table_no): the body rows of a table and of all its
--   continuations, part by part, with the first part's column names:
--     SELECT part_no, r.record['Company'] FROM kb_linked_table_rows('9f2c…', 1, 1) r;
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

CREATE OR REPLACE VIEW table_continuations AS
WITH extent AS (  -- where each page's content starts and ends, running headers and footers aside
    SELECT doc_id, page_no, min(y0) AS top, max(y1) AS bottom
    FROM blocks
    WHERE label NOT IN ('page_header', 'page_footer') AND y0 IS NOT NULL
    GROUP BY ALL
),
ends AS (SELECT t.* FROM tables t JOIN extent e USING (doc_id, page_no) WHERE t.y1 >= e.bottom - 1),
starts AS (SELECT t.* FROM tables t JOIN extent e USING (doc_id, page_no) WHERE t.y0 <= e.top + 1)
SELECT s.doc_id, s.page_no, s.table_no, e.page_no AS prev_page_no, e.table_no AS prev_table_no
FROM starts s
JOIN ends e ON e.doc_id = s.doc_id AND e.page_no = s.page_no - 1 AND e.n_cols = s.n_cols
WHERE s.header = e.header OR list_filter(s.header, lambda h: trim(h) <> '') = [];

CREATE OR REPLACE VIEW table_parts AS
WITH RECURSIVE chain AS (
    SELECT t.doc_id, t.page_no, t.table_no, t.page_no AS first_page_no, t.table_no AS first_table_no,
           1 AS part_no
    FROM tables t
    ANTI JOIN table_continuations c USING (doc_id, page_no, table_no)
    UNION ALL
    SELECT c.doc_id, c.page_no, c.table_no, chain.first_page_no, chain.first_table_no, chain.part_no + 1
    FROM chain
    JOIN table_continuations c
      ON c.doc_id = chain.doc_id AND c.prev_page_no = chain.page_no AND c.prev_table_no = chain.table_no
)
SELECT * FROM chain;

CREATE OR REPLACE MACRO kb_linked_table_rows(doc, page, tab) AS TABLE
WITH names AS (SELECT DISTINCT col, column_name FROM kb_table_cells(doc, page, tab))
SELECT p.part_no, p.page_no, p.table_no, c."row",
       list(c.text ORDER BY c.col) AS cells,
       map(list(n.column_name ORDER BY c.col), list(c.text ORDER BY c.col)) AS record
FROM table_parts p, LATERAL kb_table_cells(doc, p.page_no, p.table_no) c
JOIN names n ON n.col = c.col
WHERE p.doc_id = doc AND p.first_page_no = page AND p.first_table_no = tab AND NOT c.is_header
GROUP BY p.part_no, p.page_no, p.table_no, c."row"
ORDER BY p.part_no, c."row";
