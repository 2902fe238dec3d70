# Two commands for a fresh machine: `make run` starts the stack, `make test` runs every test.
# Both create .venv at the repository root and install everything on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The console's front-end libraries (package.json) from the npm registry, copied to static/vendor/.
VENDOR_STAMP := static/vendor/.installed
export PATH := $(CURDIR)/$(BIN):$(PATH)
# make test's pytest processes (pytest-xdist): three, each module whole on one (--dist loadfile),
# the longest modules handed out first (tests/conftest.py); most of a test's time is waiting on the
# processes it starts, so three beat two cores' worth. TEST_WORKERS=0: one process (README).
TEST_WORKERS ?= 3

.PHONY: run run-ha test test-slow lint bench bench-store bench-broker setup clean

setup: $(STAMP) $(VENDOR_STAMP)

$(VENDOR_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund && npm run --silent vendor
	touch $(VENDOR_STAMP)

$(STAMP): pyproject.toml scripts/ensure_system_packages.sh
	bash scripts/ensure_system_packages.sh
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

run: $(STAMP) $(VENDOR_STAMP)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py ensure_admin
	$(BIN)/python scripts/run_stack.py Procfile

# make run with a master and a slave of one broker set (Procfile.ha; README: High availability).
run-ha: $(STAMP) $(VENDOR_STAMP)
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py ensure_admin
	$(BIN)/python scripts/run_stack.py Procfile.ha

test: $(STAMP) $(VENDOR_STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	@# mypy checks beside the tests (a minute of a fresh clone's wall time otherwise); both must pass.
	$(BIN)/mypy & mypy=$$!; \
	$(BIN)/python -m pytest -m "not slow" -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder $(PYTEST_ARGS); \
	tests=$$?; wait $$mypy; checked=$$?; \
	if [ $$checked -ne 0 ]; then echo "mypy failed (exit $$checked)"; fi; \
	[ $$tests -eq 0 ] && [ $$checked -eq 0 ]

test-slow: $(STAMP)
	$(BIN)/python -m pytest -m slow $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench-store: $(STAMP)
	$(BIN)/python bench/store.py $(BENCH_ARGS)

bench-broker: $(STAMP)
	$(BIN)/python -m pip install --quiet -e ".[bench]"
	$(BIN)/python bench/broker.py $(BENCH_ARGS)
	$(BIN)/python bench/broker_path.py --instructions

bench: bench-store bench-broker

clean:
	rm -rf $(VENV) var .pytest_cache .ruff_cache
