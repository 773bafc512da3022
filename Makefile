# nmtkit: `make recipe-bible` trains and scores the Spanish->English Bible model; `make test` runs the tests.
# Both install what they need into .venv (as root on a fresh Debian machine).

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
MODEL ?= transformer
THREADS ?= 0
# MAX_TIME (a training budget such as 50m) has each recipe's own default: 54m for the Bible, none for WMT14
# LANG_DIR (a locale such as zh_CN, ja, th, ar, he) and CODE choose the language of recipe-messages
export MODEL MAX_TIME THREADS LANG_DIR CODE

.PHONY: install test test-isa lint bench recipe-bible recipe-bible-zoo recipe-reverse recipe-wmt recipe-messages recipe-multilingual recipe-finetune recipe-pretrained recipe-backtranslation recipe-cleaning recipe-distill recipe-distill-messages bible-data wmt-data clean

install: $(VENV)/.installed

# torch is pinned and installed first so that pip takes the local CPU build and never pulls CUDA packages.
$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV) || (apt-get update && apt-get install -y python3-venv && $(PYTHON) -m venv $(VENV))
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,recipes]'
	touch $@

# One worker per core; a test file stays on one worker, so that its module-scoped fixtures (models trained for the
# file's tests) are built once.
test: install
	$(BIN)/pytest -q -n auto --dist loadfile tests

# The numerics-sensitive tests (marker isa) once per CPU kernel family (CTranslate2's, ATen's, MKL's, oneDNN's):
# a change that holds on this CPU's kernels only fails here, not on the next machine (tests/isa_shakeout.py).
test-isa: install
	$(BIN)/python tests/isa_shakeout.py

lint: install
	$(BIN)/ruff check nmtkit tests recipes benchmarks

# Speed against the reference tools, each measured in the same run (OpenNMT-py: bash benchmarks/setup_onmt.sh first).
bench: bible-data
	$(BIN)/pip install --quiet -e '.[dev,recipes,bench]'
	$(BIN)/python benchmarks/train_speed.py --steps 60
	$(BIN)/python benchmarks/metrics_speed.py --lines 100000 1000000
	[ -f runs/bible-es-en/transformer/model.pt ] && $(BIN)/python benchmarks/align_aer.py \
	  || echo "align_aer.py skipped: run make recipe-bible first" >&2
	[ -f runs/bible-es-en/transformer/model.pt ] && $(BIN)/python benchmarks/translate_speed.py --reduced-precision \
	  || echo "translate_speed.py skipped: run make recipe-bible first" >&2
	[ -f runs/bible-es-en/transformer/model.pt ] && $(BIN)/python benchmarks/serve_speed.py \
	  || echo "serve_speed.py skipped: run make recipe-bible first" >&2

recipe-reverse: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/reverse/run.sh

bible-data: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/bible/run.sh data

recipe-bible: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/bible/run.sh

recipe-bible-zoo: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/bible/zoo.sh

wmt-data: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/wmt/run.sh data

recipe-wmt: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/wmt/run.sh

recipe-messages: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/messages/run.sh

recipe-multilingual: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/multilingual/run.sh

# X -> en for each of LANGS (de ru): bilingual only against + untagged and + tagged back-translation, the same MAX_TIME
# (or MAX_STEPS) each; tables in runs/backtranslation/<lang>/results.md. SMOKE=1: the whole workflow in minutes (tiny
# model and data)
recipe-backtranslation: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/backtranslation/run.sh

# English -> German messages with 40% of the pairs spoiled in seven ways: clean only, noisy, prepare's default filters,
# and the crawl settings after score-pairs; the table goes to runs/cleaning/results.md (recipes/cleaning/README.md)
recipe-cleaning: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/cleaning/run.sh

# fine-tunes the Bible model (make recipe-bible first) on Spanish software messages; the table goes to $OUT/results.md
recipe-finetune: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/finetune/run.sh

# builds a small OPUS-MT-style model in Hugging Face format, imports it, fine-tunes it, exports it (offline)
recipe-pretrained: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/pretrained/run.sh

# distils the Bible model (trained first if missing) into small students and times them (recipes/distill/README.md);
# SMOKE=1 runs the whole recipe in a few minutes, TIME sets each student's training budget; SHARED_VOCAB=1 gives the
# students the teacher's vocabulary
recipe-distill: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/distill/run.sh

# the same on English -> LANG_DIR (de) software messages: a teacher of TEACHER_TIME (30m), students of TIME (10m)
recipe-distill-messages: install
	PATH="$(CURDIR)/$(BIN):$$PATH" bash recipes/distill/messages.sh

clean:
	rm -rf $(VENV) runs data
