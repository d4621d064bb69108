# sparkwire: `make setup` once (idempotent, cached in .cache/), then `make test`.
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
VENV := .venv/bin
CACHE := .cache
# bench/ may be empty (git keeps no empty folders); ruff fails on a missing path.
LINT_DIRS := $(wildcard services tests bench)

.PHONY: setup test lint demo clean

setup:
	bash infra/setup.sh

test: setup
	$(VENV)/pytest tests
	$(MAKE) --no-print-directory lint

# mypy cannot see setuptools' editable finder, so it checks the `sparkwire`
# package through a symlink to services/.
lint:
	$(VENV)/ruff check $(LINT_DIRS)
	mkdir -p $(CACHE)/typecheck
	ln -sfn ../../services $(CACHE)/typecheck/sparkwire
	MYPYPATH=$(CACHE)/typecheck $(VENV)/mypy --config-file pyproject.toml -p sparkwire

demo: setup
	$(VENV)/python -m sparkwire.demo $(ARGS)

# Removes run state only; stops nothing and keeps the downloaded jars and the venv.
clean:
	rm -rf $(CACHE)/run
