# dbmatrix — make setup | reproduce | figures | paper | test | lab | clean
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
MAKEFLAGS += --warn-undefined-variables --no-builtin-rules

PYTHON ?= python3
PROFILE ?= quick
LAB_PORT ?= 8888
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.installed
OS_STAMP := $(VENV)/.os-packages

.PHONY: help setup reproduce run figures paper test test-unit lab clean distclean

help:
	@echo "make setup      OS packages (apt/dnf via dbmatrix setup) + .venv with the Python dependencies"
	@echo "make reproduce  setup, notebooks 00->10->20->30 with PROFILE=$(PROFILE), then the paper"
	@echo "make figures    notebooks 20->30 on existing data (no benchmark), then the paper"
	@echo "make paper      paper/main.pdf with latexmk"
	@echo "make test       setup, then unit, integration and notebook tests (smoke profile)"
	@echo "make lab        JupyterLab on 127.0.0.1:$(LAB_PORT) with the project's kernel"

setup: $(PY_STAMP) $(OS_STAMP)

# The virtual environment: pyproject.toml declares the dependencies, constraints.txt pins the
# versions this study was last run with (regenerate with `.venv/bin/pip freeze --exclude-editable`).
$(PY_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	touch $@

# OS packages through the same host-setup code that prepares remote hosts (idempotent).
$(OS_STAMP): $(PY_STAMP) lib/dbmatrix/hostsetup.py
	$(BIN)/dbmatrix setup --roles server,paper,test
	touch $@

reproduce: setup
	$(BIN)/dbmatrix notebooks --profile $(PROFILE)
	$(MAKE) --no-print-directory paper

run: setup
	$(BIN)/dbmatrix run --profile $(PROFILE)

figures: setup
	$(BIN)/dbmatrix notebooks --profile $(PROFILE) --only 20,30
	$(MAKE) --no-print-directory paper

paper: paper/main.pdf

paper/main.pdf: paper/main.tex $(wildcard paper/generated/*.tex) $(wildcard figures/*.pdf) | $(OS_STAMP)
	$(BIN)/dbmatrix paper

test: setup
	$(BIN)/python -m pytest tests notebooks --nbval-lax -p no:cacheprovider

test-unit: $(PY_STAMP)
	$(BIN)/python -m pytest tests/unit -p no:cacheprovider

lab: setup
	$(BIN)/python -m ipykernel install --sys-prefix --name dbmatrix --display-name "dbmatrix (.venv)" >/dev/null
	$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(LAB_PORT) --ServerApp.root_dir=$(CURDIR) \
	  $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

clean:
	-cd paper && latexmk -C -quiet main.tex >/dev/null 2>&1
	rm -rf .pytest_cache paper/_minted* paper/*.run.xml

distclean: clean
	rm -rf $(VENV)
