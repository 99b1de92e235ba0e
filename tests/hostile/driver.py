"""Run many CLI invocations in ONE Python process (the bad-input suite's driver).

``python driver.py JOBS.json RESULTS.json``: JOBS is a list of
``{"name", "argv", "root"}``; for each job the process switches to a fresh
``HOME`` (``root/home``), cache (``root/cache``) and working directory
(``root/cwd``), clears the tool-directory variables the CLI sets, captures file
descriptor 2 (so even a C library's output is seen), calls
``stresstest.cli.main(argv)`` and records the exit status and stderr. An
exception escaping ``main`` is recorded as a traceback — which the suite fails.
Paying the import cost once keeps ~90 invocations within seconds.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback

_TOOL_VARS = ("MPLCONFIGDIR", "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "STRESSTEST_USER_XDG_CACHE_HOME")


def main() -> int:
    jobs = json.loads(open(sys.argv[1], encoding="utf-8").read())
    results = []
    for job in jobs:
        root = job["root"]
        for var in _TOOL_VARS:
            os.environ.pop(var, None)
        os.environ["HOME"] = os.path.join(root, "home")
        os.environ["STRESSTEST_CACHE"] = os.path.join(root, "cache")
        os.chdir(os.path.join(root, "cwd"))
        sys.stderr.flush()
        saved = os.dup(2)
        with tempfile.TemporaryFile(mode="w+b") as cap:
            os.dup2(cap.fileno(), 2)
            try:
                from stresstest.cli import main as cli_main

                try:
                    rc = cli_main(job["argv"])
                except SystemExit as exc:  # argparse usage errors
                    rc = exc.code if isinstance(exc.code, int) else 2
                except BaseException:
                    sys.stderr.write(traceback.format_exc())
                    rc = -1
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
                os.close(saved)
            cap.seek(0)
            err = cap.read().decode("utf-8", "replace")
        results.append({"name": job["name"], "rc": rc, "stderr": err})
    with open(sys.argv[2], "w", encoding="utf-8") as fh:
        json.dump(results, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
