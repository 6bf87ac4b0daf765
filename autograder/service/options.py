"""How the service runs, in one place: ``ServiceOptions`` is what ``autograder serve`` and
``autograder worker`` build and what the worker process receives (one JSON argument, ``to_json``).

Its settings (the fields declared with ``setting``) are read from ``c.AutograderService.<setting>`` in
the course's ``nbgrader_config.py`` (``c.AutograderService.port = 8800``), then the command line's flags
win (``resolve_service``); the grading settings travel inside it as ``grading``, resolved the same way
from ``c.Autograder.<setting>`` (``grading.options.resolve_grading``). The README's table of them is
generated (``python -m autograder.tools.tables``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from autograder.course.settings import config_settings, setting

CONFIG_SECTION = "AutograderService"  # c.AutograderService.<setting> in nbgrader_config.py
LEASE_S = 60.0  # how long a claim lives without a heartbeat (the worker renews it every LEASE_S / 4)
WORKER_NICE = 10  # the worker and its sandboxes yield the CPU to the web process (0: as is)


@dataclass(frozen=True)
class ServiceOptions:
    """The service's process settings; ``grading`` holds the grading settings given (GradeOptions')."""

    course_root: Path = Path(".")
    state_dir: Path | None = None  # default: <course>/.service
    db_url: str | None = None  # default: sqlite in the state folder
    hub: bool = False  # a JupyterHub service: address, prefix and OAuth from the hub
    worker: bool = True  # False: grading is done by `autograder worker` processes elsewhere
    grading: dict[str, Any] = field(default_factory=dict)
    batch_size: int = 50  # slurm: submissions per grade() batch
    host: str = setting("127.0.0.1", "--host", "the address the web process listens on "
                        "(standalone; under --hub the hub's JUPYTERHUB_SERVICE_URL)")
    port: int = setting(8750, "--port", "the port the web process listens on (standalone)",
                        metavar="PORT")
    prefix: str = setting("/", "--prefix", "URL prefix (standalone; the hub sets its own)",
                          metavar="PATH")
    lease_s: float = setting(
        LEASE_S, "--lease-s", "a claim a worker does not renew for S seconds (it died, froze or lost "
        "the database) goes back to the queue (renewed every S/4)", metavar="S")
    gpu: bool = setting(
        False, "--gpu", "the worker's machine has a CUDA device (checked at start): it grades the "
        "exercises with GPU-only checks too; without it, and without --allow-cpu, those wait in the "
        "queue for a worker that has one")
    worker_nice: int = setting(
        WORKER_NICE, None, "the worker's CPU niceness (its templates and sandboxes inherit it), so "
        "that the web process answers first (0: as is)")

    def to_json(self) -> str:
        """This, for the worker process (``from_json`` reads it back, every field as given)."""
        return json.dumps({name: str(value) if isinstance(value, Path) else value
                           for name, value in asdict(self).items()}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ServiceOptions:
        """What ``to_json`` wrote; an unknown or missing name is an error that names it."""
        given = json.loads(text)
        names = {f.name for f in fields(cls)}
        if not isinstance(given, dict) or set(given) != names:
            raise TypeError(f"service options must be a JSON object with exactly {sorted(names)}, "
                            f"got {text[:200]!r}")
        for name in ("course_root", "state_dir"):
            given[name] = None if given[name] is None else Path(given[name])
        return cls(**given)


def resolve_service(course_root: Path | str, given: Mapping[str, Any]) -> dict[str, Any]:
    """The service settings a command runs with: the course's ``c.AutograderService.<setting>``,
    then ``given`` (the command line's flags) on top; ServiceOptions' defaults for the rest."""
    from autograder.course.nbgrader import load_course

    return {**config_settings(load_course(course_root).config, CONFIG_SECTION, ServiceOptions),
            **given}
