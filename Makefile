# Developer tasks. `make test` and `make demo` install what they need into .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint browser install bench bench-speed bench-scale bench-engines bench-faults bench-serve quality quality-public clean solr solr-cloud elasticsearch elasticsearch-cluster stop-servers

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed-base: pyproject.toml setup.py neardup/_kernels.c | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml setup.py neardup/_kernels.c | $(BIN)/python
	$(BIN)/pip install -q -e '.[test]'
	touch $@

$(VENV)/.installed-bench: pyproject.toml setup.py neardup/_kernels.c | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,bench]'
	touch $@

install: $(VENV)/.installed-test

demo: $(VENV)/.installed-base
	$(BIN)/neardup demo

lint: $(VENV)/.installed-test
	$(BIN)/ruff check neardup tests servers benchmarks

test: $(VENV)/.installed-test lint browser
	$(BIN)/pytest

# The HTML report's test renders it in Chromium, Debian's package: installed here when missing
# and the user is root (elsewhere the test is skipped, except under CI, where it fails).
browser:
	@command -v chromium >/dev/null 2>&1 || [ "$$(id -u)" != 0 ] || \
		apt-get install -y -q chromium >/dev/null 2>&1 || \
		{ apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }

# The quality table in benchmarks/README.md (needs ../shared/data for the Kijiji ads).
SHARED ?= ../shared/data
quality: $(VENV)/.installed-bench
	cd benchmarks/quality && ../../$(BIN)/python run.py --write \
		--kijiji $(abspath $(SHARED))/kijiji_rent_rome.tsv $(abspath $(SHARED))/kijiji_pairs_jaccard50.tsv

# The public entity-resolution table in benchmarks/README.md: the data is cloned once, at fixed
# commits, from the public repositories that ship it (benchmarks/quality/fetch.py).
quality-public: $(VENV)/.installed-bench
	$(BIN)/python benchmarks/quality/fetch.py --into .bench/public
	cd benchmarks/quality && ../../$(BIN)/python public.py --data ../../.bench/public

# Speed and scale (benchmarks/README.md has the results). bench-engines needs `make solr` and
# `make elasticsearch` running; ENGINE_RECORDS generated records are indexed into each.
ENGINE_RECORDS ?= 100000
bench: bench-speed bench-scale bench-engines

bench-speed: $(VENV)/.installed-bench
	$(BIN)/python benchmarks/speed.py $(abspath $(SHARED))/kijiji_rent_rome.tsv

# SCALE_STORES: store URLs to measure besides the default SQLite file, e.g. a running
# `make solr` (solr://127.0.0.1:8983/solr/scale), one JVM at a time on a small machine.
SCALE_RECORDS ?= 1000000
SCALE_STORES ?= sqlite:///$(abspath .bench)/scale.db
bench-scale: $(VENV)/.installed-bench
	$(BIN)/python benchmarks/scale.py --records $(SCALE_RECORDS) $(foreach s,$(SCALE_STORES),--store $(s))

bench-engines: $(VENV)/.installed-bench
	mkdir -p .bench && test -f .bench/generated-$(ENGINE_RECORDS).tsv || \
		$(BIN)/neardup generate $(ENGINE_RECORDS) -o .bench/generated-$(ENGINE_RECORDS).tsv
	$(BIN)/python benchmarks/engines.py .bench/generated-$(ENGINE_RECORDS).tsv --preset documents \
		--runs 1 --lookups 1000 sqlite:///$(abspath .bench)/engines.db \
		solr://127.0.0.1:8983/solr/bench elasticsearch://127.0.0.1:9200/bench

# neardup serve under 4 concurrent clients on each store (needs `make solr` and `make elasticsearch`;
# on a small machine run one engine at a time: make bench-serve SERVE_STORES=solr://…).
SERVE_STORES ?= sqlite:///$(abspath .bench)/serve.db solr://127.0.0.1:8983/solr/serve \
	elasticsearch://127.0.0.1:9200/serve
bench-serve: $(VENV)/.installed-bench
	mkdir -p .bench && test -f .bench/generated-$(ENGINE_RECORDS).tsv || \
		$(BIN)/neardup generate $(ENGINE_RECORDS) -o .bench/generated-$(ENGINE_RECORDS).tsv
	$(BIN)/python benchmarks/serve.py .bench/generated-$(ENGINE_RECORDS).tsv $(SERVE_STORES)

# Kills the client and the servers mid-run and prints what happened (starts its own servers).
bench-faults: $(VENV)/.installed-test
	PYTHONPATH=. $(BIN)/python benchmarks/faults/run.py

# Real servers on 127.0.0.1, in the background; the last line printed is the store URL.
solr:
	$(PYTHON) servers/launch.py solr

solr-cloud:
	$(PYTHON) servers/launch.py solr --cloud

elasticsearch:
	$(PYTHON) servers/launch.py elasticsearch

elasticsearch-cluster:
	$(PYTHON) servers/launch.py elasticsearch --nodes 2

stop-servers:
	$(PYTHON) servers/launch.py stop

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache *.egg-info .bench build neardup/_kernels*.so
