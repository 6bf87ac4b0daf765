"""Each notebook alone, the checker unreachable: a real sandbox (bubblewrap) asked, one notebook after
another, what the last one left and what it can reach of the template, of bubblewrap's init and of the
checker's objects (issue 24)."""

from __future__ import annotations

import ast
import os
import time
import types
from pathlib import Path

import pytest

from autograder.grading.execute import checker
from autograder.sandbox import channel as remote
from autograder.sandbox.host import SandboxProcess
from autograder.sandbox.inside import protocol, wire


@pytest.fixture(scope="module")
def box():
    sandbox = SandboxProcess()
    sandbox.start()
    sandbox.wait_ready()
    if not sandbox.info.get("isolated"):
        sandbox.close()
        pytest.skip("this kernel refuses nested namespaces (autograder doctor says so)")
    yield sandbox
    sandbox.close()


def _session(box: SandboxProcess, **job) -> remote.SandboxChannel:
    deadline = time.monotonic() + 30
    while box.state == "busy" and time.monotonic() < deadline:
        time.sleep(0.05)
        box.pump()
    message = {"id": 0, "env": {}, "threads": 1, "student_rss_bytes": None, "rlimits": {}, **job}
    data, kill = box.start_notebook(message, [("data/x.txt", b"hi")])
    return remote.SandboxChannel(data, kill, memmap_dir="/tmp")


def _values(sandbox: remote.SandboxChannel, code: str, *names: str) -> dict:
    outputs, _ = sandbox.run_cell(code, 60)
    found = sandbox.lookup(list(names))
    assert set(found) == set(names), outputs
    return found


_PLANT = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
open("/dev/shm/answers", "w").write("planted")
open("/tmp/answers", "w").write("planted")
open("/sandbox-work/answers", "w").write("planted")
segment = libc.shmget(0x5EED, 4096, 0o1666)  # IPC_CREAT | 0666
address = libc.shmat(segment, None, 0)
ctypes.memmove(address, b"planted", 7)
planted = segment >= 0 and address not in (None, ctypes.c_void_p(-1).value)
'''

_LOOK = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
found = {
    "shm": os.listdir("/dev/shm"),
    "tmp": [n for n in os.listdir("/tmp") if os.path.isfile(os.path.join("/tmp", n))],
    "work": sorted(os.listdir("/sandbox-work")),
    "sysv": libc.shmget(0x5EED, 0, 0),
    "companion": open("data/x.txt").read(),
}
'''


def test_each_notebook_starts_from_nothing_shared(box):
    first = _session(box)
    assert _values(first, _PLANT, "planted")["planted"] is True
    first.kill("done")
    second = _session(box)
    found = _values(second, _LOOK, "found")["found"]
    second.kill("done")
    assert found["shm"] == [] and found["tmp"] == [], found
    jobs = [name for name in found["work"] if name.startswith("job-")]
    assert "answers" not in found["work"] and len(jobs) == 1, found  # its own folder only
    assert found["sysv"] == -1, "a System V segment of the last notebook is visible"
    assert found["companion"] == "hi"


def test_a_large_shared_memory_write_is_refused_at_the_limit(box):
    limit = 64 * 2**20
    sandbox = _session(box, tmpfs={**protocol.NOTEBOOK_TMPFS_BYTES, "/dev/shm": limit})
    code = ("written = 0\nchunk = b'x' * 2**20\ntry:\n    with open('/dev/shm/flood', 'wb') as f:\n"
            "        for _ in range(4096):\n            f.write(chunk); f.flush(); written += len(chunk)\n"
            "    error = None\nexcept OSError as e:\n    error = e.errno\n")
    found = _values(sandbox, code, "written", "error")
    sandbox.kill("done")
    assert found["error"] == 28 and found["written"] <= limit, found  # ENOSPC at the cap, not 4 GiB


def _descendants(pid: int) -> list[int]:
    found, pending = [], [pid]
    while pending:
        current = pending.pop()
        for task in os.listdir(f"/proc/{current}/task"):
            try:
                children = Path(f"/proc/{current}/task/{task}/children").read_text().split()
            except OSError:
                continue
            found += [int(c) for c in children]
            pending += [int(c) for c in children]
    return found


def _settings(pid: int) -> tuple:
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (Path(f"/proc/{pid}/oom_score_adj").read_text().strip(), stat[16],  # nice
            Path(f"/proc/{pid}/comm").read_text().strip())


_REACH = r'''
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
mine = {str(os.getpid())}
written, errors = [], set()
for entry in os.listdir("/proc"):
    if not entry.isdigit():
        continue
    for name, text in (("oom_score_adj", "1000"), ("autogroup", "19"), ("comm", "owned")):
        try:
            with open(f"/proc/{entry}/{name}", "w") as handle:
                handle.write(text)
            if os.readlink("/proc/self") != entry:
                written.append((entry, name))
        except OSError as error:
            errors.add(error.errno)
for pid in range(1, 64):  # the template's and init's folders, listed or not
    try:
        with open(f"/proc/{pid}/oom_score_adj", "w") as handle:
            handle.write("1000")
        if str(pid) != os.readlink("/proc/self"):
            written.append((str(pid), "oom_score_adj"))
    except OSError:
        pass
os.setpriority(os.PRIO_USER, 0, 19)
# a namespace of its own cannot unmount what covers the template's folders
pid = os.fork()
if pid == 0:
    ok = libc.unshare(0x10000000 | 0x20000) == 0
    open("/proc/self/setgroups", "w").write("deny")
    results = [libc.umount2(f"/proc/{n}".encode(), 2) for n in range(1, 64)]
    os._exit(3 if ok and 0 in results else 0)
unmounted = os.WEXITSTATUS(os.waitpid(pid, 0)[1]) == 3
'''


def test_a_notebook_cannot_change_the_template_or_bubblewraps_init(box):
    outside = [box.process.pid, *_descendants(box.process.pid)]
    before = {pid: _settings(pid) for pid in outside}
    sandbox = _session(box)
    found = _values(sandbox, _REACH, "written", "unmounted")
    sandbox.kill("done")
    time.sleep(0.5)
    assert found == {"written": [], "unmounted": False}, found
    after = {pid: _settings(pid) for pid in outside if pid in before and os.path.exists(f"/proc/{pid}")}
    assert after == {pid: before[pid] for pid in after}
    assert len(after) >= 3  # bubblewrap outside, its init, the template


# --------------------------------------------------------------------------- default-deny channel


@pytest.mark.parametrize("value", [os, types, remote.SandboxChannel, print, len, lambda: 1,
                                   object(), remote.Remote.__init__, Path("/x").exists])
def test_nothing_but_plain_values_is_encoded_toward_the_sandbox(value):
    channel = remote.SandboxChannel.__new__(remote.SandboxChannel)
    channel.locals, channel.mirrors, channel.mirror_of, channel.next_mirror = {}, {}, {}, 1
    channel.memmap_dir = "/nonexistent"
    with pytest.raises(wire.NotPlainData, match="cannot be handed to the submission"):
        channel._encoder().encode({"key": [value]})
    assert channel.locals == {}


_WALK = r'''
names = ["__self__", "__globals__", "__class__", "__dict__", "__func__", "__closure__", "__code__",
         "__module__", "target", "operations", "attributes", "_kernel", "torch", "builtins", "os",
         "f_globals", "gi_frame", "__reduce__", "__getattribute__", "shape", "dtype", "dir"]

def walk(offer):
    reached = {}
    for name in names:
        try:
            value = getattr(offer, name)
        except Exception as error:
            reached[name] = "refused"
            continue
        reached[name] = type(value).__name__
    for how, use in (("call", lambda: offer(1, 2)), ("len", lambda: len(offer)),
                     ("item", lambda: offer[0]), ("iter", lambda: list(offer)[:1])):
        try:
            reached[how] = type(use()).__name__
        except Exception as error:
            reached[how] = "refused"
    return reached
'''


def test_a_handle_to_a_checker_object_reaches_nothing_but_what_it_offers(box):
    """Every kind of checker object the checker can hand out (``call_only``, ``sequence_only``),
    walked from the student's side: only the offered operations and plain attributes answer, and an
    offered function that returns a module or a function is refused."""
    sandbox = _session(box)
    sandbox.run_cell(_WALK, 60)
    walk = sandbox.lookup(["walk"])["walk"]
    called = remote.call_only(lambda a, b: a + b)
    sequence = remote.sequence_only(list(range(10)), ())
    leaky = remote.call_only(lambda *args: os)
    leaky_function = remote.call_only(lambda *args: print)
    reached = {name: walk(offer) for name, offer in
               (("call", called), ("sequence", sequence), ("leaky", leaky),
                ("leaky_function", leaky_function))}
    sandbox.kill("done")
    checker_side = {"__self__", "__globals__", "__func__", "__closure__", "__code__", "target",
                    "operations", "attributes", "torch", "builtins", "os", "f_globals", "gi_frame",
                    "shape", "dtype", "dir"}
    for name, seen in reached.items():
        assert all(seen[attribute] == "refused" for attribute in checker_side), (name, seen)
    assert reached["call"]["call"] == "int" and reached["call"]["len"] == "refused"
    assert reached["call"]["item"] == "refused" and reached["call"]["iter"] == "refused"
    assert reached["sequence"]["len"] == "int" and reached["sequence"]["item"] == "int"
    assert reached["sequence"]["call"] == "refused"
    assert reached["leaky"]["call"] == "refused" and reached["leaky_function"]["call"] == "refused"


def test_a_forged_callback_reaches_no_checker_object(box):
    """The student's code names checker objects by number: every id but an offer's is refused."""
    sandbox = _session(box)
    forge = r'''
import wire, protocol
kernel = [o for o in __import__("gc").get_objects() if type(o).__name__ == "StudentServer" and hasattr(o, "mirrors")][0]
answers = []
for target in (id(__import__("os")), 1, 2, 3, -1, 2**40):
    try:
        kernel.request(protocol.Op.LOCAL_CALL, target=target, args=("x",), kwargs={})
        answers.append("answered")
    except Exception as error:
        answers.append(type(error).__name__ + ": " + str(error))
'''
    answers = _values(sandbox, forge, "answers")["answers"]
    sandbox.kill("done")
    assert len(answers) == 6 and all(a == "CheckerError: LookupError: no such grader object"
                                     for a in answers), answers


# --------------------------------------------------------------------------- the namespace push


def test_a_grade_cells_own_names_are_never_read_from_or_pushed_to_the_student():
    cell = ("from autograder.hidden import strides as _hidden\n_hidden.check_x(flat_index)\n"
            "import os\nexpected = 14\nvalue = result\nresult = 3\ndel gone\n")
    names = checker._Names({})
    assert names.wanted(cell) == ["flat_index", "gone", "result"]
    student = {"flat_index": object(), "gone": 1, "result": 2, "_hidden": 0}
    for name in names.wanted(cell):
        names.namespace[name] = names.fetched[name] = student[name]
    exec(compile(ast.parse(cell.replace("_hidden.check_x(flat_index)", "")), "cell", "exec"),
         names.namespace)
    names.namespace.pop("__builtins__")
    names.namespace["flat_index"] = os.path.join  # rebound to a checker function: never pushed
    names.namespace["result"] = 3
    deleted, bound = names.changes()
    assert deleted == ["gone"]
    assert bound == {"result": 3}  # plain data, a name the cell read; not _hidden, os, expected


# --------------------------------------------------------------------------- mirrors by content

_IN_PLACE = {
    "data": "def update(p):\n    p.data.add_(1.0)\n",
    "no_grad": "def update(p):\n    with torch.no_grad():\n        p.add_(1.0)\n",
    "foreach": "def update(p):\n    with torch.no_grad():\n        torch._foreach_add_([p], 1.0)\n",
    "copy": "def update(p):\n    with torch.no_grad():\n        p.copy_(p + 1.0)\n",
    "data_assign": "def update(p):\n    p.data = p.data + 1.0\n",
    "grad": "def update(p):\n    p.grad.data.mul_(3.0)\n",
}


@pytest.mark.parametrize("style", sorted(_IN_PLACE))
def test_in_place_updates_come_back_whatever_their_style(box, style):
    """An optimizer step that updates parameters in place, in any of the ways honest code does,
    reaches the checker's own tensor (the sandbox mirrors by content, not by version counter)."""
    import torch

    sandbox = _session(box)
    sandbox.run_cell("import torch\n" + _IN_PLACE[style], 60)
    update = sandbox.lookup(["update"])["update"]
    p = torch.nn.Parameter(torch.zeros(4))
    p.grad = torch.ones(4)
    update(p)
    sandbox.kill("done")
    if style == "grad":
        assert torch.equal(p.grad, torch.full((4,), 3.0)) and torch.equal(p.detach(), torch.zeros(4))
    else:
        assert torch.equal(p.detach(), torch.ones(4)), p


# --------------------------------------------------------------------------- the checker's own view

_CHECKER_LOOKS = r'''
import json, os, socket
seen = {"uid": os.geteuid(), "course": os.listdir(COURSE), "gradebook": os.path.exists(COURSE + "/gradebook.db"),
        "work": sorted(os.listdir(".")), "torch": __import__("torch").__version__}
try:
    socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
    seen["network"] = "connected"
except OSError as error:
    seen["network"] = type(error).__name__
for target in (COURSE + "/planted.txt", "/usr/planted.txt", MARKER):
    try:
        open(target, "w").write("x")
        seen.setdefault("written", []).append(target)
    except OSError:
        pass
print(json.dumps(seen))
'''


def test_the_checker_sees_no_course_no_gradebook_no_network(box, tmp_path):
    """A grade cell runs in the checker: from there, the course folder is empty, the gradebook gone, the
    network closed and nothing outside its own folders writable; as root it is not root. The host's
    view of the checker's root (/proc/<checker>/root) agrees."""
    import json
    import socket as sockets

    from autograder.grading.execute.confine import CHECKER_UID
    from autograder.grading.execute.forkserver import RunningNotebook, wait_any
    from autograder.grading.execute.limits import ExecutionLimits, launch_message
    from autograder.grading.model import GRADE, NotebookProgram

    course = tmp_path / "course"
    (course / "autograded" / "ann").mkdir(parents=True)
    (course / "gradebook.db").write_text("secret")
    (course / "solutions").mkdir()
    workdir = course / "autograded" / "ann" / "stage"
    workdir.mkdir()
    (workdir / "data.txt").write_text("companion")
    listener = sockets.create_server(("127.0.0.1", 0))
    marker = tmp_path / "outside.txt"
    cell = (f"COURSE, PORT, MARKER = {str(course)!r}, {listener.getsockname()[1]}, {str(marker)!r}\n"
            + _CHECKER_LOOKS)
    job = NotebookProgram(cells=[(0, cell, [], GRADE)], timeout=30)
    limits = ExecutionLimits(memory_limit_gb=None, student_address_space_bytes=None,
                             student_rss_bytes=None, checker_rss_bytes=None, threads=1,
                             confined=True, hidden=(str(course),))
    run = RunningNotebook(key="t", program=job, limits=limits, workdir=str(workdir))
    run.sockets = box.start_notebook(launch_message(job, limits), [])
    run.start()
    from_host = None
    deadline = time.monotonic() + 60
    while not run.finished and time.monotonic() < deadline:
        if from_host is None and run.running_cell is not None:
            root = f"/proc/{run.process.pid}/root"
            from_host = {"gradebook": os.path.exists(f"{root}{course}/gradebook.db"),
                         "solutions": os.path.exists(f"{root}{course}/solutions")}
        wait_any([run], timeout=0.1)
        run.pump()
    run.close()
    listener.close()
    assert run.reason is None, run.reason
    text = "".join(o.get("text", "") for o in run.outputs[0][0])
    seen = json.loads(text.strip().splitlines()[-1])
    assert seen["course"] == ["autograded"] and seen["gradebook"] is False, seen
    assert seen["work"] == ["data.txt"] and seen["network"] != "connected", seen
    assert "written" not in seen and not marker.exists() and not (course / "planted.txt").exists()
    assert seen["uid"] == (CHECKER_UID if os.geteuid() == 0 else os.geteuid())
    assert from_host == {"gradebook": False, "solutions": False}, from_host
    deadline = time.monotonic() + 30
    while box.state == "busy" and time.monotonic() < deadline:
        time.sleep(0.05)
        box.pump()


# --------------------------------------------------------------------------- memory where it is spent


def test_the_memory_cgroup_counts_tmpfs_and_stops_the_sandbox_at_its_limit():
    """Pages written to a tmpfs are no process's resident memory, so the RSS watchdog cannot see
    them; the sandbox's memory cgroup does: the notebook is stopped, the sandbox never holds more than
    its limit, and the next notebook gets a working sandbox again."""
    from autograder.sandbox.cgroups import MemoryLimit, memory_cgroup_root

    if os.geteuid() != 0 or memory_cgroup_root() is None:
        pytest.skip("needs root and a writable memory cgroup (cgroup v1 or v2)")
    box = SandboxProcess(memory_bytes=8 * 2**30)
    box.start()
    try:
        box.wait_ready()
        assert box.memory is not None and box.memory.path is not None
        v2 = box.memory.version == "v2"
        limit = box.memory.used_bytes() + 200 * 2**20
        (box.memory.path / ("memory.max" if v2 else "memory.limit_in_bytes")).write_text(str(limit))
        sandbox = _session(box)
        flood = ("chunk = b'x' * 2**20\nwith open('/tmp/flood', 'wb') as f:\n"
                 "    for _ in range(480):\n        f.write(chunk)\n")
        with pytest.raises(remote.SandboxDied):
            sandbox.run_cell(flood, 60)
        peak = int((box.memory.path / ("memory.peak" if v2 else "memory.max_usage_in_bytes"))
                   .read_text()) if box.memory.path is not None else None
        assert peak is None or peak <= limit + 2**20, (peak, limit)
    finally:
        box.close()
    again = SandboxProcess(memory_bytes=8 * 2**30)
    again.start()
    try:
        again.wait_ready()
        after = _session(again)
        assert _values(after, "alive = 1", "alive") == {"alive": 1}
        after.kill("done")
    finally:
        again.close()
    assert isinstance(MemoryLimit.describe(), str) and "cgroup" in MemoryLimit.describe()


def test_a_function_a_grade_cell_defines_crosses_call_only():
    """nbgrader hands a grade cell's closure (an optimizer's ``step(closure)``) to the student's code
    live; here it crosses as a call-only offer, and so only a function the grade cell itself defined
    (``__main__``), never one of a module (``os.path.join``) or a builtin."""
    channel = remote.SandboxChannel.__new__(remote.SandboxChannel)
    channel.locals, channel.mirrors, channel.mirror_of, channel.next_mirror = {}, {}, {}, 1
    channel.memmap_dir, channel._grade_cell_offers = "/nonexistent", {}
    namespace = {"__name__": "__main__"}
    exec("def closure():\n    return 2.0\n", namespace)
    tree = channel._encoder().encode(namespace["closure"])
    assert tree["$"] == "local" and tree["callable"] is True
    offer = channel.locals[tree["id"]]
    assert type(offer) is protocol.Offer and offer.operations == {"call"}
    assert channel._encoder().encode(namespace["closure"])["id"] == tree["id"]  # one offer each
    for refused in (os.path.join, print):
        with pytest.raises(wire.NotPlainData):
            channel._encoder().encode(refused)
