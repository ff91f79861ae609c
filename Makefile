# PaddleCloud: `make run` runs the example job end to end; `make test` runs every check.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# Reinstall only when a dependency list changes.
DEPS_HASH := $(shell cat requirements.txt requirements-dev.txt client/pyproject.toml | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(DEPS_HASH)

.PHONY: install run stop test lint typecheck pytest k8s-build k8s-up k8s-up-node k8s-down k8s-status clean

$(STAMP): requirements.txt requirements-dev.txt client/pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements-dev.txt
	@rm -f $(VENV)/.installed-*
	@touch $@

install: $(STAMP)

run: install
	@scripts/run.sh

stop:
	@scripts/stop.sh

lint: install
	$(VENV)/bin/ruff check .

typecheck: install
	$(VENV)/bin/mypy .

pytest: install
	@scripts/pytest.sh

test: lint typecheck pytest

k8s-build:
	bash tools/k8s/build.sh

k8s-up: install
	$(PY) -m tools.k8s.testcluster up

# The same plus a real node (containerd, CNI bridge, CoreDNS, kubelet): root, after `make k8s-build`.
k8s-up-node: install
	$(PY) -m tools.k8s.testcluster up --node

k8s-down: install
	$(PY) -m tools.k8s.testcluster down

k8s-status: install
	$(PY) -m tools.k8s.testcluster status

clean: stop
	rm -rf var
