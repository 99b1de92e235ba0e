"""Versioned instruction files (the I of y = LLM(I, S, x; φ)).

Each prompt is a Markdown file ``<name>_<version>.md`` shipped as package
data, with two sections introduced by the lines ``### SYSTEM`` and
``### USER``. Both sections are templates whose ``{{placeholders}}`` are
filled by plain string replacement (so JSON braces in a prompt need no
escaping). ``prompt_hash`` is the sha256 of the file's exact bytes: editing a
single character of a prompt changes the hash, the cache key and the manifest.
A changed instruction gets a new version file; old files stay, so old runs
remain reproducible.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from stresstest.errors import LLMError

_SECTION = re.compile(r"^### (SYSTEM|USER)[ \t]*$", re.MULTILINE)
_PLACEHOLDER = re.compile(r"\{\{([a-z_]+)\}\}")


@dataclass(frozen=True)
class Prompt:
    """One loaded instruction file.

    Attributes:
        name: prompt family, e.g. ``structure``, ``judge``, ``draft``.
        version: e.g. ``v1``.
        system: system message (may hold ``{{placeholders}}`` too, e.g. the output schema).
        user_template: user message with ``{{placeholders}}``.
        sha256: hash of the file's bytes (the prompt hash recorded everywhere).
    """

    name: str
    version: str
    system: str
    user_template: str
    sha256: str

    @property
    def id(self) -> str:
        """``<name>_<version>``, e.g. ``structure_v1``."""
        return f"{self.name}_{self.version}"

    def placeholders(self) -> set[str]:
        """Names of the placeholders the system and user templates expect."""
        return set(_PLACEHOLDER.findall(self.system)) | set(_PLACEHOLDER.findall(self.user_template))

    def messages(self, **values: str) -> list[dict[str, str]]:
        """Chat messages with the placeholders filled.

        Raises:
            LLMError: when a placeholder is missing or an unknown one is given.
        """
        expected = self.placeholders()
        if set(values) != expected:
            raise LLMError(f"prompt {self.id}: expected values for {sorted(expected)}, got {sorted(values)}")
        # One pass over each template, so a value that itself contains "{{x}}" is not re-expanded.
        system, user = (_PLACEHOLDER.sub(lambda m: values[m.group(1)], t) for t in (self.system, self.user_template))
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_prompt(name: str, version: str, text: str) -> Prompt:
    """Parse the text of a prompt file (see module docstring for the format)."""
    parts = _SECTION.split(text)
    # split gives ['', 'SYSTEM', body, 'USER', body] for a well-formed file.
    sections = dict(zip(parts[1::2], parts[2::2], strict=False))
    if parts[0].strip() or set(sections) != {"SYSTEM", "USER"} or len(parts) != 5:
        raise LLMError(
            f"prompt {name}_{version}: expected exactly one '### SYSTEM' then one '### USER' section, "
            f"found {[p for p in parts[1::2]]}"
        )
    return Prompt(
        name=name,
        version=version,
        system=sections["SYSTEM"].strip(),
        user_template=sections["USER"].strip(),
        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(),
    )


@lru_cache(maxsize=64)
def load_prompt(name: str, version: str, package: str) -> Prompt:
    """Load ``<name>_<version>.md`` from the prompts package of the role that owns it.

    Args:
        name: prompt family (``structure``/``gold_draft`` in ``stresstest.structure.prompts``, ``judge`` and the
            note-quality judges in ``stresstest.metrics.prompts``, ``draft``/``guard`` in
            ``stresstest.mitigation.prompts``).
        version: ``v1``, ``v2``...
        package: the package holding the files.

    Raises:
        LLMError: naming the file and the versions that do exist.
    """
    fname = f"{name}_{version}.md"
    root = resources.files(package)
    path = root / fname
    if not path.is_file():
        have = sorted(p.name for p in root.iterdir() if p.name.startswith(f"{name}_") and p.name.endswith(".md"))
        raise LLMError(f"prompt file {package}/{fname} not found; available: {have or 'none'}")
    return parse_prompt(name, version, path.read_text("utf-8"))
