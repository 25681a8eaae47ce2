# hvio: `make run` (the main job) and `make test` (the whole suite) work from a
# fresh clone on a fresh machine: every step installs what it needs.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
CARGO ?= cargo
HVIO := target/release/hvio
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: help run test lint fmt release venv python bench clean test-rust test-python deps bad-input load fuzz-campaign

.DEFAULT_GOAL := run

# `make help` lists every target with the text after its `##`.
help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | awk -F'\t' '{printf "  make %-12s %s\n", $$1, $$2}'

run: release python ## the main job: paper 000's four VMs under every host scheduler; table, JSON, CSV, figures and report.html in out/
	mkdir -p out
	$(PY) -m hvio run --out out

# The whole suite: lint, Rust tests, Python tests.
test: deps lint test-rust test-python ## the whole suite: lint, Rust tests, Python tests

# Debian packages the tests drive as real peers (qemu-io, fio, mkfs.ext4, losetup, chromium).
deps: ## install the Debian packages the tests drive (qemu-io, fio, mkfs.ext4, losetup, chromium)
	bash scripts/deps.sh

# The benchmarks run once each in test mode (no timing), so one that can no
# longer run fails the suite instead of waiting for someone to time it.
# A test that cannot run here (no shared data, no fio, no root to mount)
# logs why to HVIO_SKIP_LOG; the last step counts and prints those lines.
SKIP_LOG := $(abspath target/skipped-tests.log)
# `hvio reproduce` hands a study to the Python package, so the Rust tests of
# the CLI need it installed.
test-rust: python ## Rust tests and benchmarks (once each, untimed), then the skipped tests and why
	rm -f $(SKIP_LOG)
	HVIO_SKIP_LOG=$(SKIP_LOG) $(CARGO) test --workspace --exclude hvio-py
	HVIO_SKIP_LOG=$(SKIP_LOG) $(CARGO) test --workspace --exclude hvio-py --benches
	@bash scripts/skipped.sh $(SKIP_LOG)

test-python: python ## Python tests (skipped ones listed with their reason)
	$(PY) -m pytest -q -rs

lint: venv ## rustfmt, clippy -D warnings, rustdoc -D warnings, ruff check and format
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps --quiet
	$(VENV)/bin/ruff check python tests scripts bench
	$(VENV)/bin/ruff format --check python tests scripts bench

fmt: venv ## format Rust and Python in place, fix what ruff can
	$(CARGO) fmt --all
	$(VENV)/bin/ruff format python tests scripts bench
	$(VENV)/bin/ruff check --fix python tests scripts bench

venv: $(VENV)/.stamp ## the Python venv with maturin, pytest, ruff, pandas, matplotlib, dask, pyarrow, plotly
$(VENV)/.stamp: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "maturin>=1.5,<2" "pytest>=7" "ruff>=0.5" "pandas>=2" "numpy>=1.24" "matplotlib>=3.7" \
		"dask[distributed]>=2024.1" "pyarrow>=14" "tqdm>=4.60" "plotly>=5"
	touch $@

# Built with profile-guided optimisation when rustup's llvm-tools are at hand
# (scripts/release-build.sh; HVIO_PGO=0 for a plain build).
release: ## the release hvio binary (target/release/hvio), profile-guided
	CARGO=$(CARGO) bash scripts/release-build.sh

# The Python package with its compiled extension, installed into the venv.
python: venv ## the hvio Python package and its extension, installed into the venv
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release -q

bench: release ## hvio bench: simulated requests per second (4 VMs × 16 threads, deadline)
	$(HVIO) bench

# Every case of the bad-input campaign (docs/bad-input.md); `make test` runs
# a sample of it (tests/test_bad_input_campaign.py).
bad-input: release ## every case of the bad-input campaign (docs/bad-input.md); make test runs a sample
	python3 scripts/bad-input-campaign.py --hvio $(HVIO)

# hvio serve under load (bench/serve-load.py); `make test` runs a 3-second
# sample of it (tests/test_serve_load.py).
load: release ## hvio serve: 8 exports x 4 NBD connections of verified fio randrw for 60 s; p99 and RSS
	python3 bench/serve-load.py --hvio $(HVIO) --seconds 60

# Every fuzz target for 10 CPU-minutes from its seed corpus, resumable
# (docs/fuzzing.md); long, so never part of `make test`.
fuzz-campaign: ## every cargo-fuzz target 10 CPU-minutes (resumable; results in target/fuzz-campaign.tsv)
	nice -n 19 python3 scripts/fuzz-campaign.py

clean: ## remove target/, the venv and out/
	$(CARGO) clean
	rm -rf $(VENV) out
