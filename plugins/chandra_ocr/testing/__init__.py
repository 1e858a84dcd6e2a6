"""Stand-ins for what a test or a benchmark cannot have here: synthetic PDFs, a tiny random VLM and
its preset, an S3 emulator on 127.0.0.1, and the table cell-match score. The test suite and the
benchmarks in bench/ share them; a deployment can use them to check its own stack without weights."""
