# One task runner. `make test` works on a fresh clone: it builds .venv with pip first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test lint typecheck pytest bench demo dev clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check missionweave tests bench examples
	$(BIN)/ruff format --check missionweave tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy missionweave

pytest: $(STAMP)
	$(BIN)/pytest

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python bench/authority_append.py

dev: $(STAMP)
	$(BIN)/missionweave dev up

demo: $(STAMP)
	$(BIN)/missionweave demo --keep-running

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
