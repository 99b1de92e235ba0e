"""Strict config: unknown or mistyped keys name the key path and the YAML line."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from stresstest.config import load_config
from stresstest.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]

BASE = """\
run:
  seed: 1
corpus:
  kind: osce
  path: corpus
noise:
  ambient:
    family: ambient
snr_db: [15, 5]
"""


def _write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "c.yaml"
    p.write_text(text)
    return p


def test_valid_config_resolves_paths_and_conditions(tmp_path):
    cfg = load_config(_write(tmp_path, BASE))
    assert cfg.corpus.path == str((tmp_path / "corpus").resolve())
    assert cfg.grid().ids == ["clean", "ambient_15db", "ambient_5db"]
    assert cfg.asr.decoding.temperature == 0.0 and cfg.structure.decoding.temperature == 0.0


def test_server_python_keeps_the_venv_link(tmp_path):
    """A venv's bin/python is a symlink to the base interpreter; resolving it would start the server outside
    the venv (without vLLM). The relative path becomes absolute, the link stays a link."""
    venv_bin = tmp_path / "venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").symlink_to(Path(sys.executable).resolve())
    (tmp_path / "cfg").mkdir()
    p = tmp_path / "cfg" / "c.yaml"
    p.write_text(BASE + "structure:\n  server: {engine: vllm, python: ../venv/bin/python}\n")
    assert load_config(p).structure.server.python == str(venv_bin / "python")


def test_unknown_key_names_path_and_line(tmp_path):
    text = BASE.replace("  seed: 1\n", "  seed: 1\n  sead: 2\n")
    with pytest.raises(ConfigError) as ei:
        load_config(_write(tmp_path, text))
    msg = str(ei.value)
    assert "c.yaml:3:" in msg and "run.sead" in msg and "unknown key" in msg


def test_mistyped_value_names_path_line_and_value(tmp_path):
    text = BASE.replace("snr_db: [15, 5]", "snr_db: [15, loud]")
    with pytest.raises(ConfigError) as ei:
        load_config(_write(tmp_path, text))
    msg = str(ei.value)
    assert "c.yaml:9:" in msg and "snr_db.1" in msg and "'loud'" in msg


def test_nested_unknown_key_in_stage_config(tmp_path):
    text = BASE + "asr:\n  decoding:\n    beam_size: 1\n    temprature: 0.2\n"
    with pytest.raises(ConfigError, match=r"c\.yaml:13: asr\.decoding\.temprature: unknown key"):
        load_config(_write(tmp_path, text))


def test_family_key_must_match_and_mitigation_must_be_in_grid(tmp_path):
    with pytest.raises(ConfigError, match="must equal its key"):
        load_config(_write(tmp_path, BASE.replace("    family: ambient", "    family: babble")))
    with pytest.raises(ConfigError, match="not in the grid"):
        load_config(_write(tmp_path, BASE + "mitigation:\n  conditions: [babble_5db]\n"))


def test_not_a_mapping_and_missing_file(tmp_path):
    with pytest.raises(ConfigError, match="expected a mapping"):
        load_config(_write(tmp_path, "- a\n- b\n"))
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml")


@pytest.mark.parametrize("path", sorted((ROOT / "configs").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_configs_validate(path):
    load_config(path)


def test_an_empty_snr_grid_is_for_chain_conditions_only(tmp_path):
    chains = "chains:\n  conditions:\n    dry: [{room: {rt60_s: 0.3}}]\n"
    cfg = load_config(_write(tmp_path, BASE.replace("snr_db: [15, 5]", "snr_db: []") + chains))
    assert [c.id for c in cfg.grid()] == ["clean", "dry"]  # the ambient family is configured, but no SNR row
    with pytest.raises(ConfigError, match=r"c\.yaml:\d+: snr_db: expected at least one SNR"):
        load_config(_write(tmp_path, BASE.replace("snr_db: [15, 5]", "snr_db: []")))


RAY_VLLM = (
    BASE.replace("run:\n  seed: 1\n", "run:\n  seed: 1\n  executor:\n    kind: ray\n{executor}")
    + """\
structure:
  backend: {backend}
  server:
    engine: vllm
    model: Qwen/Qwen2.5-7B-Instruct
    tensor_parallel_size: 2
    data_parallel_size: {dp}
"""
)


@pytest.mark.parametrize(
    ("executor", "backend", "dp", "size"),
    [
        ("", "openai", 2, 4),  # the default llm_gpus_per_engine: 0
        ("    llm_gpus_per_engine: 2\n", "openai", 2, 4),  # tensor parallel only: still too few
        ("    llm_gpus_per_engine: 1\n", "vllm-offline", 1, 2),  # offline: tensor parallel size
    ],
)
def test_ray_vllm_engine_without_its_gpus_is_a_config_error(tmp_path, executor, backend, dp, size):
    text = RAY_VLLM.format(executor=executor, backend=backend, dp=dp)
    with pytest.raises(ConfigError) as err:
        load_config(_write(tmp_path, text))
    msg = str(err.value)
    assert "\n" not in msg and "run.executor.llm_gpus_per_engine" in msg and f"on {size} GPU(s)" in msg, msg
    assert f"expected run.executor.llm_gpus_per_engine: {size}" in msg


def test_ray_vllm_engine_holding_its_gpus_or_on_a_cpu_cluster_is_accepted(tmp_path):
    ok = RAY_VLLM.format(executor="    llm_gpus_per_engine: 4\n", backend="openai", dp=2)
    assert load_config(_write(tmp_path, ok)).run.executor.llm_gpus_per_engine == 4
    cpu = RAY_VLLM.format(executor="    num_gpus: 0\n", backend="openai", dp=1)  # vLLM's CPU build, local cluster
    assert load_config(_write(tmp_path, cpu)).run.executor.num_gpus == 0
    inproc = RAY_VLLM.format(executor="", backend="openai", dp=2).replace("kind: ray", "kind: inprocess")
    assert load_config(_write(tmp_path, inproc)).run.executor.llm_gpus_per_engine == 0
