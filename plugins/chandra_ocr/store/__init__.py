"""Storage: Parquet shards per document and the DuckDB loader."""
