"""The course manifest (``course.toml``) is the one list of chapters, exercises and languages.

- ``_toc.yml`` is generated from it, and every list the code keeps is read from it (exercise names,
  GPU checks, the warm template's imports, the languages and their tags);
- every exercise it names has its files, its hidden module really is the one its grade cells import,
  its GPU checks are the ``*_gpu`` calls of its source, and its chapter links to it;
- a malformed manifest is refused with the entry named;
- ``autograder new-exercise`` (in a copy of the course, package included) writes an exercise that
  releases, grades (the reference full marks, the catalogue's wrong one nothing) and is in the outline.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from nbgrader.api import Gradebook

from autograder import i18n
from autograder.course import manifest, source
from autograder.course.manifest import ManifestError, parse
from autograder.tools import gpu_check

ROOT = Path(__file__).resolve().parents[1]
COURSE = manifest.load(ROOT)


def test_the_outline_is_generated_from_the_manifest():
    assert (ROOT / "_toc.yml").read_text(encoding="utf-8") == manifest.outline_yaml(COURSE), \
        "_toc.yml differs from course.toml: run `autograder outline`"
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    exercises = next(part for part in toc["parts"] if part["caption"] == "Exercises")
    assert [c["file"] for c in exercises["chapters"]] == [e.docname for e in COURSE.exercises]


def test_the_codes_lists_are_the_manifests():
    assert source.ASSIGNMENTS == COURSE.assignments
    assert source.EDITION_TAGS == tuple(language.tag for language in COURSE.languages)
    assert list(i18n.LANGUAGES) == [language.gettext for language in COURSE.languages]
    assert [(c.assignment, c.function, c.target) for c in gpu_check.GPU_CHECKS] == [
        (e.name, c.function, c.target) for e in COURSE.exercises for c in e.gpu_checks]


def test_no_other_file_keeps_its_own_list():
    """The exercise and language lists live in course.toml only: no tuple of exercise names in the
    package, no language in the Makefile or _config.yml, no hidden module imported by name."""
    names = "|".join(map(re.escape, COURSE.assignments))
    samples_not_lists = {"demo.py"}  # the demo's two exercises are a choice, not the course's list
    for path in sorted((ROOT / "autograder").rglob("*.py")):
        if path.name in samples_not_lists:
            continue
        text = path.read_text(encoding="utf-8")
        listed = re.findall(rf'"(?:{names})",\s*"(?:{names})"', text)
        assert not listed, f"{path.relative_to(ROOT)} lists exercises: {listed}"
    warm = (ROOT / "autograder/grading/execute/warm.py").read_text(encoding="utf-8")
    assert not [e.hidden for e in COURSE.exercises if f"autograder.hidden.{e.hidden}" in warm]
    for name in ("Makefile", "_config.yml"):
        lines = (ROOT / name).read_text(encoding="utf-8").splitlines()
        text = "\n".join(re.sub(r"(^|\s)#.*", "", line) for line in lines)  # comments may name them
        for language in COURSE.languages:
            assert not re.search(rf"\b({language.gettext}|{language.tag}|{language.folder}/)", text), \
                f"{name} names the {language.tag} edition: it is course.toml's"


@pytest.mark.parametrize("exercise", COURSE.exercises, ids=lambda e: e.name)
def test_every_exercise_has_its_files_and_its_chapter_links_to_it(exercise):
    assert source.source_path(exercise.name, course_root=ROOT).is_file()
    assert (ROOT / "autograder" / "hidden" / f"{exercise.hidden}.py").is_file()
    assert (ROOT / "catalogue" / f"{exercise.name}.py").is_file()
    for language in COURSE.languages:
        assert (ROOT / "locales" / language.gettext / "exercises" / f"{exercise.name}.po").is_file()
    calls = gpu_check.hidden_calls(exercise.name, ROOT)
    assert calls and {c.module for c in calls} == {exercise.hidden}, \
        f"{exercise.name}'s grade cells import {sorted({c.module for c in calls})}, not {exercise.hidden}"
    assert sorted((c.function, c.target) for c in calls if c.gpu) == \
        sorted((c.function, c.target) for c in exercise.gpu_checks)
    chapter = (ROOT / f"{exercise.chapter}.md").read_text(encoding="utf-8")
    assert exercise.docname in chapter, f"{exercise.chapter} does not link to {exercise.docname}"


def test_every_exercise_folder_is_in_the_manifest():
    folders = sorted(p.parent.name for p in (ROOT / source.SOURCE_DIR).glob("*/*.py")
                     if p.stem == p.parent.name)
    assert folders == sorted(COURSE.assignments)


GOOD = (ROOT / "course.toml").read_text(encoding="utf-8")


@pytest.mark.parametrize("change, message", [
    (lambda t: t.replace('name = "03_flops"', 'name = "3_flops"'), "name = '3_flops' does not match"),
    (lambda t: t.replace('name = "03_flops"', 'name = "01_strides"'), "exercise name used twice: 01_strides"),
    (lambda t: t.replace('hidden = "flops"', 'hidden = "strides"'), "hidden module used twice: strides"),
    (lambda t: t.replace('chapter = "chapters/06_gradients_backward_flops"', 'chapter = "chapters/99_x"'),
     "03_flops: chapter 'chapters/99_x' is not in [outline] chapters"),
    (lambda t: t.replace('function = "check_adagrad_gpu"', 'function = "check_adagrad"'),
     "(04_adagrad) gpu_checks[0]: function = 'check_adagrad'"),
    (lambda t: t.replace('hidden = "flops"', 'hidden = "flops"\ngpu = true'), "(03_flops): unknown keys ['gpu']"),
    (lambda t: t.replace("[outline]", "[outlines]"), "needs an [outline] table"),
    (lambda t: t + "\n[[language]]\n", "[[language]] #2: 'gettext' must be a non-empty string"),
    (lambda t: t + "[", "not valid TOML"),
])
def test_a_malformed_manifest_is_refused_with_the_entry_named(change, message):
    with pytest.raises(ManifestError) as raised:
        parse(change(GOOD), "course.toml")
    assert str(raised.value).startswith("course.toml") and message in str(raised.value), str(raised.value)


def _course_copy(destination: Path) -> Path:
    """The course's tracked files (the autograder package included) under ``destination``."""
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, files.decode().split("\0")):
        if (ROOT / name).is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            (destination / name).write_bytes((ROOT / name).read_bytes())
    return destination


def _in_copy(copy: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(copy)}  # the copy's package, so its course.toml
    result = subprocess.run([sys.executable, *args], cwd=copy, env=env, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, f"{args}:\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


def test_new_exercise_releases_grades_and_is_in_the_outline(tmp_path):
    copy = _course_copy(tmp_path / "course")
    made = _in_copy(copy, "-m", "autograder.cli", "new-exercise", "07_numel",
                    "--chapter", "chapters/05_compute_accounting", "--title", "counting elements")
    assert "autograder release 07_numel" in made.stdout
    copied = manifest.load(copy)
    assert copied.assignments[-1] == "07_numel" and copied.exercise("07_numel").hidden == "numel"
    toc = yaml.safe_load((copy / "_toc.yml").read_text(encoding="utf-8"))
    assert "exercises/07_numel/07_numel" in [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert (copy / "locales/zh_TW/exercises/07_numel.po").is_file()
    again = subprocess.run([sys.executable, "-m", "autograder.cli", "new-exercise", "07_numel"], cwd=copy,
                           env={**os.environ, "PYTHONPATH": str(copy)}, capture_output=True, text=True)
    assert again.returncode == 1 and "already has exercise 07_numel" in again.stderr

    _in_copy(copy, "-m", "autograder.cli", "release", "07_numel")
    assert (copy / "exercises/07_numel/07_numel.ipynb").is_file()
    assert (copy / "exercises/07_numel/07_numel.zh-TW.ipynb").is_file()
    _in_copy(copy, "-c", "from pathlib import Path; from autograder.authoring import samples; "
                         "samples.write_catalogue_submissions('07_numel', course_root=Path('.'))")
    _in_copy(copy, "-m", "autograder.cli", "grade", "07_numel", "--allow-cpu", "--no-progress")
    with Gradebook(f"sqlite:///{copy / 'gradebook.db'}") as gb:
        scores = {s.student.id: s.score for s in gb.assignment_submissions("07_numel")}
    assert scores == {"reference": 2.0, "wrong-sums_the_sizes": 0.0, "correct-math_prod": 2.0}, scores
