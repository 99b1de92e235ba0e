"""Text helpers shared by the corpus loaders: decoding, line splitting, cleaning.

The reference transcript for WER is ``Encounter.reference_text()``: the turn texts
joined by one space. For that rule to be the whole story, every loader hands over
turn texts that are already clean: transcriber tags resolved, typographic
punctuation mapped to ASCII, whitespace collapsed. The helpers here do the parts
that are common to all corpora.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from stresstest.errors import CorpusError

# Typographic characters that transcribers' word processors insert. Mapping them to
# ASCII keeps the same word spelled the same way across files ("don’t" vs "don't"),
# which matters for WER alignment and for the TTS front-end.
_PUNCT_MAP = str.maketrans(
    {
        "\u2018": "'",  # left single quote
        "\u2019": "'",  # right single quote / apostrophe
        "\u201a": "'",
        "\u201b": "'",
        "\u2032": "'",  # prime
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u201f": '"',
        "\u2033": '"',
        "\u2010": "-",  # hyphen
        "\u2011": "-",  # non-breaking hyphen
        "\u2012": "-",  # figure dash
        "\u2013": "-",  # en dash
        "\u2014": "-",  # em dash
        "\u2015": "-",
        "\u2212": "-",  # minus sign
        "\u2026": "...",  # ellipsis
        "\u00a0": " ",  # no-break space
        "\u2009": " ",  # thin space
        "\u202f": " ",  # narrow no-break space
        "\u200b": "",  # zero-width space
        "\u200c": "",
        "\u200d": "",
        "\u2060": "",
        "\ufeff": "",  # a BOM in the middle of a file (concatenated exports)
    }
)

_WS = re.compile(r"\s+")
# Unicode category Cc minus the whitespace controls (tab, LF, VT, FF, CR, FS..US).
_CONTROL = re.compile(r"[\x00-\x08\x0e-\x1b\x7f-\x84\x86-\x9f]")
_SPACE_BEFORE_PUNCT = re.compile(r"\s+([,.?!;:%])")
_LEADING_PUNCT = re.compile(r"^[\s,.;:]+")
_WORDISH = re.compile(r"\w")
# Line breaks as the files use them: CRLF, LF or a lone CR. str.splitlines() would
# also split on form feeds and Unicode separators, which would shift the line
# numbers we report against what an editor shows.
_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def decode_text(data: bytes, path: Path) -> str:
    """Decode a text file's bytes: UTF-16 (BOM or evident NUL pattern) or UTF-8 (BOM optional).

    Args:
        data: the raw file content.
        path: the file, for error messages.

    Returns:
        The text without any byte-order mark.

    Raises:
        CorpusError: when the bytes are neither UTF-16 nor valid UTF-8; the message
            names the file and the line of the first bad byte.
    """
    if data.startswith(b"\xff\xfe"):
        return _decode(data[2:], "utf-16-le", path)
    if data.startswith(b"\xfe\xff"):
        return _decode(data[2:], "utf-16-be", path)
    if data.startswith(b"\xef\xbb\xbf"):
        return _decode(data[3:], "utf-8", path)
    # UTF-16 without a BOM: ASCII text then has a NUL in every other byte.
    if len(data) >= 4 and data.count(b"\x00") * 3 > len(data):
        odd_nuls = data[1::2].count(b"\x00")
        even_nuls = data[0::2].count(b"\x00")
        return _decode(data, "utf-16-le" if odd_nuls >= even_nuls else "utf-16-be", path)
    return _decode(data, "utf-8", path)


def _decode(data: bytes, encoding: str, path: Path) -> str:
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CorpusError(
            f"{path}:{line}: expected UTF-8 or UTF-16 text, got bytes that are not valid {encoding} "
            f"({data[exc.start : exc.start + 4]!r}); re-save the file as UTF-8"
        ) from exc


def read_text(path: Path) -> str:
    """Read and decode a text file (see :func:`decode_text`).

    Raises:
        CorpusError: when the file cannot be read or decoded.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CorpusError(f"{path}: cannot read file ({exc.strerror or exc})") from exc
    return decode_text(data, path)


def split_lines(text: str) -> list[str]:
    """Split on CRLF, LF or CR only, so that line numbers match an editor's."""
    return _LINE_BREAK.split(text)


def normalise_chars(text: str) -> str:
    """NFC-compose, map typographic punctuation to ASCII and drop control characters."""
    text = unicodedata.normalize("NFC", text).translate(_PUNCT_MAP)
    # Control characters (other than whitespace, which is collapsed later) are export
    # debris; they are invisible to a reader and would become tokens in WER.
    return _CONTROL.sub("", text)


def clean_text(text: str) -> str:
    """Normalise characters and collapse every run of whitespace to one space."""
    return _WS.sub(" ", normalise_chars(text)).strip()


def tidy_after_removal(text: str) -> str:
    """Repair the spacing left behind when tags are removed from a text.

    Removing ``<UNIN/>`` from ``"that <UNIN/>, is it"`` leaves ``"that , is it"``;
    this joins the punctuation back (``"that, is it"``) and drops punctuation that
    now starts the text.
    """
    text = _WS.sub(" ", text).strip()
    text = _SPACE_BEFORE_PUNCT.sub(r"\1", text)
    return _LEADING_PUNCT.sub("", text).strip()


def has_words(text: str) -> bool:
    """True when the text holds at least one letter or digit (not just punctuation)."""
    return bool(_WORDISH.search(text))
