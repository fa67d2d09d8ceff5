# Two entry points work on a fresh clone with only python3 installed:
#   make preview   install, then preview every demo stack offline (the main job)
#   make test      install, then run the test suite
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: preview test check bench schema catalog-check twin

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[test,dev]'
	touch $(STAMP)

# The converter environment (images/converter/requirements.txt: llm-compressor and the compressed-tensors and
# transformers it pins, which the vLLM image's differ from), with torch's CPU build: the tests run compress.py in it.
CONVERTER := .venv-converter
CONVERTER_STAMP := $(CONVERTER)/.installed
$(CONVERTER_STAMP): images/converter/requirements.txt
	$(PYTHON) -m venv $(CONVERTER)
	$(CONVERTER)/bin/pip install --quiet --disable-pip-version-check torch==2.13.0 -r images/converter/requirements.txt
	touch $(CONVERTER_STAMP)

preview: $(STAMP)
	$(VENV)/bin/python -m infra preview --all

# The twin's hot modules compiled with mypyc (docs/simulate.md, "Speed"), rebuilt when one changes. Without a
# C compiler it says so and the twin runs from its source; TWIN_FLAGS=--require makes that an error (CI).
TWIN := infra/serving/twin
TWIN_RECORD := $(TWIN)/_compiled.json
$(TWIN_RECORD): $(STAMP) $(addprefix $(TWIN)/,hpa.py keda.py replica.py engine.py traces.py accel.py build.py)
	$(VENV)/bin/python -m infra.serving.twin.build $(TWIN_FLAGS)

twin: $(TWIN_RECORD)

# One worker per core (pytest-xdist): the tests share no ports, files or state.
test: $(STAMP) twin $(CONVERTER_STAMP)
	$(VENV)/bin/python -m pytest -n auto

# Lint, format, types and the layering contracts (pyproject.toml); CI runs it before the tests.
# mypy runs twice, once per cloud: the provider SDKs' types fill mypy's memory, and one run over both peaked at
# 24.2 GB RSS on a cold cache, the whole of the 24 GB machine; split, the runs peak at 22.3 GB (AWS and the shared
# code) and 2.3 GB (the GCP components and stacks). Together they are pyproject's `files`.
GCP_TYPED := $(shell find components stacks -path '*/gcp/*' -name '*.py' | sort)
check: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy $(filter-out $(GCP_TYPED),$(shell find components stacks -name '*.py' | sort)) infra policies run_guard run_guard_gcp
	$(VENV)/bin/mypy $(GCP_TYPED)
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/preview_bench.py --out benchmarks/RESULTS.md

schema: $(STAMP)
	$(VENV)/bin/python -m infra schema --out stacks/mlinfra-stack.schema.json

catalog-check: $(STAMP)
	$(VENV)/bin/python -m infra.catalog.refresh --check
