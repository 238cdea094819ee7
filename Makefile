# dbmatrix — make setup | reproduce | figures | paper | test | lab | clean
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
MAKEFLAGS += --warn-undefined-variables --no-builtin-rules

PYTHON ?= python3
PROFILE ?= quick
# DATA: a data root holding one directory per experiment (e.g. DATA=data/reference). Empty: per experiment
# data/runs/<experiment> when it has completed runs, else the committed data/reference/<experiment>.
DATA ?=
# CAMPAIGN: which campaign (one run of the whole matrix on one boot) reproduce/run measure: auto = a new
# campaign when the latest one is complete, else resume it; last = resume the latest; new; or a number.
CAMPAIGN ?= auto
LAB_PORT ?= 8888
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.installed
OS_STAMP := $(VENV)/.os-packages
GEN := paper/generated
DATA_ARG := $(if $(DATA),--data $(DATA))

.PHONY: help setup reproduce run figures paper test test-unit test-browser lint lab clean distclean FORCE

help:
	@echo "make setup      OS packages (apt/dnf via dbmatrix setup) + .venv with the Python dependencies"
	@echo "make reproduce  setup, notebooks 00->10->20->30 with PROFILE=$(PROFILE) (new runs in data/runs/), then the paper"
	@echo "make figures    processed tables, figures and paper inputs from existing data (no benchmark)"
	@echo "make paper      paper/main.pdf (builds the figures first if they are stale)"
	@echo "make test       setup, lint (ruff, mypy), then unit, integration, browser and notebook tests (smoke profile)"
	@echo "make lab        JupyterLab on 127.0.0.1:$(LAB_PORT) with the project's kernel"
	@echo "DATA=dir        read data from dir/<experiment> (default: data/runs, else data/reference)"
	@echo "CAMPAIGN=auto   reproduce/run: auto (new campaign if the latest is complete), last (resume), new, or K"

setup: $(PY_STAMP) $(OS_STAMP)

# The virtual environment: pyproject.toml declares the dependencies, constraints.txt pins the
# versions this study was last run with (regenerate with `.venv/bin/pip freeze --exclude-editable`).
# The notebooks' kernel `dbmatrix` (dbmatrix.lab) is installed into the venv, where Jupyter finds it
# whatever JUPYTER_DATA_DIR says.
$(PY_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'
	$(BIN)/python -m ipykernel install --sys-prefix --name dbmatrix --display-name "dbmatrix (.venv)" >/dev/null
	touch $@

# OS packages through the same host-setup code that prepares remote hosts (idempotent).
$(OS_STAMP): $(PY_STAMP) lib/dbmatrix/hosts/setup.py
	$(BIN)/dbmatrix setup --roles server,paper,test
	touch $@

# New runs go to data/runs/<experiment>/ (resumable), never into the committed data/reference/.
reproduce: setup
	$(BIN)/dbmatrix notebooks --profile $(PROFILE) --campaign $(CAMPAIGN) $(DATA_ARG)
	$(MAKE) --no-print-directory paper

run: setup
	$(BIN)/dbmatrix run --profile $(PROFILE) --campaign $(CAMPAIGN) $(DATA_ARG)

# ---- figures and paper: real file targets, rebuilt only when stale ---------------------------------------
# $(GEN)/sources.mk says which data directory each study of the profile reads and holds one rule per study:
# its processed tables (stamp: processed/analysis.json) from its raw manifests, spec and the analysis code.
# It is rewritten only when its content changes (another PROFILE or DATA, runs appearing in data/runs), so
# that change rebuilds what depends on it; make re-reads it before deciding anything else.
# Code dependencies come from the import graph (dbmatrix.codedeps): sources.mk sets ANALYSIS_CODE (what
# `dbmatrix analyse` imports, function-local imports included) and FIGURE_CODE (what notebook 30 imports,
# the notebook and the profile's parameters), so a new import is a new dependency without editing this file.
STUDY_STAMPS :=
FIGURE_GOALS := figures paper $(GEN)/provenance.json paper/main.pdf
ifneq ($(filter $(FIGURE_GOALS),$(MAKECMDGOALS)),)
include $(GEN)/sources.mk
endif

$(GEN)/sources.mk: FORCE | $(PY_STAMP)
	@mkdir -p $(@D)
	@$(BIN)/dbmatrix sources --profile $(PROFILE) $(DATA_ARG) --make > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; echo "data sources changed: $@"; fi

# Notebook 30 draws every figure, the claims table and the paper's generated inputs; provenance.json is
# written last, so it stands for all of them.
$(GEN)/provenance.json: $(GEN)/sources.mk $(STUDY_STAMPS) $(FIGURE_CODE) | $(PY_STAMP)
	$(BIN)/dbmatrix notebooks --profile $(PROFILE) --only 30 $(DATA_ARG)

figures: $(GEN)/provenance.json

paper: paper/main.pdf

paper/main.pdf: $(GEN)/provenance.json $(wildcard paper/*.tex) $(wildcard paper/*.bib) | $(OS_STAMP)
	$(BIN)/dbmatrix paper

FORCE:

# Notebooks run in the environment pytest runs in (--nbval-current-env), as papermill runs them in the CLI's.
# tests/browser drives JupyterLab in headless Chromium (select it alone with `-m browser`).
test: setup lint
	$(BIN)/python -m pytest tests notebooks --nbval-lax --nbval-current-env -p no:cacheprovider

# ruff (the rule set chosen in pyproject.toml) and mypy over the package; make test runs both first.
lint: $(PY_STAMP)
	$(BIN)/ruff check lib tests benchmarks conftest.py
	$(BIN)/mypy

test-browser: setup
	$(BIN)/python -m pytest tests/browser -m browser -p no:cacheprovider

test-unit: $(PY_STAMP)
	$(BIN)/python -m pytest tests/unit -p no:cacheprovider

# Saving a tracked notebook (notebooks/*.ipynb) drops its outputs (dbmatrix.lab.pre_save_hook), so running
# one and saving leaves it as committed; executed copies are what `dbmatrix notebooks` writes.
lab: setup
	$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(LAB_PORT) --ServerApp.root_dir=$(CURDIR) \
	  --ContentsManager.pre_save_hook=dbmatrix.lab.pre_save_hook $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

clean:
	-cd paper && latexmk -C -quiet main.tex >/dev/null 2>&1
	rm -rf .pytest_cache paper/_minted* paper/*.run.xml $(GEN)/sources.mk

distclean: clean
	rm -rf $(VENV)
