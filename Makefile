# Task runner. The two set-up commands from the README are `make site` and `make test`;
# each creates .venv from requirements.lock on first use.
SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
JB_FLAGS := -W --keep-going
PORT ?= 8000

.PHONY: site test check env system-deps lab serve release demo gpu-check bench bench-service lint clean

env: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --disable-pip-version-check -q --no-deps -r requirements.lock  # the whole set
	$(BIN)/pip install --disable-pip-version-check -q --no-deps --no-build-isolation -e .
	@touch $@

## 1. Build the site into _build/html (pages execute; unchanged pages come from the cache), then the
## zh-TW edition into _build/html/zh-tw/ from generated sources (its code cells are the English ones,
## so every page is a hit in the English build's execution cache).
I18N_LANGUAGES = $(shell $(BIN)/python -m autograder.course.manifest languages)  # course.toml's editions
site: $(STAMP)
	$(BIN)/jupyter-book build . $(JB_FLAGS)
	@set -o pipefail; for lang in $(I18N_LANGUAGES); do \
	  start=$$SECONDS; \
	  folder=$$($(BIN)/python -c "from autograder.i18n import LANGUAGES; print(LANGUAGES['$$lang']['folder'])"); \
	  $(BIN)/python -m autograder.i18n pages --language $$lang | tail -1 && \
	  $(BIN)/jupyter-book build _build/i18n/$$lang/book --path-output _build/i18n/$$lang $(JB_FLAGS) \
	    > _build/i18n/$$lang/build.log 2>&1 || { tail -40 _build/i18n/$$lang/build.log; exit 1; }; \
	  rm -rf _build/html/$$folder && cp -r _build/i18n/$$lang/_build/html _build/html/$$folder && \
	  echo "$$lang edition: $$(grep -c 'Using cached notebook' _build/i18n/$$lang/build.log) pages from the" \
	    "execution cache, $$(grep -c 'Executing notebook' _build/i18n/$$lang/build.log) executed," \
	    "$$((SECONDS - start)) s -> _build/html/$$folder/" || exit 1; \
	done

## 2. Run the whole test suite (builds the site first, from the cache).
## Two xdist workers, whole modules each (tests/conftest.py: pytest_xdist_make_scheduler); most tests
## wait on subprocesses, sandboxes and services, so two streams keep both cores busy.
PYTEST_WORKERS ?= 2
test: system-deps site node-deps  # system-deps first: the zh-TW figures are drawn with its CJK font
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadscope

## 3. Before a commit, in under 2 minutes: ruff, mypy, import-linter's contracts, the fast tier of the
## tests (`-m fast`: the AST, layout, architecture and guard tests with their planted violations, the
## unit tests of wire, deadlines, settings, manifest, source, forbidden; tests/support/tiers.py), and
## every generated artefact current (`python -m autograder.tools.regenerate --check`). `make test` runs all.
check: $(STAMP)
	$(BIN)/ruff check autograder tests benchmarks solutions _ext catalogue
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -q -n 0 -p no:cacheprovider -m fast $$($(BIN)/python tests/support/tiers.py)
	$(BIN)/python -m autograder.tools.regenerate --check

## Regenerate every generated artefact (the outline, the docs' tables, the releases, the translation
## catalogues, the misconceptions table, the goldens: several minutes; ONLY=outline,tables for some).
.PHONY: regenerate
regenerate: $(STAMP)
	$(BIN)/python -m autograder.tools.regenerate $(if $(ONLY),--only $(ONLY))

## npm packages the tests drive: JupyterHub's proxy (tests/test_service_hub.py), inside .venv.
CHP_VERSION := 5.3.0
CHP := $(VENV)/node/node_modules/.bin/configurable-http-proxy
.PHONY: node-deps
node-deps: $(CHP)
$(CHP):
	npm install --silent --no-audit --no-fund --prefix $(VENV)/node configurable-http-proxy@$(CHP_VERSION)

## Debian packages the tests drive: headless chromium; Slurm + munge (the one-node test cluster of
## tests/support/slurm_cluster.py); bubblewrap (the grading sandbox); PostgreSQL (the service's queue on a
## private cluster, tests/support/postgres_cluster.py). Each is installed only when missing.
SYSTEM_DEPS := chromium:chromium slurmctld:slurm-wlm slurmd:slurm-wlm munged:munge bwrap:bubblewrap \
  initdb:postgresql
## Fonts, as fontconfig-language:package, one per edition of course.toml: without one chromium draws
## the edition's pages as boxes (tests/test_i18n_site.py looks at one). fonts-noto-cjk: 57 MB.
SYSTEM_FONTS = $(shell $(PYTHON) -m autograder.course.manifest fonts)
system-deps:
	@MISSING=$$( { for dep in $(SYSTEM_DEPS); do \
	  command -v $${dep%%:*} >/dev/null || command -v /usr/sbin/$${dep%%:*} >/dev/null || \
	    ls /usr/lib/postgresql/*/bin/$${dep%%:*} >/dev/null 2>&1 || echo $${dep#*:}; \
	  done; for font in $(SYSTEM_FONTS); do \
	  fc-list :lang=$${font%%:*} 2>/dev/null | grep -q . || echo $${font#*:}; \
	  done; } | sort -u | tr '\n' ' '); \
	[ -z "$${MISSING// /}" ] || { \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$MISSING; }

## Serve the built site on http://localhost:$(PORT)
serve: site
	$(BIN)/python -m http.server --directory _build/html $(PORT)

## Open JupyterLab on the exercises, with nbgrader's extensions (student workflow).
lab: $(STAMP)
	$(BIN)/jupyter lab --notebook-dir=exercises $$( [ "$$(id -u)" = 0 ] && echo --allow-root )

## Regenerate exercises/ from solutions/ (instructors).
release: $(STAMP)
	$(BIN)/autograder release

## A small sample class through collect -> grade -> feedback -> report.
demo: $(STAMP)
	$(BIN)/autograder demo

## Reference solutions through every GPU check (needs CUDA).
gpu-check: $(STAMP)
	$(BIN)/python -m autograder.tools.gpu_check

## Record the lecture's GPU figures on this machine into data/gpu/<device>.json (needs CUDA).
.PHONY: gpu-measure
gpu-measure: $(STAMP)
	$(BIN)/python benchmarks/gpu_measure.py

## Autograder throughput against plain nbgrader.
bench: $(STAMP)
	$(BIN)/python benchmarks/autograde_throughput.py --students 8

## Load on `autograder serve`: 300 students submit at once; time to feedback, status latency, and
## throughput against batch `autograder grade` on the same notebooks (several minutes).
bench-service: $(STAMP)
	$(BIN)/python benchmarks/service_load.py --students 300

## Write the student edition (pages, releases; no solutions, hidden checks or tests), leak-checked.
.PHONY: publish
DEST ?= _build/student-edition
publish: $(STAMP)
	$(BIN)/autograder publish $(DEST)

lint: $(STAMP)
	$(BIN)/ruff check autograder tests benchmarks solutions _ext catalogue

clean:
	rm -rf _build

## What the tamper catalogue's attacks earn under plain nbgrader (tests/tamper_golden.json), every attack
## through the real `nbgrader autograde` (about 5 minutes); each test run re-measures a sample.
.PHONY: tamper-golden
tamper-golden: $(STAMP)
	TAMPER_GOLDEN=write $(BIN)/python -m pytest -q tests/test_tamper.py -k "what_pays_with_nbgrader_is_measured"

## Is tamper_golden.json current (its digest: the attacks, the exercise, nbgrader's version)? No grading.
.PHONY: tamper-golden-check
tamper-golden-check: $(STAMP)
	$(BIN)/python -m pytest -q -n 0 -p no:cacheprovider \
	  tests/test_tamper.py::test_the_record_of_what_pays_with_nbgrader_is_current

## Golden results of the nbgrader parity suite (tests/parity/golden/): every ported scenario of
## nbgrader's test_nbgrader_autograde.py graded by the real `nbgrader autograde` (a few minutes).
.PHONY: parity-golden
parity-golden: $(STAMP)
	cd tests && PYTHONPATH=. ../$(BIN)/python -m parity.regenerate $(SCENARIOS)

## Are the golden results current (each scenario's digest, nbgrader's version)? No grading.
.PHONY: parity-golden-check
parity-golden-check: $(STAMP)
	$(BIN)/python -m pytest -q -n 0 -p no:cacheprovider tests/test_nbgrader_parity.py::test_golden_results_are_current

## The misconceptions' signature table (catalogue/misconceptions.json): every wrong catalogue
## entry graded in process under three seeds (about 30 s); tests/test_misconceptions.py checks it is
## current. Run it after editing a catalogue, a grade cell or a hidden check's message.
.PHONY: misconceptions
misconceptions: $(STAMP)
	$(BIN)/python -m autograder.reports.misconception_table
