"""The student edition (`autograder publish`) and the leak check that guards it.

The course is published into a temporary folder; the edition's site is built there by a real, cold
`jupyter-book build` (its pages execute inside the edition, so it builds on its own), compared with the
course's own build (same pages, same executed cells and kinds of output), opened in headless chromium
and leak-checked together with the course's built site. The leak check is itself shown to catch a
planted solution line, hidden-check line, hidden-test line, instructor-only file and the course
repository's URL.

Run after `make site` (the comparison needs the course's _build/); CI runs it as part of `make test`.
"""

from __future__ import annotations

import ast
import html
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.request
from pathlib import Path
from urllib.parse import parse_qs, urljoin, urlsplit

import jupytext
import nbformat
import pytest
import yaml
from browser import (
    launch_chromium,
    require_chromium,
    screenshot,
    serve_directory,
    unavailable,
    watch,
)
from conftest import ROOT

from autograder.authoring.leaks import course_secrets, find_leaks, is_trivial
from autograder.authoring.publish import (
    BUILD_COMMAND,
    MARKER,
    STUDENT_PACKAGES,
    STUDENT_UNPINNED,
    git_remote_urls,
    publish,
)
from autograder.authoring.release import nbgrader_environment
from autograder.cli import main
from autograder.errors import PublishError

COURSE_CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
STUDENT_URL = COURSE_CONFIG["repository"]["url"].rstrip("/")
STUDENT_BRANCH = COURSE_CONFIG["repository"]["branch"]
# The course repository's URLs: its git remotes, and the kit's own repository (which _config.yml's
# repository button named before the student edition existed). None may reach a student page.
COURSE_URLS = sorted({*git_remote_urls(ROOT), "https://github.com/cs336-course-kit/resource-accounting"})
COURSE_HTML = ROOT / "_build" / "html"
COURSE_EXECUTED = ROOT / "_build" / "jupyter_execute"
EDITION_TOP_LEVEL = {".github", ".gitignore", MARKER, "README.md", "_config.yml", "_ext", "_toc.yml",
                     "chapters", "data", "exercises", "intro.md", "references.bib", "references.md",
                     "requirements-site.txt", "requirements-student.txt", "submit.py", "zh-tw"}
COPIED_FROM_COURSE = ("intro.md", "references.md", "references.bib", "_toc.yml", "chapters",
                      "exercises", "_ext", "data")  # data/gpu/: the recorded GPU measurements the pages show


def tree_bytes(root: Path, *, skip=("_build", "__pycache__", ".ipynb_checkpoints")) -> dict[str, bytes]:
    """Relative path -> bytes of every file under root (build output and caches left out)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not set(skip).intersection(p.relative_to(root).parts)}


@pytest.fixture(scope="module")
def edition(tmp_path_factory) -> Path:
    destination = tmp_path_factory.mktemp("publish") / "student-edition"
    publish(destination=destination, course_root=ROOT, instructor_urls=COURSE_URLS)
    return destination


@pytest.fixture(scope="module")
def student_html(edition) -> Path:
    """The edition's site, built inside the edition with nothing from the course (cold: no cache);
    both editions, by the command its README and workflow give (this interpreter's jupyter-book)."""
    done = subprocess.run(BUILD_COMMAND, shell=True, cwd=edition,
                          capture_output=True, text=True, env=nbgrader_environment())
    assert done.returncode == 0, (f"`{BUILD_COMMAND}` failed in the student edition:\n"
                                  f"{done.stdout[-4000:]}{done.stderr[-4000:]}")
    return edition / "_build" / "html"


def require_course_build() -> None:
    if not (COURSE_HTML / "index.html").is_file() or not COURSE_EXECUTED.is_dir():
        unavailable(f"no course build at {COURSE_HTML}: run `make site` first")


# --------------------------------------------------------------------------- what is published


def test_edition_holds_the_student_material_and_nothing_else(edition):
    top = {p.name for p in edition.iterdir()} - {"_build"}
    assert top == EDITION_TOP_LEVEL, (f"unexpected: {sorted(top - EDITION_TOP_LEVEL)}, "
                                      f"missing: {sorted(EDITION_TOP_LEVEL - top)}")
    published = tree_bytes(edition)
    for name in COPIED_FROM_COURSE:
        course = tree_bytes(ROOT / name) if (ROOT / name).is_dir() else {"": (ROOT / name).read_bytes()}
        for relative, data in course.items():
            path = f"{name}/{relative}" if relative else name
            assert published.get(path) == data, f"{path}: not the course's bytes"
    manifest = json.loads((edition / MARKER).read_text(encoding="utf-8"))
    assert sorted(manifest["files"]) == sorted(set(published) - {MARKER})


def test_the_edition_ships_the_service_client_itself_and_describes_the_service(edition, tmp_path):
    """M7: ``submit.py`` is the course package's client, byte for byte (never a hand-kept copy),
    imports nothing but the standard library, runs in an interpreter without site-packages, and
    the README says how to use the service (the page, the token, the command)."""
    client = ROOT / "autograder" / "service" / "client.py"
    shipped = edition / "submit.py"
    assert shipped.read_bytes() == client.read_bytes()
    imported = set()
    for node in ast.walk(ast.parse(shipped.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add((node.module or "").split(".")[0])
    assert imported - {"__future__"} <= set(sys.stdlib_module_names), imported
    helped = subprocess.run([sys.executable, "-I", "-S", str(shipped), "--help"], cwd=tmp_path,
                            capture_output=True, text=True)
    assert helped.returncode == 0 and "AUTOGRADER_TOKEN" in helped.stdout, helped.stderr
    unset = subprocess.run([sys.executable, "-I", "-S", str(shipped), "01_strides.ipynb"],
                           cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                           env={"PATH": os.environ["PATH"]})
    assert unset.returncode == 1 and "no service address" in unset.stderr
    readme = (edition / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Feedback before the deadline"):]
    for words in ("python submit.py exercises/NN_name/NN_name.ipynb", "AUTOGRADER_URL",
                  "AUTOGRADER_TOKEN", "course token", "In the browser", "Copy of NN_name.ipynb",
                  "no grader"):
        assert words in section, words


def test_published_config_names_only_the_student_repository(edition):
    config = yaml.safe_load((edition / "_config.yml").read_text(encoding="utf-8"))
    assert config["repository"] == COURSE_CONFIG["repository"]
    assert config["launch_buttons"] == COURSE_CONFIG["launch_buttons"]
    from autograder.course import manifest

    expected = json.loads(json.dumps(COURSE_CONFIG["sphinx"]))  # the course's, and the editions of
    expected["config"]["language_switch"] = manifest.language_switch(manifest.course())  # course.toml
    assert config["sphinx"] == expected
    assert STUDENT_URL not in COURSE_URLS
    patterns = config["exclude_patterns"] + config["execute"]["exclude_patterns"]
    instructor = [p for p in patterns if p.split("/")[0] in {"solutions", "autograder", "tests"}]
    assert not instructor, f"instructor-only exclude patterns in the published config: {instructor}"
    readme = (edition / "README.md").read_text(encoding="utf-8")
    for needed in (STUDENT_URL, "requirements-student.txt", "nbgrader validate", "Colab",
                   f"{COURSE_CONFIG['launch_buttons']['jupyterhub_url']}/hub/user-redirect/git-pull"
                   f"?repo={STUDENT_URL.replace('://', '%3A//')}&branch={STUDENT_BRANCH}", "Submit",
                   BUILD_COMMAND):
        assert needed in readme, f"the student README does not say {needed!r}"
    workflow = yaml.safe_load((edition / ".github" / "workflows" / "site.yml").read_text())
    runs = [step.get("run", "") for step in workflow["jobs"]["build"]["steps"]]
    assert BUILD_COMMAND in runs and any("requirements-site.txt" in r for r in runs)


def code_imports(source: str) -> set[str]:
    """Top-level module names imported by a cell (IPython magics skipped)."""
    lines = [line for line in source.splitlines() if not line.lstrip().startswith(("%", "!"))]
    names = set()
    for node in ast.walk(ast.parse("\n".join(lines))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_student_requirements_cover_what_the_pages_import(edition):
    requirements = (edition / "requirements-student.txt").read_text(encoding="utf-8").splitlines()
    listed = {re.split(r"[=<>]", line)[0] for line in requirements if line and not line.startswith("#")}
    assert listed == set(STUDENT_PACKAGES) | set(STUDENT_UNPINNED)
    notebooks = [jupytext.read(p) for p in sorted((edition / "chapters").glob("*.md"))]
    notebooks += [nbformat.read(p, as_version=4) for p in sorted(edition.glob("exercises/*/*.ipynb"))]
    imported = set().union(*(code_imports(c.source) for nb in notebooks for c in nb.cells
                             if c.cell_type == "code"))
    local = {p.stem for p in (edition / "chapters").glob("*.py")}
    providers = importlib.metadata.packages_distributions()
    missing = {}
    for module in sorted(imported - set(sys.stdlib_module_names) - local):
        dists = {d.lower() for d in providers.get(module, [])}
        if not dists & {p.lower() for p in listed}:
            missing[module] = sorted(dists)
    assert not missing, f"imported by the pages but not in requirements-student.txt: {missing}"
    site = (edition / "requirements-site.txt").read_text(encoding="utf-8")
    assert "-r requirements-student.txt" in site and "jupyter-book==" in site


# --------------------------------------------------------------------------- how it is written


def test_publishing_is_deterministic(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    publish(destination=first, course_root=ROOT, instructor_urls=COURSE_URLS)
    snapshot = tree_bytes(first, skip=())
    again = publish(destination=first, course_root=ROOT, instructor_urls=COURSE_URLS)
    assert again.written == [] and again.removed == [], f"a re-run rewrote {again.written}"
    assert tree_bytes(first, skip=()) == snapshot, "re-publishing changed the edition"
    publish(destination=second, course_root=ROOT, instructor_urls=COURSE_URLS)
    assert tree_bytes(second, skip=()) == snapshot, "two fresh editions differ"


def test_publish_refuses_a_folder_that_is_not_an_edition(tmp_path):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    with pytest.raises(PublishError, match=r"refusing to publish into .*foreign.*notes\.txt"):
        publish(destination=foreign, course_root=ROOT, instructor_urls=COURSE_URLS)
    assert sorted(p.name for p in foreign.iterdir()) == ["notes.txt"]

    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("x")
    with pytest.raises(PublishError, match="is a file"):
        publish(destination=not_a_folder, course_root=ROOT, instructor_urls=COURSE_URLS)

    clone = tmp_path / "clone"  # a fresh clone of an empty student repository
    (clone / ".git").mkdir(parents=True)
    (clone / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    publish(destination=clone, course_root=ROOT, instructor_urls=COURSE_URLS)
    (clone / "_build" / "html").mkdir(parents=True)  # a local build and caches sit beside it
    (clone / "chapters" / "__pycache__").mkdir()
    (clone / "chapters" / "__pycache__" / "_runtime.cpython-311.pyc").write_bytes(b"\0")
    publish(destination=clone, course_root=ROOT, instructor_urls=COURSE_URLS)

    (clone / "chapters" / "my_notes.md").write_text("# an edit made in the student repository\n")
    with pytest.raises(PublishError, match=r"other file\(s\): chapters/my_notes\.md"):
        publish(destination=clone, course_root=ROOT, instructor_urls=COURSE_URLS)


def test_republishing_removes_what_left_the_edition(tmp_path):
    destination = tmp_path / "edition"
    publish(destination=destination, course_root=ROOT, instructor_urls=COURSE_URLS)
    marker = destination / MARKER
    original = marker.read_bytes()
    manifest = json.loads(original)
    manifest["files"]["chapters/99_retired/old.md"] = "0" * 64  # as if an earlier edition had it
    marker.write_text(json.dumps(manifest))
    (destination / "chapters" / "99_retired").mkdir()
    (destination / "chapters" / "99_retired" / "old.md").write_text("# retired\n")
    result = publish(destination=destination, course_root=ROOT, instructor_urls=COURSE_URLS)
    assert result.removed == ["chapters/99_retired/old.md"] and result.written == [MARKER]
    assert not (destination / "chapters" / "99_retired").exists()
    assert marker.read_bytes() == original


@pytest.mark.parametrize("spelling", ["{url}", "{url}.git", "{url}/"])
def test_publish_refuses_the_course_repository_as_student_repository(tmp_path, spelling):
    destination = tmp_path / "edition"
    with pytest.raises(PublishError, match="is the course repository itself"):
        publish(destination=destination, course_root=ROOT,
                instructor_urls=[spelling.format(url=STUDENT_URL)])
    assert not destination.exists()


def test_publish_fails_on_a_leak_and_leaves_the_destination_alone(tmp_path):
    course = tmp_path / "course"
    for name in (*COPIED_FROM_COURSE, "_config.yml", "requirements.lock", "solutions",
                 "autograder/hidden"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, course / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            (course / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, course / name)
    release = course / "exercises" / "01_strides" / "01_strides.ipynb"
    nb = nbformat.read(release, as_version=4)
    stub = next(c for c in nb.cells if c.cell_type == "code" and "raise NotImplementedError()" in c.source)
    secret_text, secret = next((t, s) for t, s in course_secrets(ROOT).items()
                               if s.origin.startswith("solutions/01_strides/"))
    stub.source = stub.source.replace("raise NotImplementedError()", secret_text)  # a broken release
    nbformat.write(nb, release)
    destination = tmp_path / "edition"
    with pytest.raises(PublishError) as error:
        publish(destination=destination, course_root=course, instructor_urls=[])
    message = str(error.value)
    assert "exercises/01_strides/01_strides.ipynb:" in message and secret.origin in message, message
    assert not destination.exists()


def test_cli_publish_and_leak_check(tmp_path, capsys):
    destination = tmp_path / "edition"
    assert main(["--course-root", str(ROOT), "publish", str(destination)]) == 0
    assert "no leaks" in capsys.readouterr().out
    assert main(["--course-root", str(ROOT), "publish", str(destination)]) == 0
    assert "0 written, 0 removed" in capsys.readouterr().out
    assert main(["--course-root", str(ROOT), "leak-check", str(destination)]) == 0
    assert f"no leaks in {destination}" in capsys.readouterr().out
    (destination / "intro.md").write_text("### BEGIN SOLUTION\n")
    assert main(["--course-root", str(ROOT), "leak-check", str(destination)]) == 1
    assert f"{destination / 'intro.md'}:1: instructor-only text 'BEGIN SOLUTION'" in capsys.readouterr().out


# --------------------------------------------------------------------------- the leak check itself


def first_secret(kind: str) -> str:
    return next(text for text, secret in course_secrets(ROOT).items() if secret.kind == kind)


@pytest.fixture
def edition_copy(edition, tmp_path) -> Path:
    copy = tmp_path / "copy"
    shutil.copytree(edition, copy, ignore=shutil.ignore_patterns("_build", "__pycache__"))
    assert find_leaks(paths=[copy], course_root=ROOT, extra_text=COURSE_URLS) == []
    return copy


def plant_line(path: Path, after: int, line: str) -> int:
    """Insert ``line`` after line ``after`` of a text file; return its line number."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines.insert(after, line + "\n")
    path.write_text("".join(lines), encoding="utf-8")
    return after + 1


def test_leak_check_finds_a_planted_solution_line(edition_copy):
    secret = first_secret("solution")
    page = edition_copy / "chapters" / "03_storage_and_strides.md"
    number = plant_line(page, 40, "    " + secret)
    leaks = find_leaks(paths=[edition_copy], course_root=ROOT)
    assert [(leak.path, leak.line) for leak in leaks] == [(page, number)], leaks
    origin = course_secrets(ROOT)[secret].origin
    assert str(leaks[0]) == f"{page}:{number}: solution line from {origin}: {secret!r}"


def test_leak_check_finds_a_planted_hidden_check_line_in_html(edition_copy):
    secret = first_secret("hidden check")
    page = edition_copy / "site.html"  # as Sphinx highlights code: spans and escaped entities
    words = html.escape(secret).split(" ")
    page.write_text("<html><body><pre>\n" + " ".join(f'<span class="n">{w}</span>' for w in words)
                    + "\n</pre></body></html>\n", encoding="utf-8")
    leaks = find_leaks(paths=[edition_copy], course_root=ROOT)
    assert [(leak.path, leak.line) for leak in leaks] == [(page, 2)], leaks
    assert "hidden check line from autograder/hidden/" in leaks[0].what


def test_leak_check_finds_a_planted_hidden_test_line_in_a_notebook(edition_copy):
    secret = first_secret("hidden test")
    release = edition_copy / "exercises" / "02_einops" / "02_einops.ipynb"
    nb = nbformat.read(release, as_version=4)
    nb.cells[-1].source += "\n" + secret
    nbformat.write(nb, release)
    number = next(i for i, line in enumerate(release.read_text().splitlines(), start=1)
                  if json.dumps(secret)[1:-1] in line)
    leaks = find_leaks(paths=[edition_copy], course_root=ROOT)
    assert [(leak.path, leak.line) for leak in leaks if "hidden test line" in leak.what] == \
        [(release, number)], leaks


def test_leak_check_finds_instructor_only_files_and_urls(edition_copy):
    (edition_copy / "solutions" / "01_strides").mkdir(parents=True)
    (edition_copy / "solutions" / "01_strides" / "01_strides.py").write_text("x = 1\n")
    (edition_copy / "gradebook.db").write_bytes(b"SQLite format 3\0")
    page = edition_copy / "intro.md"
    number = plant_line(page, 1, f"[hub](https://hub.example.edu/hub/user-redirect/git-pull?repo="
                                 f"{COURSE_URLS[0].replace('://', '%3A//')}&branch=main)")
    leaks = [str(leak) for leak in find_leaks(paths=[edition_copy], course_root=ROOT,
                                              extra_text=COURSE_URLS)]
    assert leaks == [
        f"{edition_copy / 'gradebook.db'}: instructor-only file name 'gradebook.db'",
        f"{page}:{number}: instructor-only text {COURSE_URLS[0]!r}",
        f"{edition_copy / 'solutions/01_strides/01_strides.py'}: instructor-only file name 'solutions'",
    ], leaks


@pytest.mark.parametrize("line", ["return x", "pass", ")", "import torch", "else:",
                                  "from einops import rearrange",
                                  "# a comment that is long enough to count"])
def test_trivial_lines_never_count(edition_copy, line):
    assert is_trivial(line)
    plant_line(edition_copy / "intro.md", 1, line)
    assert find_leaks(paths=[edition_copy], course_root=ROOT) == []


# --------------------------------------------------------------------------- the edition's own site


@pytest.mark.slow
def test_student_site_has_the_same_pages_and_executed_outputs(student_html, edition):
    require_course_build()

    def pages(root: Path) -> set[str]:
        return {p.relative_to(root).as_posix() for p in root.rglob("*.html")
                if not p.relative_to(root).parts[0].startswith("_")}

    assert pages(student_html) == pages(COURSE_HTML)

    def signature(nb) -> list:
        """Per code cell: its source and the kinds of its outputs (streams merged: text varies)."""
        cells = []
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            kinds = []
            for out in cell.outputs:
                kind = (out.output_type, out.get("name") or out.get("ename")
                        or tuple(sorted(out.get("data", {}))))
                if not kinds or kinds[-1] != kind or out.output_type != "stream":
                    kinds.append(kind)
            cells.append((cell.source, kinds))
        return cells

    executed = sorted(p.relative_to(COURSE_EXECUTED) for p in COURSE_EXECUTED.rglob("*.ipynb"))
    assert executed, f"no executed pages under {COURSE_EXECUTED}"
    for relative in executed:
        ours = edition / "_build" / "jupyter_execute" / relative
        assert ours.is_file(), f"{relative}: not executed in the student build"
        assert signature(nbformat.read(ours, as_version=4)) == \
            signature(nbformat.read(COURSE_EXECUTED / relative, as_version=4)), \
            f"{relative}: the student build executed different cells or got other kinds of output"


@pytest.mark.slow
def test_leak_check_passes_the_edition_and_both_built_sites(student_html, edition):
    require_course_build()
    leaks = find_leaks(paths=[edition, COURSE_HTML], course_root=ROOT, extra_text=COURSE_URLS)
    assert not leaks, "leaks:\n" + "\n".join(map(str, leaks))


def hrefs(page: Path) -> list[str]:
    return [html.unescape(h) for h in re.findall(r'href="([^"]+)"', page.read_text(encoding="utf-8"))]


@pytest.mark.slow
def test_hub_link_opens_the_student_repository(student_html):
    require_course_build()
    name = STUDENT_URL.rsplit("/", 1)[-1]
    for site in (student_html, COURSE_HTML):
        pulled = 0
        for page in sorted(site.rglob("*.html")):
            relative = page.relative_to(site)
            if relative.parts[0].startswith("_"):
                continue
            for href in hrefs(page):
                for course_url in COURSE_URLS:
                    assert not re.search(re.escape(course_url) + r"(?![\w-])", href), \
                        f"{page}: links the course repository: {href}"
                if "/git-pull?" in href:
                    query = parse_qs(urlsplit(href).query)
                    assert query["repo"] == [STUDENT_URL] and query["branch"] == [STUDENT_BRANCH], \
                        f"{page}: hub link pulls {query.get('repo')} {query.get('branch')}: {href}"
                    opened = query["urlpath"][0].rsplit(".", 1)[0]
                    assert opened == f"lab/tree/{name}/{relative.with_suffix('').as_posix()}", \
                        f"{page}: hub link opens {query['urlpath']}"
                    pulled += 1
                elif href.startswith("https://github.com/"):
                    assert href == STUDENT_URL or href.startswith(STUDENT_URL + "/"), f"{page}: {href}"
                elif "colab.research.google.com" in href:
                    assert f"/github/{STUDENT_URL.split('github.com/')[1]}/blob/{STUDENT_BRANCH}/" in href
        assert pulled >= 17, f"{site}: only {pulled} JupyterHub links (one per lecture/exercise page)"


@pytest.mark.slow
@pytest.mark.browser
def test_student_site_in_the_browser(student_html, edition, tmp_path_factory):
    """Every page reached from the sidebar, clean; downloads are the releases; buttons open the
    student repository."""
    require_chromium()
    from playwright.sync_api import sync_playwright

    hub = COURSE_CONFIG["launch_buttons"]["jupyterhub_url"].rstrip("/")
    problems: list[str] = []
    with serve_directory(student_html) as site_url, sync_playwright() as p:
        context = launch_chromium(p, tmp_path_factory.mktemp("chromium-student-site"))
        context.set_default_timeout(30_000)
        try:
            page = context.new_page()
            page.watch = watch(page)
            page.goto(site_url)  # index.html redirects to the root page of _toc.yml
            page.wait_for_url(f"**/{yaml.safe_load((edition / '_toc.yml').read_text())['root']}.html")
            page.wait_for_load_state("load")
            assert COURSE_CONFIG["title"] in page.title()
            links = page.eval_on_selector_all("nav.bd-docs-nav a.reference.internal",
                                              "links => links.map(a => a.href.split('#')[0])")
            assert len(links) >= 18, f"the sidebar lists {len(links)} pages"
            for link in links:
                page.watch.clear()
                response = page.goto(link)
                page.wait_for_load_state("load")
                docname = urlsplit(link).path.lstrip("/").removesuffix(".html")
                where = f"{docname}:"
                if response is None or not response.ok:
                    problems.append(f"{where} HTTP {response and response.status}")
                    continue
                if page.locator("article.bd-article h1").count() < 1:
                    problems.append(f"{where} no <h1>")
                problems += [f"{where} {p}" for p in page.watch.problems()]
                repo_button = page.locator(f"a[href='{STUDENT_URL}']")
                if repo_button.count() < 1:
                    problems.append(f"{where} no repository button for {STUDENT_URL}")
                if docname.startswith("chapters/") and page.locator(".cell_output").count() == 0:
                    problems.append(f"{where} no executed outputs")
                if docname.startswith(("chapters/", "exercises/")):
                    pulls = page.eval_on_selector_all(f"a[href^='{hub}/hub/user-redirect/git-pull']",
                                                      "ls => ls.map(a => a.href)")
                    if not pulls or parse_qs(urlsplit(pulls[0]).query).get("repo") != [STUDENT_URL]:
                        problems.append(f"{where} hub link {pulls} does not pull {STUDENT_URL}")
                if docname.startswith("exercises/"):
                    download = page.locator("a.btn-download-source-button[href$='.ipynb']")
                    href = urljoin(page.url, download.first.get_attribute("href"))
                    with urllib.request.urlopen(href, timeout=10) as reply:
                        offered = reply.read()
                    if offered != (ROOT / f"{docname}.ipynb").read_bytes():
                        problems.append(f"{where} the download {href} is not the release")
                    colab = page.eval_on_selector_all("a[href*='colab.research.google.com']",
                                                      "ls => ls.map(a => a.href)")
                    student_path = STUDENT_URL.split("github.com/")[1]
                    if not colab or f"/github/{student_path}/blob/{STUDENT_BRANCH}/{docname}.ipynb" \
                            not in colab[0]:
                        problems.append(f"{where} Colab link {colab}")
                screenshot(page, f"student-site/{docname.replace('/', '__')}")
        finally:
            context.close()
    assert not problems, "student site:\n  " + "\n  ".join(problems)
