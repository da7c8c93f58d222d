# vllm_fleet.recipes: developer and CI entry points.
#
#   make venv        .venv with everything Python needs (skipped when requirements are unchanged)
#   make demo        run tools/demo.py
#   make test        two stages at once (what CI runs): static (ruff -> mypy -> unit ->
#                    conformance -> sanity -> lint) beside integration (molecule); logs in
#                    tests/output/test/
#
# Every step is its own target; `make help` lists them. docs/development.md explains
# each one, which ansible-test sanity tests run and why some are skipped.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
MAKEFLAGS += --no-print-directory

# ---------------------------------------------------------------------------
# Knobs (override on the command line: `make unit PYTEST_ARGS='-k schema -x'`)
# ---------------------------------------------------------------------------
PYTHON        ?= python3
VENV          ?= .venv
SHARED        ?= ../shared
PYTEST_ARGS   ?=
# pytest-xdist workers for `make unit` (-n): logical = one per CPU; 0 runs in one process.
PYTEST_WORKERS ?= logical
# worksteal: idle workers take queued tests from busy ones (the suite's durations are uneven).
PYTEST_DIST    ?= worksteal
SANITY_ARGS   ?=
LINT_ARGS     ?=
RUFF_ARGS     ?=
MYPY_ARGS     ?=
# ansible-core's controller Python for `ansible-test sanity --python`.
SANITY_PYTHON ?= 3.11
# Collections that deploy roles need; Galaxy is unreachable, so they are taken
# from PyPI's `ansible` bundle (see `make collections`).
ANSIBLE_BUNDLE_VERSION ?= 12.3.0
BUNDLED_COLLECTIONS    ?= community/docker ansible/posix community/library_inventory_filtering_v1

# ---------------------------------------------------------------------------
# Derived paths
# ---------------------------------------------------------------------------
ROOT        := $(abspath .)
VBIN        := $(abspath $(VENV))/bin
VPY         := $(VBIN)/python
# requirements.txt: the collection's own (shipped); requirements-dev.txt: ansible-core + test tooling;
# requirements-integration.txt: molecule, molecule-plugins[docker], pytest-testinfra, vllm-router.
REQS        := requirements.txt requirements-dev.txt requirements-integration.txt
COLL_ROOT   := $(ROOT)/.collections
COLL_LINK   := $(COLL_ROOT)/ansible_collections/vllm_fleet/recipes
BUNDLE_DIR  := $(ROOT)/.cache/ansible-bundle
BUNDLE_STAMP := $(COLL_ROOT)/.bundled-$(ANSIBLE_BUNDLE_VERSION)

# Tools run from the venv and see this checkout as vllm_fleet.recipes.
export PATH := $(VBIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(COLL_ROOT)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# ansible-test sanity tests that cannot run here (docs/development.md, "Sanity"):
#   pslint  - PowerShell only; pwsh/PSScriptAnalyzer are not installable from the
#             registries we reach, and this collection ships no PowerShell.
#   import  - run separately below (`sanity-import`), without plugins/plugin_utils/.
SANITY_SKIP := pslint import

.PHONY: help venv collection-link collections mermaid-cli ruff mypy unit conformance sanity sanity-main \
        sanity-import ansible-test-pip lint static test test-packages demo build clean distclean

help: ## list targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# ---------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------
venv: ## create/refresh .venv from requirements*.txt (no-op when unchanged)
	@$(PYTHON) tools/devenv.py venv --venv $(VENV) --sanity-python $(SANITY_PYTHON) $(REQS)

collection-link: ## make .collections/ansible_collections/vllm_fleet/recipes -> this checkout
	@mkdir -p $(dir $(COLL_LINK))
	@if [ "$$(readlink $(COLL_LINK) 2>/dev/null)" != "../../.." ]; then \
		rm -rf $(COLL_LINK); ln -s ../../.. $(COLL_LINK); \
		echo "collection-link: $(COLL_LINK) -> ../../.."; \
	fi

collections: collection-link $(BUNDLE_STAMP) ## also unpack community.docker / ansible.posix from PyPI's ansible bundle

# Unpacks only the named collections from the bundle wheel (3 MB of 54).
$(BUNDLE_STAMP): | venv
	$(VPY) tools/devenv.py bundle --version $(ANSIBLE_BUNDLE_VERSION) --cache $(BUNDLE_DIR) \
		--dest $(COLL_ROOT) $(BUNDLED_COLLECTIONS)
	@rm -f $(COLL_ROOT)/.bundled-*
	@touch $@

# ---------------------------------------------------------------------------
# Test steps
# ---------------------------------------------------------------------------
# `make test` runs two stages at the same time (tests/infra/parallel.sh), each
# into its own log, tests/output/test/<stage>.log, printed when the stage ends:
#   integration  the molecule scenarios: long, and mostly waiting on docker;
#   static       STATIC_STEPS one after another, at nice STATIC_NICE, so the
#                scenarios (health gates, timeouts) keep the CPUs they ask for.
# TEST_PARALLEL=0 runs static, then integration, in the foreground instead.
# ruff and mypy first: seconds each, so a lint or type error shows before the minutes of unit.
STATIC_STEPS  ?= ruff mypy unit conformance sanity lint
STATIC_NICE   ?= 10
TEST_PARALLEL ?= 1
TEST_LOG_DIR  ?= tests/output/test
# Lines of a passed stage's log to print (a failed stage prints its whole log); 0: whole logs.
TEST_LOG_TAIL ?= 40

ifeq ($(TEST_PARALLEL),0)
test: test-packages static integration
else
# venv, collections and the Debian packages first: the two stages must not both install them.
test: venv collections test-packages ## everything CI runs: static and integration (at once; TEST_PARALLEL=0: in turn)
	tests/infra/parallel.sh --log-dir $(TEST_LOG_DIR) --tail $(TEST_LOG_TAIL) \
		integration '$(MAKE) integration' \
		static 'nice -n $(STATIC_NICE) $(MAKE) static'
endif

# The Debian packages of both stages (tests/infra/bindep.txt: shellcheck, prometheus, docker.io ...),
# installed with apt-get when missing (root or sudo); it prints what it installs.
test-packages: venv ## install the Debian packages `make test` needs (tests/infra/bindep.txt), when missing
	tests/infra/packages.sh install static integration

# Every step runs even when one before it failed (like `make -k`); the failed ones are named,
# and a missing shellcheck is repeated last.
static: ## ruff, mypy, unit, conformance, sanity, lint in turn (STATIC_STEPS; no docker)
	@rc=0; tests/infra/in_turn.sh static step '$(MAKE) {}' $(STATIC_STEPS) || rc=$$?; \
	command -v shellcheck >/dev/null || echo "static: WARNING: shellcheck is not installed: SKIPPED shellcheck of .ci/run (lint) and ansible-test's shellcheck sanity test; CI runs both" >&2; \
	exit $$rc

# mmdc for the test that parses PLAN.md's Mermaid diagrams (tests/unit/test_plan_diagram_mmdc.py):
# pinned with its whole tree in tests/infra/mermaid-cli/, `npm ci` once into
# /var/tmp/vllm-fleet-infra/mermaid-cli/ (kept across runs and checkouts); says what it installs.
# Without node/npm it says so and installs nothing (the test skips itself).
mermaid-cli: ## install mmdc (@mermaid-js/mermaid-cli) for the Mermaid diagram test, when missing
	tests/infra/mermaid.sh install

# The Python linters; their settings and every rule left out, with why, are in pyproject.toml
# (docs/development.md, "Ruff and mypy"). Either fails on any finding.
ruff: venv ## ruff check of every Python file (rules in pyproject.toml; RUFF_ARGS=--fix fixes what is safe)
	$(VBIN)/ruff check $(RUFF_ARGS) .

# mypy imports the collection by its full name, through .collections/ (collection-link).
mypy: venv collection-link ## mypy on plugins/ (strict on plugin_utils; settings in pyproject.toml)
	$(VBIN)/mypy $(MYPY_ARGS)

unit: venv collections mermaid-cli ## pytest on tests/ (PYTEST_WORKERS=logical processes, pytest-xdist)
	$(VPY) -m pytest $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist $(PYTEST_DIST)) $(PYTEST_ARGS)

conformance: venv collection-link ## replay the upstream command-synthesis corpus and the seed recipe
ifeq ($(wildcard $(SHARED)/.),)
	@echo "conformance: SKIPPED: $(SHARED) not found (the upstream corpus must sit beside the checkout)"
else
	$(VPY) tools/conformance.py --recipes $(SHARED)/upstream/recipes --cases $(SHARED)/upstream/conformance/cases.jsonl.gz
	$(VPY) tools/conformance.py --published $(SHARED)/seed/GLM-5.3-Flash.json
endif

sanity: sanity-main sanity-import ## ansible-test sanity: offline-capable tests, local, no docker

# ansible-test finds the collection through ANSIBLE_TEST_CONTENT_ROOT: os.getcwd()
# resolves the symlink, so cd'ing into it alone is not enough.
ANSIBLE_TEST := cd $(COLL_LINK) && ANSIBLE_TEST_CONTENT_ROOT=$(COLL_LINK) \
	ansible-test sanity --python $(SANITY_PYTHON) --color no

sanity-main: venv collections ansible-test-pip
	@tests/infra/shellcheck.sh sanity "ansible-test's shellcheck test of the *.sh files"
	$(ANSIBLE_TEST) $(addprefix --skip-test ,$(SANITY_SKIP)) $(SANITY_ARGS)

# The import test runs each file in a venv holding only ansible-core's own
# requirements. plugins/plugin_utils/ is the engine, which hard-depends on
# pydantic (requirements.txt), so it is excluded there; tests/unit imports it.
# Filters/lookups/actions must guard engine imports (docs/development.md).
sanity-import: venv collections ansible-test-pip
	$(ANSIBLE_TEST) --test import --exclude plugins/plugin_utils/ $(SANITY_ARGS)

# ansible-test bootstraps pip in each sanity venv with a get-pip.py it downloads
# from a host we cannot reach. It first looks in ~/.ansible/test/cache, so we put
# an equivalent there (tools/get_pip_offline.py: ensurepip, then pip from PyPI).
ansible-test-pip: venv
	@$(VPY) tools/ansible_test_pip.py --python $(SANITY_PYTHON)

# The molecule playbooks are linted like playbooks/ and roles/; galaxy.yml for Galaxy's rules
# (tags, changelog, metadata).
LINT_PATHS := galaxy.yml playbooks roles tests/molecule

lint: venv collections ## ansible-lint (profile production) on galaxy.yml, playbooks/, roles/ and tests/molecule/
	ansible-lint $(LINT_ARGS) $(LINT_PATHS)
	@tests/infra/shellcheck.sh lint 'shellcheck of .ci/run' .ci/run

# ---------------------------------------------------------------------------
# Other entry points
# ---------------------------------------------------------------------------
# The demo needs only what the collection needs at run time (requirements.txt, ansible-core):
# its own small venv, not .venv's development tools, and no community.docker (rendering needs none).
# In two steps, so that a fresh clone sees part 1 (the engine: pydantic and PyYAML only) before
# ansible-core is installed for the plans; each step is a no-op once its stamp matches.
DEMO_VENV ?= .venv-demo
DEMO_PY    = $(abspath $(DEMO_VENV))/bin/python

demo: collection-link ## run tools/demo.py in .venv-demo (requirements.txt + ansible-core only)
	@$(PYTHON) tools/devenv.py venv --lean --venv $(DEMO_VENV) --stamp .engine-requirements.sha256 requirements.txt
	@$(DEMO_PY) tools/demo.py --engine-only
	@$(PYTHON) tools/devenv.py venv --lean --venv $(DEMO_VENV) tools/demo-requirements.txt
	@$(DEMO_PY) tools/demo.py --plans-only

build: venv ## build the collection tarball into out/ from git's tracked files (tools/build.sh)
	tools/build.sh out/

clean: ## remove generated test output, linter caches and the collection symlink tree
	rm -rf .collections tests/output out .pytest_cache .mypy_cache .ruff_cache

distclean: clean ## also remove .venv, .venv-demo and download caches
	rm -rf $(VENV) $(DEMO_VENV) .cache

# --- integration infrastructure ---------------------------------------------
# Molecule scenarios on local systemd test hosts (containers of
# local/debian-systemd:12, each with its own dockerd), a local registry, the
# engine and Hugging Face Hub stand-ins: docs/testing.md. Machine-wide state
# (pids, logs, registry storage, package cache) lives in /var/tmp/vllm-fleet-infra.
#
#   make infra                       start dockerd, registry, Hub stand-in; build + push images (cached)
#   make molecule SCENARIO=smoke     one scenario (MOLECULE_CMD=converge|verify|destroy|login ... too)
#   make integration                 the scenarios of MOLECULE_LANES, lanes at once (part of `make test`)
#   make infra-down                  stop the daemons `make infra` started

SCENARIO          ?= smoke
MOLECULE_CMD      ?= test
# What `make integration` (and so `make test`) runs: the scenarios of MOLECULE_LANES (below).
# smoke is not among them; it stays runnable alone: make molecule SCENARIO=smoke.
MOLECULE_SCENARIOS = $(subst +, ,$(MOLECULE_LANES))

.PHONY: infra infra-down infra-status molecule integration

infra: ## dockerd + local registry + Hub stand-in up; test images built and pushed (cached)
	tests/infra/infra.sh up

infra-down: ## stop the daemons `make infra` started (images and registry data stay)
	tests/infra/infra.sh down

infra-status: ## daemons of the test infrastructure and image recipe hashes
	tests/infra/infra.sh status

molecule: venv collections infra ## one scenario: make molecule SCENARIO=smoke [MOLECULE_CMD=test]
	tests/infra/molecule.sh $(SCENARIO) $(MOLECULE_CMD)

# Lanes at once (CI time): every word of MOLECULE_LANES is a lane, and all lanes start
# together (20 s apart, the longest first); `a+b` runs b after a in one lane. One lane per
# scenario since the scenarios run the real vLLM engine: each spends minutes waiting for engines
# to load, and pd_cluster+multi_node in one lane took 41 + ~35 min (docs/testing.md, "Measured
# timings"); three lanes hold at most six engines, about 14 GiB. Scenarios of different lanes
# never share test hosts, Hub stand-in (vllm_test_hub_port in their molecule.yml) or molecule lock
# (one per Hub stand-in, tests/infra/molecule.sh); they share the registry and the test
# network. Each lane logs to tests/output/test/integration-lane-N.log, printed at the end.
# INTEGRATION_SERIAL=1: every scenario in turn, in the foreground.
MOLECULE_LANES     ?= replicas multi_node pd_cluster
INTEGRATION_SERIAL ?= 0

integration: venv collections infra ## `molecule test` of MOLECULE_SCENARIOS (MOLECULE_LANES at once; part of `make test`)
	tests/infra/integration.sh --log-dir $(TEST_LOG_DIR) \
		$(if $(filter 1,$(INTEGRATION_SERIAL)),--serial $(MOLECULE_SCENARIOS),$(MOLECULE_LANES))
