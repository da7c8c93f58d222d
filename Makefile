# vllm_fleet.recipes: developer and CI entry points.
#
#   make venv        .venv with everything Python needs (skipped when requirements are unchanged)
#   make demo        run tools/demo.py
#   make test        two stages at once (what CI runs): static (unit -> conformance ->
#                    sanity -> lint) beside integration (molecule); logs in tests/output/test/
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
# requirements.txt: the collection's own (shipped); requirements-dev.txt: ansible-core + test tooling.
REQS        := requirements.txt requirements-dev.txt
VENV_STAMP  := $(VENV)/.vllm-fleet-requirements.sha256
COLL_ROOT   := $(ROOT)/.collections
COLL_LINK   := $(COLL_ROOT)/ansible_collections/vllm_fleet/recipes
BUNDLE_DIR  := $(ROOT)/.cache/ansible-bundle
BUNDLE_STAMP := $(COLL_ROOT)/.bundled-$(ANSIBLE_BUNDLE_VERSION)
# pip on our machines warns about configured file:// indexes that do not exist.
PIP_NOISE   := WARNING: Location '.*' is ignored: it is neither a file nor a directory

# Tools run from the venv and see this checkout as vllm_fleet.recipes.
export PATH := $(VBIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(COLL_ROOT)
export PIP_DISABLE_PIP_VERSION_CHECK := 1

# ansible-test sanity tests that cannot run here (docs/development.md, "Sanity"):
#   pslint  - PowerShell only; pwsh/PSScriptAnalyzer are not installable from the
#             registries we reach, and this collection ships no PowerShell.
#   import  - run separately below (`sanity-import`), without plugins/plugin_utils/.
SANITY_SKIP := pslint import

.PHONY: help venv collection-link collections unit conformance sanity sanity-main \
        sanity-import ansible-test-pip lint static test demo build clean distclean

help: ## list targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# ---------------------------------------------------------------------------
# Environment
# ---------------------------------------------------------------------------
venv: ## create/refresh .venv from requirements*.txt (no-op when unchanged)
	@want="$$(cat $(REQS) | sha256sum | cut -d' ' -f1)"; \
	if [ -x "$(VPY)" ] && [ -f "$(VENV_STAMP)" ] && [ "$$(cat $(VENV_STAMP))" = "$$want" ]; then \
		echo "venv: $(VENV) is up to date with $(REQS)"; \
		exit 0; \
	fi; \
	if [ ! -x "$(VPY)" ]; then \
		echo "venv: creating $(VENV) with $$(command -v $(PYTHON))"; \
		$(PYTHON) -m venv $(VENV); \
	fi; \
	echo "venv: installing $(REQS)"; \
	$(VPY) -m pip install --quiet $(addprefix -r ,$(REQS)) 2>&1 | { grep -v "$(PIP_NOISE)" || true; }; \
	v="$$($(VPY) -c 'import sys; print("%d.%d" % sys.version_info[:2])')"; \
	[ "$$v" = "$(SANITY_PYTHON)" ] || echo "venv: WARNING: $(VENV) runs Python $$v; ansible-test sanity expects $(SANITY_PYTHON)"; \
	echo "$$want" > $(VENV_STAMP); \
	echo "venv: ready ($$($(VPY) -m pip freeze | wc -l) packages)"

collection-link: ## make .collections/ansible_collections/vllm_fleet/recipes -> this checkout
	@mkdir -p $(dir $(COLL_LINK))
	@if [ "$$(readlink $(COLL_LINK) 2>/dev/null)" != "../../.." ]; then \
		rm -rf $(COLL_LINK); ln -s ../../.. $(COLL_LINK); \
		echo "collection-link: $(COLL_LINK) -> ../../.."; \
	fi

collections: collection-link $(BUNDLE_STAMP) ## also unpack community.docker / ansible.posix from PyPI's ansible bundle

# Unpacks only the named collections from the bundle wheel (3 MB of 54).
define UNPACK_BUNDLE_PY
import shutil, sys, zipfile
wheel, dest, wanted = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as zf:
    for coll in wanted:
        prefix = "ansible_collections/%s/" % coll
        shutil.rmtree("%s/%s" % (dest, prefix), ignore_errors=True)
        members = [n for n in zf.namelist() if n.startswith(prefix)]
        if not members:
            sys.exit("collections: %s not found in %s" % (coll, wheel))
        zf.extractall(dest, members)
        print("collections: unpacked %s (%d files)" % (coll.replace("/", "."), len(members)))
endef
export UNPACK_BUNDLE_PY

$(BUNDLE_STAMP): | venv
	@mkdir -p $(BUNDLE_DIR) $(COLL_ROOT)/ansible_collections
	$(VPY) -m pip download --quiet --no-deps --dest $(BUNDLE_DIR) ansible==$(ANSIBLE_BUNDLE_VERSION) \
		2>&1 | { grep -v "$(PIP_NOISE)" || true; }
	@$(VPY) -c "$$UNPACK_BUNDLE_PY" $(BUNDLE_DIR)/ansible-$(ANSIBLE_BUNDLE_VERSION)-py3-none-any.whl \
		$(COLL_ROOT) $(BUNDLED_COLLECTIONS)
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
STATIC_STEPS  ?= unit conformance sanity lint
STATIC_NICE   ?= 10
TEST_PARALLEL ?= 1
TEST_LOG_DIR  ?= tests/output/test
# Lines of a passed stage's log to print (a failed stage prints its whole log); 0: whole logs.
TEST_LOG_TAIL ?= 40

ifeq ($(TEST_PARALLEL),0)
test: static integration
else
# venv and collections first: the two stages must not both install them.
test: venv collections ## everything CI runs: static and integration (at once; TEST_PARALLEL=0: in turn)
	tests/infra/parallel.sh --log-dir $(TEST_LOG_DIR) --tail $(TEST_LOG_TAIL) \
		integration '$(MAKE) integration' \
		static 'nice -n $(STATIC_NICE) $(MAKE) static'
endif

# Every step runs even when one before it failed (like `make -k`); the failed ones are named.
static: ## unit, conformance, sanity, lint in turn (STATIC_STEPS; no docker)
	@rc=0; failed=""; times=""; \
	for step in $(STATIC_STEPS); do \
		start=$$SECONDS; \
		$(MAKE) $$step || { rc=1; failed="$$failed $$step"; }; \
		times="$$times $$step=$$((SECONDS - start))s"; \
	done; \
	echo "static: step durations:$$times"; \
	command -v shellcheck >/dev/null || echo "static: WARNING: shellcheck is not installed: SKIPPED shellcheck of .ci/run (lint) and ansible-test's shellcheck sanity test; CI runs both" >&2; \
	if [ $$rc -ne 0 ]; then echo "static: FAILED steps:$$failed" >&2; else echo "static: passed: $(STATIC_STEPS)"; fi; \
	exit $$rc

unit: venv collections ## pytest on tests/ (PYTEST_WORKERS=logical processes, pytest-xdist)
	$(VPY) -m pytest $(if $(filter-out 0,$(PYTEST_WORKERS)),-n $(PYTEST_WORKERS) --dist $(PYTEST_DIST)) $(PYTEST_ARGS)

conformance: venv collection-link ## replay the upstream command-synthesis corpus and the seed recipe
	@if [ ! -d "$(SHARED)" ]; then \
		echo "conformance: SKIPPED: $(SHARED) not found (the upstream corpus must sit beside the checkout)"; \
		exit 0; \
	fi; \
	if [ ! -f tools/conformance.py ]; then \
		echo "conformance: FAILED: tools/conformance.py does not exist (yet)" >&2; \
		exit 1; \
	fi; \
	set -x; \
	$(VPY) tools/conformance.py --recipes $(SHARED)/upstream/recipes --cases $(SHARED)/upstream/conformance/cases.jsonl.gz; \
	$(VPY) tools/conformance.py --published $(SHARED)/seed/GLM-5.3-Flash.json

sanity: sanity-main sanity-import ## ansible-test sanity: offline-capable tests, local, no docker

# ansible-test finds the collection through ANSIBLE_TEST_CONTENT_ROOT: os.getcwd()
# resolves the symlink, so cd'ing into it alone is not enough.
ANSIBLE_TEST := cd $(COLL_LINK) && ANSIBLE_TEST_CONTENT_ROOT=$(COLL_LINK) \
	ansible-test sanity --python $(SANITY_PYTHON) --color no

sanity-main: venv collections ansible-test-pip
	@command -v shellcheck >/dev/null || { $(call shellcheck_missing,sanity,ansible-test's shellcheck test of the *.sh files); }
	$(ANSIBLE_TEST) $(addprefix --skip-test ,$(SANITY_SKIP)) $(SANITY_ARGS)

# The import test runs each file in a venv holding only ansible-core's own
# requirements. plugins/plugin_utils/ is the engine, which hard-depends on
# pydantic (requirements.txt), so it is excluded there; tests/unit imports it.
# Filters/lookups/actions must guard engine imports (docs/development.md).
sanity-import: venv collections ansible-test-pip
	$(ANSIBLE_TEST) --test import $(if $(wildcard plugins/plugin_utils/*.py),--exclude plugins/plugin_utils/) $(SANITY_ARGS)

# ansible-test bootstraps pip in each sanity venv with a get-pip.py it downloads
# from a host we cannot reach. It first looks in ~/.ansible/test/cache, so we put
# an equivalent there: ensurepip, then pip installs the requested pip from PyPI.
define GET_PIP_SHIM
"""Offline stand-in for get-pip.py, written by vllm_fleet.recipes' Makefile.

ansible-test runs it as: python get_pip_X_Y.py [pip options] pip==X.Y [--no-setuptools] [--no-wheel]
"""
import subprocess
import sys

args = [a for a in sys.argv[1:] if a not in ("--no-setuptools", "--no-wheel")]
subprocess.check_call([sys.executable, "-m", "ensurepip", "--upgrade", "--default-pip"])
subprocess.check_call([sys.executable, "-m", "pip", "install", "--upgrade", "--force-reinstall"] + args)
if "--no-setuptools" in sys.argv:
    subprocess.call([sys.executable, "-m", "pip", "uninstall", "--yes", "--quiet", "setuptools"])
endef
export GET_PIP_SHIM

ansible-test-pip: venv
	@ver="$$($(VPY) -c 'import types; from ansible_test._internal.python_requirements import get_venv_packages as g; print(g(types.SimpleNamespace(version="$(SANITY_PYTHON)"))["pip"])')"; \
	shim="$$HOME/.ansible/test/cache/get_pip_$${ver//./_}.py"; \
	if [ ! -s "$$shim" ]; then \
		mkdir -p "$$(dirname "$$shim")"; \
		printf '%s\n' "$$GET_PIP_SHIM" > "$$shim"; \
		echo "ansible-test-pip: wrote offline pip bootstrap $$shim"; \
	fi

LINT_PATHS := $(wildcard playbooks roles)

lint: venv collections ## ansible-lint (profile production) on playbooks/ and roles/
ifeq ($(strip $(LINT_PATHS)),)
	@echo "lint: SKIPPED ansible-lint: neither playbooks/ nor roles/ exists yet"
else
	ansible-lint $(LINT_ARGS) $(LINT_PATHS)
endif
	@if command -v shellcheck >/dev/null; then \
		echo "shellcheck .ci/run"; shellcheck .ci/run; \
	else \
		$(call shellcheck_missing,lint,shellcheck of .ci/run); \
	fi

# shellcheck_missing,STEP,WHAT: shellcheck is not installed. CI (which installs it) fails;
# a local run goes on and says loudly which check it skipped (`make static` repeats it last).
define shellcheck_missing
if [ -n "$${CI:-}" ] && [ "$${CI}" != false ]; then \
	echo "$(1): FAILED: shellcheck is not installed, so $(2) cannot run (CI runs every check)" >&2; exit 1; \
fi; \
echo "$(1): WARNING: SKIPPED $(2): shellcheck is not installed (apt-get install shellcheck; CI runs it)" >&2
endef

# ---------------------------------------------------------------------------
# Other entry points
# ---------------------------------------------------------------------------
demo: venv collections ## run tools/demo.py
	$(VPY) tools/demo.py

build: venv ## build the collection tarball into out/
	ansible-galaxy collection build --force --output-path out/ .

clean: ## remove generated test output and the collection symlink tree
	rm -rf .collections tests/output out .pytest_cache

distclean: clean ## also remove .venv and download caches
	rm -rf $(VENV) .cache

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

# molecule, molecule-plugins[docker], pytest-testinfra, vllm-router.
REQS += requirements-integration.txt
# The molecule playbooks are linted like playbooks/ and roles/.
LINT_PATHS += $(wildcard tests/molecule)

SCENARIO          ?= smoke
MOLECULE_CMD      ?= test
# What `make integration` (and so `make test`) runs: the scenarios of MOLECULE_LANES (below).
# smoke is not among them; it stays runnable alone: make molecule SCENARIO=smoke.
MOLECULE_SCENARIOS = $(subst +, ,$(MOLECULE_LANES))

.PHONY: infra infra-down infra-status molecule integration

# run_scenarios,LABEL,SCENARIOS: `molecule test` of each scenario in turn; all run even
# when one fails; prints each one's duration and names the failed ones.
define run_scenarios
rc=0; failed=""; ran=""; times=""; \
for s in $(2); do \
	if [ ! -f "tests/molecule/$$s/molecule.yml" ]; then \
		echo "$(1): WARNING: tests/molecule/$$s/ does not exist; skipped"; continue; \
	fi; \
	case " $$ran " in *" $$s "*) continue ;; esac; \
	start=$$SECONDS; \
	tests/infra/molecule.sh "$$s" test || { rc=1; failed="$$failed $$s"; }; \
	ran="$$ran $$s"; times="$$times $$s=$$((SECONDS - start))s"; \
done; \
[ -n "$$ran" ] || echo "$(1): WARNING: none of $(strip $(2)) exists; no scenario ran"; \
echo "$(1): scenario durations:$$times"; \
if [ $$rc -ne 0 ]; then echo "$(1): FAILED scenarios:$$failed" >&2; else echo "$(1): passed:$$ran"; fi; \
exit $$rc
endef

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
	@if [ "$(INTEGRATION_SERIAL)" = 1 ]; then \
		$(call run_scenarios,integration,$(MOLECULE_SCENARIOS)); \
	fi; \
	mkdir -p $(TEST_LOG_DIR); export VLLM_FLEET_KEEP_NETWORK=1; \
	n=0; pids=(); logs=(); \
	for lane in $(MOLECULE_LANES); do \
		log=$(TEST_LOG_DIR)/integration-lane-$$((n + 1)).log; \
		echo "integration: lane $$((n + 1)): $${lane//+/, then } (log $$log)"; \
		( sleep $$((n * 20)); $(call run_scenarios,integration lane $$((n + 1)),$${lane//+/ }) ) >"$$log" 2>&1 & \
		pids+=($$!); logs+=("$$log"); n=$$((n + 1)); \
	done; \
	failed=""; \
	for i in "$${!pids[@]}"; do wait "$${pids[$$i]}" || failed="$$failed $$((i + 1))"; done; \
	for log in "$${logs[@]}"; do echo "================ $$log"; cat "$$log"; done; \
	grep -ah "scenario durations" "$${logs[@]}" || true; \
	if [ -n "$$failed" ]; then echo "integration: FAILED lane(s):$$failed" >&2; exit 1; fi; \
	echo "integration: passed, all $$n lanes"

# --- deploy scenarios ---------------------------------------------------------
# The deploy roles' molecule scenarios (docs/deploy.md, "Tests"): replicas, multi_node
# (3 hosts) and pd_cluster (prefill, decode, router). `make integration` (part of `make test`)
# runs them too; this target runs only these.
DEPLOY_SCENARIOS ?= replicas pd_cluster multi_node

.PHONY: deploy-scenarios

deploy-scenarios: venv collections infra ## molecule test of the deploy-role scenarios only
	@$(call run_scenarios,deploy-scenarios,$(DEPLOY_SCENARIOS))
