# sparkwire: `make demo` (installs what the demo runs: `make setup-demo`) or `make test` (installs everything:
# `make setup`). Both are idempotent, cached in .cache/.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv/bin
CACHE := .cache
# Python's bytecode cache, kept out of the source tree (.cache/pycache) and written even where the environment
# says PYTHONDONTWRITEBYTECODE (as CI's machines do): without it every Python process compiled from source
# every module it imported, and the tests start hundreds (gateways, producers, Spark's workers, pytest runs).
# A gateway's start took 1.4 s instead of 0.6 (wall time), four gateway test modules 49 s of user CPU instead of
# 16 (docs/test-times.md). Empty is "not set" to Python.
export PYTHONPYCACHEPREFIX ?= $(abspath $(CACHE))/pycache
export PYTHONDONTWRITEBYTECODE :=
# bench/ may be empty (git keeps no empty folders); ruff fails on a missing path.
LINT_DIRS := $(wildcard services harness tests bench)

.PHONY: setup setup-demo test lint check-packages demo chaos clean kind-up kind-down e2e-kind kind-test bench-peers bench-spark bench-update bench-realtime bench-recovery bench-abuse

setup:
	bash infra/setup.sh all

setup-demo:
	bash infra/setup.sh demo

# Three lanes of pytest runs side by side (tests/run-suite.sh): the Spark tests in two of them, the rest in
# the third, then the lint; the 25 slowest tests are listed at the end.
test: setup
	SPARKWIRE_LINT='$(MAKE) --no-print-directory lint' bash tests/run-suite.sh $(ARGS)

# The Python package as a user installs it (infra/check-packages.sh, ~40 s): builds the sdist and the wheel,
# twine-checks them, installs each extra (client, gateway, spark, server) from the wheel into a fresh venv
# and runs `sparkwire --help` there.
check-packages: setup
	bash infra/check-packages.sh

# services/sparkwire and harness/sparkwire_harness are the packages' folders, so mypy finds them by name.
lint:
	$(VENV)/ruff check $(LINT_DIRS)
	MYPYPATH=services:harness $(VENV)/mypy --config-file pyproject.toml -p sparkwire -p sparkwire_harness

demo: setup-demo
	$(VENV)/python -m sparkwire_harness.demo $(ARGS)

# The whole pipeline under a seeded fault schedule, checked exactly once (docs/reliability.md):
# make chaos ARGS="--minutes 10 --seed 7" (those are the defaults; ~14 min with start and check). The test
# harness's own command (sparkwire-harness chaos), not the product's.
chaos: setup
	$(VENV)/python -m sparkwire_harness chaos $(ARGS)

# A kind cluster running sparkwire (infra/kind/README.md): on a machine with no image registry everything is
# built here from package registries (~18 min cold, ~90 s warm). e2e-kind then runs the kind chaos,
# helm install and skaffold tests against it; a missing cluster fails them instead of skipping.
kind-up: setup
	bash infra/kind/kind-up.sh

kind-down:
	bash infra/kind/kind-down.sh

e2e-kind: kind-up
	$(MAKE) --no-print-directory kind-test

# The kind suite against the cluster kind-up built, without building it again. SPARKWIRE_KIND_SHARE=auto
# (CI): the core tests and this commit's share of the others (docs/kind-e2e.md, "What CI runs").
kind-test:
	SPARKWIRE_KIND_REQUIRED=1 $(VENV)/pytest tests/e2e/kind -v -rs --durations=0 $(ARGS)

# Removes run state only; stops nothing and keeps the downloaded jars and the venv.
clean:
	rm -rf $(CACHE)/run
bench-peers: ; flock -o /tmp/sparkwire-heavy.lock $(VENV)/python bench/side_by_side.py $(ARGS)
bench-recovery: ; flock -o /tmp/sparkwire-heavy.lock $(VENV)/python bench/driver_recovery.py $(ARGS)
bench-spark: ; flock -o /tmp/sparkwire-heavy.lock $(VENV)/python bench/spark_throughput.py $(ARGS)
bench-update: ; flock -o /tmp/sparkwire-heavy.lock $(VENV)/python bench/update_latency.py $(ARGS)
bench-realtime: ; flock -o /tmp/sparkwire-heavy.lock $(VENV)/python bench/realtime_latency.py $(ARGS)
bench-abuse: ; flock -o /tmp/sparkwire-heavy.lock $(VENV)/python bench/abuse.py $(ARGS)

# The documentation site (mkdocs.yml, pages in docs/) into site/, warnings as errors: broken links and anchors
# fail it. Its packages (docs/requirements.txt) go into .venv when missing or changed; the CLI reference is
# generated from the sparkwire package's parser, so the venv needs `make setup-demo` (or setup) first.
.PHONY: docs
DOCS_STAMP := .venv/.docs-requirements.txt
$(DOCS_STAMP): docs/requirements.txt
	@test -x $(VENV)/python || { echo "make docs: no .venv yet: run make setup-demo first" >&2; exit 1; }
	$(VENV)/pip install -q -r docs/requirements.txt
	cp docs/requirements.txt $@
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(VENV)/mkdocs build --strict --site-dir site
