"""The CI gate's logic, for ``.github/workflows/specdec-gate.yml`` (``pytest-specdec gate …``).

* :mod:`~pytest_specdec.gate.legs` — what each backend's leg measures on this runner
  (``[tool.specdec.gate]``), the profile check, and the servers the gate starts.
* :mod:`~pytest_specdec.gate.releases` — the pinned set-up (a lock beside the accepted
  baselines), the upgrade, and the before → after versions of runtimes and servers.
* :mod:`~pytest_specdec.gate.runs` — measuring one leg, and re-running its flips once.
* :mod:`~pytest_specdec.gate.alerts` — issues through ``gh``, and the webhook.
"""
