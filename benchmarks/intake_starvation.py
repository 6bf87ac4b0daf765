"""Can one student's upload starve the web process? Status latency with and without huge uploads.

    python benchmarks/intake_starvation.py [--cells N] [--uploads K] [--probes P]

Starts ``autograder serve`` standalone on a temporary course (``tests/support/service_course.py``), then measures
another student's status request (``GET api/submissions/<id>``, back to back) twice in one run: quiet,
and while a first student uploads K notebooks of N empty cells each (under the size cap; the review
found 114,000 cells held the event loop 4.6-6.5 s per upload when nbformat ran on it). Prints p50 /
p95 / max of both and the ratio of the p95s, and what each upload got back. Exit status 1 if an upload
was not refused with a 400, or if the probe's worst request took over 100 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "support"))
from service_course import Service, client, make_course, right_notebook  # noqa: E402


def crowded(content: bytes, cells: int) -> bytes:
    nb = json.loads(content)
    nb["cells"] += [{"cell_type": "raw", "source": ""}] * cells  # the smallest cell: in the cap
    return json.dumps(nb, separators=(",", ":")).encode()


def probe(http: httpx.Client, path: str, stop: threading.Event, out: list[float]) -> None:
    while not stop.is_set():
        start = time.perf_counter()
        http.get(path).raise_for_status()
        out.append(time.perf_counter() - start)


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return (f"p50 {1000 * statistics.median(ordered):6.1f} ms  p95 {1000 * p95:6.1f} ms  "
            f"max {1000 * ordered[-1]:6.1f} ms  ({len(ordered)} requests)")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cells", type=int, default=114_000)
    parser.add_argument("--uploads", type=int, default=10)
    parser.add_argument("--probes", type=float, default=5.0, metavar="S", help="quiet probe, seconds")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="intake-starvation-"))
    course = make_course(root / "course", students=("attacker", "reader"))
    service = Service(course, workers=1).start()
    try:
        tokens = service.tokens("attacker", "reader")
        with client(service, tokens["reader"]) as reader, client(service, tokens["attacker"]) as bad:
            own = reader.post("api/submissions", params={"filename": "01_strides.ipynb"},
                              content=right_notebook(course)).json()["id"]
            path = f"api/submissions/{own}"
            quiet: list[float] = []
            stop = threading.Event()
            thread = threading.Thread(target=probe, args=(reader, path, stop, quiet))
            thread.start()
            time.sleep(args.probes)
            stop.set()
            thread.join()
            body = crowded(right_notebook(course), args.cells)
            loaded: list[float] = []
            stop = threading.Event()
            thread = threading.Thread(target=probe, args=(reader, path, stop, loaded))
            thread.start()
            replies = []
            for _ in range(args.uploads):
                reply = bad.post("api/submissions", params={"filename": "01_strides.ipynb"},
                                 content=body)
                replies.append((reply.status_code, reply.json().get("error", "")[:70]))
            stop.set()
            thread.join()
    finally:
        service.stop()
    print(f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}; uploads of {args.cells} cells, "
          f"{len(body) / 2**20:.1f} MiB each")
    print(f"status, quiet          : {percentiles(quiet)}")
    print(f"status, during uploads : {percentiles(loaded)}")
    p95 = lambda values: sorted(values)[int(0.95 * (len(values) - 1))]  # noqa: E731
    print(f"p95 ratio (during / quiet): {p95(loaded) / p95(quiet):.2f}")
    for status, error in sorted(set(replies)):
        print(f"upload answered {status}: {error}")
    ok = all(status == 400 for status, _ in replies) and max(loaded) < 0.1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
