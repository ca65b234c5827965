"""Errors the plugin turns into one clear line (never a traceback).

Every message names the problem and the fix. The pytest glue converts
:class:`SpecdecUsageError` into ``pytest.UsageError``; the CLI prints it and exits 2.
"""

from __future__ import annotations

# Ends the line a test fails with when its comparison recorded nothing (the gate's measure step
# counts such a test as one that could not measure, never as a refuted claim).
NO_RESULT_KEPT = "no result was kept"


class SpecdecUsageError(ValueError):
    """Bad input from the user: an option, a marker, a model path, a config table."""


class BackendUnavailable(SpecdecUsageError):
    """The backend's runtime library is not installed on this machine."""


class ModelLoadError(SpecdecUsageError):
    """A model or draft could not be loaded, or the pair does not fit together."""


class TemplateRefused(SpecdecUsageError):
    """A model's chat template refused a conversation (a role it does not take, turns out of order)."""


class BackendRuntimeError(RuntimeError):
    """A backend failed while generating (server fault, stream cut, bad response)."""


class PlainArmSpeculates(BackendRuntimeError):
    """The plain arm drafted although it was started not to (a release whose default drafts): no comparison."""


class NotMeasurableHere(SpecdecUsageError):
    """A comparison this machine cannot run as asked (a context beyond the window or the memory): skipped, not failed."""
