"""One configuration model for grading (autograder/grading/options.py): each grading setting's flag,
default and meaning are written once, in ``GradeOptions``; the command lines of ``grade`` and ``serve``
are generated from it, the service's worker receives the settings as given, and the README's table is
generated from it."""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest

from autograder.grading.options import (
    GRADING_SETTINGS,
    GradeOptions,
    from_settings_json,
    settings_json,
    settings_table,
)
from autograder.service import worker
from autograder.service.serve import ServeOptions, worker_command

ROOT = Path(__file__).resolve().parents[1]
SETTINGS = {f.name: f for f in fields(GradeOptions) if f.name in GRADING_SETTINGS}


def test_the_readme_table_is_generated():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- grading-settings:[^>]*-->\n(.*?)<!-- /grading-settings -->", text, re.S)
    assert found, "README.md lost its grading-settings block"
    assert found.group(1) == settings_table(), "README's settings table differs: paste settings_table()"


@pytest.mark.parametrize("command", ["grade", "serve"])
def test_grade_and_serve_take_every_grading_setting(command):
    shown = subprocess.run([sys.executable, "-m", "autograder.cli", command, "--help"],
                           capture_output=True, text=True, check=True).stdout
    for f in SETTINGS.values():
        assert f.metadata["flag"] in shown, f"`autograder {command} --help` lacks {f.metadata['flag']}"
    assert "--timeout" in shown and "--device" in shown


def test_no_default_or_flag_is_written_twice():
    """Outside options.py no file spells a grading setting's flag in an add_argument, nor gives one of
    its fields a default of its own (the copies this replaced: 600 and 4.0 in five places)."""
    for path in sorted((ROOT / "autograder").rglob("*.py")):
        if path.name == "options.py" and path.parent.name == "grading":
            continue
        text = path.read_text(encoding="utf-8")
        for name, f in SETTINGS.items():
            flag = f.metadata["flag"]
            assert not re.search(rf"add_argument\(\s*[\"']{re.escape(flag)}[\"']", text), \
                f"{path.relative_to(ROOT)} adds {flag} by hand"
            for value in re.findall(rf"^    {name}\s*:[^=\n,()]*=\s*([^#\n]+?)\s*(?:#|$)", text, re.M):
                assert f.default is None or value not in (repr(f.default), str(f.default)), \
                    f"{path.relative_to(ROOT)} copies {name}'s default {value}"


def test_the_worker_receives_the_settings_as_serve_was_given_them(tmp_path):
    given = {"timeout": 7.0, "device": "cpu", "allow_cpu": True, "workers": 3}
    command = worker_command(ServeOptions(grading=given), tmp_path, tmp_path / "state", "sqlite://")
    assert command[1:3] == ["-m", "autograder.service.worker"]
    args = worker.command_line().parse_args(command[3:])
    options = GradeOptions.of(**args.grading)
    assert (options.timeout, options.device, options.allow_cpu, options.workers) == (7.0, "cpu", True, 3)
    assert (options.notebook_timeout, options.memory_limit_gb) == (
        SETTINGS["notebook_timeout"].default, SETTINGS["memory_limit_gb"].default)


def test_a_wrong_setting_is_refused_before_it_reaches_the_worker():
    with pytest.raises(TypeError, match="'color' is not a grading setting"):
        settings_json({"color": "red"})
    with pytest.raises(Exception, match="--device must be auto, cpu or cuda"):
        settings_json({"device": "tpu"})
    with pytest.raises(TypeError, match="'force' is not a grading setting"):
        from_settings_json('{"force": true}')
