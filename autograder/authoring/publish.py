"""The student edition: what students see, written as a folder ready to be its own public repository.

    autograder publish DEST              (make publish DEST=...; default _build/student-edition)

    course repository (private) --autograder publish--> DEST = student repository (public: site + hub)

The edition holds the landing page, the lecture pages (``chapters/``, with what they import), the
released exercise notebooks (``exercises/``, each language's edition beside the English one), each
translated edition's generated book (``zh-tw/``: ``autograder.i18n.pages``), the references, the site's ``_toc.yml``, its Sphinx
extensions (``_ext/``, needed by the build) and generated files: a ``_config.yml`` without the
instructor-only exclude patterns, a student ``README.md``, ``requirements-student.txt`` (the packages
the exercises, the lecture pages and a hub image need), ``requirements-site.txt`` (those plus the book's),
a ``.gitignore``, a GitHub Pages workflow and the marker ``.student-edition.json`` (the manifest of
every file written). No ``solutions/``, ``autograder/``, tests, catalogue, gradebook or instructor tooling.

The student repository is named in ONE place: ``repository:`` (``url``, ``branch``) in the course's
``_config.yml``. The repository button, the issues button and the launch buttons (JupyterHub via
nbgitpuller, Colab) are built from it, on the site built from the course repository and on the
edition's own build alike, so no page ever names the course repository. Publishing refuses a
``repository.url`` that is one of the course repository's own git remotes.

Publishing writes the edition into a staging folder, runs the leak check (``autograder.authoring.leaks``) on it
with the course's remote URLs as forbidden text, and on the translation catalogues
(``find_translation_leaks``), and only then updates DEST: files whose bytes changed are rewritten,
files of the earlier edition that are gone are removed, nothing carries a timestamp, so an unchanged
course leaves DEST byte-identical. DEST must be missing, empty (a ``.git`` folder aside)
or an earlier edition (its marker lists every file; ``.git``, ``_build`` and Python/Jupyter caches
may sit beside them).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from string import Template
from urllib.parse import quote

import yaml

from autograder.authoring.leaks import INSTRUCTOR_ONLY_NAMES, find_leaks, find_translation_leaks
from autograder.course import manifest
from autograder.errors import PublishError
from autograder.i18n import LANGUAGES
from autograder.i18n.pages import book_files

MARKER = ".student-edition.json"
# Copied from the course root as they are (folders recursively); the first four must exist.
REQUIRED = ("intro.md", "_toc.yml", "chapters", "exercises")
OPTIONAL = ("references.md", "references.bib", "_ext", "figures", "data")
SKIPPED_NAMES = frozenset({"__pycache__", ".ipynb_checkpoints", ".DS_Store"})
# In an earlier edition these may sit beside the manifest's files (a clone, a local build, caches).
TOLERATED_IN_EDITION = frozenset({".git", "_build", "__pycache__", ".ipynb_checkpoints"})
# _config.yml exclude patterns that name instructor-only paths (absent from the edition).
INSTRUCTOR_EXCLUDES = INSTRUCTOR_ONLY_NAMES | {"release", "source", "test-artifacts", "CHANGELOG.md"}

# What the exercises and lecture pages import, plus what opens them (JupyterLab, jupytext for the
# MyST pages, nbgrader's Validate and assignment list, nbgitpuller for the hub button). Pinned from
# requirements.lock; nbgitpuller is not in the lock (the course machine never runs a hub).
STUDENT_PACKAGES = ("torch", "numpy", "einops", "jaxtyping", "beartype", "matplotlib", "ipykernel",
                    "jupyterlab", "jupytext", "nbgrader")
STUDENT_UNPINNED = {"nbgitpuller": "nbgitpuller>=1.2"}
SITE_PACKAGES = ("jupyter-book", "sphinxcontrib-bibtex", "django-static-mathjax", "jieba")
ENGLISH_BUILD = "jupyter-book build . -W --keep-going"
# Each translated edition is a generated book in its own folder (zh-tw/), built after the English one
# (its pages are answered by the English build's execution cache) into _build/html/<folder>/.
BUILD_COMMAND = " && ".join([ENGLISH_BUILD] + [
    f"jupyter-book build {info['folder']} --path-output _build/{info['folder']} -W --keep-going && "
    f"cp -r _build/{info['folder']}/_build/html _build/html/{info['folder']}"
    for info in LANGUAGES.values()])


@dataclass
class PublishResult:
    """What ``publish`` did: every file of the edition, those it (re)wrote and those it removed."""

    destination: Path
    files: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def publish(*, destination: Path, course_root: Path = Path("."),
            instructor_urls: Sequence[str] | None = None) -> PublishResult:
    """Write the student edition of the course at ``course_root`` into ``destination``.

    ``instructor_urls``: URLs that name the course (instructor) repository and must appear nowhere
    in the edition (default: the course repository's git remotes). Raises PublishError on a leak, on
    a destination that holds anything but an earlier edition, or on a missing student repository.
    """
    root = Path(course_root).resolve()
    destination = Path(destination).resolve()
    if instructor_urls is None:
        instructor_urls = git_remote_urls(root)
    files = edition_files(root, instructor_urls=instructor_urls)
    earlier = _earlier_edition(destination)
    with tempfile.TemporaryDirectory(prefix="student-edition-") as staging:
        _write_tree(Path(staging), files)
        leaks = find_leaks(paths=[Path(staging)], course_root=root, extra_text=instructor_urls)
        leaks += find_translation_leaks(course_root=root)
        if leaks:
            shown = "\n  ".join(str(leak).replace(staging, "<edition>") for leak in leaks[:40])
            more = f"\n  ... and {len(leaks) - 40} more" if len(leaks) > 40 else ""
            raise PublishError(f"the student edition would leak ({len(leaks)} findings); "
                               f"{destination} was not touched:\n  {shown}{more}")
    return _sync(destination, files, earlier)


# The feedback service's client, Python's standard library only: the edition's submit.py is this file.
# Read as a file (publish imports nothing of the service); tests/test_publish.py keeps them equal.
CLIENT = Path(__file__).resolve().parents[1] / "service" / "client.py"
CLIENT_NAME = "submit.py"


def edition_files(course_root: Path, *, instructor_urls: Sequence[str] = ()) -> dict[str, bytes]:
    """Relative POSIX path -> bytes of every file of the edition (the marker excepted), sorted."""
    root = Path(course_root)
    config = _read_config(root)
    student_url = _student_repository(config, instructor_urls)
    files: dict[str, bytes] = {}
    for name in REQUIRED + OPTIONAL:
        path = root / name
        if path.is_file():
            files[name] = path.read_bytes()
        elif path.is_dir():
            for item in sorted(path.rglob("*")):
                relative = item.relative_to(root)
                if item.is_file() and not SKIPPED_NAMES.intersection(relative.parts):
                    files[relative.as_posix()] = item.read_bytes()
        elif name in REQUIRED:
            raise PublishError(f"{root} has no {name}: is it the course root?")
    _check_toc(root, files)
    for language, info in LANGUAGES.items():  # the translated editions' generated books
        book, _ = book_files(language, root, cache="_build/.jupyter_cache")
        book["_config.yml"] = _published_config(yaml.safe_load(book["_config.yml"]))
        files.update({f"{info['folder']}/{name}": data for name, data in book.items()})
    locked = _locked_versions(root / "requirements.lock")
    branch = str(config["repository"].get("branch") or "main")
    files["_config.yml"] = _published_config(config)
    files["README.md"] = _student_readme(config, student_url, branch).encode()
    files["requirements-student.txt"] = _requirements(
        "The packages the exercises and lecture pages need, and a course hub image's.",
        [_pin(name, locked) for name in STUDENT_PACKAGES] + list(STUDENT_UNPINNED.values()))
    files["requirements-site.txt"] = _requirements(
        f"Building the site ({BUILD_COMMAND}): the student packages and the book's.",
        ["-r requirements-student.txt"] + [_pin(name, locked) for name in SITE_PACKAGES])
    files[CLIENT_NAME] = CLIENT.read_bytes()  # the course package's client itself, never a copy
    files[".gitignore"] = GITIGNORE.encode()
    files[".github/workflows/site.yml"] = Template(PAGES_WORKFLOW).substitute(
        branch=branch, build=BUILD_COMMAND).encode()
    return dict(sorted(files.items()))


# --------------------------------------------------------------------------- course settings


def _read_config(root: Path) -> dict:
    path = root / "_config.yml"
    if not path.is_file():
        raise PublishError(f"{root} has no _config.yml: is it the course root?")
    config = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(config, dict):
        raise PublishError(f"{path}: expected a mapping of Jupyter Book settings")
    return config


def _student_repository(config: dict, instructor_urls: Sequence[str]) -> str:
    """``repository.url`` of the course config: the student repository (checked, see module doc)."""
    repository = config.get("repository") or {}
    url = str(repository.get("url") or "").rstrip("/")
    if not url:
        raise PublishError("_config.yml sets no repository.url: name the public student repository "
                           "there (its launch buttons and repository button point at it)")
    if (repository.get("path_to_book") or "") not in ("", "."):
        raise PublishError(f"_config.yml: repository.path_to_book is {repository['path_to_book']!r}; "
                           "the student edition keeps the book at its root, set it to \"\"")
    own = {normalize_url(u) for u in instructor_urls}
    if normalize_url(url) in own:
        raise PublishError(f"_config.yml: repository.url {url} is the course repository itself (one of "
                           "its git remotes); name the public student repository there, or the hub "
                           "button would clone the solutions into every student's home folder")
    return url


def normalize_url(url: str) -> str:
    """A git URL in one spelling: ``git@host:org/repo.git`` and ``https://host/org/repo/`` alike
    become ``https://host/org/repo``."""
    url = url.strip().rstrip("/")
    scp = re.match(r"^[\w.-]+@([\w.-]+):(.+)$", url)
    if scp:
        url = f"https://{scp.group(1)}/{scp.group(2)}"
    url = re.sub(r"^(ssh|git)://([\w.-]+@)?", "https://", url)
    return re.sub(r"\.git$", "", url)


def git_remote_urls(root: Path) -> list[str]:
    """The course repository's remote URLs (normalized, sorted), or [] outside git."""
    try:
        done = subprocess.run(["git", "-C", str(root), "remote", "-v"], capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return []
    urls = {normalize_url(line.split()[1]) for line in done.stdout.splitlines() if len(line.split()) > 1}
    return sorted(u for u in urls if "://" in u)  # a local path is no URL a page could print


def _check_toc(root: Path, files: dict[str, bytes]) -> None:
    """Every document of _toc.yml is in the edition (else its own build could not find it)."""
    toc = yaml.safe_load(files["_toc.yml"])
    names = [toc.get("root")]

    def walk(entries) -> None:
        for entry in entries or []:
            names.append(entry.get("file"))
            walk(entry.get("sections"))

    for part in toc.get("parts") or [{"chapters": toc.get("chapters")}]:
        walk(part.get("chapters"))
    for name in filter(None, names):
        stem = re.sub(r"\.(md|ipynb)$", "", str(name))
        if not any(f"{stem}{suffix}" in files for suffix in (".md", ".ipynb")):
            raise PublishError(f"_toc.yml names {name}, which the student edition does not hold "
                               f"(only {', '.join(REQUIRED + OPTIONAL)} are published)")


def _published_config(config: dict) -> bytes:
    """The course's _config.yml for the edition: the same book, without instructor-only patterns."""
    published = json.loads(json.dumps(config))  # a deep copy of plain YAML data
    sphinx_config = published.setdefault("sphinx", {}).setdefault("config", {})
    sphinx_config.setdefault("language_switch", manifest.language_switch(manifest.course()))

    def keep(pattern: str) -> bool:
        return PurePosixPath(str(pattern)).parts[0] not in INSTRUCTOR_EXCLUDES

    published["exclude_patterns"] = [p for p in published.get("exclude_patterns") or [] if keep(p)]
    execute = published.get("execute") or {}
    if "exclude_patterns" in execute:
        execute["exclude_patterns"] = [p for p in execute["exclude_patterns"] if keep(p)]
    header = ("# Jupyter Book configuration of the student edition, written by `autograder publish`\n"
              "# from the course repository's _config.yml: change it there, then publish again.\n")
    return (header + yaml.safe_dump(published, sort_keys=False, allow_unicode=True, width=100)).encode()


def _locked_versions(lock: Path) -> dict[str, str]:
    """Normalized distribution name -> exact version, from the course's requirements.lock."""
    if not lock.is_file():
        raise PublishError(f"{lock} is missing: the student requirements are pinned from it")
    versions = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line.strip())
        if match:
            versions[_canonical(match.group(1))] = match.group(2)
    return versions


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pin(name: str, locked: dict[str, str]) -> str:
    version = locked.get(_canonical(name))
    if version is None:
        raise PublishError(f"requirements.lock pins no {name}, which the student edition needs")
    return f"{name}=={version}"


def _requirements(purpose: str, lines: list[str]) -> bytes:
    return ("# " + purpose + "\n# Written by `autograder publish` from the course's requirements.lock.\n"
            + "".join(f"{line}\n" for line in lines)).encode()


# --------------------------------------------------------------------------- writing DEST


def _earlier_edition(destination: Path) -> set[str]:
    """The files of the earlier edition in ``destination`` (empty if none); PublishError if the
    folder holds anything else."""
    if not destination.exists():
        return set()
    if not destination.is_dir():
        raise PublishError(f"{destination} is a file, not a folder for the student edition")
    marker = destination / MARKER
    present = sorted(p.relative_to(destination) for p in destination.rglob("*")
                     if p.is_file() and ".git" not in p.relative_to(destination).parts)
    if not marker.is_file():
        if present:
            listed = ", ".join(str(p) for p in present[:5]) + (" ..." if len(present) > 5 else "")
            raise PublishError(f"refusing to publish into {destination}: it holds files and no "
                               f"earlier student edition ({MARKER} is missing): {listed}")
        return set()
    try:
        earlier = set(json.loads(marker.read_text(encoding="utf-8"))["files"])
    except (ValueError, KeyError, TypeError) as error:
        raise PublishError(f"{marker} is not a student-edition manifest ({error})") from None
    foreign = [p for p in present if p.as_posix() not in earlier and p.as_posix() != MARKER
               and not TOLERATED_IN_EDITION.intersection(p.parts)]
    if foreign:
        listed = ", ".join(str(p) for p in foreign[:5]) + (" ..." if len(foreign) > 5 else "")
        raise PublishError(f"refusing to publish into {destination}: besides an earlier student "
                           f"edition it holds {len(foreign)} other file(s): {listed} (the edition is "
                           "generated, never edited: move them into the course repository)")
    return earlier


def _write_tree(root: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def _sync(destination: Path, files: dict[str, bytes], earlier: set[str]) -> PublishResult:
    result = PublishResult(destination=destination, files=list(files))
    destination.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        path = destination / name
        if not path.is_file() or path.read_bytes() != data:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            result.written.append(name)
    for name in sorted(earlier - set(files)):
        path = destination / name
        if path.is_file():
            path.unlink()
            result.removed.append(name)
        for parent in path.parents:  # drop folders the removal left empty
            if parent == destination or not parent.is_dir() or any(parent.iterdir()):
                break
            parent.rmdir()
    manifest = {
        "generator": "autograder publish",
        "about": "The student edition of the course: generated, never edited. `autograder publish` "
                 "rewrites this folder and refuses one without this file.",
        "files": {name: hashlib.sha256(data).hexdigest() for name, data in files.items()},
    }
    marker_bytes = (json.dumps(manifest, indent=1) + "\n").encode()
    marker = destination / MARKER
    if not marker.is_file() or marker.read_bytes() != marker_bytes:
        marker.write_bytes(marker_bytes)
        result.written.append(MARKER)
    return result


# --------------------------------------------------------------------------- generated text


def _student_readme(config: dict, url: str, branch: str) -> str:
    launch = config.get("launch_buttons") or {}
    hub = str(launch.get("jupyterhub_url") or "").rstrip("/")
    name = url.rsplit("/", 1)[-1]
    hub_section = (
        f"Each page of the site has a **JupyterHub** launch button. It pulls this repository into your "
        f"home folder on the course hub ({hub}) with nbgitpuller and opens the page in JupyterLab; all "
        f"exercises at once:\n<{hub}/hub/user-redirect/git-pull?repo={quote(url, safe='/')}&branch={branch}"
        f"&urlpath=lab/tree/{name}/exercises>.\nA later pull brings new material and keeps the "
        f"changes you made. Submit on the hub (below)." if hub else
        "This course has no JupyterHub; work locally or on Colab.")
    return Template(STUDENT_README).substitute(
        title=config.get("title", "Course"), url=url, name=name, hub_section=hub_section,
        build=BUILD_COMMAND, **_edition_rows())


def _edition_rows() -> dict[str, str]:
    """The student README's lines about each translated edition (course.toml's languages)."""
    languages = manifest.course().languages
    notebooks = "; ".join(f"`NN_name.{lang.tag}.ipynb`: {lang.label}" for lang in languages)
    rows = "".join(f"| `{lang.folder}/` | the site's {lang.tag} edition (generated: change the course "
                   "repository, then publish again) |\n" for lang in languages)
    return {"edition_notebooks": f" ({notebooks}, graded the same way)" if languages else "",
            "edition_rows": rows}


STUDENT_README = """\
# $title — student edition

The lecture pages and exercises of the course, as the site shows them. This repository is generated
from the course's own repository by `autograder publish`: do not edit it here (a change is overwritten
at the next publish); report problems as issues on <$url>.

| path | what it holds |
| --- | --- |
| `intro.md`, `chapters/` | the landing page and the lecture pages (MyST Markdown notebooks) |
| `exercises/NN_name/NN_name.ipynb` | the exercise notebooks$edition_notebooks |
$edition_rows| `_config.yml`, `_toc.yml`, `_ext/`, `references.*` | the site (Jupyter Book) |
| `requirements-student.txt` | what the exercises and lecture pages need (also the course hub's image) |
| `requirements-site.txt` | what building the site needs |
| `submit.py` | submits a notebook to the course's feedback service from a terminal (below) |

## Open the exercises

**On the course hub.** $hub_section

**On Colab.** The Colab button of an exercise page opens its notebook on Google Colab (Colab opens
`.ipynb` files only, so lecture pages have no Colab button). Run `%pip install einops jaxtyping beartype`
in a first cell, and save a copy to your Drive before you start.

**Locally**, with Python 3.11 (3.10–3.12 work):

```bash
git clone $url && cd $name
python3 -m venv .venv && source .venv/bin/activate
pip install -r requirements-student.txt   # Linux without a GPU: add --extra-index-url https://download.pytorch.org/whl/cpu
jupyter lab                               # then open exercises/NN_name/NN_name.ipynb
```

## Work, validate, submit

Read each notebook's introduction and each function's docstring: it is the contract. Replace
`raise NotImplementedError()` in the cells marked `# YOUR CODE HERE` and leave the other cells as they
are (test cells are locked). Run the test cell after a function: an `AssertionError` says what was
expected and what came back.

**Validate** before you submit: save, then press *Validate* in the notebook toolbar, or run
`nbgrader validate exercises/NN_name/NN_name.ipynb`. It restarts the kernel, runs the whole notebook and
reports "Success! Your notebook passes all the tests." or each failing cell. Validate runs the visible
tests only; the grade also counts hidden tests that call your functions on many random inputs and edge
cases (a failure message prints its seed), so passing the visible tests is necessary, not sufficient.

**Submit** on the course hub with *Nbgrader → Assignment List → Submit*, or upload the saved
`NN_name.ipynb` (not renamed, not re-exported) where your course collects work. Graders re-run the
notebook from the top: it must run cleanly after *Kernel → Restart and Run All*.

## Feedback before the deadline: the feedback service

If your course runs the feedback service, a notebook you upload to it is graded at once, with the
visible and the hidden tests, in a sandbox, and you see which tests passed (how much the feedback shows
before the due date is the course's choice). The course staff give you the service's address and your
own **course token**: it is your login, keep it to yourself.

- **In the browser:** open the address, paste your token once, choose `NN_name.ipynb` and press
  *Submit*. The page shows your place in the queue, then the score and each test; the assignments
  table shows when each exercise opens and is due, and how many submissions you have left.
- **From a terminal:** `submit.py` (one file, Python's standard library only: nothing to install):

  ```bash
  export AUTOGRADER_URL=<the service's address>
  export AUTOGRADER_TOKEN=<your course token>   # or leave it unset: submit.py asks for it
  python submit.py exercises/NN_name/NN_name.ipynb
  ```

  It prints the score and each test, or why the notebook was not graded. Exit status: 0 graded, 1
  refused, not graded or a grader error, 2 not graded yet (`--no-wait` only submits).

The file's name says which exercise it is; a copy renamed by your browser or Colab
(`NN_name (1).ipynb`, `Copy of NN_name.ipynb`) is recognised by its cells. An upload refused
("no grader … is running now", a limit, not open yet) was not recorded: nothing counts against you. A
"grader error" is the service's fault, not your notebook's, and does not count either; the staff are
told. What the course grades in the end is the notebook it collects (on the hub, or the latest or best
upload here, as the assignments table says).

## Build the site

```bash
pip install -r requirements-site.txt
$build   # the site in _build/html; pages execute (a few minutes on a laptop)
```

`.github/workflows/site.yml` does the same on GitHub and publishes the site with GitHub Pages.
"""

GITIGNORE = """\
# Written by `autograder publish`.
_build/
.venv/
__pycache__/
.ipynb_checkpoints/
"""

PAGES_WORKFLOW = """\
# Build the student site and publish it with GitHub Pages (written by `autograder publish`).
name: Site
on:
  push:
    branches: [$branch]
  workflow_dispatch:
permissions:
  contents: read
  pages: write
  id-token: write
concurrency:
  group: pages
  cancel-in-progress: true
jobs:
  build:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.11"
      - run: pip install --extra-index-url https://download.pytorch.org/whl/cpu -r requirements-site.txt
      - run: $build
      - uses: actions/upload-pages-artifact@v3
        with:
          path: _build/html
  deploy:
    needs: build
    runs-on: ubuntu-latest
    environment:
      name: github-pages
      url: $${{ steps.deployment.outputs.page_url }}
    steps:
      - id: deployment
        uses: actions/deploy-pages@v4
"""
