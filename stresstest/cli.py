"""Command line: ``stresstest run | mix | triggers | report | compare | llm serve | gold ...``.

Every user error exits non-zero with one line on stderr (``stresstest: error: ...``),
never a bare traceback; ``--debug`` shows the traceback for bug reports.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from pathlib import Path

from stresstest import __version__
from stresstest.errors import StressTestError
from stresstest.records import revise

EXIT_USER_ERROR = 2
EXIT_INTERNAL = 3


def _cmd_run(a: argparse.Namespace) -> int:
    from stresstest.pipeline.runner import format_quality_table, format_table, run

    result = run(a.config, a.out, replace=a.replace_run)
    out = result.out
    print(format_table(result.rows))
    quality = format_quality_table(result.rows, result.manifest.note_quality)
    if quality:
        print("\nNote quality (docs/spec.md §8; LLM judges)\n" + quality)
    print(f"\nrun directory: {out}")
    for name in ("summary.csv", "items.jsonl", "manifest.json", "report/report.html"):
        if (out / name).exists():
            print(f"  {out / name}")
    return 0


def _cmd_mix(a: argparse.Namespace) -> int:
    """One mixture. Only ``--out`` is left behind: the canonical speech (used to measure the SNR back)
    and noise are hidden temporary files next to it, and a failed mixture is removed. Every step reads
    and writes a block at a time, so memory does not grow with the recordings' length."""
    import math
    import os
    import tempfile

    from stresstest.audio import scan_audio, write_canonical
    from stresstest.config import SNR_MAX_DB, SNR_MIN_DB
    from stresstest.errors import MixError
    from stresstest.noise.mix import SpanMask, item_rng, wav_noise, write_mixture
    from stresstest.speech.recording import energy_vad_file

    if not math.isfinite(a.snr) or not SNR_MIN_DB <= a.snr <= SNR_MAX_DB:
        raise MixError(f"--snr: expected a finite SNR between {SNR_MIN_DB:g} and {SNR_MAX_DB:g} dB, got {a.snr:g}")
    a.snr += 0.0  # canonical: -0 is 0 (recorded as 0 in the mixture's info)
    out = Path(a.out)
    if out.is_dir():
        raise MixError(f"--out {out}: is a directory; expected the path of the WAV file to write")
    if out.suffix.lower() != ".wav":
        raise MixError(f"--out {out}: expected a file name ending in .wav")
    if not out.parent.is_dir():
        raise MixError(f"--out {out}: folder {out.parent} does not exist")
    for opt, given in (("--speech", a.speech), ("--noise", a.noise)):
        if _same_file(out, Path(given)):
            raise MixError(
                f"--out {out}: is the {opt} input; writing the mixture there would destroy it "
                "(give another output file)"
            )
    n, speech_peak = scan_audio(a.speech)
    n_noise, noise_peak = scan_audio(a.noise)
    existed = out.exists()
    temps = []
    for what in ("speech", "noise"):
        fd, tmp = tempfile.mkstemp(prefix=f".{out.stem}.", suffix=f".{what}.wav", dir=out.parent)
        os.close(fd)
        temps.append(Path(tmp))
    clean_path, noise_path = temps
    try:
        # Canonical copies next to --out, written and read a block at a time (memory flat in length).
        write_canonical(a.speech, clean_path, n, speech_peak)
        segments = energy_vad_file(clean_path)
        if not segments:
            raise MixError(f"{a.speech}: no speech found (the file is silent or too quiet to measure an SNR)")
        write_canonical(a.noise, noise_path, n_noise, noise_peak)
        rng = item_rng(a.seed, Path(a.speech).name, "file")
        offset = int(rng.integers(0, n_noise - n + 1)) if n_noise > n else 0
        info = write_mixture(
            out,
            clean_path,
            wav_noise(noise_path, offset),
            SpanMask.from_segments(n, segments),
            a.snr,
            family="file",
            noise_source=str(a.noise),
            noise_offset_s=offset / 16000,
            noise_recipe={"seed": a.seed, "vad": "energy"},
        )
    except BaseException:
        if not existed:
            out.unlink(missing_ok=True)  # a failed mixture is not left behind
        raise
    finally:
        for tmp_path in temps:
            tmp_path.unlink(missing_ok=True)
    print(json.dumps(info.model_dump(mode="json"), indent=2))
    return 0


def _same_file(a: Path, b: Path) -> bool:
    """True when ``a`` and ``b`` name one file (same path after resolving links, or hard links to one inode)."""
    try:
        if a.resolve() == b.resolve():
            return True
        return a.exists() and b.exists() and a.samefile(b)
    except (OSError, ValueError):
        return False


#: Largest transcript ``stresstest triggers`` reads (bytes): one conversation's transcript is far smaller, and
#: the detector, linear in the text, takes minutes at this size (scripts/bench_scale.py).
MAX_TRIGGER_TEXT_BYTES = 10_000_000


def _read_text(path: str, option: str = "") -> str:
    from stresstest.errors import MetricError
    from stresstest.paths import input_problem

    p = Path(path)
    problem = input_problem(p, "a UTF-8 text file")  # a FIFO or a symlink loop is named, not "not found"
    if problem is not None:
        raise MetricError(problem)
    size = p.stat().st_size
    if size > MAX_TRIGGER_TEXT_BYTES:
        raise MetricError(
            f"{option + ' ' if option else ''}{p}: is {size / 1e6:.1f} MB; expected a transcript of at "
            f"most {MAX_TRIGGER_TEXT_BYTES / 1e6:g} MB (one conversation); split longer texts"
        )
    try:
        return p.read_text("utf-8")
    except UnicodeDecodeError as exc:
        raise MetricError(f"{p}: expected UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def _cmd_triggers(a: argparse.Namespace) -> int:
    from stresstest.metrics.triggers import detect_triggers

    concepts: list[str] = []
    if a.gold is not None:
        from stresstest.config import GoldConfig
        from stresstest.pipeline.score import load_gold_for

        gold = load_gold_for([a.gold], GoldConfig(path=a.gold_dir, required=True))[a.gold]
        concepts = [c.concept for c in gold.claims]
    events = detect_triggers(_read_text(a.ref, "--ref"), _read_text(a.hyp, "--hyp"), concepts)
    print(json.dumps([e.model_dump(mode="json") for e in events], indent=2, ensure_ascii=False))
    return 0


def _cmd_report(a: argparse.Namespace) -> int:
    from stresstest.pipeline.ownership import locked_run_dir
    from stresstest.report import cli_report

    with locked_run_dir(Path(a.run_dir)):  # not while a run is writing the same directory
        print(cli_report(Path(a.run_dir)))
    return 0


def _cmd_compare(a: argparse.Namespace) -> int:
    from stresstest.errors import ReportError
    from stresstest.report import cli_compare

    try:
        print(cli_compare(Path(a.run_a), Path(a.run_b), Path(a.out) if a.out else None, strict=a.strict))
    except ReportError as exc:
        if not a.pairwise:
            raise
        # The metric table needs encounters paired within both runs; the pairwise judge needs only the two records.
        print(f"metric comparison skipped: {exc}")
    if a.pairwise:
        from stresstest.report.pairwise_compare import cli_pairwise

        print()
        print(cli_pairwise(a.run_a, a.run_b, a.out, config=a.config, conditions=a.conditions))
    return 0


def _cmd_llm_serve(a: argparse.Namespace) -> int:
    from stresstest.config import load_config
    from stresstest.llm.served import serve

    cfg = load_config(a.config).structure
    if a.port is not None:
        cfg = revise(cfg, server=revise(cfg.server, port=a.port))
    serve(cfg, foreground=True)
    return 0


def _cmd_check(a: argparse.Namespace) -> int:
    from stresstest.cache import confine_tool_dirs, default_cache_dir
    from stresstest.config import load_config
    from stresstest.pipeline.preflight import run_checks

    cfg = load_config(a.config)
    cache = Path(cfg.run.cache_dir) if cfg.run.cache_dir else default_cache_dir()
    confine_tool_dirs(cache)
    out = Path(a.out) if a.out else Path("runs") / Path(a.config).stem
    findings = run_checks(cfg, out=out, cache=cache, deep=not a.quick, config_path=a.config)
    for f in findings:
        print(f, file=sys.stdout if f.ok else sys.stderr, flush=True)
    bad = sum(not f.ok for f in findings)
    print(f"{'ready' if not bad else f'{bad} problem(s)'}: {a.config}", flush=True)
    return EXIT_USER_ERROR if bad else 0


def _cmd_gold(a: argparse.Namespace) -> int:
    from stresstest.cli_gold import gold_command

    return gold_command(a)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="stresstest", description="Paired acoustic stress test for ASR→LLM clinical scribes."
    )
    p.add_argument("--version", action="version", version=f"stresstest {__version__}")
    p.add_argument("--debug", action="store_true", help="show tracebacks")
    sub = p.add_subparsers(dest="cmd", required=True)

    r = sub.add_parser("run", help="run a sweep from a YAML config")
    r.add_argument("config")
    r.add_argument("--out", help="run directory (default runs/<config name>): new, empty, or a run of this config")
    r.add_argument(
        "--replace-run",
        action="store_true",
        help="replace the finished run in --out although it was made from a different config",
    )
    r.set_defaults(func=_cmd_run)

    ck = sub.add_parser(
        "check",
        help="will this config run here? corpora, models, CUDA libraries, one decode, "
        "one LLM call, disk, writable folders, a time estimate",
    )
    ck.add_argument("config")
    ck.add_argument("--out", help="run directory it would write (default runs/<config name>)")
    ck.add_argument("--quick", action="store_true", help="skip loading models (no decode, no LLM call)")
    ck.set_defaults(func=_cmd_check)

    m = sub.add_parser("mix", help="mix one noise file into one speech file at an SNR (docs/spec.md §2 rules)")
    m.add_argument("--speech", required=True)
    m.add_argument("--noise", required=True)
    m.add_argument("--snr", required=True, type=float, help="target SNR in dB")
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--out", required=True)
    m.set_defaults(func=_cmd_mix)

    t = sub.add_parser("triggers", help="cause-side trigger events between two transcripts (JSON)")
    t.add_argument("--ref", required=True)
    t.add_argument("--hyp", required=True)
    t.add_argument(
        "--gold",
        metavar="ENCOUNTER_ID",
        help="widen the negation check with this encounter's gold concepts, as a run does",
    )
    t.add_argument("--gold-dir", help="gold records to read --gold from (default: the shipped set; a run's gold.path)")
    t.set_defaults(func=_cmd_triggers)

    rp = sub.add_parser("report", help="(re)build report.html / report.md for a run directory")
    rp.add_argument("run_dir")
    rp.set_defaults(func=_cmd_report)

    c = sub.add_parser("compare", help="paired comparison of two run directories")
    c.add_argument("run_a")
    c.add_argument("run_b")
    c.add_argument("--out")
    c.add_argument(
        "--strict",
        action="store_true",
        help="refuse runs that are not paired (a condition of one name defined differently, another "
        "corpus, max_turns, reference text or encounter set) instead of warning",
    )
    c.add_argument(
        "--pairwise",
        action="store_true",
        help="also judge B's records against A's on the PDSQI-9-derived dimensions (LLM judge)",
    )
    c.add_argument("--config", help="run config naming the judge LLM for --pairwise (default: RUN_B's resolved config)")
    c.add_argument("--conditions", help="--pairwise: judge only these conditions (comma-separated: clean,babble_5db)")
    c.set_defaults(func=_cmd_compare)

    llm = sub.add_parser("llm", help="local LLM server")
    llm_sub = llm.add_subparsers(dest="llm_cmd", required=True)
    s = llm_sub.add_parser("serve", help="serve the config's structuring model on 127.0.0.1")
    s.add_argument("config")
    s.add_argument("--port", type=int)
    s.set_defaults(func=_cmd_llm_serve)

    g = sub.add_parser("gold", help="gold reference workflow: draft, check, audit")
    from stresstest.cli_gold import add_gold_arguments

    add_gold_arguments(g)
    g.set_defaults(func=_cmd_gold)
    return p


def _os_error_message(exc: OSError) -> str:
    """A one-line user message for an environment failure (permissions, full disk, wrong kind of path)."""
    import errno

    from stresstest.cache import active_cache_dir

    where = exc.filename if exc.filename is not None else "a file"
    what = exc.strerror or type(exc).__name__
    # A write into the cache is fixed by moving the cache, not the run directory.
    place = "--out"
    if exc.filename is not None:
        try:
            Path(os.fsdecode(exc.filename)).resolve().relative_to(active_cache_dir().resolve())
            place = "cache directory (STRESSTEST_CACHE or run.cache_dir)"
        except (ValueError, OSError, TypeError):
            pass
    hint = {
        errno.EACCES: f"check the permissions or choose another {place}",
        errno.EPERM: f"check the permissions or choose another {place}",
        errno.EROFS: f"the file system is read-only; choose another {place}",
        errno.ENOSPC: f"the disk is full; free space or choose another {place}",
        errno.EEXIST: "a file is in the way of a folder",
        errno.ENOTDIR: "a file is in the way of a folder",
        errno.EISDIR: "a folder is where a file was expected",
    }.get(exc.errno or -1, "")
    return f"cannot use {where}: {what}" + (f" ({hint})" if hint else "")


def _clear_progress_bars() -> None:
    """Close any progress bar still drawn, so the error line starts on a line of its own."""
    try:
        from tqdm import tqdm

        for bar in list(getattr(tqdm, "_instances", ())):
            bar.close()
    except Exception:
        pass


def _error(msg: str) -> None:
    from stresstest.console import one_line

    _clear_progress_bars()
    sys.stderr.write(f"stresstest: {one_line(msg)}\n")
    sys.stderr.flush()


def _terminate_like_interrupt(args: argparse.Namespace | None = None) -> None:
    """Make SIGTERM unwind like Ctrl-C, so ``finally`` blocks stop a managed LLM server.

    Python's default SIGTERM action kills the process without running cleanup, which left the run's
    llama.cpp/vLLM server (its own session, so not killed with us) running after ``kill PID``.
    """
    if threading.current_thread() is not threading.main_thread():
        return
    if getattr(args, "cmd", None) == "triggers":
        # Nothing to clean up, and the alignment runs in C code that a Python-level handler would wait for
        # (minutes on a long pair): the default action ends the process at once.
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        return

    def _on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _on_term)
    _arm_sigterm_watchdog()


#: Seconds the orderly stop gets after SIGTERM before the watchdog ends the process.
SIGTERM_GRACE_S = 5.0
_WATCHDOG: list[threading.Thread] = []


def _arm_sigterm_watchdog() -> None:
    """End the process ``SIGTERM_GRACE_S`` after a SIGTERM that the orderly stop has not finished.

    The Python-level handler above runs only between bytecodes, so while the main thread is inside one long
    native call (an SVD, an FFT, a model's forward pass) SIGTERM waited for it to return. The C-level signal
    handler writes the signal number to a wakeup pipe; a thread blocked on that pipe (native calls that take
    long release the GIL) waits for the grace period, then stops the managed servers (:mod:`stresstest.children`)
    and exits 130 without unwinding. What was written is safe: every write is atomic and a run resumes.
    Armed once per process.
    """
    if _WATCHDOG:
        return
    r, w = os.pipe()
    os.set_blocking(w, False)
    try:
        signal.set_wakeup_fd(w, warn_on_full_buffer=False)
    except ValueError:  # not the main thread of the main interpreter
        os.close(r)
        os.close(w)
        return

    def watch() -> None:
        import time

        while True:
            data = os.read(r, 64)
            if not data:
                return
            if signal.SIGTERM in data:
                time.sleep(SIGTERM_GRACE_S)
                from stresstest import children

                children.kill_all()
                os.write(
                    2,
                    (
                        f"stresstest: interrupted (SIGTERM; still busy {SIGTERM_GRACE_S:g} s later, so stopped "
                        "without unwinding); re-run the same command to resume\n"
                    ).encode(),
                )
                os._exit(130)

    t = threading.Thread(target=watch, name="sigterm-watchdog", daemon=True)
    t.start()
    _WATCHDOG.append(t)


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit status.

    User errors (:class:`StressTestError`, an :class:`OSError` from the environment
    such as an unwritable ``--out``, running out of memory) exit 2 with ONE line;
    anything else is a bug and exits 3 with one line (the traceback with ``--debug``).
    """
    parser = build_parser()
    a = parser.parse_args(argv)
    from stresstest.cache import confine_tool_dirs

    confine_tool_dirs()  # nothing in $HOME but the documented cache dir
    _terminate_like_interrupt(a)
    try:
        return int(a.func(a))
    except StressTestError as exc:
        if a.debug:
            raise
        _error(f"error: {exc}")
        return EXIT_USER_ERROR
    except KeyboardInterrupt:
        _error("interrupted; re-run the same command to resume")
        return 130
    except OSError as exc:
        if a.debug:
            raise
        _error(f"error: {_os_error_message(exc)}")
        return EXIT_USER_ERROR
    except MemoryError:
        if a.debug:
            raise
        _error("error: ran out of memory; use a smaller corpus.limit or report.n_resamples")
        return EXIT_USER_ERROR
    except Exception as exc:  # an unexpected failure is a bug: one line, the traceback on --debug
        if a.debug:
            raise
        _error(f"internal error: {type(exc).__name__}: {exc} (re-run with --debug for the traceback)")
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
