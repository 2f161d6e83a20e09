# One task runner. `make test` works on a fresh clone: it builds .venv with pip first.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: test lint typecheck pytest bench faults conformance demo dev clean venv

venv: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check missionweave tests bench examples
	$(BIN)/ruff format --check missionweave tests bench examples
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy missionweave

# The tests run in parallel on PYTEST_WORKERS processes (xdist): each worker starts the session
# servers its tests ask for (Temporal, the time-skipping server, moto, PostgreSQL) on ports and
# in directories of its own. --dist loadgroup hands out tests one by one, but keeps together the
# tests of one heavy server and those of a file with a module fixture (tests/conftest.py,
# xdist_group); PYTEST_WORKERS=0 runs them in this process, one after another. Long trials
# (marker `long`) are left to `make faults` and `make conformance`.
PYTEST_WORKERS ?= 3
pytest: $(STAMP)
	@start=$$(date +%s); \
		$(BIN)/pytest -n $(PYTEST_WORKERS) --dist loadgroup -m 'not long' $(PYTEST_ARGS); \
		rc=$$?; echo "pytest: $$(( $$(date +%s) - start )) s on $(PYTEST_WORKERS) workers"; exit $$rc

test: lint typecheck pytest

bench: $(STAMP)
	$(BIN)/python bench/authority_append.py

# The fault suite (docs/faults.md): kill, freeze and cut every part; the seed reproduces a run,
# e.g. `make faults SEED=42 TRIALS=5` (TRIALS per kind and fault; KIND=worker for one kind).
TRIALS ?= 1
faults: $(STAMP)
	$(BIN)/pytest -m long tests/test_faults.py
	$(BIN)/python -m tests.faults --trials $(TRIALS) $(if $(SEED),--seed $(SEED)) \
		$(if $(KIND),--kind $(KIND))

# The conformance table (docs/spec/CONFORMANCE.md) is current, every recorded mutation of a
# MUST row (tests/conformance_mutations.py) is killed by its row's tests (JOBS scratch copies
# at once; ROW=MW-11.3-c runs one row), and the published OpenAPI document holds under
# schemathesis with EXAMPLES per operation (`make test` runs 25).
EXAMPLES ?= 100
JOBS ?= 1
conformance: $(STAMP)
	$(BIN)/python -m tests.conformance --check
	$(BIN)/python -m tests.conformance --mutate --jobs $(JOBS) $(if $(ROW),--row $(ROW))
	MISSIONWEAVE_SCHEMATHESIS_EXAMPLES=$(EXAMPLES) $(BIN)/pytest tests/authority/test_openapi.py

# The embedded stack's ports, e.g. `TEMPORAL_PORT=17233 UI_PORT=18233 make demo` (0: any free
# one). METRICS_PORT is `make dev`'s GET /metrics (default 9465; none: `METRICS_PORT=none`).
PORTS = $(if $(TEMPORAL_PORT),--temporal-port $(TEMPORAL_PORT)) \
        $(if $(UI_PORT),--ui-port $(UI_PORT)) \
        $(if $(AUTHORITY_PORT),--authority-port $(AUTHORITY_PORT))
METRICS = $(if $(filter none,$(METRICS_PORT)),--no-metrics, \
          $(if $(METRICS_PORT),--metrics-port $(METRICS_PORT)))

dev: $(STAMP)
	$(BIN)/missionweave dev up $(PORTS) $(METRICS)

demo: $(STAMP)
	$(BIN)/missionweave demo --keep-running $(PORTS)

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
