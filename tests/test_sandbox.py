"""The sandbox and its channel: the bubblewrap policy as a list, the values-only wire format, and a real
sandbox asked what it can see, reach and start."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from autograder.sandbox import channel as remote
from autograder.sandbox.host import SandboxProcess, bwrap_command, python_dirs
from autograder.sandbox.inside import codec, wire

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- the policy


def _pairs(args: list[str], flag: str) -> list[tuple[str, str]]:
    return [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == flag]


def test_policy_unshares_everything_and_binds_only_what_it_names():
    args = bwrap_command()
    for flag in ("--unshare-all", "--unshare-user", "--die-with-parent", "--new-session",
                 "--clearenv"):
        assert flag in args
    assert args[args.index("--cap-drop") + 1] == "ALL"
    assert "--share-net" not in args and "--bind" not in args and "--dev-bind" not in args
    sources = {src for src, _ in _pairs(args, "--ro-bind")}
    allowed = set(python_dirs()) | {str(ROOT / "autograder" / "sandbox" / "inside")}
    for source in sources:
        assert source.startswith(("/usr", "/etc/", "/lib", "/bin", "/sbin")) or source in allowed, source
    course_binds = [s for s in sources if s == str(ROOT) or s.startswith(str(ROOT) + "/")]
    assert all(s.startswith(str(ROOT / ".venv")) or s == str(ROOT / "autograder" / "sandbox" / "inside")
               for s in course_binds), course_binds
    tmpfs = [args[i + 1] for i, a in enumerate(args) if a == "--tmpfs"]
    assert tmpfs == ["/tmp", "/sandbox-work"]
    assert args.count("--size") == 2


def test_gpu_policy_adds_device_nodes_only():
    plain, gpu = bwrap_command(), bwrap_command(gpu=True)
    extra = [a for a in gpu if a not in plain]
    assert all(a.startswith(("/dev/nvidia", "/dev/dri", "/sys", "--dev-bind", "--ro-bind", "/usr/local"))
               or a.startswith("/") for a in extra)
    assert "--share-net" not in gpu


# --------------------------------------------------------------------------- the wire format


def _round_trip(value, **kwargs):
    encoder = codec.Encoder(lambda obj: (_ for _ in ()).throw(wire.NotPlainData(type(obj).__name__)))
    tree = encoder.encode(value)
    return codec.Decoder(encoder.blobs, lambda tree: None, **kwargs).decode(tree)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float8_e4m3fn, torch.int64,
                                   torch.bool, torch.complex64])
def test_tensors_keep_values_and_layout(dtype):
    base = (torch.arange(24) % 5).to(dtype)
    view = base.reshape(4, 6).t()[1:, ::2]
    got = _round_trip(view)
    assert got.dtype == dtype and got.shape == view.shape
    assert got.stride() == view.stride() and got.storage_offset() == view.storage_offset()
    comparable = torch.complex128 if dtype.is_complex else torch.float64
    assert torch.equal(got.to(comparable), view.to(comparable))


def test_plain_values_round_trip_exactly():
    value = {"a": (1, 2.5, float("inf"), None, True, "x", b"\x00\xff"),
             3: [slice(1, None, 2), ..., range(3), {1, 2}, 2**80, -(2**70), 1 + 2j],
             "dt": torch.bfloat16, "dev": torch.device("cpu"), "size": torch.Size([2, 3]),
             "np": np.arange(6, dtype=np.uint16).reshape(2, 3), "scalar": np.int64(7),
             "type": np.uint32, "npdtype": np.dtype("<f4")}
    got = _round_trip(value)
    assert got["a"] == value["a"] and got[3] == value[3] and got["size"] == torch.Size([2, 3])
    assert got["dt"] is torch.bfloat16 and got["type"] is np.uint32 and got["npdtype"] == np.float32
    assert np.array_equal(got["np"], value["np"]) and type(got["scalar"]) is np.int64


def test_what_is_not_plain_data_never_crosses_by_value():
    class Sneaky(torch.Tensor):
        pass

    class Liar(int):
        def __eq__(self, other):
            return True

    for value in (torch.ones(2).as_subclass(Sneaky), Liar(3), np.array([object()]), lambda: 1):
        with pytest.raises(wire.NotPlainData):
            _round_trip(value)


@pytest.mark.parametrize("header", [b"H{not json", b"H[1, 2]", b'H{"blobs": [-1]}',
                                    b'H{"blobs": "x"}', b'H{"long_header": 99999999999}'])
def test_malformed_messages_are_refused(header):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.send(header)
    with pytest.raises(wire.WireError):
        wire.recv(ours, timeout=2)


def test_unknown_value_kinds_and_bare_lists_are_refused():
    decoder = codec.Decoder([], lambda tree: None)
    for tree in ({"$": "pickle", "v": "..."}, [1, 2], {"$": "dtype", "v": "object"},
                 {"$": "tensor", "dtype": "float32", "shape": [2], "stride": [1], "offset": 0,
                  "device": "cpu", "b": 5}):
        with pytest.raises((wire.WireError, KeyError)):
            decoder.decode(tree)


def test_a_nesting_bomb_is_a_wire_error_not_a_crash():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    theirs.send(b"H" + b"[" * 30_000 + b"]" * 30_000)
    with pytest.raises(wire.WireError, match="nested"):
        wire.recv(ours, timeout=2)


def test_the_deadline_is_the_whole_messages_not_each_packets():
    """A writer that drips stray packets (or a message's blob) cannot keep the reader waiting."""
    import threading

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    stop = threading.Event()

    def drip() -> None:
        while not stop.is_set():
            try:
                theirs.send(b"B" + b"x" * 10)
            except OSError:
                return
            time.sleep(0.05)

    threading.Thread(target=drip, daemon=True).start()
    started = time.monotonic()
    try:
        with pytest.raises(TimeoutError):
            wire.recv(ours, timeout=1.0)
    finally:
        stop.set()
    assert time.monotonic() - started < 3.0


def test_a_blob_is_decoded_once():
    encoder = codec.Encoder(lambda obj: {"$": "ref", "id": 1})
    tree = encoder.encode(np.arange(4, dtype=np.int64))
    decoder = codec.Decoder(encoder.blobs, lambda tree: None)
    with pytest.raises(wire.WireError, match="twice"):
        decoder.decode({"$": "list", "v": [tree, tree]})


@pytest.mark.parametrize("shape, stride, offset", [([1000], [1], 0), ([2, 2], [4, 1], 0),
                                                   ([4], [1], 1), ([3], [-1], 2)])
def test_a_tensor_needs_a_blob_as_large_as_its_view(shape, stride, offset):
    """Never a view past its bytes: torch would fill the rest from uninitialised memory."""
    decoder = codec.Decoder([b"\0" * 16], lambda tree: None)
    tree = {"$": "tensor", "dtype": "float32", "shape": shape, "stride": stride, "offset": offset,
            "device": "cpu", "b": 0}
    with pytest.raises(wire.WireError):
        decoder.decode(tree)
    ok = {"$": "tensor", "dtype": "float32", "shape": [4], "stride": [1], "offset": 0,
          "device": "cpu", "b": 0}
    assert codec.Decoder([b"\0" * 16], lambda tree: None).decode(ok).shape == (4,)


# --------------------------------------------------------------------------- a real sandbox


@pytest.fixture(scope="module")
def box():
    sandbox = SandboxProcess()
    sandbox.start()
    sandbox.wait_ready()
    yield sandbox
    sandbox.close()


def _session(box: SandboxProcess, **limits) -> remote.SandboxChannel:
    """A fresh notebook in ``box`` (once the previous one is cleaned up)."""
    deadline = time.monotonic() + 30
    while box.state == "busy" and time.monotonic() < deadline:
        time.sleep(0.05)
        box.pump()
    data, kill = box.start_notebook({"id": 0, "env": {}, "threads": 1, "student_rss_bytes": None,
                                "rlimits": limits}, [("data/x.txt", b"hi")])
    return remote.SandboxChannel(data, kill, memmap_dir="/tmp")


def _run(sandbox: remote.SandboxChannel, code: str, name: str):
    outputs, _ = sandbox.run_cell(code, 30)
    return sandbox.lookup([name]).get(name, outputs)


def test_no_network_not_even_loopback(box):
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    sandbox = _session(box)
    got = _run(sandbox, f"import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), "
                        "timeout=2)\n    r = 'connected'\nexcept OSError as e:\n    r = type(e).__name__",
               "r")
    sandbox.kill("done")
    listener.close()
    assert got in ("ConnectionRefusedError", "OSError", "TimeoutError")


def test_files_the_sandbox_sees(box):
    sandbox = _session(box)
    got = _run(sandbox, f"import os\nr = (os.path.exists({str(ROOT / 'solutions')!r}), "
                        f"os.path.exists({str(ROOT / 'autograder' / 'hidden')!r}), "
                        f"os.path.exists({str(ROOT / 'nbgrader_config.py')!r}), "
                        "open('data/x.txt').read(), os.listdir('/'))", "r")
    sandbox.kill("done")
    solutions, hidden, config, companion, top = got
    assert (solutions, hidden, config) == (False, False, False)
    assert companion == "hi"  # the notebook's companion files are in its working folder
    assert "home" not in top and "srv" not in top and "var" not in top


def test_processes_are_limited_and_do_not_outlive_the_notebook(box):
    sandbox = _session(box, nproc=40)
    code = ("import os, time\nforked = 0\ntry:\n    for _ in range(500):\n        if os.fork() == 0:\n"
            "            os.setsid(); time.sleep(600); os._exit(0)\n        forked += 1\n"
            "except OSError as e:\n    error = type(e).__name__\n"
            "seen = sum(p.isdigit() for p in os.listdir('/proc'))")
    sandbox.run_cell(code, 30)
    found = sandbox.lookup(["forked", "error", "seen"])
    sandbox.kill("done")
    assert found.get("error") == "BlockingIOError" and found["forked"] < 40, found
    sandbox = _session(box)  # the next notebook starts in an empty PID namespace
    seen = _run(sandbox, "import os\nr = sum(p.isdigit() for p in os.listdir('/proc'))", "r")
    sandbox.kill("done")
    assert seen <= 4, f"{seen} processes visible: the daemons of the last notebook survived"


def test_without_a_pids_cgroup_the_template_stops_a_fork_bomb(monkeypatch):
    """Where no pids cgroup can be made and no RLIMIT_NPROC binds (root is exempt from it), the
    template counts the sandbox's tasks and stops the notebook past its limit."""
    from autograder.sandbox import cgroups

    monkeypatch.setattr(cgroups, "pids_cgroup_root", lambda: None)
    lonely = SandboxProcess()
    lonely.start()
    try:
        lonely.wait_ready()
        assert lonely.processes is not None and lonely.processes.path is None
        session = _session(lonely)  # no RLIMIT_NPROC either: the template's count is the limit
        bomb = ("import os, time\nfor _ in range(300):\n    if os.fork() == 0:\n"
                "        time.sleep(600); os._exit(0)\ntime.sleep(5)\n")
        with pytest.raises(remote.SandboxDied, match="processes and threads passed the limit"):
            session.run_cell(bomb, 30)
            session.run_cell("x = 1", 30)
    finally:
        lonely.close()


_VENV_PROBE = """
import json, sys
from autograder.sandbox import channel
from autograder.sandbox.host import SandboxProcess

import time
box = SandboxProcess()
box.start()
box.wait_ready()
seen = []
for job in range(2):  # the clean-up after the first must leave the bound venv alone
    while box.state == "busy":
        time.sleep(0.05)
        box.pump()
    data, kill = box.start_notebook({"id": 0, "env": {}, "threads": 1, "student_rss_bytes": None,
                                "rlimits": {}}, [])
    sandbox = channel.SandboxChannel(data, kill, memmap_dir="/tmp")
    sandbox.run_cell("import os, sys, torch\\nleft = os.path.exists('/tmp/left-by-job-0')\\n"
                     "open('/tmp/left-by-job-0', 'w').write('x')\\n"
                     "found = [sys.prefix, str(torch.__version__), left]", 60)
    seen.append(sandbox.lookup(["found"]).get("found"))
    sandbox.kill("done")
print(json.dumps(seen))
box.close()
"""


def test_the_sandbox_starts_from_a_virtual_environment_under_tmp(tmp_path):
    """A venv below /tmp (a CI runner's or a Slurm job's $TMPDIR) is bound on top of the sandbox's
    private /tmp, not hidden by it. This venv has no packages of its own: a .pth file adds the
    project's, as a shared read-only environment would."""
    import subprocess
    import sys
    import sysconfig

    venv = tmp_path / "venv with space"
    assert str(venv).startswith("/tmp/")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "project.pth").write_text(f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n")
    probe = subprocess.run([str(venv / "bin" / "python"), "-c", _VENV_PROBE], capture_output=True,
                           text=True, timeout=300, cwd=tmp_path)
    assert probe.returncode == 0, probe.stderr[-3000:]
    first, second = __import__("json").loads(probe.stdout.strip().splitlines()[-1])
    assert first == [str(venv), torch.__version__, False]
    assert second == [str(venv), torch.__version__, False]  # a fresh /tmp, the venv still there
