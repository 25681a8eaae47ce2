# hvio: `make run` (the main job) and `make test` (the whole suite) work from a
# fresh clone on a fresh machine: every step installs what it needs.

SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
CARGO ?= cargo
HVIO := target/release/hvio
export PATH := $(HOME)/.cargo/bin:$(PATH)

.PHONY: run test lint fmt build release venv python bench clean test-rust test-python deps bad-input

run: release python
	mkdir -p out
	$(PY) -m hvio run --out out

# The whole suite: lint, Rust tests, Python tests.
test: deps lint test-rust test-python

# Debian packages the tests drive as real peers (qemu-io, fio, mkfs.ext4, losetup).
deps:
	bash scripts/deps.sh

# The benchmarks run once each in test mode (no timing), so one that can no
# longer run fails the suite instead of waiting for someone to time it.
test-rust:
	$(CARGO) test --workspace --exclude hvio-py
	$(CARGO) test --workspace --exclude hvio-py --benches

test-python: python
	$(PY) -m pytest -q

lint: venv
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(VENV)/bin/ruff check python tests scripts bench
	$(VENV)/bin/ruff format --check python tests scripts bench

fmt: venv
	$(CARGO) fmt --all
	$(VENV)/bin/ruff format python tests scripts bench
	$(VENV)/bin/ruff check --fix python tests scripts bench

venv: $(VENV)/.stamp
$(VENV)/.stamp: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q "maturin>=1.5,<2" "pytest>=7" "ruff>=0.5" "pandas>=2" "numpy>=1.24" "matplotlib>=3.7"
	touch $@

release:
	$(CARGO) build --release -p hvio-cli

# The Python package with its compiled extension, installed into the venv.
python: venv
	VIRTUAL_ENV=$(abspath $(VENV)) $(VENV)/bin/maturin develop --release -q

bench: release
	$(HVIO) bench

# Every case of the bad-input campaign (docs/bad-input.md); `make test` runs
# a sample of it (tests/test_bad_input_campaign.py).
bad-input: release
	python3 scripts/bad-input-campaign.py --hvio $(HVIO)

clean:
	$(CARGO) clean
	rm -rf $(VENV) out
