# Two commands on a fresh machine:  `make studio` (set up, then run the studio)  and  `make test`.
# Setup is idempotent: system packages via apt when missing, a virtual environment in .venv.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
APT_PKGS := libegl1 libgl1 libegl-mesa0 libgl1-mesa-dri chromium coturn protobuf-compiler-grpc libgrpc++-dev pkg-config g++
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
# pyproject's `engines` requirements: `bpy` (without its marker) or the `rest`
ENGINES_EXTRA = $(BIN)/python -c "import sys, tomllib; reqs = tomllib.load(open('pyproject.toml', 'rb'))['project']['optional-dependencies']['engines']; print(' '.join(r.split(';')[0].strip() for r in reqs if r.startswith('bpy') == (sys.argv[1] == 'bpy')))"

.PHONY: setup studio test test-repeat system-packages lint

system-packages:
	@missing=""; for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then echo "installing system packages:$$missing"; \
	  $(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; fi

$(STAMP): pyproject.toml
	$(MAKE) system-packages
	[ -x $(BIN)/python ] || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# CPU build from local disk first; a bare `torch` requirement would pull a multi-GB CUDA build.
	$(BIN)/python -c "import torch" 2>/dev/null || $(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[flash,text,train,dev,cluster]'
	# The engines extra (panda3d, bpy, grpc), with bpy apart: its metadata asks for numpy<2, which would take numpy
	# and pandas back a major version for the whole studio; it renders on numpy 2 (tests/test_record_blender.py).
	$(BIN)/pip install -q $$($(ENGINES_EXTRA) rest)
	$(BIN)/pip install -q --no-deps $$($(ENGINES_EXTRA) bpy) && $(BIN)/pip install -q cython requests zstandard
	touch $(STAMP)

setup: $(STAMP)

studio: setup
	$(BIN)/alaya-studio serve

test: setup lint
	$(BIN)/python -m pytest -q

# The determinism check: N full runs in a row (LOAD=1 keeps one core busy meanwhile); see RELIABILITY.md.
N ?= 10
test-repeat: setup
	scripts/test-repeat $(N) $(if $(LOAD),--load,)

# ruff on the parts that are clean so far, then mypy on pyproject's [tool.mypy] files; `make test` runs both first.
# Every Python file is under ruff; mypy covers pyproject's [tool.mypy] files: every package but cluster/ so far.
RUFF_CLEAN := alaya_errors.py app.py bench cluster gbuffer prompt_presets renderer scripts webrtc timeline media \
              studio training tests docs
lint: setup
	$(BIN)/ruff check $(RUFF_CLEAN)
	$(BIN)/mypy
