"""PriMock57 loader and the TextGrid reader on small synthetic files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from stresstest.corpus import load_corpus
from stresstest.corpus.primock57 import resolve_tags
from stresstest.corpus.textgrid import parse_textgrid, read_textgrid
from stresstest.errors import CorpusError


def _long(intervals: list[tuple[float, float, str]], name: str = "Speaker") -> str:
    """A TextGrid in Praat's long text format, CRLF line ends like the real files."""
    end = intervals[-1][1] if intervals else 1.0
    out = [
        'File type = "ooTextFile"',
        'Object class = "TextGrid"',
        "",
        "xmin = 0 ",
        f"xmax = {end} ",
        "tiers? <exists> ",
        "size = 1 ",
        "item []: ",
        "\titem [1]:",
        '\t\tclass = "IntervalTier" ',
        f'\t\tname = "{name}" ',
        "\t\txmin = 0 ",
        f"\t\txmax = {end} ",
        f"\t\tintervals: size = {len(intervals)} ",
    ]
    for k, (a, b, text) in enumerate(intervals, start=1):
        quoted = text.replace('"', '""')
        out += [
            f"\t\tintervals [{k}]:",
            f"\t\t\txmin = {a} ",
            f"\t\t\txmax = {b} ",
            f'\t\t\ttext = "{quoted}" ',
        ]
    return "\r\n".join(out) + "\r\n"


def _short(intervals: list[tuple[float, float, str]]) -> str:
    """The same in Praat's short text format (values only)."""
    end = intervals[-1][1]
    out = ['File type = "ooTextFile"', 'Object class = "TextGrid"', "", "0", str(end), "<exists>", "1"]
    out += ['"IntervalTier"', '"Doctor"', "0", str(end), str(len(intervals))]
    for a, b, text in intervals:
        out += [str(a), str(b), '"' + text.replace('"', '""') + '"']
    return "\n".join(out) + "\n"


def test_long_and_short_formats_read_the_same() -> None:
    ivs = [(0.0, 1.5, ""), (1.5, 3.25, 'He said "ouch"'), (3.25, 4e0, "two\nlines")]
    long_tiers, short_tiers = parse_textgrid(_long(ivs)), parse_textgrid(_short(ivs))
    for tiers in (long_tiers, short_tiers):
        assert len(tiers) == 1 and tiers[0].tier_class == "IntervalTier"
        assert [(i.start_s, i.end_s, i.text) for i in tiers[0].items] == ivs
    assert [i.line for i in long_tiers[0].items] == [16, 20, 24]


def test_textgrid_utf16_and_point_tier(tmp_path: Path) -> None:
    text = (
        'File type = "ooTextFile"\nObject class = "TextGrid"\n\n'
        "xmin = 0\nxmax = 2\ntiers? <exists>\nsize = 1\n"
        'item []:\n    item [1]:\n        class = "TextTier"\n        name = "events"\n        xmin = 0\n'
        "        xmax = 2\n        points: size = 1\n        points [1]:\n            number = 0.5\n"
        '            mark = "cough é"\n'
    )
    p = tmp_path / "x.TextGrid"
    p.write_bytes(b"\xfe\xff" + text.encode("utf-16-be"))
    (tier,) = read_textgrid(p)
    assert tier.tier_class == "TextTier" and tier.items[0].text == "cough é" and tier.items[0].start_s == 0.5


def test_textgrid_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = _long([(0.0, 1.0, "hi")]).replace("xmax = 1.0 \r\n\t\t\ttext", "xmax = oops \r\n\t\t\ttext")
    with pytest.raises(CorpusError, match=r"bad\.TextGrid:18: expected the xmax of interval 1 of tier 1"):
        parse_textgrid(bad, tmp_path / "bad.TextGrid")
    truncated = "\r\n".join(_long([(0.0, 1.0, "hi")]).split("\r\n")[:17])
    with pytest.raises(CorpusError, match=r"cut\.TextGrid:17: expected .* got the end of the file"):
        parse_textgrid(truncated, "cut.TextGrid")
    with pytest.raises(CorpusError, match=r"b\.TextGrid:1: expected a text TextGrid"):
        (tmp_path / "b.TextGrid").write_bytes(b"ooBinaryFile\x08TextGrid")
        read_textgrid(tmp_path / "b.TextGrid")
    with pytest.raises(CorpusError, match=r"n\.TextGrid:1: expected File type \"ooTextFile\""):
        parse_textgrid('File type = "ooTextFileX"\n', "n.TextGrid")


@pytest.mark.parametrize(
    "raw,clean",
    [
        ("<UNSURE>Hello how</UNSURE> um.", "Hello how um."),
        ("<UNIN/> Sorry to hear that.", "Sorry to hear that."),
        ("Is that <INAUDIBLE_SPEECH/>, is that on both eyes?", "Is that, is that on both eyes?"),
        ("<UNSURE><UNIN/> hypothyroidism</UNSURE>.", "hypothyroidism."),
        ("<UNIN/>", ""),
        ("<UNIN/>.", ""),
        ("  lots   of\tspace  ", "lots of space"),
    ],
)
def test_resolve_tags(raw: str, clean: str) -> None:
    assert resolve_tags(raw) == clean


def test_unknown_tag_is_an_error() -> None:
    with pytest.raises(CorpusError, match=r"f\.TextGrid:7: expected only the tags .* got '<LAUGH/>'"):
        resolve_tags("ha <LAUGH/> ha", "f.TextGrid:7")


def _corpus(root: Path, note: object = None) -> Path:
    (root / "transcripts").mkdir(parents=True)
    doctor = [
        (0.0, 1.0, ""),
        (1.0, 2.0, "Hello, <UNSURE>what</UNSURE> brings you in?"),
        (2.0, 5.0, ""),
        (5.0, 6.0, "<UNIN/>"),
        (6.0, 7.5, "How long?"),
    ]
    patient = [(0.0, 2.5, ""), (2.5, 4.0, "My <UNIN/> chest hurts."), (4.0, 6.2, ""), (6.2, 7.0, "Two days.")]
    (root / "transcripts" / "day1_consultation01_doctor.TextGrid").write_text(_long(doctor), newline="")
    # The short-format file names its tier "Doctor": the speaker comes from the file name.
    (root / "transcripts" / "day1_consultation01_patient.TextGrid").write_text(_short(patient))
    if note is not None:
        (root / "notes").mkdir()
        (root / "notes" / "day1_consultation01.json").write_text(json.dumps(note))
    return root


def test_primock57_merges_channels_by_time_and_attaches_note(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "primock57", {"presenting_complaint": "chest pain", "note": "2/7 chest pain.\n"})
    (e,) = load_corpus("primock57", root)
    assert e.encounter_id == "day1_consultation01" and e.reference_note == "2/7 chest pain."
    assert [(t.speaker, t.text, t.start_s, t.end_s) for t in e.turns] == [
        ("doctor", "Hello, what brings you in?", 1.0, 2.0),
        ("patient", "My chest hurts.", 2.5, 4.0),
        ("doctor", "How long?", 6.0, 7.5),
        ("patient", "Two days.", 6.2, 7.0),
    ]
    assert e.reference_text() == "Hello, what brings you in? My chest hurts. How long? Two days."
    # Given the transcripts folder, notes are found next to it.
    assert load_corpus("primock57", root / "transcripts")[0].reference_note == "2/7 chest pain."


def test_primock57_without_notes(tmp_path: Path) -> None:
    (e,) = load_corpus("primock57", _corpus(tmp_path / "p"))
    assert e.reference_note is None


def test_primock57_bad_note_and_missing_channel(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "p", {"note": "x"})
    (root / "notes" / "day1_consultation01.json").write_text('{"note":\n  "x",,\n}')
    with pytest.raises(CorpusError, match=r"day1_consultation01\.json:2: expected a JSON object"):
        load_corpus("primock57", root)
    (root / "notes" / "day1_consultation01.json").unlink()
    (root / "transcripts" / "day1_consultation01_patient.TextGrid").unlink()
    with pytest.raises(CorpusError, match=r"partner channel .*day1_consultation01_patient\.TextGrid"):
        load_corpus("primock57", root)


def test_primock57_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="PriMock57 folder not found"):
        load_corpus("primock57", tmp_path / "absent")


def _channel_wav(path: Path, bursts: list[tuple[float, float]], freq: float, amp: float, dur: float = 8.0) -> None:
    import numpy as np
    import soundfile as sf

    sr = 16000
    t = np.arange(int(dur * sr)) / sr
    x = np.zeros_like(t)
    for a, b in bursts:
        m = (t >= a) & (t < b)
        x[m] = amp * np.sin(2 * np.pi * freq * t[m])
    path.parent.mkdir(parents=True, exist_ok=True)
    sf.write(str(path), x.astype(np.float32), sr)


def test_primock57_upstream_audio_layout_is_one_mixed_recording(tmp_path: Path) -> None:
    """audio/<id>_doctor.wav + audio/<id>_patient.wav beside transcripts/: one recording, channels summed
    at their recorded levels and peak-normalised; the TextGrid timings are the speech mask."""
    import numpy as np

    from stresstest.audio import read_wav_exact
    from stresstest.speech import speech_for

    root = _corpus(tmp_path / "primock57")
    _channel_wav(root / "audio" / "day1_consultation01_doctor.wav", [(1.0, 2.0), (6.0, 7.5)], 220.0, 0.4)
    _channel_wav(root / "audio" / "day1_consultation01_patient.wav", [(2.5, 4.0), (6.2, 7.0)], 330.0, 0.1, dur=7.5)
    (e,) = load_corpus("primock57", root)
    audio = root / "audio"
    assert e.audio_channels == (
        str((audio / "day1_consultation01_doctor.wav").resolve()),
        str((audio / "day1_consultation01_patient.wav").resolve()),
    )
    assert e.audio_path == e.audio_channels[0]
    sp = speech_for(e, tmp_path / "cache")
    assert sp.segments_source == "corpus_timings"
    assert sp.segments_s == ((1.0, 2.0), (2.5, 4.0), (6.0, 7.5))  # doctor and patient spans, merged
    assert sp.duration_s == pytest.approx(8.0)  # the longer channel
    x = read_wav_exact(sp.path)
    # The patient channel stays 4x quieter than the doctor's (no per-channel normalisation).
    doc = np.abs(x[int(1.2 * 16000) : int(1.8 * 16000)]).max()
    pat = np.abs(x[int(2.7 * 16000) : int(3.8 * 16000)]).max()
    assert doc / pat == pytest.approx(4.0, rel=0.02)
    assert sp.recipe["channels_sha256"] and len(sp.recipe["channels"]) == 2  # type: ignore[arg-type]
    # Without audio the same corpus has none.
    assert load_corpus("primock57", _corpus(tmp_path / "bare"))[0].audio_channels == ()


def test_primock57_one_channel_without_its_partner_is_an_error(tmp_path: Path) -> None:
    root = _corpus(tmp_path / "primock57")
    _channel_wav(root / "audio" / "day1_consultation01_doctor.wav", [(1.0, 2.0)], 220.0, 0.4)
    with pytest.raises(CorpusError, match=r"partner channel .*day1_consultation01_patient\.wav"):
        load_corpus("primock57", root)
