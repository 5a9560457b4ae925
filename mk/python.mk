# The Python SDK (python/): a venv inside the repository (python/.venv,
# git-ignored) made from nothing by `make deps` with the pinned packages
# of python/requirements.txt; tests (pytest with pytest-asyncio, then
# mypy --strict over the package); the conformance suite with the Python
# testee as client and as provider (child, unix, tcp); and the bench
# (python/bench: hubwire beside multiprocessing and grpcio, same run).

PY_DIR := python
PYTHON3 ?= python3
PY_VENV := $(PY_DIR)/.venv
PY := $(CURDIR)/$(PY_VENV)/bin/python
PY_STAMP := $(PY_VENV)/.installed
PY_TESTEE := $(PY) $(CURDIR)/$(PY_DIR)/conformance/testee.py

.PHONY: deps-python test-python conformance-python bench-python

$(PY_STAMP): $(PY_DIR)/requirements.txt
	@command -v $(PYTHON3) >/dev/null 2>&1 || { echo "error: '$(PYTHON3)' not found: the Python SDK needs Python >= 3.11" >&2; exit 1; }
	@$(PYTHON3) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "error: the Python SDK needs Python >= 3.11 ($(PYTHON3) is older)" >&2; exit 1; }
	@[ -x $(PY) ] || $(PYTHON3) -m venv $(PY_VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r $(PY_DIR)/requirements.txt
	@touch $@

deps-python: $(PY_STAMP) ## Create python/.venv and install the pinned packages (msgspec; pytest, pytest-asyncio, mypy; grpcio for the bench)

test-python: deps-python ## Test the Python SDK: vectors, behaviour on every transport (asyncio and blocking), examples; then mypy --strict
	@cd $(PY_DIR) && status=0; \
	$(PY) -m pytest -q -p no:cacheprovider --junit-xml=.venv/test-results.xml || status=$$?; \
	counts=$$($(PY) -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); s = r if r.tag == "testsuite" else r[0]; n, f = int(s.get("tests")), int(s.get("failures")) + int(s.get("errors")); print(n - f - int(s.get("skipped")), f)' .venv/test-results.xml 2>/dev/null || echo "0 1"); \
	set -- $$counts; passed=$$1; failed=$$2; \
	echo "== mypy --strict hubwire"; \
	if $(PY) -m mypy --strict hubwire; then passed=$$((passed + 1)); else failed=$$((failed + 1)); status=1; fi; \
	echo "python: $$passed passed, $$failed failed"; exit $$status

conformance-python: deps-python ## Run the conformance suite against the Python SDK, as client and provider (child, unix, tcp)
	cd $(RUST_DIR) && $(CARGO) build -p hubwire-conformance $(LOCKED)
	$(BIN)/hubwire-conformance --root $(CURDIR) --lang python --testee "$(PY_TESTEE)"

bench-python: deps-python ## Run the Python bench (hubwire vs socket, multiprocessing, grpcio; ~5 min); rewrites python/bench/README.md's results
	$(PY) $(PY_DIR)/bench/run.py --readme $(PY_DIR)/bench/README.md --readme $(PY_DIR)/README.md

DEPS_STEPS += deps-python
TEST_STEPS += test-python
CONFORMANCE_STEPS += conformance-python
BENCH_STEPS += bench-python

# `make run` and `make test-demo` start python/examples/translate.py with
# the venv's python (examples/hubwire.toml): make the venv first.
run test-demo: deps-python
