"""Run untrusted Python programs (code a model wrote during RL) under limits.

    res = run_python("print(input())", Limits(cpu_s=2, wall_s=5), stdin="hi\\n")
    res.status, res.output      # ("ok", "hi\\n")

Plain Python, stdlib only. Two isolation levels; `isolation()` says which one "auto" picks
and `Result.isolation` which one ran:

* "namespaces" (root with /usr/bin/unshare and /usr/bin/setpriv): the program runs as
  /usr/bin/python3 under a uid/gid of its own (drawn from SANDBOX_UIDS, no passwd entry, no
  groups, no_new_privs) in new network,
  mount and PID namespaces. The network namespace has only a downed loopback, so there is
  no network at all. In the mount namespace the root filesystem is bind-remounted read-only
  and /tmp, /var/tmp and /dev/shm are fresh tmpfs mounts of `file_mb` MB each (mode 1777,
  gone with the namespace); the program's cwd is /tmp. Everything the program starts lives
  in the PID namespace, whose init is a small bootstrap process (the program is its
  child): when the program exits, or when it is killed, the namespace goes down and every
  process in it (double-forked, setsid() or not) is killed before `run_python` returns.
  Each run draws its own uid, so RLIMIT_NPROC (`procs`) is that run's budget: sandboxes
  running at the same time (an environment's workers) do not share it (two runs drawing
  the same uid, one chance in a million, would share it and nothing else: each sees only
  its own namespaces and tmpfs).
* "rlimits" (not root, or no unshare): the program runs as the calling user with
  `sys.executable -I`, its cwd a fresh temporary directory (removed afterwards), under the
  same rlimits. This mode is much weaker: there is no filesystem isolation (the program can
  read and write whatever the user can), the network block is only Python-level
  (socket.socket for non-AF_UNIX families, socket.create_connection, create_server and
  getaddrinfo raise OSError("network disabled in the sandbox"); ctypes or a subprocess gets
  around it), and only the program's process group is killed, so a process that
  double-forks and calls setsid() can outlive the run. RLIMIT_NPROC is set to the user's
  current task count + `procs` (it counts all of the user's tasks; root ignores it).

Limits (both modes, set between fork and exec): RLIMIT_CPU (SIGXCPU at ceil(cpu_s) s,
SIGKILL one second later), RLIMIT_AS, RLIMIT_FSIZE, RLIMIT_CORE 0, RLIMIT_NPROC. Wall time
and output are watched from here: past `wall_s`, or past `output_bytes` of merged
stdout+stderr, the whole process tree gets SIGKILL. Python ignores SIGXFSZ, so a write past
RLIMIT_FSIZE shows as OSError "File too large" (status "file_limit").

The program text goes to the child on its stdin (length-prefixed; whatever `stdin` was
given follows it and is left for the program), never through the filesystem. It runs as
module `__main__` with `__file__ == "program.py"`; tracebacks name "program.py" (and show
its lines), and a program that does not compile fails with status "error" and a
SyntaxError reason. `source` is encoded as UTF-8 with surrogatepass, so lone surrogates
make a SyntaxError rather than an exception here; `stdin` is encoded with errors="replace".

Startup overhead (`run_python("pass")`, median wall time on this 2-core VM): about 26 ms
in "namespaces" mode (unshare, sh, five mount calls, setpriv, /usr/bin/python3 at ~10 ms)
and about 28 ms in "rlimits" mode (almost all of it the venv interpreter's own startup).
The limits are set by /usr/bin/prlimit, which execs the rest, so no Python code runs
between fork and exec in a multithreaded parent (a trainer); where prlimit is absent they
are set in a preexec_fn, which makes subprocess fork() instead of vfork(), so the fork
costs more as the parent grows (3 GB resident: about 31 and 34 ms).
"""

from __future__ import annotations

import dataclasses
import math
import secrets
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from typing import Optional

__all__ = ["SANDBOX_UIDS", "Limits", "Result", "isolation", "run_python"]

_UNSHARE = "/usr/bin/unshare"
_SETPRIV = "/usr/bin/setpriv"
_NS_PYTHON = "/usr/bin/python3"
SANDBOX_UIDS = range(1_000_000, 2_000_000)  # a run's uid and gid: above every login and system id
_ENV_PATH = "/usr/local/bin:/usr/bin:/bin"


@dataclasses.dataclass(frozen=True)
class Limits:
    cpu_s: float = 5.0          # RLIMIT_CPU seconds
    wall_s: float = 10.0        # killed (whole process tree) at this wall time
    memory_mb: int = 512        # RLIMIT_AS
    file_mb: int = 8            # RLIMIT_FSIZE per file; the writable tmpfs mounts are this size too
    procs: int = 16             # process/thread count for the program's user (RLIMIT_NPROC)
    output_bytes: int = 65536   # stdout+stderr kept; past it the program is killed

    @classmethod
    def from_mapping(cls, values, where: str = "data.sandbox") -> "Limits":
        """Limits from a config's mapping (fields left out keep their defaults); an unknown
        field or a value that is not a positive number is a ValueError naming it."""
        known = [f.name for f in dataclasses.fields(cls)]
        out = {}
        for key, value in dict(values or {}).items():
            if key not in known:
                raise ValueError(f"{where}.{key}: no such sandbox limit (known: {', '.join(known)})")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ValueError(f"{where}.{key}={value!r}: need a positive number")
            out[key] = value
        return cls(**out)


@dataclasses.dataclass(frozen=True)
class Result:
    status: str      # "ok" | "error" | "timeout" | "cpu_limit" | "memory_limit"
                     # | "output_limit" | "file_limit" | "killed"
    exit_code: Optional[int]   # None when killed by a signal
    output: str      # stdout and stderr merged, at most output_bytes, utf-8 errors="replace"
    seconds: float   # wall time
    isolation: str   # "namespaces" or "rlimits"
    reason: str      # one line a person can read


# The bootstrap run by `python -I -u -c _BOOT MODE STATUS_FD`. In "ns" mode it is the PID
# namespace's init: it forks, the child runs the program, and init reaps everything, then
# writes the program's raw wait status and CPU seconds to STATUS_FD and exits (which takes
# the namespace down). The child (or, in "rl" mode, the only process) reads a 12-digit
# length and that many bytes of program from fd 0, leaving the rest of fd 0 to the program.
_BOOT = r'''
import os, sys
def _boot():
    mode = sys.argv[1]
    status_fd = int(sys.argv[2])
    if mode == "ns":
        pid = os.fork()
        if pid:
            import _signal
            _signal.signal(_signal.SIGINT, _signal.SIG_DFL)
            os.close(0)
            while True:
                p, st, ru = os.wait4(-1, 0)
                if p == pid:
                    break
            os.write(status_fd, b"%d %.3f\n" % (st, ru.ru_utime + ru.ru_stime))
            os._exit(0)
        os.close(status_fd)

    def readn(n):
        buf = bytearray()
        while len(buf) < n:
            chunk = os.read(0, min(n - len(buf), 1 << 20))
            if not chunk:
                break
            buf += chunk
        return bytes(buf)

    src = readn(int(readn(12) or b"0"))
    if mode == "rl":
        import socket
        def _off(*args, **kwargs):
            raise OSError("network disabled in the sandbox")
        class _Socket(socket.socket):
            def __init__(self, family=-1, type=-1, proto=-1, fileno=None):
                if fileno is None and family != socket.AF_UNIX:
                    raise OSError("network disabled in the sandbox")
                super().__init__(family, type, proto, fileno)
        socket.socket = _Socket
        socket.create_connection = socket.create_server = socket.getaddrinfo = _off

    class _Loader:  # serves program.py's lines to linecache (traceback, inspect)
        def get_source(self, name):
            return src.decode("utf-8", "replace")

    main = type(sys)("__main__")
    main.__file__ = "program.py"
    main.__loader__ = _Loader()
    main.__builtins__ = __builtins__
    sys.modules["__main__"] = main
    sys.argv[:] = ["program.py"]
    sys.path.insert(0, os.getcwd())

    def report(e, tb):
        if sys.excepthook is sys.__excepthook__:
            import traceback
            traceback.print_exception(type(e), e, tb)
        else:
            sys.excepthook(type(e), e, tb)
        sys.stderr.flush()

    try:
        code = compile(src, "program.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:  # 3.11 raises ValueError for NUL bytes
        if not isinstance(e, SyntaxError):
            e = SyntaxError(str(e))
        report(e, None)
        sys.exit(1)
    try:
        exec(code, main.__dict__)
    except SystemExit:
        raise
    except BaseException as e:
        tb = e.__traceback__
        report(e, tb.tb_next if tb is not None else None)
        sys.exit(1)

_boot()
'''

# Run by `unshare ... /bin/sh -c _SCRIPT sandbox FILE_MB BOOT STATUS_FD` in the new namespaces.
_SCRIPT = r'''set -e
mount --make-rprivate /
mount -o remount,bind,ro /
for d in /tmp /var/tmp /dev/shm; do
  if [ -d "$d" ]; then mount -t tmpfs -o "size=$1m,mode=1777,nosuid,nodev" sandbox "$d"; fi
done
cd /tmp
exec /usr/bin/setpriv --reuid="$4" --regid="$4" --clear-groups --no-new-privs \
  /usr/bin/python3 -I -u -c "$2" ns "$3"
'''

_isolation_lock = threading.Lock()
_isolation_cache: Optional[str] = None


def isolation() -> str:
    """"namespaces" when running as root with /usr/bin/unshare and /usr/bin/setpriv usable
    (probed once by running a tiny program that way, then cached), else "rlimits"."""
    global _isolation_cache
    with _isolation_lock:
        if _isolation_cache is None:
            _isolation_cache = "namespaces" if _probe_namespaces() else "rlimits"
        return _isolation_cache


def _probe_namespaces() -> bool:
    if not sys.platform.startswith("linux") or os.geteuid() != 0:
        return False
    if not all(os.access(p, os.X_OK) for p in (_UNSHARE, _SETPRIV, _NS_PYTHON, "/bin/sh")):
        return False
    try:
        res = _run("import os\nprint('sandbox', os.getuid())", Limits(wall_s=20.0), "", True)
    except OSError:
        return False
    words = res.output.split()
    return res.status == "ok" and len(words) == 2 and words[0] == "sandbox" and int(words[1]) in SANDBOX_UIDS


def run_python(source: str, limits: Limits = Limits(), *, stdin: str = "",
               mode: str = "auto") -> Result:
    """Run `source` as a Python program. mode: "auto" (namespaces where available),
    "namespaces" (raise RuntimeError with a clear message if unavailable), "rlimits".

    Never raises for anything in `source` or `stdin`; raises OSError only when the sandbox
    itself cannot be started (e.g. no memory to fork)."""
    if mode == "auto":
        namespaces = isolation() == "namespaces"
    elif mode == "namespaces":
        if isolation() != "namespaces":
            raise RuntimeError(
                "namespaces sandbox unavailable: it needs root (euid 0) and working "
                f"{_UNSHARE} (--net --mount --pid), {_SETPRIV} and {_NS_PYTHON}; "
                "use mode='rlimits' or mode='auto'")
        namespaces = True
    elif mode == "rlimits":
        namespaces = False
    else:
        raise ValueError(f"mode must be 'auto', 'namespaces' or 'rlimits', not {mode!r}")
    return _run(source, limits, stdin, namespaces)


# ----------------------------------------------------------------------------- internals

def _encode(text, errors: str) -> bytes:
    if isinstance(text, bytes):
        return text
    text = str(text)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", errors)
        except UnicodeEncodeError:
            return text.encode("utf-8", "replace")


def _user_tasks(uid: int) -> int:
    """Tasks (threads) of `uid` now, which is what RLIMIT_NPROC counts."""
    n = 0
    try:
        names = os.listdir("/proc")
    except OSError:
        return 0
    for name in names:
        if not name.isdigit():
            continue
        try:
            if os.stat("/proc/" + name).st_uid == uid:
                n += len(os.listdir(f"/proc/{name}/task"))
        except OSError:
            continue
    return n


def _rlimit_plan(limits: Limits, nproc: int):
    cpu = max(1, math.ceil(limits.cpu_s))
    mem = max(1, int(limits.memory_mb)) << 20
    fsize = max(0, int(limits.file_mb)) << 20
    wanted = [(resource.RLIMIT_CPU, cpu, cpu + 1), (resource.RLIMIT_AS, mem, mem),
              (resource.RLIMIT_FSIZE, fsize, fsize), (resource.RLIMIT_CORE, 0, 0),
              (resource.RLIMIT_NPROC, nproc, nproc)]
    plan = []
    for res, soft, hard in wanted:
        try:
            _, cur_hard = resource.getrlimit(res)
        except (OSError, ValueError):
            continue
        if cur_hard != resource.RLIM_INFINITY and os.geteuid() != 0:
            hard = min(hard, cur_hard)
            soft = min(soft, hard)
        plan.append((res, (soft, hard)))
    return plan


_PRLIMIT = "/usr/bin/prlimit"
_PRLIMIT_NAMES = {resource.RLIMIT_CPU: "cpu", resource.RLIMIT_AS: "as", resource.RLIMIT_FSIZE: "fsize",
                  resource.RLIMIT_CORE: "core", resource.RLIMIT_NPROC: "nproc"}


def _prlimit_argv(plan) -> list:
    """`prlimit --cpu=S:H ... --` for the plan, or [] where util-linux's prlimit is absent
    (the limits are then set in a preexec_fn)."""
    if not os.access(_PRLIMIT, os.X_OK):
        return []
    return [_PRLIMIT] + [f"--{_PRLIMIT_NAMES[res]}={soft}:{hard}" for res, (soft, hard) in plan] + ["--"]


def _make_preexec(plan):
    setrlimit = resource.setrlimit

    def preexec():  # runs in the forked child: only setrlimit calls, nothing allocated
        for res, value in plan:
            try:
                setrlimit(res, value)
            except (OSError, ValueError):
                pass
    return preexec


def _read_stat(pid: int):
    """(ppid, state) of `pid` from /proc, or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    return int(fields[1]), fields[0]


def _children_of(ppid: int):
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = _read_stat(int(name))
            if st is not None and st[0] == ppid:
                out.append(int(name))
    return out


def _pidfd(pid: int) -> Optional[int]:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _kill_tree(pid: int, namespaces: bool) -> None:
    """SIGKILL the session of `pid` (our unreaped child, so its pgid cannot be reused). In
    namespaces mode also wait until the namespace's init, hence every process in the
    namespace, is gone."""
    init_fds = []
    if namespaces:
        try:
            for child in _children_of(pid):
                fd = _pidfd(child)
                if fd is None:
                    continue
                st = _read_stat(child)
                if st is not None and st[0] == pid:  # still unshare's child: the right process
                    init_fds.append(fd)
                else:
                    os.close(fd)
        except OSError:
            pass
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass
    for fd in init_fds:
        try:
            try:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            except (AttributeError, OSError):
                pass
            select.select([fd], [], [], 5.0)  # readable once init and its namespace are gone
        finally:
            os.close(fd)


def _wait_nohang(pid: int) -> bool:
    """True once `pid` has exited; does not reap it."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _size(n: int) -> str:
    if n >= 1024 and n % 1024 == 0:
        return f"{n // 1024} KiB" if n < (1 << 20) or n % (1 << 20) else f"{n >> 20} MiB"
    return f"{n} bytes"


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line:
            return line if len(line) <= 200 else line[:197] + "..."
    return ""


def _signame(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


def _run(source, limits: Limits, stdin, namespaces: bool) -> Result:
    src = _encode(source, "surrogatepass")
    payload = b"%012d" % len(src) + src + _encode(stdin or "", "replace")
    tag = "namespaces" if namespaces else "rlimits"
    out_cap = max(0, int(limits.output_bytes))
    wall = max(0.0, float(limits.wall_s))
    cpu_soft = max(1, math.ceil(limits.cpu_s))

    workdir = None
    fds = []
    try:
        in_r, in_w = os.pipe()
        fds += [in_r, in_w]
        out_r, out_w = os.pipe()
        fds += [out_r, out_w]
        st_r, st_w = os.pipe()
        fds += [st_r, st_w]
        if namespaces:
            # root is exempt from RLIMIT_NPROC; it binds the run's own uid: the program, its
            # threads and children, plus the namespace's init.
            plan = _rlimit_plan(limits, max(1, int(limits.procs)) + 1)
            argv = [_UNSHARE, "--net", "--mount", "--pid", "--fork", "--kill-child",
                    "--mount-proc", "/bin/sh", "-c", _SCRIPT, "sandbox",
                    str(max(1, int(limits.file_mb))), _BOOT, str(st_w),
                    str(SANDBOX_UIDS.start + secrets.randbelow(len(SANDBOX_UIDS)))]
            cwd = "/"
            env = {"PATH": _ENV_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
                   "HOME": "/tmp", "TMPDIR": "/tmp"}
        else:
            plan = _rlimit_plan(limits, _user_tasks(os.getuid()) + max(1, int(limits.procs)))
            workdir = tempfile.mkdtemp(prefix="sandbox-")
            argv = [sys.executable, "-I", "-u", "-c", _BOOT, "rl", "-1"]
            cwd = workdir
            env = {"PATH": _ENV_PATH, "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
                   "HOME": workdir, "TMPDIR": workdir}

        start = time.monotonic()
        deadline = start + wall
        # /usr/bin/prlimit sets the limits and execs the rest, so Popen needs no preexec_fn:
        # no Python runs between fork and exec (the parent is multithreaded: a trainer's XLA
        # threads may hold allocator locks at the fork), and it can spawn without fork().
        prefix = _prlimit_argv(plan)
        proc = subprocess.Popen(prefix + argv, stdin=in_r, stdout=out_w, stderr=subprocess.STDOUT,
                                cwd=cwd, env=env, pass_fds=(st_w,) if namespaces else (),
                                start_new_session=True,
                                preexec_fn=None if prefix else _make_preexec(plan), close_fds=True)
        for fd in (in_r, out_w, st_w):
            os.close(fd)
            fds.remove(fd)
        pid = proc.pid
        try:
            pidfd = _pidfd(pid)
            if pidfd is not None:
                fds.append(pidfd)
            return _supervise(proc, pidfd, in_w, out_r, st_r, payload, limits, out_cap,
                              deadline, start, cpu_soft, namespaces, tag, fds)
        finally:
            if proc.returncode is None:  # only on an internal error: never leak the tree
                _kill_tree(pid, namespaces)
                try:
                    os.waitpid(pid, 0)
                except ChildProcessError:
                    pass
                proc.returncode = -9
    finally:
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def _supervise(proc, pidfd, in_w, out_r, st_r, payload, limits, out_cap, deadline,
               start, cpu_soft, namespaces, tag, fds) -> Result:
    pid = proc.pid
    os.set_blocking(in_w, False)
    os.set_blocking(out_r, False)
    os.set_blocking(st_r, False)
    chunks = []
    kept = 0
    sent = 0
    stdin_open = True
    eof = False
    exited = False
    killed_for = None       # "timeout" | "output_limit"
    grace_end = None        # after exit, how long to wait for the pipe to close

    def close_stdin():
        nonlocal stdin_open
        if stdin_open:
            stdin_open = False
            fds.remove(in_w)
            os.close(in_w)

    if not payload:
        close_stdin()
    while True:
        now = time.monotonic()
        if not exited and now >= deadline:
            killed_for = "timeout"
            break
        if exited and (eof or now >= grace_end):
            break
        limit = (grace_end if exited else deadline) - now
        rlist = [] if eof else [out_r]
        if pidfd is not None and not exited:
            rlist.append(pidfd)
        wlist = [in_w] if stdin_open else []
        if pidfd is None and not exited:
            limit = min(limit, 0.05)
        if not rlist and not wlist:
            time.sleep(max(0.0, min(limit, 0.05)))
            r, w = [], []
        else:
            r, w, _ = select.select(rlist, wlist, [], max(0.0, limit))
        if w:
            try:
                n = os.write(in_w, payload[sent:sent + (1 << 16)])
                sent += n
                if sent >= len(payload):
                    close_stdin()
            except BlockingIOError:
                pass
            except OSError:  # EPIPE: the program stopped reading
                close_stdin()
        if out_r in r:
            try:
                data = os.read(out_r, 1 << 16)
            except BlockingIOError:
                data = None
            if data == b"":
                eof = True
            elif data:
                room = out_cap - kept
                if len(data) > room:
                    if room > 0:
                        chunks.append(data[:room])
                        kept += room
                    if not exited:
                        killed_for = "output_limit"
                        break
                    eof = True  # exited already: just stop reading
                else:
                    chunks.append(data)
                    kept += len(data)
        if not exited and (pidfd in r if pidfd is not None else _wait_nohang(pid)):
            exited = True
            close_stdin()
            # Leftover processes of the program's group (rlimits mode) go now; in
            # namespaces mode there are none left once unshare has exited.
            if not namespaces:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except OSError:
                    pass
            grace_end = time.monotonic() + (2.0 if namespaces else 0.5)

    if killed_for is not None:
        _kill_tree(pid, namespaces)
    close_stdin()
    _, wstatus, rusage = os.wait4(pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(wstatus)
    seconds = time.monotonic() - start
    if not exited and not namespaces:
        try:  # the leader is reaped; anything left in its group goes too
            os.killpg(pid, signal.SIGKILL)
        except OSError:
            pass
    output = b"".join(chunks).decode("utf-8", "replace")

    cpu_used = rusage.ru_utime + rusage.ru_stime
    sandbox_note = ""
    if namespaces:
        try:
            line = os.read(st_r, 256).decode("ascii", "replace").split()
        except OSError:
            line = []
        if len(line) == 2:
            wstatus, cpu_used = int(line[0]), float(line[1])
        elif killed_for is None:
            sandbox_note = "sandbox did not report the program's status; "
    return _classify(wstatus, killed_for, output, limits, seconds, tag, cpu_used, cpu_soft,
                     sandbox_note)


def _classify(wstatus, killed_for, output, limits, seconds, tag, cpu_used, cpu_soft,
              note) -> Result:
    def result(status, code, reason):
        return Result(status, code, output, seconds, tag, note + reason)

    if killed_for == "timeout":
        return result("timeout", None, f"ran past its {limits.wall_s:g} s wall-time limit")
    if killed_for == "output_limit":
        return result("output_limit", None,
                      f"killed at {_size(max(0, int(limits.output_bytes)))} of output")
    if os.WIFSIGNALED(wstatus):
        sig = os.WTERMSIG(wstatus)
        if sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu_used >= cpu_soft - 0.05):
            return result("cpu_limit", None,
                          f"ran past its {limits.cpu_s:g} s CPU-time limit ({_signame(sig)})")
        if sig == signal.SIGXFSZ:
            return result("file_limit", None,
                          f"wrote past its {limits.file_mb} MB file-size limit (SIGXFSZ)")
        return result("killed", None, f"killed by {_signame(sig)}")
    code = os.WEXITSTATUS(wstatus) if os.WIFEXITED(wstatus) else -1
    if code == 0:
        return result("ok", 0, "exit code 0")
    last = _last_line(output)
    if "MemoryError" in output:
        return result("memory_limit", code,
                      f"MemoryError (memory limit {limits.memory_mb} MB; exit code {code})")
    if "File too large" in output:
        return result("file_limit", code,
                      f"File too large (file-size limit {limits.file_mb} MB; exit code {code})")
    return result("error", code, f"exit code {code}: {last}" if last else f"exit code {code}")
