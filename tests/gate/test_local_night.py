"""``pytest-specdec gate try``'s parts that need no act: what it refuses, in one line, before anything runs."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_specdec.cli import main
from pytest_specdec.errors import SpecdecUsageError
from pytest_specdec.gate import local_night
from pytest_specdec.gate.local_night import act_command, stand_in_actions

STANDINS = Path(local_night.__file__).with_name("standins")
CHECKOUT = "actions/checkout@" + "1" * 40


def test_each_pinned_action_of_the_night_maps_to_its_stand_in_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    (tmp_path / "night.yml").write_text(f"steps:\n  - uses: {CHECKOUT} # v4\n  - uses: ./.github/workflows/leg.yml\n")
    (tmp_path / "leg.yml").write_text("steps:\n  - uses: actions/upload-artifact@" + "2" * 40 + "\n")
    (tmp_path / "ci.yml").write_text("steps:\n  - uses: actions/setup-python@" + "4" * 40 + "\n")  # not the night's
    mapped = stand_in_actions(tmp_path, "night.yml", STANDINS)
    assert mapped == ["--local-repository", f"{CHECKOUT}={STANDINS}",
                      "--local-repository", f"actions/upload-artifact@{'2' * 40}={STANDINS / 'upload-artifact'}"]  # fmt: skip
    (tmp_path / "leg.yml").write_text("steps:\n  - uses: actions/cache@" + "3" * 40 + "\n")
    with pytest.raises(SpecdecUsageError, match=r"^actions/cache has no stand-in for a local night"):
        stand_in_actions(tmp_path, "night.yml", STANDINS)
    (tmp_path / "leg.yml").write_text("steps:\n  - uses: someone/deploy@v2\n")  # a tag: it would be fetched
    with pytest.raises(SpecdecUsageError, match=r"^someone/deploy@v2 has no stand-in for a local night"):
        stand_in_actions(tmp_path, "night.yml", STANDINS)


def test_every_label_and_the_hosted_image_run_on_this_host() -> None:
    command = act_command("act", "specdec-gate.yml", {"leg": "all"}, ["self-hosted", "Linux"], [],
                          environment={"A": "1"})  # fmt: skip
    assert command == ["act", "workflow_dispatch", "-W", ".github/workflows/specdec-gate.yml",
                       "-P", "self-hosted=-self-hosted", "-P", "Linux=-self-hosted", "-P", "ubuntu-24.04=-self-hosted",
                       "--input", "leg=all", "--env", "A=1"]  # fmt: skip


def test_try_without_the_workflows_or_without_act_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert main(["gate", "try"]) == 2
    assert ".github/workflows/specdec-gate.yml is not here — run 'pytest-specdec gate init --write'" in (
        capsys.readouterr().err
    )
    assert main(["gate", "init", "--workflows"]) == 0
    assert main(["gate", "try"]) == 2
    assert "is not a git checkout — gate try runs a clone of it" in capsys.readouterr().err
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    monkeypatch.setattr(local_night.sys, "executable", str(tmp_path / "python"))  # no act beside it
    monkeypatch.setattr(local_night.shutil, "which", lambda name: None)
    assert main(["gate", "try"]) == 2
    assert local_night.NO_ACT in capsys.readouterr().err


def test_the_throwaway_clone_is_the_work_tree_as_it_is(tmp_path: Path) -> None:
    """Uncommitted edits and untracked files copied, a symbolic link kept a link, a deleted file deleted; ignored
    files left out."""
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / ".gitignore").write_text("*.log\n")
    (repo / "kept.py").write_text("committed\n")
    (repo / "gone.py").write_text("committed, then deleted\n")
    (repo / "staged.py").write_text("committed, then git rm\n")
    (repo / "folder").mkdir()
    (repo / "folder" / "inside.py").write_text("committed in a folder\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run([*git, "add", "-A"], cwd=repo, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "one"], cwd=repo, check=True)
    (repo / "kept.py").write_text("edited\n")
    (repo / "gone.py").unlink()
    subprocess.run(["git", "rm", "-q", "staged.py"], cwd=repo, check=True)  # a deletion staged, not committed
    shutil.rmtree(repo / "folder")
    (repo / "folder").symlink_to("kept.py")  # a folder replaced by a link
    (repo / "new.py").write_text("untracked\n")
    (repo / "link.py").symlink_to("kept.py")
    (repo / "noise.log").write_text("ignored\n")
    clone = local_night.throwaway_clone(repo, tmp_path / "night")
    assert (clone / "kept.py").read_text() == "edited\n"
    assert (clone / "new.py").read_text() == "untracked\n"
    assert not (clone / "gone.py").exists(), "deleted in the work tree: deleted in the clone"
    assert (clone / "link.py").is_symlink()
    assert str((clone / "link.py").readlink()) == "kept.py"
    assert not (clone / "noise.log").exists()
    assert not (clone / "staged.py").exists(), "a staged deletion too"
    assert (clone / "folder").is_symlink(), "the link in the folder's place, not inside it"
