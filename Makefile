# `make test` is the one command that checks everything on a fresh machine:
# it creates the repo-local Python venv (the published standardwebhooks
# package the signature test verifies with), builds the hookline binary the
# end-to-end tests run, and runs every test of the workspace.

VENV ?= .venv
PYTHON ?= python3
CARGO ?= cargo

.PHONY: test build venv bench clean-venv

test: venv build
	HOOKLINE_TEST_PYTHON=$(abspath $(VENV))/bin/python $(CARGO) test --workspace --locked

build:
	$(CARGO) build -p hookline --locked

venv: $(VENV)/.ok

$(VENV)/.ok: tests/python/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
	touch $@

bench:
	$(CARGO) run --release -p hookline-tests --bin bench -- $(ARGS)

clean-venv:
	rm -rf $(VENV)
