"""Stage progress: plain lines a log can hold (bounded in number, with rate and ETA), bars on a terminal."""

from __future__ import annotations

import io
import re

import pytest

from stresstest.progress import StageProgress, duration

LINE = re.compile(
    r"stresstest: asr (\d+)/(\d+) items \((\d+)%\), [\d.]+ items/(s|min), elapsed (\S+), ETA (\S+)"
    r"(, \d+ failed so far)?"
)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def _run(total: int, step_s: float, fail_every: int = 0) -> list[str]:
    out, clock = io.StringIO(), Clock()
    p = StageProgress("asr", total, stream=out, clock=clock, tty=False)
    for i in range(total):
        clock.t += step_s
        p.update(failed=int(bool(fail_every) and i % fail_every == 0))
    p.close()
    return out.getvalue().splitlines()


def test_the_paper_grid_gives_a_bounded_number_of_lines_with_rate_and_eta() -> None:
    lines = _run(272 * 9, step_s=4.0, fail_every=400)  # 2448 items, 2.7 hours
    assert 10 <= len(lines) <= 60, len(lines)
    body, end = lines[:-1], lines[-1]
    assert all(LINE.fullmatch(ln) for ln in body), body
    done = [int(LINE.fullmatch(ln).group(1)) for ln in body]  # type: ignore[union-attr]
    assert done == sorted(done) and len(set(done)) == len(done)
    half = next(ln for ln in body if LINE.fullmatch(ln).group(1) == "1224")  # type: ignore[union-attr]
    assert "elapsed 1h21m, ETA 1h21m" in half, half  # half done after 1224 × 4 s: as long again to go
    assert end == "stresstest: asr done: 2448/2448 items in 2h43m (0.25 items/s), 7 failed"


def test_a_line_every_tenth_of_a_fast_stage() -> None:
    lines = _run(100, step_s=0.01)
    assert [int(LINE.fullmatch(ln).group(3)) for ln in lines[:-1]] == list(range(10, 100, 10))  # type: ignore[union-attr]
    assert lines[-1].startswith("stresstest: asr done: 100/100 items in 1s")


def test_a_slow_stage_prints_every_30_seconds_before_a_tenth_is_done() -> None:
    lines = _run(1000, step_s=16.0)[:7]  # a tenth is 100 items, 27 minutes
    elapsed = [LINE.fullmatch(ln).group(5) for ln in lines]  # type: ignore[union-attr]
    # every 30 s (the next item after), then every fifth of the elapsed time
    assert elapsed == ["32s", "1m04s", "1m36s", "2m08s", "2m40s", "3m28s", "4m32s"]


def test_no_line_when_progress_is_off_and_no_line_on_a_terminal() -> None:
    for kw in ({"enabled": False, "tty": False}, {"enabled": False, "tty": True}):
        out = io.StringIO()
        with StageProgress("asr", 50, stream=out, **kw) as p:  # type: ignore[arg-type]
            p.update(50)
        assert out.getvalue() == ""
    out = io.StringIO()
    with StageProgress("asr", 50, stream=out, tty=True) as p:  # a terminal: the tqdm bar, no log line
        p.update(50)
    assert "stresstest:" not in out.getvalue() and "asr" in out.getvalue()


def test_durations() -> None:
    assert [duration(s) for s in (0, 42.4, 185, 7620)] == ["0s", "42s", "3m05s", "2h07m"]


def test_run_progress_is_validated_strictly(tmp_path) -> None:
    from stresstest.config import load_config
    from stresstest.errors import StressTestError

    (tmp_path / "c.yaml").write_text("run: {progress: false}\ncorpus: {kind: osce, path: x}\n")
    assert load_config(tmp_path / "c.yaml").run.progress is False
    for bad, said in (
        ("progress: 'yes'", "run.progress: Input should be a valid boolean"),
        ("progres: false", "run.progres: unknown key"),
    ):
        (tmp_path / "c.yaml").write_text(f"run: {{{bad}}}\ncorpus: {{kind: osce, path: x}}\n")
        with pytest.raises(StressTestError, match=said):
            load_config(tmp_path / "c.yaml")
