"""Storage: staged Parquet shards, the Parquet dataset, and kb.duckdb (views + catalog) with its loader."""
