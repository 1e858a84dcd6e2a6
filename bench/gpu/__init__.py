"""GPU experiments: vLLM scheduling and throughput on H100/H200 with dummy-weight model folders."""
