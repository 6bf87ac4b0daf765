"""What a grading run pays once instead of once per notebook (``make bench``; README "Speed").

- the templates' warm-up (``shell.warm_up``): the first traceback's imports and tables are made before
  the fork, with no shell and no thread left behind;
- the grading parent never imports torch (the checker's template and the sandbox do): reading the
  course's ``nbgrader_config.py`` loads ``autograder.hidden._feedback``, not the hidden checks;
- nbgrader's metadata checks see a ``jsonschema`` that checks nbgrader's schema once, with the same
  verdicts as ``jsonschema.validate``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import nbformat
import pytest
from conftest import ROOT

INSIDE = ROOT / "autograder" / "sandbox" / "inside"

WARM = f"""
import json, sys, threading, gc
sys.path.insert(0, {str(INSIDE)!r})
import shell
shell.warm_up()
import pygments.lexer
from IPython.core.interactiveshell import InteractiveShell
ready = sorted(c.__name__ for c in gc.get_objects()
               if isinstance(c, pygments.lexer.RegexLexerMeta) and "_tokens" in c.__dict__)
print(json.dumps({{"threads": threading.active_count(), "shell": InteractiveShell.initialized(),
                  "ready": ready, "stack_data": "stack_data" in sys.modules}}))
"""


def test_the_warm_up_readies_a_traceback_and_leaves_no_shell_or_thread():
    result = subprocess.run([sys.executable, "-I", "-c", WARM], capture_output=True, text=True,
                            timeout=120, check=True)
    found = json.loads(result.stdout.strip().splitlines()[-1])
    assert found["threads"] == 1  # a forked child must be able to start its own
    assert found["shell"] is False  # each notebook's process makes its own shell
    assert "PythonLexer" in found["ready"] and found["stack_data"]


def test_both_templates_warm_up():
    warm = (ROOT / "autograder/grading/execute/warm.py").read_text(encoding="utf-8")
    template = (INSIDE / "template.py").read_text(encoding="utf-8")
    assert "shell.warm_up()" in warm and "shell.warm_up()" in template


def test_reading_the_course_config_imports_no_torch(tmp_path):
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
              "from autograder.course.nbgrader import load_course\n"
              f"load_course({str(ROOT)!r})\n"
              "import autograder.grading.local, autograder.grading.pipeline\n"
              "print('torch' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120, check=True, cwd=tmp_path)
    assert result.stdout.strip().splitlines()[-1] == "False"


def test_the_hidden_package_still_offers_every_name():
    import autograder.hidden as hidden
    from autograder.hidden import _base, _gpu

    for name in hidden.__all__:
        assert getattr(hidden, name) is getattr(_base if hasattr(_base, name) else _gpu, name)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        hidden.nothing  # noqa: B018


BAD_METADATA = [
    {"schema_version": 3, "grade": True, "solution": False, "locked": False, "points": "ten"},
    {"schema_version": 3, "grade": True, "solution": False, "locked": False},
    {"schema_version": 3, "grade": "yes", "solution": False, "locked": False, "grade_id": "a"},
    {"schema_version": 3, "grade": True, "solution": False, "locked": False, "grade_id": "a",
     "points": -1, "extra": 1},
]


@pytest.mark.parametrize("metadata", BAD_METADATA)
def test_the_schema_checked_once_gives_jsonschemas_verdict(metadata):
    from nbgrader.nbgraderformat.v3 import MetadataValidatorV3

    from autograder.grading import nbgrader_seam

    schema = MetadataValidatorV3().schema
    try:
        jsonschema.validate(metadata, schema)
        expected = None
    except jsonschema.ValidationError as error:
        expected = (error.message, list(error.path))
    try:
        nbgrader_seam._SchemaCheckedOnce.validate(metadata, schema)
        got = None
    except jsonschema.ValidationError as error:
        got = (error.message, list(error.path))
    assert got == expected


def test_nbgraders_checks_in_a_run_check_the_schema_once(monkeypatch):
    """Every cell of every notebook is validated; the schema itself is checked once."""
    from nbgrader.preprocessors import CheckCellMetadata
    from traitlets.config import Config

    from autograder.grading import nbgrader_seam

    checked: list[object] = []
    real = jsonschema.Draft4Validator.check_schema
    monkeypatch.setattr(jsonschema.Draft4Validator, "check_schema",
                        classmethod(lambda cls, schema, **kw: (checked.append(schema),
                                                               real(schema, **kw))[1]))
    nbgrader_seam._validator.cache_clear()
    source = ROOT / "exercises" / "01_strides" / "01_strides.ipynb"
    steps = nbgrader_seam.AutogradeSteps(sanitize=(CheckCellMetadata,), after_execute=(),
                                         config=Config(), converter=None)  # type: ignore[arg-type]
    import logging

    for _ in range(3):
        steps.run((CheckCellMetadata,), nbformat.read(source, as_version=4), {},
                  logging.getLogger("test"))
    graded = sum("nbgrader" in c.metadata for c in nbformat.read(source, as_version=4).cells)
    assert graded > 3 and len(checked) == 1
