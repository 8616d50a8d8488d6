# privagg — the two set-up commands are `make demo` and `make test`; both create .venv if missing.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check -q

.PHONY: demo test mutants bench utility utility-full bench-aggregate bench-opendp-venv venv clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip

venv: $(PY)

# One stamp per extra: reinstall only when pyproject.toml changes.
$(VENV)/.installed-%: pyproject.toml | $(PY)
	$(PIP) install -e '.[$*]'
	touch $@

demo: $(VENV)/.installed-plot
	$(VENV)/bin/privagg demo

test: $(VENV)/.installed-test
	$(PY) -m pytest -n 2 --dist loadgroup -q

# Privacy-critical mutations, one at a time on a temporary copy of src/ (never the working tree),
# each against the tests meant to kill it; fails if one survives (a few minutes; not part of `test`).
mutants: $(VENV)/.installed-test
	$(PY) tools/mutants.py

bench: $(VENV)/.installed-bench
	$(PY) benchmarks/noise.py
	$(PY) benchmarks/histogram.py
	$(PY) benchmarks/ledger.py
	$(PY) benchmarks/friendcount.py

# Accuracy of the private mean and k-means against CoinPress, the oracle and diffprivlib
# (minutes; writes docs/utility/). `utility-full` runs the whole grid (hours on 2 cores).
utility: $(VENV)/.installed-bench
	$(PY) benchmarks/utility.py --quick
	$(PY) benchmarks/utility.py --section kmeans

utility-full: $(VENV)/.installed-bench
	$(PY) benchmarks/utility.py --full --results docs/utility/mean-results.jsonl
	$(PY) benchmarks/utility.py --section kmeans --full --results docs/utility/kmeans-results.jsonl

# Group-by aggregates (issue 13): speed against plain DuckDB on 10^7 rows, utility against PipelineDP
# and OpenDP. OpenDP 0.16 needs polars 1.36.1 (the project venv has 2.x): it runs in a throwaway venv.
OPENDP_VENV ?= /tmp/privagg-opendp-venv

$(OPENDP_VENV)/.installed: benchmarks/requirements-opendp.txt
	$(PYTHON) -m venv $(OPENDP_VENV)
	$(OPENDP_VENV)/bin/python -m pip --disable-pip-version-check -q install -r benchmarks/requirements-opendp.txt
	touch $@

bench-opendp-venv: $(OPENDP_VENV)/.installed

bench-aggregate: $(VENV)/.installed-bench $(OPENDP_VENV)/.installed
	$(PY) benchmarks/aggregate.py --opendp-python $(OPENDP_VENV)/bin/python

clean:
	rm -rf $(VENV) build *.egg-info src/*.egg-info .pytest_cache .hypothesis
