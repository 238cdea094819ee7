# dbmatrix — make smoke | reproduce | figures | paper | test | lab | clean | clean-host
SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DELETE_ON_ERROR:
MAKEFLAGS += --warn-undefined-variables --no-builtin-rules

PYTHON ?= python3
# PROFILE: what smoke/run/reproduce measure (quick by default: the 30-minute demonstration). figures, paper and
# the notebooks' figure step draw BUILD_PROFILE: the paper profile, whose committed reference the tracked
# figures/ and paper/ are built from, unless PROFILE is given (`make paper PROFILE=quick`); reproduce builds
# the paper of the profile it measured.
PROFILE ?= quick
BUILD_PROFILE := $(if $(filter command line environment environment override,$(origin PROFILE)),$(PROFILE),paper)
# DATA: which results figures and the paper read (dbmatrix.datachoice): reference (the committed
# data/reference/<experiment>), runs (your data/runs/<experiment>), a data root DIR (DIR/<experiment>), or
# empty = auto: your runs once they hold a complete campaign, else the committed reference.
DATA ?=
# Where a build's figures, paper inputs and paper go. The committed build is the paper profile on the committed
# reference (`make figures` / `make paper` with neither PROFILE nor DATA, or PROFILE=paper DATA=reference): it
# writes the tracked figures/ and paper/, and does so byte for byte (no commit in them: that is in the
# untracked paper/generated/build.json and build-macros.tex). Every other build (make reproduce, PROFILE=...,
# DATA=...) goes under build/<profile>[-<data>]/ (gitignored: DBMATRIX_BUILD_DIR), so it never changes a
# tracked file. BUILD_DATA: the data choice of figures/paper (reference for the committed build, else DATA).
PROFILE_GIVEN := $(filter command line environment environment override,$(origin PROFILE))
BUILD_DATA := $(or $(DATA),$(if $(PROFILE_GIVEN),,reference))
COMMITTED_BUILD := $(and $(filter paper,$(BUILD_PROFILE)),$(filter reference,$(BUILD_DATA)))
BUILD_OUT := $(if $(COMMITTED_BUILD),.,build/$(BUILD_PROFILE)$(if $(DATA),-$(notdir $(DATA))))
BUILD_ENV := $(if $(COMMITTED_BUILD),,DBMATRIX_BUILD_DIR=$(CURDIR)/$(BUILD_OUT))
BUILD_DATA_ARG := $(if $(BUILD_DATA),--data $(BUILD_DATA))
# make reproduce's build (whatever PROFILE's origin): build/<profile>[-<data>]/
REPRO_OUT := build/$(PROFILE)$(if $(DATA),-$(notdir $(DATA)))
# CAMPAIGN: which campaign (one run of the whole matrix on one boot) reproduce/run measure: auto = a new
# campaign when the latest one is complete, else resume it; last = resume the latest; new; or a number.
CAMPAIGN ?= auto
LAB_PORT ?= 8888
VENV := .venv
BIN := $(VENV)/bin
PY_STAMP := $(VENV)/.installed
# OS packages by role (dbmatrix.hosts.setup.PACKAGES), each installed (as root) only by the targets that need
# it: server (MariaDB, sysbench, media tools: smoke, run, reproduce), paper (LaTeX: reproduce, which ends
# with the paper; `make setup-paper` alone), test (sshd, chromium: make test). figures, paper and lab need
# none: only the Python environment (and LaTeX already present for paper).
OS_SERVER := $(VENV)/.os-server
OS_PAPER := $(VENV)/.os-paper
OS_TEST := $(VENV)/.os-test
# every role at once (make setup, make test): one index update and one apt transaction, its triggers run once
OS_ALL := $(VENV)/.os-all
SMOKE_ROOT := data/smoke
GEN := $(BUILD_OUT)/paper/generated
PAPER_PDF := $(BUILD_OUT)/paper/main.pdf
DATA_ARG := $(if $(DATA),--data $(DATA))

.PHONY: help setup setup-paper smoke reproduce run soak figures paper publish-pdf readme test test-ready test-unit test-browser lint lab \
	clean clean-host distclean FORCE

help:
	@echo "make smoke      the smallest real run (profile smoke: server packages, runs, analysis, figures) into $(SMOKE_ROOT)/"
	@echo "make reproduce  server + LaTeX packages, notebooks 00->10->20->30 with PROFILE=$(PROFILE) (runs in data/runs/), the paper"
	@echo "                PROFILE=paper: one campaign (~1 h; the claims are judged after every campaign, at most 6)"
	@echo "make soak       the next campaign of the soak study (seed 000's hour-long run, ~64 min) in data/runs/: a sitting of its own"
	@echo "make figures    processed tables, figures and paper inputs from existing data (no benchmark, no root);"
	@echo "                the $(BUILD_PROFILE) profile's studies (the committed build: paper; PROFILE=quick for the quick ones)"
	@echo "make paper      paper/main.pdf (figures first if stale); needs LaTeX (make setup-paper), no root otherwise"
	@echo "make publish-pdf docs/paper.pdf: the committed build's paper for readers without LaTeX (commit it)"
	@echo "make test       every OS role, lint (ruff, mypy), then unit, integration, browser and notebook tests"
	@echo "make lab        JupyterLab on 127.0.0.1:$(LAB_PORT) with the project's kernel (Python only)"
	@echo "make setup      .venv and every OS package role (server, paper, test)"
	@echo "make clean-host undo what runs did to this machine: media (tmpfs, loop devices, cgroups), work directory"
	@echo "DATA=choice     reference, runs, a data root DIR, or empty = your runs once a campaign is complete, else reference"
	@echo "CAMPAIGN=auto   reproduce/run: auto (new campaign if the latest is complete), last (resume), new, or K"

setup: $(PY_STAMP) $(OS_ALL)

setup-paper: $(PY_STAMP) $(OS_PAPER)

# The virtual environment: pyproject.toml declares the dependencies, constraints.txt pins the
# versions this study was last run with (regenerate with `.venv/bin/pip freeze --exclude-editable`).
# The notebooks' kernel `dbmatrix` (dbmatrix.lab) is installed into the venv, where Jupyter finds it
# whatever JUPYTER_DATA_DIR says.
# uv (from PyPI, like every other package) installs the same pinned set in seconds where pip takes a minute or
# more on a fresh machine (make test's budget counts it); pip does it if uv cannot be had. Both leave the
# packages compiled to bytecode (uv: --compile-bytecode, about 15 s on 2 vCPUs): where PYTHONDONTWRITEBYTECODE is
# set (as on this VM), Python never caches what it compiles, and every process (a CLI call, a notebook kernel, a
# test worker) compiled pandas, scipy, matplotlib and jupyter afresh, about 2 s of each `dbmatrix` call.
$(PY_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	if $(BIN)/python -m pip install -q uv==0.13.9; then \
	  $(BIN)/uv pip install --python $(BIN)/python -q --compile-bytecode -c constraints.txt -e '.[test]'; \
	else $(BIN)/python -m pip install -q -c constraints.txt -e '.[test]'; fi
	$(BIN)/python -m ipykernel install --sys-prefix --name dbmatrix --display-name "dbmatrix (.venv)" >/dev/null
	touch $@

# OS packages of one role ($(VENV)/.os-server, .os-paper, .os-test) through the same host-setup code that
# prepares remote hosts (idempotent; installs only what is missing, as root or with sudo -n).
$(VENV)/.os-%: $(PY_STAMP) lib/dbmatrix/hosts/setup.py
	$(BIN)/dbmatrix setup --roles $*
	touch $@

$(OS_ALL): $(PY_STAMP) lib/dbmatrix/hosts/setup.py
	$(BIN)/dbmatrix setup --roles server,paper,test
	touch $(OS_SERVER) $(OS_PAPER) $(OS_TEST) $@

# New runs go to data/runs/<experiment>/ (resumable), never into the committed data/reference/: one campaign
# per call (the paper profile's claims are judged after every campaign: run the next one in another sitting).
# The build (figures, paper inputs, the paper) goes to $(REPRO_OUT)/, never to the tracked figures/ and paper/.
reproduce: $(PY_STAMP) $(OS_SERVER) $(OS_PAPER)
	DBMATRIX_BUILD_DIR=$(CURDIR)/$(REPRO_OUT) $(BIN)/dbmatrix notebooks --profile $(PROFILE) --campaign $(CAMPAIGN) \
	  $(DATA_ARG)
	$(MAKE) --no-print-directory paper PROFILE=$(PROFILE)
	@echo "reproduce: runs in data/runs/, figures in $(REPRO_OUT)/figures/, the paper $(REPRO_OUT)/paper/main.pdf"

run: $(PY_STAMP) $(OS_SERVER)
	$(BIN)/dbmatrix run --profile $(PROFILE) --campaign $(CAMPAIGN) $(DATA_ARG)

# The soak study (seed 000's run length: one hour-long run per campaign) is never run with the paper profile's
# other studies (a paper campaign stays about an hour): its next campaign, in a sitting of its own.
soak: $(PY_STAMP) $(OS_SERVER)
	$(BIN)/dbmatrix run --spec specs/paper-soak.yaml --campaign $(CAMPAIGN)

# The smallest real run: the smoke profile (one engine, two cache levels, one repetition) through the same
# notebooks as reproduce, with everything it writes under $(SMOKE_ROOT)/ (gitignored): runs, executed
# notebooks, figures and paper inputs, never the tracked figures/ or paper/generated/.
smoke: $(PY_STAMP) $(OS_SERVER)
	DBMATRIX_OUTPUT_ROOT=$(CURDIR)/$(SMOKE_ROOT) $(BIN)/dbmatrix notebooks --profile smoke --campaign auto
	@echo "smoke: runs in $(SMOKE_ROOT)/data/runs, figures in $(SMOKE_ROOT)/figures"

# ---- figures and paper: real file targets, rebuilt only when stale ---------------------------------------
# $(GEN)/sources.mk says which data directory each study of the profile reads and holds one rule per study:
# its processed tables (stamp: processed/analysis.json) from its raw manifests, spec and the analysis code.
# It is rewritten only when its content changes (another PROFILE or DATA, runs appearing in data/runs), so
# that change rebuilds what depends on it; make re-reads it before deciding anything else.
# Code dependencies come from the import graph (dbmatrix.codedeps): sources.mk sets ANALYSIS_CODE (what
# `dbmatrix analyse` imports, function-local imports included) and FIGURE_CODE (what notebook 30 imports,
# the notebook and the profile's parameters), so a new import is a new dependency without editing this file.
# ($(value FIGURE_CODE): empty, and no undefined-variable warning, where sources.mk is not read, e.g. make reproduce.)
STUDY_STAMPS :=
FIGURE_GOALS := figures paper $(GEN)/provenance.json $(PAPER_PDF)
ifneq ($(filter $(FIGURE_GOALS),$(MAKECMDGOALS)),)
include $(GEN)/sources.mk
endif

$(GEN)/sources.mk: FORCE | $(PY_STAMP)
	@mkdir -p $(@D)
	@$(BIN)/dbmatrix sources --profile $(BUILD_PROFILE) $(BUILD_DATA_ARG) --make > $@.tmp
	@if cmp -s $@.tmp $@; then rm -f $@.tmp; else mv $@.tmp $@; echo "data sources changed: $@"; fi

# Notebook 30 draws every figure, the claims table and the paper's generated inputs; provenance.json is
# written last, so it stands for all of them.
$(GEN)/provenance.json: $(GEN)/sources.mk $(STUDY_STAMPS) $(value FIGURE_CODE) | $(PY_STAMP)
	$(BUILD_ENV) $(BIN)/dbmatrix notebooks --profile $(BUILD_PROFILE) --only 30 $(BUILD_DATA_ARG)

figures: $(GEN)/provenance.json
	@echo "figures: $(BUILD_OUT)/figures/, paper inputs $(GEN)/ ($(if $(COMMITTED_BUILD),the committed build,a build of your own))"

paper: $(PAPER_PDF)

# LaTeX only (no root, no MariaDB): `make setup-paper` installs it, or install latexmk and TeX Live yourself.
$(PAPER_PDF): $(GEN)/provenance.json $(wildcard paper/*.tex) $(wildcard paper/*.bib) | $(PY_STAMP)
	@command -v latexmk >/dev/null || { echo "make paper needs LaTeX (latexmk, TeX Live): make setup-paper" \
	  "(apt-get/dnf as root) or install them yourself"; exit 2; }
	$(BUILD_ENV) $(BIN)/dbmatrix paper

# docs/paper.pdf, the committed build's paper for readers without LaTeX (README): refreshed on purpose only,
# since the PDF names the commit it was built at and would change at every commit.
publish-pdf:
	$(MAKE) --no-print-directory paper PROFILE=paper DATA=reference
	cp paper/main.pdf docs/paper.pdf
	@echo "publish-pdf: docs/paper.pdf (commit it)"

# The README's generated blocks (claims and verdicts, counts, measured times, requirements) from the
# committed data: run after the claims table, the reference or docs/measured.json change; a unit test fails
# while they differ.
readme: $(PY_STAMP)
	$(BIN)/dbmatrix readme

FORCE:

# Notebooks run in the environment pytest runs in (--nbval-current-env), as papermill runs them in the CLI's.
# tests/browser drives JupyterLab in headless Chromium (select it alone with `-m browser`).
# TEST_WORKERS: pytest-xdist workers, each taking whole test files (--dist loadfile: a file's module fixtures,
# e.g. one Galera cluster, stay on one worker). Run one after another the tests keep 2 vCPUs about a quarter
# busy (they wait on servers, windows and clusters), so two workers nearly halve the wall time. Three kept the
# 2 vCPUs 134-154 % busy (two: 104 %) but gained nothing reliable on this VM (pytest 820-1017 s against 886-1005 s
# with two, 2026-11-29; 806 s against 834 s on one boot, 2026-12-01, where every file took about 40 % longer and
# some task waited for a CPU during 462 of the 806 s: the tests' CPU-bound phases, LaTeX, analysis, figures,
# imports, collide; and with the page cache kept, conftest.py, 746 s against 757 s) and let timing-sensitive
# tests fail under the load; TEST_WORKERS=0 runs them in one
# process. The fixtures take free ports, their own namespaces and trees. --no-loadscope-reorder keeps the order
# conftest.py gives (slow files first, the many short unit files last to even out the workers' ends).
TEST_WORKERS ?= 2
# The OS packages (about 1.5 min on a fresh machine: download, unpack, triggers; apt allows one transaction at a
# time, so all roles go in one) install beside ruff and mypy (about 1 min, CPU), whatever -j make test was given.
# The package's own modules are compiled too (PYTHONDONTWRITEBYTECODE aside: every test subprocess imports them).
test: $(PY_STAMP)
	$(MAKE) --no-print-directory -j2 --output-sync=target test-ready
	$(BIN)/python -m compileall -q -j 0 lib/dbmatrix >/dev/null
	$(BIN)/python -m pytest tests notebooks --nbval-lax --nbval-current-env -p no:cacheprovider \
		-n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

# What the tests need before they start: every OS role and a clean lint (make test builds it with -j2).
test-ready: setup lint

# ruff (the rule set chosen in pyproject.toml) and mypy over the package; make test runs both first.
lint: $(PY_STAMP)
	$(BIN)/ruff check lib tests benchmarks conftest.py
	$(BIN)/mypy

test-browser: $(PY_STAMP) $(OS_TEST)
	$(BIN)/python -m pytest tests/browser -m browser -p no:cacheprovider

test-unit: $(PY_STAMP)
	$(BIN)/python -m pytest tests/unit -p no:cacheprovider -n $(TEST_WORKERS)

# Saving a tracked notebook (notebooks/*.ipynb) drops its outputs (dbmatrix.lab.pre_save_hook), so running
# one and saving leaves it as committed; executed copies are what `dbmatrix notebooks` writes.
lab: $(PY_STAMP)
	$(BIN)/jupyter lab --no-browser --ip=127.0.0.1 --port=$(LAB_PORT) --ServerApp.root_dir=$(CURDIR) \
	  --ContentsManager.pre_save_hook=dbmatrix.lab.pre_save_hook $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

clean:
	-cd paper && latexmk -C -quiet main.tex >/dev/null 2>&1
	rm -rf .pytest_cache paper/_minted* paper/*.run.xml $(GEN)/sources.mk

# Undo what runs did to this machine (OS packages stay; the README says how to remove them): tear down the
# media of the local inventory (unmount the tmpfs and XFS mounts, detach loop devices, remove their backing
# files and the dbmatrix cgroups), then remove the work directory (dataset snapshots, datadirs) and the port
# leases. Stop running benchmarks first; their media would be busy.
clean-host: $(PY_STAMP)
	$(BIN)/dbmatrix media teardown
	rm -rf "$${DBMATRIX_WORKDIR:-/var/tmp/dbmatrix}" /tmp/dbmatrix-ports

distclean: clean
	rm -rf $(VENV) $(SMOKE_ROOT)

# `make print-VAR`: a variable's value as make computes it (tests check where builds go: make print-BUILD_OUT).
print-%:
	@echo '$($*)'
