"""The sandbox for untrusted programs: statuses, limits, isolation, hostile input.

Namespaces-mode tests skip (with the reason) where `isolation()` is not "namespaces"; the
key behaviours run in rlimits mode too. Nothing here sends traffic anywhere: the only
connection attempted is to 1.1.1.1:80 from inside the sandbox, where it must fail.
"""

import os
import time
import uuid
from pathlib import Path

import pytest

from activemem_jax.envs import sandbox
from activemem_jax.envs.sandbox import Limits, Result, isolation, run_python

REPO = Path(__file__).resolve().parents[2]
NS_REASON = "namespaces sandbox unavailable here (needs root, /usr/bin/unshare and /usr/bin/setpriv)"
needs_ns = pytest.mark.skipif(isolation() != "namespaces", reason=NS_REASON)
MODES = [pytest.param("namespaces", marks=needs_ns), "rlimits"]
SMALL = Limits(cpu_s=1, wall_s=3)


def _run_uid(res: Result) -> int:
    """The uid a namespaces run printed first (each run draws its own)."""
    uid = int(res.output.split()[0])
    assert uid in sandbox.SANDBOX_UIDS, res
    return uid


def _uid_procs(uids=sandbox.SANDBOX_UIDS):
    """pids of live (non-zombie) processes whose real uid is one of `uids` (the sandboxes')."""
    pids = set()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            status = Path(f"/proc/{name}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("State", "").strip().startswith(("Z", "X")):
            continue
        if int(fields.get("Uid", "-1").split()[0]) in uids:
            pids.add(int(name))
    return pids


def _my_zombies():
    me = os.getpid()
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = sandbox._read_stat(int(name))
            if st is not None and st[0] == me and st[1] == b"Z":
                out.append(int(name))
    return out


@pytest.fixture(autouse=True)
def _no_zombies():
    yield
    assert _my_zombies() == []


def test_api():
    assert sandbox.__all__ == ["SANDBOX_UIDS", "Limits", "Result", "isolation", "run_python"]
    assert isolation() in ("namespaces", "rlimits")
    assert isolation() == isolation()
    res = run_python("pass")
    assert isinstance(res, Result) and res.isolation == isolation() and res.status == "ok"
    with pytest.raises(ValueError):
        run_python("pass", mode="docker")


def test_namespaces_mode_refused_when_unavailable(monkeypatch):
    monkeypatch.setattr(sandbox, "_isolation_cache", "rlimits")
    with pytest.raises(RuntimeError, match="namespaces sandbox unavailable"):
        run_python("pass", mode="namespaces")
    assert run_python("print(1)").isolation == "rlimits"  # auto follows isolation()


@pytest.mark.parametrize("mode", MODES)
def test_ok_output_and_stdin(mode):
    res = run_python("import sys\nname = input()\nprint('hello', name)\n"
                     "print('rest', sys.stdin.read().split())\nprint('err', file=sys.stderr)\n"
                     "print(__name__, __file__)",
                     stdin="world\n1 2\n3\n", mode=mode)
    assert res.status == "ok", res
    assert res.exit_code == 0 and res.isolation == mode
    assert res.output == "hello world\nrest ['1', '2', '3']\nerr\n__main__ program.py\n"
    assert 0 < res.seconds < 10


@pytest.mark.parametrize("mode", MODES)
def test_exception_and_exit_codes(mode):
    res = run_python("def f():\n    assert 1 == 2, 'one is not two'\nprint('before')\nf()\n",
                     mode=mode)
    assert res.status == "error" and res.exit_code == 1, res
    assert res.output.startswith("before\nTraceback")
    assert 'File "program.py", line 2, in f' in res.output
    assert "assert 1 == 2" in res.output  # the source line is shown
    assert res.reason == "exit code 1: AssertionError: one is not two"

    res = run_python("import sys\nprint('bye')\nsys.exit(3)", mode=mode)
    assert (res.status, res.exit_code, res.reason) == ("error", 3, "exit code 3: bye")


@pytest.mark.parametrize("mode", MODES)
def test_syntax_error(mode):
    res = run_python("def f(:\n    pass\n", mode=mode)
    assert res.status == "error" and res.exit_code == 1, res
    assert "SyntaxError" in res.reason and 'File "program.py", line 1' in res.output


@pytest.mark.parametrize("mode", MODES)
def test_busy_loop_hits_cpu_limit(mode):
    t0 = time.monotonic()
    res = run_python("while True: pass", SMALL, mode=mode)
    assert res.status in ("cpu_limit", "timeout"), res
    assert res.exit_code is None
    assert time.monotonic() - t0 < SMALL.wall_s + 3


@pytest.mark.parametrize("mode", MODES)
def test_cpu_limit_when_sigxcpu_is_ignored(mode):
    res = run_python("import signal\nsignal.signal(signal.SIGXCPU, signal.SIG_IGN)\n"
                     "while True: pass", Limits(cpu_s=1, wall_s=6), mode=mode)
    assert res.status == "cpu_limit" and "CPU-time limit" in res.reason, res


@pytest.mark.parametrize("mode", MODES)
def test_sleep_hits_wall_limit(mode):
    t0 = time.monotonic()
    res = run_python("import time\nprint('start', flush=True)\ntime.sleep(100)",
                     Limits(cpu_s=1, wall_s=2), mode=mode)
    elapsed = time.monotonic() - t0
    assert res.status == "timeout" and res.exit_code is None, res
    assert res.output == "start\n"
    assert res.reason == "ran past its 2 s wall-time limit"
    assert 1.9 <= res.seconds and elapsed < 2 + 4


@pytest.mark.parametrize("mode", MODES)
def test_output_flood_is_cut(mode):
    res = run_python('while True: print("x" * 10000)', Limits(wall_s=10, output_bytes=65536),
                     mode=mode)
    assert res.status == "output_limit", res
    assert len(res.output) <= 65536 and len(res.output.encode()) <= 65536
    assert res.output.startswith("x" * 10000)
    assert res.reason == "killed at 64 KiB of output"
    assert res.seconds < 8


@pytest.mark.parametrize("mode", MODES)
def test_output_flood_on_stderr_without_newlines(mode):
    res = run_python("import sys\nwhile True: sys.stderr.write('é' * 5000)",
                     Limits(wall_s=10, output_bytes=1000), mode=mode)
    assert res.status == "output_limit", res
    assert 0 < len(res.output) <= 1000


@pytest.mark.parametrize("mode", MODES)
def test_big_allocation_hits_memory_limit(mode):
    res = run_python("x = bytearray(4 * 1024 ** 3)\nprint('allocated')", mode=mode)
    assert res.status == "memory_limit", res
    assert "MemoryError" in res.reason and "allocated" not in res.output


@pytest.mark.parametrize("mode", MODES)
def test_big_file_hits_file_limit(mode):
    name = f"sandbox_big_{uuid.uuid4().hex}.bin"
    res = run_python(f"import os\nprint(os.getcwd(), flush=True)\nf = open({name!r}, 'wb')\n"
                     "for _ in range(100):\n    f.write(b'x' * 2 ** 20)\n    f.flush()\n",
                     Limits(wall_s=10, file_mb=8), mode=mode)
    assert res.status == "file_limit" or (res.status == "error"
                                          and "File too large" in res.output), res
    cwd = res.output.splitlines()[0]
    assert not os.path.exists(os.path.join(cwd, name))
    assert not os.path.exists(os.path.join("/tmp", name))
    if mode == "rlimits":
        assert not os.path.exists(cwd)  # the temporary cwd is removed


@pytest.mark.parametrize("mode", MODES)
def test_hostile_source_text(mode):
    for source in ["print(1)\x00print(2)", "print('\ud800')", "\udcff\x00\ufffe",
                   "# " + "y" * (2 << 20) + "\nprint('done')", "", "\x00" * 1000]:
        res = run_python(source, stdin="\ud800 \x00", mode=mode)
        assert res.status in ("ok", "error"), (source[:30], res)
    assert run_python("print(1)\x00", mode=mode).reason.startswith("exit code 1: SyntaxError")
    big = run_python("# " + "y" * (2 << 20) + "\nprint('done')", mode=mode)
    assert (big.status, big.output) == ("ok", "done\n")
    assert run_python("", mode=mode).status == "ok"
    res = run_python("import sys\nprint(repr(sys.stdin.read()))", stdin="a\ud800b", mode=mode)
    assert res.status == "ok" and res.output == "'a?b'\n"


@pytest.mark.parametrize("mode", MODES)
def test_killed_by_signal(mode):
    res = run_python("import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)", mode=mode)
    assert res.status == "killed" and res.exit_code is None and "SIGSEGV" in res.reason, res


def test_rlimits_python_level_network_block():
    res = run_python(
        "import socket\n"
        "for call in (lambda: socket.socket(),\n"
        "             lambda: socket.getaddrinfo('localhost', 80),\n"
        "             lambda: socket.create_connection(('1.1.1.1', 80), timeout=2)):\n"
        "    try:\n"
        "        call()\n"
        "        print('connected')\n"
        "    except OSError as e:\n"
        "        print('blocked', e)\n"
        "a, b = socket.socketpair()\n"  # local AF_UNIX sockets still work (asyncio needs them)
        "a.sendall(b'hi'); print(b.recv(2))\n",
        mode="rlimits")
    assert res.status == "ok", res
    assert res.output == "blocked network disabled in the sandbox\n" * 3 + "b'hi'\n"


# ------------------------------------------------------------------ namespaces only


@needs_ns
def test_ns_runs_as_a_uid_of_its_own_in_empty_tmp():
    res = run_python("import os\nprint(os.getuid(), os.getgid(), os.getgroups(), os.getcwd(), "
                     "os.listdir('.'), os.getpid())", mode="namespaces")
    assert res.status == "ok", res
    *ids, pid = res.output.split()
    uid, gid, *rest = ids
    assert int(uid) in sandbox.SANDBOX_UIDS and gid == uid and " ".join(rest) == "[] /tmp []"
    other = run_python("import os\nprint(os.getuid())", mode="namespaces")
    assert int(other.output) in sandbox.SANDBOX_UIDS and other.output.strip() != uid  # a uid per run
    assert int(pid) < 20  # a fresh PID namespace (the setup's few processes came first)


@needs_ns
def test_ns_host_filesystem_is_not_writable():
    probe = REPO / f"sandbox_probe_{uuid.uuid4().hex}.txt"
    # /run/lock is world-writable on the host disk: only the read-only remount protects it
    targets = [str(probe), f"/root/{probe.name}", f"/var/lib/{probe.name}",
               f"/run/lock/{probe.name}"]
    scratch = [f"/tmp/{probe.name}", f"/var/tmp/{probe.name}", f"/dev/shm/{probe.name}"]
    try:
        res = run_python(
            f"for path in {targets!r}:\n"
            "    try:\n"
            "        open(path, 'w').write('escaped')\n"
            "        print('wrote', path)\n"
            "    except OSError as e:\n"
            "        print(type(e).__name__, e.strerror)\n"
            f"for path in {scratch!r}:\n"
            "    open(path, 'w').write('inside')\n"
            "    print(open(path).read())\n",
            mode="namespaces")
        assert res.status == "ok", res
        lines = res.output.splitlines()
        assert len(lines) == 7 and lines[4:] == ["inside"] * 3, res.output
        for path, line in zip(targets, lines[:4]):
            # a checkout under /tmp (CI's clone may be) is hidden by the sandbox's own /tmp
            hidden = ("FileNotFoundError",) if path.startswith("/tmp/") else ()
            assert line.startswith(("PermissionError", "OSError Read-only", *hidden)), res.output
        for path in targets + scratch:
            assert not os.path.exists(path), path
    finally:
        for path in targets + scratch:
            if os.path.exists(path):
                os.remove(path)


@needs_ns
def test_ns_fork_bomb_ends_and_leaves_no_process():
    t0 = time.monotonic()
    res = run_python("import os\nprint(os.getuid())\nwhile True:\n    try:\n        os.fork()\n"
                     "    except OSError:\n        pass\n",
                     Limits(cpu_s=1, wall_s=2, procs=16), mode="namespaces")
    assert res.status != "ok" and res.status in ("timeout", "cpu_limit"), res
    assert time.monotonic() - t0 < 10
    assert _uid_procs({_run_uid(res)}) == set()  # this run's uid (others may run beside it)


@needs_ns
def test_ns_thread_and_process_count_is_limited():
    res = run_python("import threading, time\nn = 0\ntry:\n    for _ in range(100):\n"
                     "        threading.Thread(target=time.sleep, args=(2,), daemon=True).start()\n"
                     "        n += 1\nexcept RuntimeError as e:\n    print('stopped', e)\n"
                     "print(n)", Limits(procs=8, wall_s=10), mode="namespaces")
    assert res.status == "ok", res
    assert "can't start new thread" in res.output
    assert int(res.output.splitlines()[-1]) < 8


@needs_ns
def test_ns_double_forked_setsid_child_is_gone():
    res = run_python("import os, time\nprint(os.getuid())\nif os.fork() == 0:\n    os.setsid()\n"
                     "    if os.fork() == 0:\n        time.sleep(100)\n    os._exit(0)\n"
                     "os.wait()\ntime.sleep(0.2)\nprint('parent done')",
                     Limits(wall_s=5), mode="namespaces")
    assert res.status == "ok" and res.output.splitlines()[1:] == ["parent done"], res
    assert res.seconds < 4  # did not wait for the grandchild
    assert _uid_procs({_run_uid(res)}) == set()


@needs_ns
def test_ns_timeout_kills_the_whole_namespace():
    res = run_python("import os, time\nprint(os.getuid())\nfor _ in range(3):\n    if os.fork() == 0:\n"
                     "        os.setsid()\n        time.sleep(100)\ntime.sleep(100)",
                     Limits(wall_s=1.5), mode="namespaces")
    assert res.status == "timeout", res
    assert _uid_procs({_run_uid(res)}) == set()


@needs_ns
def test_ns_no_network():
    res = run_python("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)",
                     Limits(wall_s=8), mode="namespaces")
    assert res.status == "error", res
    assert "OSError" in res.output
    assert res.seconds < 6
