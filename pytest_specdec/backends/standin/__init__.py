"""The kit stand-in servers are built from: a threaded HTTP server with injectable faults
(:mod:`.http`) and real generations on the synthetic pair (:mod:`.engine`).

A backend whose server cannot run on the machines that test this plugin keeps its
stand-in handler in its own folder (``backends/ollama/standin.py``) and names it in its
spec; ``python -m pytest_specdec.backends.standin NAME`` (or ``pytest-specdec standin NAME``)
serves any of them. Each handler follows the real server's source and cites it.
"""
