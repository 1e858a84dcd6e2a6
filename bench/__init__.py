"""The lab beside the product: benchmarks run as ``python -m bench.<name>`` from the repository root
(bench/README.md says what each measures and which results file it writes)."""
