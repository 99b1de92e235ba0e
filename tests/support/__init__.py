"""Test support shared by the suites (never imported by the ``stresstest`` package).

Imported as ``support.<module>``: pytest puts ``tests/`` on ``sys.path`` (``tests/conftest.py``, no
``tests/__init__.py``), as it does for ``outcome_checks``.

* :mod:`support.llm_stub` — a scripted OpenAI-compatible stub server on 127.0.0.1 (the client's failure paths);
* :mod:`support.faultproxy` — an HTTP proxy in front of a real server that injects faults.
"""
