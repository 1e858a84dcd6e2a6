"""Lexical search: the word index of the chunks and BM25 ranking, both in DuckDB.

``terms`` turns text into index terms: lower-cased words stemmed by the Snowball English stemmer
(PyStemmer), numbers with their thousands separators removed ("11,588" → "11588"), English stop
words dropped; letters and digits written together split ("FY2019" → "fy", "2019"). The same
function serves chunks and questions, so they meet on the same terms.

``postings`` holds one row per chunk and term with the term's frequency; ``bm25`` ranks chunks with
Okapi BM25 (k1 1.2, b 0.75; idf as in Lucene, never negative) over it and a ``lexical_chunks`` table
(each chunk's ``doc_id`` and ``n_terms``). Adding or removing a chunk touches only its own rows, so
the feed keeps the index current by the outbox's upserts and deletes (``lexical_index``).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from functools import lru_cache

import duckdb
import pyarrow as pa

K1 = 1.2
B = 0.75

# Function words that carry no topic (NLTK's English list, shortened to the commonest).
_STOPWORDS = (
    "a about above after again against all am an and any are as at be because been before being below "
    "between both but by can could did do does doing down during each few for from further had has "
    "have having he her here hers herself him himself his how i if in into is it its itself just me "
    "more most my myself no nor not now of off on once only or other our ours ourselves out over own "
    "same she should so some such than that the their theirs them themselves then there these they "
    "this those through to too under until up very was we were what when where which while who whom "
    "why will with would you your yours yourself yourselves"
)
STOPWORDS = frozenset(_STOPWORDS.split())

_WORD = re.compile(r"[^\W\d_]+|\d+(?:[,.]\d+)*")


@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer  # PyStemmer: the Snowball stemmers in C

    return Stemmer.Stemmer("english")


def terms(text: str) -> list[str]:
    """The index terms of ``text``, in order, repeats kept (see the module doc)."""
    words = []
    for match in _WORD.finditer(text.lower()):
        word = match.group()
        if word[0].isdigit():
            words.append(word.replace(",", "").rstrip("."))
        elif word not in STOPWORDS:
            words.append(word)
    stems = _stemmer().stemWords([w for w in words if not w[0].isdigit()])
    it = iter(stems)
    return [w if w[0].isdigit() else next(it) for w in words]


def create_postings(con: duckdb.DuckDBPyConnection) -> None:
    """Create the ``postings`` table in ``con`` when missing (``bm25`` also reads ``lexical_chunks``:
    ``chunk_id``, ``doc_id`` and ``n_terms`` of every chunk, kept by the caller)."""
    con.execute(
        "CREATE TABLE IF NOT EXISTS postings ("
        "term VARCHAR NOT NULL, chunk_id VARCHAR NOT NULL, tf INTEGER NOT NULL)"
    )


def add_postings(con: duckdb.DuckDBPyConnection, rows: Iterable[tuple[str, str]]) -> list[int]:
    """Insert the postings of ``(chunk_id, text)`` rows; returns each row's number of terms, in order."""
    lengths, p_terms, p_chunks, p_tf = [], [], [], []
    for chunk_id, text in rows:
        counts = Counter(terms(text))
        lengths.append(sum(counts.values()))
        for term, tf in counts.items():
            p_terms.append(term)
            p_chunks.append(chunk_id)
            p_tf.append(tf)
    if p_terms:
        table = pa.table({"term": p_terms, "chunk_id": p_chunks, "tf": pa.array(p_tf, pa.int32())})
        con.register("new_postings", table)
        try:
            con.execute("INSERT INTO postings SELECT * FROM new_postings")
        finally:
            con.unregister("new_postings")
    return lengths


def remove(con: duckdb.DuckDBPyConnection, chunk_ids: list[str]) -> None:
    """Delete the postings of the chunks ``chunk_ids``."""
    con.execute("DELETE FROM postings WHERE chunk_id IN (SELECT unnest($ids::VARCHAR[]))", {"ids": chunk_ids})


_BM25 = """
WITH q AS (SELECT DISTINCT unnest($terms::VARCHAR[]) AS term),
stats AS (SELECT count(*) AS n, avg(n_terms) AS avgdl FROM lexical_chunks),
df AS (SELECT p.term, count(*) AS df FROM postings p SEMI JOIN q USING (term) GROUP BY p.term),
idf AS (SELECT term, ln(1 + (stats.n - df + 0.5) / (df + 0.5)) AS idf FROM df, stats)
SELECT p.chunk_id,
       sum(idf.idf * p.tf * ($k1 + 1)
           / (p.tf + $k1 * (1 - $b + $b * c.n_terms / greatest(stats.avgdl, 1)))) AS score
FROM postings p JOIN idf USING (term) JOIN lexical_chunks c USING (chunk_id), stats
WHERE $doc::VARCHAR IS NULL OR c.doc_id = $doc
GROUP BY p.chunk_id
ORDER BY score DESC, p.chunk_id
LIMIT $n
"""


def bm25(
    con: duckdb.DuckDBPyConnection, question: str, n: int = 50, doc_id: str | None = None
) -> list[tuple[str, float]]:
    """The ``n`` best ``(chunk_id, score)`` for ``question`` by BM25, best first (of one document if
    given)."""
    query_terms = sorted(set(terms(question)))
    if not query_terms:
        return []
    rows = con.execute(_BM25, {"terms": query_terms, "doc": doc_id, "n": int(n), "k1": K1, "b": B}).fetchall()
    return [(chunk_id, float(score)) for chunk_id, score in rows]
