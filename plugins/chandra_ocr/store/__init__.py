"""Storage: staged rows, the Parquet dataset, and kb.duckdb (views + catalog) with its loader."""
