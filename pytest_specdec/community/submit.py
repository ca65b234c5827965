"""``pytest-specdec submit``'s work: a results file as submissions, stripped of whatever names the person or machine.

What a submission keeps is chosen field by field (:func:`submissions_of`): the comparison as
the results file has it, the machine's chip, memory, OS and Python, the command that ran it.
pytest-benchmark's machine and commit info (host name, working folder, branch) are left out
whole. Every free-text and path field that remains (the command, notes, device, model names,
messages, scope values: :func:`free_text`) is then scrubbed (:func:`scrub`): the home folder
becomes ``~``, any ``/Users/<name>`` or ``/home/<name>`` folder too, the user's name
``<user>``, the host's names ``<host>``, a server's address other than this machine's own
``<server>`` (and a URL's user and password go); model paths keep only their last part.
Identifiers (machine class, backend, arm and axis names, versions) are never rewritten: they
are the project's own words, and a user called ``max`` must not turn ``Apple-M1-Max-64GB``
into something else. :func:`leaks` is the final word on the same fields, whole words as
:func:`scrub` finds them (and the home folder anywhere): a submission in which any is still
found is never written.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, is_dataclass, replace
from pathlib import PurePath
from typing import Any
from urllib.parse import urlencode

from pytest_specdec.store.records import MEMORY_KEY, ComparisonRecord, RunRecord
from pytest_specdec.store.submissions import SUBMISSION_KIND, SUBMISSION_SCHEMA, Submission, SubmittedMachine

USER_FOLDER = re.compile(r"(?:/Users|/home|[A-Za-z]:\\Users)[/\\][^/\\\s'\"]+")
URL_HOST = re.compile(r"(?P<scheme>\b[a-z][a-z0-9+.-]*://)(?:[^@/\s]*@)?(?P<host>\[[^\]]*\]|[^/:\s'\"]+)")
SERVER_HOST = re.compile(r"(?P<said>\bserver: )(?:[a-z][a-z0-9+.-]*://)?(?:[^@/\s]*@)?(?P<host>\[[^\]]*\]|[^/:\s'\"]+)")
LOOPBACK = {"localhost", "127.0.0.1", "[::1]", "::1", "0.0.0.0"}
MIN_NAME = 2  # a one-letter user or host name names no one: it is not searched (it would rewrite every "a")
ISSUE_URL_LIMIT = 7500  # GitHub answers 414 above about 8 kB of URL: the body is cut to fit


@dataclass(frozen=True)
class Private:
    """What must not leave the machine: the home folder, the user's name, the host's names."""

    home: str
    user: str
    hosts: tuple[str, ...]

    @classmethod
    def here(cls, *more_hosts: str) -> Private:
        """This machine's (and the results file's own host name, where it kept one)."""
        import getpass
        import os
        import socket
        from pathlib import Path

        hosts = {socket.gethostname(), socket.gethostname().split(".")[0], *more_hosts}
        return cls(
            str(Path.home()), getpass.getuser() or os.environ.get("USER", ""), tuple(sorted(h for h in hosts if h))
        )

    @property
    def words(self) -> tuple[str, ...]:
        """The strings searched for: the home folder, the user's and host's names."""
        return tuple(w for w in (self.home, self.user, *self.hosts) if w and w != "/")


def scrub(text: str, private: Private) -> str:
    """``text`` with the home folder as ``~``, other users' folders as ``~``, the user's name as ``<user>``
    and host names as ``<host>``.

    >>> scrub("/home/ada/models/x.gguf on ada-mbp, as ada", Private("/home/ada", "ada", ("ada-mbp",)))
    '~/models/x.gguf on <host>, as <user>'
    >>> scrub("plain_url=http://ada:pw@studio.lan:1234/v1 and http://127.0.0.1:8080", Private("/h", "", ()))
    'plain_url=http://<server>:1234/v1 and http://127.0.0.1:8080'
    """
    if private.home and private.home != "/":
        text = text.replace(private.home, "~")
    text = USER_FOLDER.sub("~", text)
    text = URL_HOST.sub(lambda m: m["scheme"] + _host(m["host"]), text)
    text = SERVER_HOST.sub(lambda m: m["said"] + _host(m["host"]), text)
    for host in sorted((h for h in private.hosts if len(h) >= MIN_NAME), key=len, reverse=True):
        text = _word(host).sub("<host>", text)
    return _word(private.user).sub("<user>", text) if len(private.user) >= MIN_NAME else text


def _host(host: str) -> str:
    """A server's host as shared: this machine's own loopback as it is, any other as ``<server>``."""
    return host if host.lower() in LOOPBACK or host.startswith("127.") else "<server>"


def remote_server(device: str) -> str | None:
    """The host of the server a comparison's ``device`` names when it is not this machine (``None``: this
    machine's own, or in-process).

    >>> remote_server("server: http://192.168.1.9:11434"), remote_server("server: http://127.0.0.1:11434")
    ('192.168.1.9', None)
    """
    found = SERVER_HOST.search(device)
    return None if found is None or _host(found["host"]) != "<server>" else found["host"]


def _word(name: str) -> re.Pattern[str]:
    return re.compile(rf"(?<![A-Za-z0-9]){re.escape(name)}(?![A-Za-z0-9])", re.IGNORECASE)


def leaks(texts: Iterable[str], private: Private, *, anywhere: Iterable[str] = ()) -> list[str]:
    """Which private words are still in ``texts`` (whole words, case-insensitive, as :func:`scrub` finds them), and
    whether the home folder is anywhere in ``anywhere`` too: empty for a submission that may be shared.

    >>> leaks(["by Ada"], Private("/home/ada", "ada", ()))
    ['ada']
    >>> leaks(["Apple-M1-<user>"], Private("/home/max", "max", ()), anywhere=["Apple-M1-Max-64GB"])
    []
    """
    words = [w for w in (private.user, *private.hosts) if len(w) >= MIN_NAME]
    found = [w for w in words if any(_word(w).search(text) for text in texts)]
    home = private.home if private.home and private.home != "/" else ""
    return found + ([home] if home and any(home in text for text in [*texts, *anywhere]) else [])


def free_text(submission: Submission) -> list[str]:
    """Every free-text or path value of a submission: what :func:`scrub` rewrites and :func:`leaks` searches."""
    c = submission.comparison
    texts = [submission.command, c.nodeid, c.device, c.target, c.draft or "", c.claim_quote or "", *c.notes]
    texts += [c.judgement.failure or "", c.judgement.warning or "", *c.scope.values()]
    texts += [c.check.message] if c.check is not None else []
    texts += [c.theory.text, c.theory.cause] if c.theory is not None else []
    return texts


def machine_of(run: RunRecord) -> SubmittedMachine:
    """The machine of a results file, from what it kept (pytest-benchmark's machine info and the machine class).

    >>> machine_of(RunRecord("Apple-M1-Max-64GB", "", "", (), machine_info={"cpu": {"brand_raw": "Apple M1 Max"},
    ...     "system": "Darwin", "release": "24.1.0", "machine": "arm64", "python_version": "3.12.7"})).memory_gb
    64
    """
    info = run.machine_info
    found = info.get("cpu")
    cpu: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    in_class = re.search(r"-(\d+)GB$", run.machine_class)  # a Mac's class names its memory; a Linux one does not
    kept = info.get(MEMORY_KEY)
    memory = int(in_class.group(1)) if in_class else round(kept / 2**30) if isinstance(kept, int | float) else None
    return SubmittedMachine(
        machine_class=run.machine_class,
        chip=str(cpu.get("brand_raw") or run.machine_class),
        memory_gb=memory or None,
        os=" ".join(str(info[k]) for k in ("system", "release") if info.get(k)) or "unknown",
        arch=str(info.get("machine") or "unknown"),
        python=str(info.get("python_version") or "unknown"),
    )


def _model_name(name: str | None) -> str | None:
    """A model as its last path part (``/Users/ada/models/q.gguf`` → ``q.gguf``); a registry name as it is."""
    if name is None or ("/" not in name and "\\" not in name):
        return name
    if name.startswith(("/", "~", ".")) or re.match(r"^[A-Za-z]:\\", name):
        return PurePath(name.replace("\\", "/")).name
    return name  # an org/name model id (Hugging Face, Ollama): not a path


def submittable(record: ComparisonRecord) -> str | None:
    """Why a comparison cannot be submitted (``None``: it can): a result needs its pairs and their counts, and it
    must have run on this machine (a server elsewhere has another chip)."""
    remote = remote_server(record.device)
    if remote is not None:
        return f"measured on a server at {remote}, not on this machine: its chip is not this machine's"
    if record.judgement.conclusion.says_nothing_about_speed:
        return f"{record.judgement.conclusion.value}: no speedup to share"
    if len(record.samples) < 2:
        return "fewer than two pairs (a published figure, or a run cut short)"
    if any(s.decode_tokens is None for s in record.samples):
        return "its pairs have no token counts (measured by a pytest-specdec before 0.1's submit; measure again)"
    return None


def submissions_of(run: RunRecord, private: Private, submitted: str) -> tuple[list[Submission], list[str]]:
    """One submission per comparison that can be shared, and one line for each left out."""
    machine = machine_of(run)
    command = shlex.join(run.command) if run.command else "(not kept: measured before pytest-specdec kept the command)"
    made, skipped = [], []
    for record in run.comparisons:
        why = submittable(record)
        if why is not None:
            skipped.append(f"{record.nodeid} [{record.category}]: {why}")
            continue
        named = replace(record, target=_model_name(record.target) or record.target, draft=_model_name(record.draft))
        submission = Submission(
            SUBMISSION_KIND, SUBMISSION_SCHEMA, run.specdec_version or "unknown", submitted, command, machine, named
        )
        made.append(_scrubbed(submission, private))
    return made, skipped


def _scrubbed(submission: Submission, private: Private) -> Submission:
    """The submission with every :func:`free_text` field scrubbed; identifiers as they are."""

    def clean(text: str) -> str:
        return scrub(text, private)

    c = submission.comparison
    judgement = replace(
        c.judgement,
        failure=clean(c.judgement.failure) if c.judgement.failure else c.judgement.failure,
        warning=clean(c.judgement.warning) if c.judgement.warning else c.judgement.warning,
    )
    record = replace(
        c,
        nodeid=clean(c.nodeid),
        device=clean(c.device),
        target=clean(c.target),
        draft=clean(c.draft) if c.draft else c.draft,
        claim_quote=clean(c.claim_quote) if c.claim_quote else c.claim_quote,
        notes=tuple(map(clean, c.notes)),
        scope={key: clean(value) for key, value in c.scope.items()},
        judgement=judgement,
        check=replace(c.check, message=clean(c.check.message)) if c.check is not None else None,
        theory=replace(c.theory, text=clean(c.theory.text), cause=clean(c.theory.cause)) if c.theory else None,
    )
    return replace(submission, command=clean(submission.command), comparison=record)


def field_names(value: object, prefix: str = "") -> list[str]:
    """Every field a submission includes, dotted (``comparison.samples[].drafted``), in file order.

    >>> field_names(SubmittedMachine("c", "chip", 8, "os", "arm64", "3.12"))[:3]
    ['machine_class', 'chip', 'memory_gb']
    """
    if is_dataclass(value) and not isinstance(value, type):
        names: list[str] = []
        for f in fields(value):
            inner = getattr(value, f.name)
            names.append(prefix + f.name)
            names += field_names(inner, f"{prefix}{f.name}.")
        return names
    if isinstance(value, tuple | list) and value and is_dataclass(value[0]):
        return field_names(value[0], prefix.rstrip(".") + "[].")
    return []


def markdown(submission: Submission) -> str:
    """The submission as a Markdown summary: what ran where, the verdict, and how to check the file."""
    c, m = submission.comparison, submission.machine
    s = c.speedup
    acceptance = f"{c.acceptance.estimate:.0%}" if c.acceptance is not None else "not counted"
    drafted = sum(x.drafted or 0 for x in c.samples)
    accepted = sum(x.accepted or 0 for x in c.samples)
    models = c.target + (f" + draft {c.draft}" if c.draft else "")
    return "\n".join(
        [
            f"## SD on {m.chip}" + (f" ({m.memory_gb} GB)" if m.memory_gb else "") + f": {c.backend} {c.release}",
            "",
            f"- **Speedup**: {s.estimate:.2f}x [{s.low:.2f}, {s.high:.2f}] at {s.confidence:.0%} — "
            f"**{c.judgement.shown}** ({c.claim_id or c.nodeid.split('::')[-1]}, {c.category})",
            f"- **Pairs**: {len(c.samples)} paired, interleaved; drafted {drafted}, accepted {accepted} "
            f"(acceptance {acceptance}); lossless check: {c.design.observed.lossless_check or 'not recorded'}",
            f"- **Models**: {models} (digest `{c.model_digest}`)",
            f"- **Machine**: `{m.machine_class}`, {m.os}, {m.arch}, "
            + (f"{m.memory_gb} GB memory" if m.memory_gb else "memory not recorded by this results file")
            + f", Python {m.python}",
            f"- **Command**: `{submission.command}`",
            f"- **File**: `{submission.relative_path.as_posix()}` — check it with `pytest-specdec validate FILE`",
            "",
            "Submitted, not reproduced: the file is checked for consistency, not for having been measured.",
        ]
    )


def issue_url(submissions: Iterable[Submission], repository: str) -> str:
    """A prefilled new-issue URL on ``repository`` (``owner/name``) carrying the summaries (cut to fit a URL).

    >>> issue_url([], "o/n").startswith("https://github.com/o/n/issues/new?")
    True
    """
    shown = list(submissions)
    chips = sorted({s.machine.chip for s in shown}) or ["a Mac"]
    title = f"Submitted result: SD on {', '.join(chips)} ({len(shown)} comparison(s))"
    body = "\n\n".join(markdown(s) for s in shown)
    body += "\n\nThe submission files are attached (or in a pull request): `pytest-specdec validate` reads them."
    base = f"https://github.com/{repository}/issues/new?"
    cut = "\n\n(cut to fit a URL: the files hold it all)"
    while len(base + urlencode({"title": title, "body": body, "labels": "submission"})) > ISSUE_URL_LIMIT:
        body = body.removesuffix(cut)
        body = body[: int(len(body) * 0.9)].rsplit("\n", 1)[0] + cut
    return base + urlencode({"title": title, "body": body, "labels": "submission"})
