"""The Airflow room: provider metadata, the vLLM connection hook, operators and the DAG builder."""
