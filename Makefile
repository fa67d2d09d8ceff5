# Two entry points work on a fresh clone with only python3 installed:
#   make preview   install, then preview every demo stack offline (the main job)
#   make test      install, then run the test suite
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed

.PHONY: preview test bench schema catalog-check

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

preview: $(STAMP)
	$(VENV)/bin/python -m infra preview --all

test: $(STAMP)
	$(VENV)/bin/python -m pytest

bench: $(STAMP)
	$(VENV)/bin/python benchmarks/preview_bench.py --out benchmarks/RESULTS.md

schema: $(STAMP)
	$(VENV)/bin/python -m infra schema --out stacks/mlinfra-stack.schema.json

catalog-check: $(STAMP)
	$(VENV)/bin/python -m infra.catalog.refresh --check
