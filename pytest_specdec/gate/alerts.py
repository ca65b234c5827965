"""Telling people: one issue per alert key, opened, commented on, closed when cleared, reopened; and a webhook.

An alert's key is (machine class, leg, claim, state, cause): the cause is the release pair
for a flip and the refusal's kind for a leg's state, so a night "not measurable" because its
models are absent and a later broken upgrade are two issues, not one. The key is written in
the issue's body as a marker line and every issue the gate opens carries its label, so the
gate finds its issues again by listing the label (never through GitHub's search, whose
index lags and matches words, not titles). Which findings are told, and when a key counts
as cleared, is :mod:`pytest_specdec.gate.alert_job`'s.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate.findings import State
from pytest_specdec.store.records import RunRecord

LABEL = "specdec-gate"
MARKER = "specdec-alert:"  # the body's marker line: <!-- specdec-alert: {key as JSON} -->
LEGACY_CAUSE = "opened before alerts were keyed"  # the cause of an issue from before marker lines: any cause
# The titles issues had before keys (pytest_specdec/gate/alert_job.py and watchdog.py before bea5787):
_LEGACY_TITLE = re.compile(r"^specdec: (?P<state>.+?) — (?P<subject>.+) on (?P<machine_class>.+) \((?P<leg>[^(),]+)\)$")
_LEGACY_WATCHDOG = re.compile(r"^specdec: no gate night for [0-9.]+ hours \((?P<workflow>.+)\)$")


@dataclass(frozen=True, order=True)
class AlertKey:
    """What one issue is about; equal keys are the same change, whatever the night."""

    machine_class: str
    leg: str
    subject: str  # "claim d", a test's name, "leg", or "nights" for the watchdog
    state: str  # the State's word
    cause: str = ""  # the release pair of a flip; the refusal's kind of a leg state
    profile: str = ""  # the model profile measured; "" on keys written before profiles were part of them

    @property
    def marker(self) -> str:
        """The body's marker line (an HTML comment: not shown, kept verbatim)."""
        return f"<!-- {MARKER} {json.dumps(asdict(self), sort_keys=True)} -->"

    @property
    def title(self) -> str:
        """``specdec: conclusion changed — claim d on Apple-M1-Max-64GB (mlx, seed): mlx-lm 0.32.2 → 0.33.0``."""
        cause = f": {self.cause}" if self.cause else ""
        leg = f"{self.leg}, {self.profile}" if self.profile else self.leg
        return f"specdec: {self.state} — {self.subject} on {self.machine_class} ({leg}){cause}"

    def same_profile(self, profile: str) -> bool:
        """Whether a night on ``profile`` speaks for this key (a key from before profiles were keyed: any)."""
        return not self.profile or self.profile == profile


def key_in(body: str) -> AlertKey | None:
    """The key of a body's marker line (``None``: no marker, or one that does not parse)."""
    for line in body.splitlines():
        text = line.strip()
        if text.startswith("<!--") and MARKER in text and text.endswith("-->"):
            try:
                fields = json.loads(text[text.index(MARKER) + len(MARKER) : -3])
                if not isinstance(fields, dict):
                    return None
                return AlertKey(**{str(name): str(value) for name, value in fields.items()})
            except (ValueError, TypeError):
                return None
    return None


@dataclass(frozen=True)
class KnownIssue:
    """An issue the gate opened earlier, found again by its key."""

    number: int
    key: AlertKey
    open: bool


def gh_output(gh: str, *args: str) -> str:
    """What ``gh ARGS`` prints; a failure is one line naming the command."""
    done = subprocess.run([gh, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        said = (done.stderr.strip() or done.stdout.strip())[:300]
        raise SpecdecUsageError(f"'gh {' '.join(args[:2])}' failed: {said}")
    return done.stdout


def gh_json(gh: str, *args: str) -> object:
    """What ``gh ARGS`` answers, as JSON; an answer that is not JSON is one line naming the command."""
    said = gh_output(gh, *args)
    try:
        return json.loads(said or "null")
    except json.JSONDecodeError:
        raise SpecdecUsageError(
            f"'gh {' '.join(args[:2])}' answered something that is not JSON: {said[:200]!r}"
        ) from None


STATE_WORDS = frozenset(state.value for state in State)


def known_issues(gh: str) -> dict[AlertKey, KnownIssue]:
    """Every issue carrying the gate's label, open or closed, by key (the newest where two share one)."""
    issues = gh_json(gh, "issue", "list", "--label", LABEL, "--state", "all", "--limit", "1000",
                     "--json", "number,state,body")  # fmt: skip
    found: dict[AlertKey, KnownIssue] = {}
    for issue in sorted(issues if isinstance(issues, list) else [], key=lambda item: int(item.get("number", 0))):
        key = key_in(str(issue.get("body") or ""))
        if key is not None:
            found[key] = KnownIssue(int(issue["number"]), key, str(issue.get("state", "")).upper() == "OPEN")
    return found


def legacy_key(title: str, states: frozenset[str] = STATE_WORDS) -> AlertKey | None:
    """The key of an issue titled as the gate titled them before keys; ``None`` for any other title.

    >>> key = legacy_key("specdec: conclusion changed — claim d on Apple-M1-Max-64GB (mlx)")
    >>> key.subject, key.leg, key.cause
    ('claim d', 'mlx', 'opened before alerts were keyed')
    >>> legacy_key("specdec: please add LM Studio (a user's)") is None
    True
    """
    watchdog = _LEGACY_WATCHDOG.match(title)
    if watchdog is not None:
        return AlertKey("every machine class", "every leg", "the nightly gate", "no night measured",
                        watchdog["workflow"])  # fmt: skip
    found = _LEGACY_TITLE.match(title)
    if found is None or found["state"] not in states:
        return None
    return AlertKey(found["machine_class"], found["leg"], found["subject"], found["state"], LEGACY_CAUSE)


def adopt_legacy(gh: str, states: frozenset[str] = STATE_WORDS) -> dict[AlertKey, KnownIssue]:
    """The gate's open issues from before keys (``pytest-specdec gate adopt-issues``, once after upgrading), each found
    by its title's exact shape and given the label and a marker line, so the nightly verdict finds it by the
    label from then on; a key whose cause is :data:`LEGACY_CAUSE` stands for any cause of its state."""
    issues = gh_json(gh, "issue", "list", "--state", "open", "--limit", "1000", "--json", "number,title,body")
    found: dict[AlertKey, KnownIssue] = {}
    for issue in issues if isinstance(issues, list) else []:
        body = str(issue.get("body") or "")
        key = legacy_key(str(issue.get("title") or ""), states) if key_in(body) is None else None
        if key is None:
            continue
        if not found:
            gh_output(gh, "label", "create", LABEL, "--force", "--color", "B60205",
                      "--description", "opened and closed by the specdec gate")  # fmt: skip
        number = int(issue["number"])
        gh_output(gh, "issue", "edit", str(number), "--add-label", LABEL, "--body", f"{body}\n\n{key.marker}\n")
        found[key] = KnownIssue(number, key, True)
    return found


def raise_alert(gh: str, key: AlertKey, body: str, known: Mapping[AlertKey, KnownIssue]) -> str:
    """Comment on the key's open issue, reopen its closed one (the state returned), or open one; what was done."""
    issue = known.get(key)
    if issue is not None and issue.open:
        gh_output(gh, "issue", "comment", str(issue.number), "--body", body)
        return f"commented on #{issue.number}: {key.title}"
    if issue is not None:
        gh_output(gh, "issue", "reopen", str(issue.number), "--comment", f"It returned.\n\n{body}")
        return f"reopened #{issue.number} (it returned): {key.title}"
    # gh refuses a label the repository lacks ("could not add label"); --force makes this idempotent.
    gh_output(gh, "label", "create", LABEL, "--force", "--color", "B60205",
              "--description", "opened and closed by the specdec gate")  # fmt: skip
    gh_output(gh, "issue", "create", "--title", key.title, "--label", LABEL, "--body", f"{body}\n\n{key.marker}\n")
    return f"opened: {key.title}"


def clear_alert(gh: str, issue: KnownIssue, why: str) -> str:
    """Comment why the key's state has cleared and close its issue; what was done."""
    gh_output(gh, "issue", "close", str(issue.number), "--comment", why)
    return f"closed #{issue.number} (cleared): {issue.key.title}"


def verdicts_payload(run: RunRecord) -> dict[str, object]:
    """The verdict JSON a webhook receives."""
    return {
        "machine_class": run.machine_class,
        "finished": run.finished,
        "comparisons": [
            {
                "nodeid": r.nodeid,
                "backend": r.backend,
                "release": r.release,
                "category": r.category,
                "speedup": r.speedup.estimate,
                "interval": [r.speedup.low, r.speedup.high],
                "verdict": r.judgement.shown,
                "change": r.check.change if r.check else None,
            }
            for r in run.comparisons
        ],
    }


def notify(run: RunRecord, url: str) -> str:
    """POST the verdicts; a webhook that fails is reported, never fatal."""
    import httpx

    try:
        response = httpx.post(url, json=verdicts_payload(run), timeout=30)
    except httpx.HTTPError as error:
        return f"webhook not reached ({error}) — the gate's result stands"
    return f"webhook answered HTTP {response.status_code}"


def run_url() -> str:
    """This GitHub Actions run's page, from the runner's environment."""
    server = os.environ.get("GITHUB_SERVER_URL", "https://github.com")
    return f"{server}/{os.environ.get('GITHUB_REPOSITORY', '?')}/actions/runs/{os.environ.get('GITHUB_RUN_ID', '?')}"
