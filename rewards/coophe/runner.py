"""comlrl CoopHE sandbox runner: the untrusted side of a CoopHE run.

The judge (``judge.py``, trusted) starts this script with ``python3 -I -S -B runner.py``
(optionally under ``unshare``), writes one JSON job line to stdin and reads newline-delimited JSON
messages from file descriptor 3. Candidate prints go to stdout/stderr, which the judge caps and
keeps apart.

This process never sees a test: after loading the candidate's definitions it only answers calls
(``{"id", "f": name, "a": args, "k": kwargs, "t": alarm}``) with the plain value the function
returned, or the exception it raised. Candidate code shares this interpreter, so it can rewrite
anything here, forge any message on fd 3 or answer calls itself; that gains it nothing, because
the judge compares the answers with the expected values in its own process, decodes them into
fresh built-in objects (None, bool, int, float, complex, str, bytes, list, tuple, dict, set,
frozenset) and treats anything else as a failed call.

Order of work:
  1. trusted set-up: read the job, detach from the caller (own session, parent-death signal),
     close inherited descriptors, private tmpfs work dir, resource limits, Landlock, seccomp;
  2. trusted analysis: ``ast.parse`` of the combined code (the reward's syntax level) and, for
     feedback, the AST check of how ``main`` uses ``aux``. These events are written in full
     before any candidate code runs, so the judge can trust them;
  3. untrusted execution: ``exec`` of the combined code under a SIGALRM limit, then one call at
     a time, each under the SIGALRM limit the judge sends with it.
"""

import ast
import json
import math
import os
import signal
import sys

RESULT_FD = 3
MAX_JOB_BYTES = 256 * 1024 * 1024
MAX_REQUEST_BYTES = 64 * 1024 * 1024
MAX_REPLY_BYTES = 16 * 1024 * 1024
MAX_MESSAGE_CHARS = 65536
MAX_DEPTH = 100
BIG_INT = 1 << 63
RUNNER_PID = os.getpid()


class TimeoutException(Exception):
    """Raised by the SIGALRM handler; an ``Exception`` as in the reference, so candidate code
    that catches ``Exception`` swallows it exactly as it would there."""


_alarm_fired = [False]


def _on_alarm(signum, frame):
    _alarm_fired[0] = True
    raise TimeoutException("Code execution timed out")


class Channel:
    """The message channel to the judge (fd 3). A forked copy of the runner must never answer."""

    def emit(self, event):
        if os.getpid() != RUNNER_PID:
            os._exit(0)
        data = (json.dumps(event, ensure_ascii=True) + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            written = os.write(RESULT_FD, view)
            view = view[written:]


class LineReader:
    """Newline-delimited messages from stdin (the judge), read with ``os.read``."""

    def __init__(self, fd):
        self._fd = fd
        self._buf = bytearray()
        self._eof = False

    def readline(self, cap):
        """The next line (without its newline); None at end of input; ValueError beyond ``cap``."""
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line = bytes(self._buf[:nl])
                del self._buf[: nl + 1]
                return line
            if len(self._buf) > cap:
                raise ValueError("message over %d bytes" % cap)
            if self._eof:
                if not self._buf:
                    return None
                line = bytes(self._buf)
                self._buf.clear()
                return line
            chunk = os.read(self._fd, 1 << 20)
            if not chunk:
                self._eof = True
            else:
                self._buf += chunk


class _CappedBytes:
    """``sys.stdout.buffer`` of a :class:`CappedWriter` (shares its budget)."""

    def __init__(self, owner):
        self._owner = owner

    def write(self, data):
        data = bytes(data)
        self._owner._send(data)
        return len(data)

    def flush(self):
        return None


class CappedWriter:
    """Replaces sys.stdout/sys.stderr: keeps the first ``cap`` bytes, drops the rest in process,
    so an endless ``print`` loop spins (and times out) without flooding the pipe."""

    def __init__(self, fd, cap):
        self._fd = fd
        self._left = cap
        self.encoding = "utf-8"
        self.errors = "backslashreplace"
        self.buffer = _CappedBytes(self)

    def _send(self, data):
        if self._left > 0 and data:
            part = data[: self._left]
            self._left -= len(part)
            try:
                os.write(self._fd, part)
            except OSError:
                self._left = 0

    def write(self, text):
        if not isinstance(text, str):
            raise TypeError("write() argument must be str, not " + type(text).__name__)
        if self._left > 0 and text:
            # Encode at most what can still be kept (4 bytes per character at worst).
            self._send(text[: self._left].encode("utf-8", "backslashreplace"))
        return len(text)

    def flush(self):
        return None

    def isatty(self):
        return False

    def fileno(self):
        return self._fd

    def writable(self):
        return True


def _safe_str(value):
    """``str(value)`` capped at MAX_MESSAGE_CHARS (feedback texts quote exception messages)."""
    try:
        text = str(value)
    except BaseException:  # a hostile __str__ must not take the runner down
        text = "<unprintable>"
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS]
    return text


def _type_name(value):
    try:
        return str(type(value).__name__)
    except BaseException:
        return "BaseException"


def _disarm():
    signal.setitimer(signal.ITIMER_REAL, 0)


def _arm(seconds):
    signal.signal(signal.SIGALRM, _on_alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)


# ---------------------------------------------------------------------------------------------
# Linux isolation helpers (ctypes; every one of them degrades to "not applied" elsewhere)
# ---------------------------------------------------------------------------------------------

def _libc():
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    libc.prctl.restype = ctypes.c_int
    return ctypes, libc


PR_SET_PDEATHSIG = 1
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


def _prctl(libc, ctypes, option, arg2=0):
    return libc.prctl(ctypes.c_int(option), ctypes.c_ulong(arg2), ctypes.c_ulong(0),
                      ctypes.c_ulong(0), ctypes.c_ulong(0))


def _mount_tmpfs(ctypes, libc, path, size_mb, notes):
    """A size-capped private tmpfs at ``path`` (inside this mount namespace only); becomes cwd."""
    MS_NOSUID, MS_NODEV = 2, 4
    opts = ("size=%dm,mode=0700" % size_mb).encode()
    rc = libc.mount(b"tmpfs", path.encode(), b"tmpfs", ctypes.c_ulong(MS_NOSUID | MS_NODEV), opts)
    if rc != 0:
        notes.append("tmpfs: " + os.strerror(ctypes.get_errno()))
        return False
    os.chdir(path)
    return True


def _private_mount_namespace(cfg, notes):
    """True only when this process's mount namespace differs from the caller's (sent by Node).
    Mounting in the caller's namespace would change the host's file system: never do that."""
    host = cfg.get("host_mount_ns")
    try:
        own = os.readlink("/proc/self/ns/mnt")
    except OSError as e:
        notes.append("mount namespace: %s" % e)
        return False
    if not host or own == host:
        notes.append("mount namespace: not private, tmpfs and read-only root skipped")
        return False
    return True


def _readonly_root(ctypes, libc, notes):
    class MountAttr(ctypes.Structure):
        _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                    ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]

    SYS_mount_setattr, AT_FDCWD, AT_RECURSIVE, MOUNT_ATTR_RDONLY = 442, -100, 0x8000, 1
    attr = MountAttr(MOUNT_ATTR_RDONLY, 0, 0, 0)
    rc = libc.syscall(ctypes.c_long(SYS_mount_setattr), ctypes.c_long(AT_FDCWD), b"/",
                      ctypes.c_long(AT_RECURSIVE), ctypes.byref(attr),
                      ctypes.c_size_t(ctypes.sizeof(attr)))
    if rc != 0:
        notes.append("read-only root: " + os.strerror(ctypes.get_errno()))
        return False
    return True


LL_EXECUTE, LL_WRITE_FILE, LL_READ_FILE, LL_READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
LL_REFER, LL_TRUNCATE, LL_IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
LL_FILE_RIGHTS = LL_EXECUTE | LL_WRITE_FILE | LL_READ_FILE | LL_TRUNCATE | LL_IOCTL_DEV
LL_NET_BIND_TCP, LL_NET_CONNECT_TCP = 1, 2
LL_SCOPE_ABSTRACT_UNIX, LL_SCOPE_SIGNAL = 1, 2


def _landlock_abi(ctypes, libc):
    abi = libc.syscall(ctypes.c_long(444), ctypes.c_void_p(None), ctypes.c_size_t(0),
                       ctypes.c_long(1))
    return abi if abi > 0 else 0


def _landlock(ctypes, libc, workdir, read_paths, notes):
    """Writes only beneath the work dir, reads only beneath the interpreter's and system library
    directories; TCP bind/connect denied (ABI >= 4); signals and abstract unix sockets scoped to
    the sandbox (ABI >= 6). Returns the ABI applied, 0 when unavailable."""
    abi = _landlock_abi(ctypes, libc)
    if abi <= 0:
        notes.append("landlock: unavailable")
        return 0

    class RulesetAttr(ctypes.Structure):
        _fields_ = [("handled_access_fs", ctypes.c_uint64),
                    ("handled_access_net", ctypes.c_uint64),
                    ("scoped", ctypes.c_uint64)]

    class PathBeneath(ctypes.Structure):
        _pack_ = 1
        _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]

    fs_all = (1 << 13) - 1
    if abi >= 2:
        fs_all |= LL_REFER
    if abi >= 3:
        fs_all |= LL_TRUNCATE
    if abi >= 5:
        fs_all |= LL_IOCTL_DEV
    attr = RulesetAttr(fs_all, 0, 0)
    size = 8
    if abi >= 4:
        attr.handled_access_net = LL_NET_BIND_TCP | LL_NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL
        size = 24
    ruleset = libc.syscall(ctypes.c_long(444), ctypes.byref(attr), ctypes.c_size_t(size),
                           ctypes.c_long(0))
    if ruleset < 0:
        notes.append("landlock: create_ruleset " + os.strerror(ctypes.get_errno()))
        return 0

    def allow(path, rights):
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except OSError:
            return
        try:
            if not os.path.isdir(path):
                rights &= LL_FILE_RIGHTS
            rule = PathBeneath(rights & fs_all, fd)
            rc = libc.syscall(ctypes.c_long(445), ctypes.c_long(ruleset), ctypes.c_long(1),
                              ctypes.byref(rule), ctypes.c_long(0))
            if rc != 0:
                notes.append("landlock: rule for %s: %s" % (path, os.strerror(ctypes.get_errno())))
        finally:
            os.close(fd)

    read_rights = LL_EXECUTE | LL_READ_FILE | LL_READ_DIR
    for path in read_paths:
        allow(path, read_rights)
    for dev in ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"):
        allow(dev, LL_READ_FILE | LL_WRITE_FILE | LL_TRUNCATE | LL_IOCTL_DEV)
    allow(workdir, fs_all)
    try:
        if _prctl(libc, ctypes, PR_SET_NO_NEW_PRIVS, 1) != 0:
            notes.append("landlock: no_new_privs " + os.strerror(ctypes.get_errno()))
            return 0
        rc = libc.syscall(ctypes.c_long(446), ctypes.c_long(ruleset), ctypes.c_long(0))
        if rc != 0:
            notes.append("landlock: restrict_self " + os.strerror(ctypes.get_errno()))
            return 0
    finally:
        os.close(ruleset)
    return abi


# Syscall numbers for the seccomp filter (x86_64, aarch64).
_SYSCALLS = {
    "x86_64": dict(arch=0xC000003E, fork=57, vfork=58, clone=56, clone3=435, kill=62, tkill=200,
                   tgkill=234, rt_sigqueueinfo=129, rt_tgsigqueueinfo=297, socket=41, execve=59,
                   execveat=322, ptrace=101, process_vm_readv=310, process_vm_writev=311,
                   pidfd_send_signal=424, pidfd_open=434, pidfd_getfd=438, mount=165, umount2=166,
                   unshare=272, setns=308, pivot_root=155, chroot=161, bpf=321,
                   perf_event_open=298, userfaultfd=323, keyctl=250, add_key=248, request_key=249,
                   io_uring_setup=425),
    "aarch64": dict(arch=0xC00000B7, clone=220, clone3=435, kill=129, tkill=130, tgkill=131,
                    rt_sigqueueinfo=138, rt_tgsigqueueinfo=240, socket=198, execve=221,
                    execveat=281, ptrace=117, process_vm_readv=270, process_vm_writev=271,
                    pidfd_send_signal=424, pidfd_open=434, pidfd_getfd=438, mount=40, umount2=39,
                    unshare=97, setns=268, pivot_root=41, chroot=51, bpf=280, perf_event_open=241,
                    userfaultfd=282, keyctl=219, add_key=217, request_key=218, io_uring_setup=425),
}


def _seccomp(ctypes, libc, notes):
    """A small allow-by-default filter: no new processes (threads stay possible), no exec, no
    sockets but AF_UNIX, signals only to this process or its own group, no namespace, mount,
    ptrace, bpf or io_uring calls."""
    table = _SYSCALLS.get(os.uname().machine)
    if table is None:
        notes.append("seccomp: unsupported machine " + os.uname().machine)
        return False
    LD_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
    ALLOW, KILL_PROCESS = 0x7FFF0000, 0x80000000
    EPERM, EACCES, ENOSYS = 1, 13, 38

    def errno(e):
        return 0x00050000 | e

    pid = os.getpid()
    u32 = lambda v: v & 0xFFFFFFFF  # noqa: E731
    ARG0 = 16  # seccomp_data.args[0], low 32 bits (little-endian)

    def deny(e):
        return [(RET, 0, 0, errno(e))]

    def arg0_in(values, e):
        block = [(LD_ABS, 0, 0, ARG0)]
        for j, value in enumerate(values):
            block.append((JEQ, len(values) - j, 0, u32(value)))
        return block + [(RET, 0, 0, errno(e)), (RET, 0, 0, ALLOW)]

    rules = []
    for name in ("fork", "vfork", "execve", "execveat", "ptrace", "process_vm_readv",
                 "process_vm_writev", "pidfd_send_signal", "pidfd_open", "pidfd_getfd", "mount",
                 "umount2", "unshare", "setns", "pivot_root", "chroot", "bpf", "perf_event_open",
                 "userfaultfd", "keyctl", "add_key", "request_key", "io_uring_setup"):
        if name in table:
            rules.append((table[name], deny(EPERM)))
    # clone3 cannot be inspected (its flags sit behind a pointer): ENOSYS makes libc fall back
    # to clone, whose flags can be, and which is allowed for threads only.
    rules.append((table["clone3"], deny(ENOSYS)))
    rules.append((table["clone"], [(LD_ABS, 0, 0, ARG0), (JSET, 1, 0, 0x00010000),
                                   (RET, 0, 0, errno(EPERM)), (RET, 0, 0, ALLOW)]))
    rules.append((table["kill"], arg0_in([pid, 0, -pid], EPERM)))
    for name in ("tkill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
        rules.append((table[name], arg0_in([pid], EPERM)))
    rules.append((table["socket"], arg0_in([1], EACCES)))  # AF_UNIX only

    prog = [(LD_ABS, 0, 0, 4), (JEQ, 1, 0, table["arch"]), (RET, 0, 0, KILL_PROCESS),
            (LD_ABS, 0, 0, 0)]
    if os.uname().machine == "x86_64":
        prog += [(JGE, 0, 1, 0x40000000), (RET, 0, 0, errno(EPERM))]  # x32 ABI
    for nr, block in rules:
        prog.append((JEQ, 0, len(block), nr))
        prog.extend(block)
    prog.append((RET, 0, 0, ALLOW))

    class SockFilter(ctypes.Structure):
        _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte),
                    ("k", ctypes.c_uint32)]

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(SockFilter))]

    array = (SockFilter * len(prog))(*[SockFilter(*ins) for ins in prog])
    fprog = SockFprog(len(prog), ctypes.cast(array, ctypes.POINTER(SockFilter)))
    if _prctl(libc, ctypes, PR_SET_NO_NEW_PRIVS, 1) != 0:
        notes.append("seccomp: no_new_privs " + os.strerror(ctypes.get_errno()))
        return False
    rc = libc.prctl(ctypes.c_int(PR_SET_SECCOMP), ctypes.c_ulong(SECCOMP_MODE_FILTER),
                    ctypes.byref(fprog), ctypes.c_ulong(0), ctypes.c_ulong(0))
    if rc != 0:
        notes.append("seccomp: " + os.strerror(ctypes.get_errno()))
        return False
    return True


def _set_limit(resource, name, soft, notes, applied):
    res = getattr(resource, name, None)
    if res is None or soft is None:
        return
    try:
        _, cur_hard = resource.getrlimit(res)
        hard = soft if cur_hard == resource.RLIM_INFINITY else min(soft, cur_hard)
        resource.setrlimit(res, (min(soft, hard), hard))
        applied[name] = min(soft, hard)
    except (ValueError, OSError) as e:
        notes.append("%s: %s" % (name, e))


def _default_read_paths():
    paths = []
    for p in (sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix,
              os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
              "/usr", "/lib", "/lib64", "/lib32", "/libx32"):
        if p and p not in paths and os.path.exists(p):
            paths.append(p)
    return paths


def _watchdog(seconds, notes):
    """Ends the runner after its wall-clock budget even if Node is gone, so no orphan keeps
    running. Started after the sandbox is applied (threads inherit Landlock and seccomp); it
    calls only functions captured here, so candidate monkeypatching of ``os`` cannot reach it."""
    import _thread
    import time

    def sleeper(_sleep=time.sleep, _exit=os._exit):
        _sleep(seconds)
        _exit(124)

    try:
        _thread.start_new_thread(sleeper, ())
    except RuntimeError as e:
        notes.append("watchdog: %s" % e)


def apply_sandbox(cfg):
    notes = []
    iso = {"landlock_abi": 0, "landlock": False, "seccomp": False, "tmpfs": False,
           "readonly_root": False, "pid_namespace": os.getpid() == 1, "rlimits": {},
           "platform": sys.platform, "python": sys.version.split()[0], "notes": notes}
    try:
        os.setsid()  # own session and process group: kill(0) and kill(-pgid) stay inside
    except OSError:
        pass
    linux = sys.platform.startswith("linux")
    ctypes = libc = None
    if linux:
        try:
            ctypes, libc = _libc()
            _prctl(libc, ctypes, PR_SET_PDEATHSIG, signal.SIGKILL)
        except OSError as e:
            notes.append("libc: %s" % e)
            ctypes = libc = None
    try:
        os.closerange(RESULT_FD + 1, 1 << 16)
    except OSError:
        pass
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # oversized writes fail (EFBIG), not kill
    workdir = os.getcwd()
    if libc is not None and cfg.get("mount_namespace") and _private_mount_namespace(cfg, notes):
        if cfg.get("readonly_root", True):
            iso["readonly_root"] = _readonly_root(ctypes, libc, notes)
        # The tmpfs goes over /tmp, not over Node's work dir: a mount point held by a namespace
        # that is still being torn down could not be removed (EBUSY) once the run ends.
        target = "/tmp" if os.path.isdir("/tmp") else workdir
        if _mount_tmpfs(ctypes, libc, target, int(cfg.get("tmpfs_mb", 64)), notes):
            iso["tmpfs"] = True
            workdir = target
    try:
        import resource
    except ImportError:
        resource = None
        notes.append("resource module unavailable")
    if resource is not None:
        mb = 1024 * 1024
        applied = iso["rlimits"]
        _set_limit(resource, "RLIMIT_CORE", 0, notes, applied)
        _set_limit(resource, "RLIMIT_CPU", cfg.get("cpu_s"), notes, applied)
        if cfg.get("memory_mb"):
            _set_limit(resource, "RLIMIT_AS", int(cfg["memory_mb"]) * mb, notes, applied)
        if cfg.get("file_size_mb") is not None:
            _set_limit(resource, "RLIMIT_FSIZE", int(cfg["file_size_mb"]) * mb, notes, applied)
        _set_limit(resource, "RLIMIT_NOFILE", cfg.get("open_files"), notes, applied)
        _set_limit(resource, "RLIMIT_NPROC", cfg.get("processes"), notes, applied)
    if libc is not None and cfg.get("landlock", True):
        read_paths = _default_read_paths() + list(cfg.get("read_paths", []))
        abi = _landlock(ctypes, libc, workdir, read_paths, notes)
        iso["landlock_abi"] = abi
        iso["landlock"] = abi > 0
    elif libc is not None:
        iso["landlock_abi"] = _landlock_abi(ctypes, libc)
    if libc is not None and cfg.get("seccomp", True):
        iso["seccomp"] = _seccomp(ctypes, libc, notes)
    if cfg.get("wall_clock_s"):
        _watchdog(float(cfg["wall_clock_s"]), notes)
    return iso


# ---------------------------------------------------------------------------------------------
# Trusted analysis
# ---------------------------------------------------------------------------------------------

def syntax_check(code):
    """The reward's level 2 (``ast.parse``). Returns (ok, message, line, offset, msg)."""
    try:
        ast.parse(code)
        return True, "Combined code syntax OK", None, None, None
    except SyntaxError as e:
        return False, "Combined code has syntax error: " + _safe_str(e), e.lineno, e.offset, e.msg
    except (ValueError, RecursionError, MemoryError, OverflowError) as e:
        # The reference only catches SyntaxError (these would escape it, e.g. a NUL byte on
        # Python 3.11); here they count as a failed syntax level instead of crashing the reward.
        return False, "Combined code has syntax error: " + _safe_str(e), None, None, None


def aux_misuse(main_code, name="aux"):
    """How ``main`` uses the result of ``aux(...)`` (feedback text only, never the reward).

    Mirrors the reference detector including its flaw: a variable's later reads are looked up
    in the reads recorded *so far* in a pre-order walk, so ``x = aux(...)`` is reported as
    "assigned to x but never used" unless x was already read on a later line earlier in the
    walk (deliberate, it defines the feedback text)."""
    if not main_code or name not in main_code:
        return []
    try:
        tree = ast.parse(main_code)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return []
    parents = {}
    reads = {}
    problems = []

    def reassigned_before_use(var, line):
        assigned, used = [], []
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign) and node.lineno > line:
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id == var:
                        assigned.append(node.lineno)
            if (isinstance(node, ast.Name) and node.id == var
                    and isinstance(node.ctx, ast.Load) and node.lineno > line):
                used.append(node.lineno)
        if not assigned:
            return None
        first = min(assigned)
        return first if first < (min(used) if used else float("inf")) else None

    def classify(call):
        parent = parents.get(call)
        if parent is None:
            return "standalone call (not assigned)"
        if isinstance(parent, (ast.Return, ast.Call, ast.BinOp, ast.UnaryOp, ast.Compare,
                               ast.List, ast.Tuple, ast.Set, ast.Dict)):
            return None
        if isinstance(parent, (ast.If, ast.While)) and parent.test is call:
            return None
        if isinstance(parent, ast.Assign):
            for target in parent.targets:
                if isinstance(target, ast.Name):
                    var = target.id
                    later = [ln for ln in reads.get(var, []) if ln > parent.lineno]
                    if not later:
                        return "assigned to %s but never used" % var
                    again = reassigned_before_use(var, parent.lineno)
                    if again:
                        return "assigned to %s but reassigned on line %d before use" % (var, again)
            return None
        if isinstance(parent, ast.Expr):
            return "standalone call (not assigned)"
        return None

    def visit(node):
        children = list(ast.iter_child_nodes(node))
        for child in children:
            parents[child] = node
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name:
            reason = classify(node)
            if reason:
                problems.append("Line %d: %s" % (node.lineno, reason))
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            reads.setdefault(node.id, []).append(node.lineno)
        for child in children:
            visit(child)

    try:
        visit(tree)
    except RecursionError:
        return []
    return problems


# ---------------------------------------------------------------------------------------------
# Wire values: the same plain-data encoding as judge.py (only its decoder there is trusted)
# ---------------------------------------------------------------------------------------------

class Unrepresentable(Exception):
    """A value that is not plain data (or is nested too deeply)."""


def to_wire(value, depth=0):
    """JSON-ready form of a plain value: None, bool, int, str as themselves, a list as a JSON
    array, the other types tagged (``{"f": repr}`` float, ``{"t": [...]}`` tuple, ``{"d": [[k,
    v], ...]}`` dict, ``{"s"|"z": [...]}`` set/frozenset, ``{"c": [re, im]}`` complex, ``{"b":
    hex}`` bytes). Exact types only: subclasses are not plain data."""
    if depth > MAX_DEPTH:
        raise Unrepresentable("a value nested more than %d levels deep" % MAX_DEPTH)
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        # Large ints travel in hex: decimal conversion is capped (4300 digits) and quadratic.
        return value if -BIG_INT < value < BIG_INT else {"x": int.__format__(value, "x")}
    if t is float:
        return {"f": float.__repr__(value)}
    if t is list:
        return [to_wire(v, depth + 1) for v in value]
    if t is tuple:
        return {"t": [to_wire(v, depth + 1) for v in value]}
    if t is dict:
        return {"d": [[to_wire(k, depth + 1), to_wire(v, depth + 1)] for k, v in value.items()]}
    if t is set:
        return {"s": [to_wire(v, depth + 1) for v in value]}
    if t is frozenset:
        return {"z": [to_wire(v, depth + 1) for v in value]}
    if t is complex:
        return {"c": [float.__repr__(value.real), float.__repr__(value.imag)]}
    if t is bytes:
        return {"b": value.hex()}
    raise Unrepresentable("a value of type %s is not plain data" % _type_name(value))


def _float(text):
    if type(text) is not str or len(text) > 40:
        raise ValueError("bad float")
    return float(text)


def from_wire(value, depth=0):
    """The inverse of :func:`to_wire` (arguments sent by the judge)."""
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    t = type(value)
    if value is None or t is bool or t is int or t is str:
        return value
    if t is list:
        return [from_wire(v, depth + 1) for v in value]
    if t is dict and len(value) == 1:
        (tag, body), = value.items()
        if tag == "f":
            return _float(body)
        if tag == "x":
            return int(body, 16)
        if tag == "c":
            return complex(_float(body[0]), _float(body[1]))
        if tag == "b":
            return bytes.fromhex(body)
        items = [from_wire(v, depth + 1) for v in body]
        if tag == "t":
            return tuple(items)
        if tag == "d":
            return {k: v for k, v in items}
        if tag == "s":
            return set(items)
        if tag == "z":
            return frozenset(items)
    raise ValueError("not a wire value")


# ---------------------------------------------------------------------------------------------
# Untrusted execution
# ---------------------------------------------------------------------------------------------

def _load(code, env, seconds, channel):
    """``exec`` of the definitions. The reference sets no limit here (a hanging default argument
    would hang it); here it is the per-test limit, and a timeout counts as a failed load."""
    try:
        _arm(seconds)
        try:
            exec(code, env)
            _disarm()
            outcome = {"ev": "exec", "ok": True}
        except BaseException as e:
            _disarm()
            outcome = {"ev": "exec", "ok": False, "error_type": _type_name(e),
                       "error_message": _safe_str(e)}
    except TimeoutException as e:
        _disarm()
        outcome = {"ev": "exec", "ok": False, "error_type": "TimeoutException",
                   "error_message": _safe_str(e)}
    channel.emit(outcome)
    return outcome["ok"]


def _call(env, request):
    """Runs one call; returns the reply (without its id)."""
    try:
        name = request["f"]
        args = [from_wire(a) for a in request.get("a", [])]
        kwargs = {k: from_wire(v) for k, v in request.get("k", [])}
        alarm = request.get("t")
    except (KeyError, TypeError, ValueError) as e:
        return {"e": "ValueError", "m": "malformed call: " + _safe_str(e)}
    _alarm_fired[0] = False
    try:
        if alarm is not None:
            _arm(max(float(alarm), 1e-3))
        try:
            if name not in env:
                raise NameError("name '%s' is not defined" % name)
            result = env[name](*args, **kwargs)
            try:
                data = json.dumps({"r": to_wire(result)}, ensure_ascii=True)
            except (Unrepresentable, ValueError, RecursionError) as e:
                data = None
                reply = {"e": "TypeError", "m": "the return value is not plain data: " + _safe_str(e)}
            if data is not None and len(data) > MAX_REPLY_BYTES:
                data = None
                reply = {"e": "OverflowError", "m": "the return value is over %d bytes" % MAX_REPLY_BYTES}
            _disarm()
            if data is not None:
                reply = {"raw": data}
        except TimeoutException as e:
            _disarm()
            reply = {"e": "TimeoutException", "m": _safe_str(e), "to": True}
        except BaseException as e:  # SystemExit, KeyboardInterrupt, ...: a failed call here
            _disarm()
            reply = {"e": _type_name(e), "m": _safe_str(e)}
    except TimeoutException as e:  # the alarm fired between the call and the disarm
        _disarm()
        reply = {"e": "TimeoutException", "m": _safe_str(e), "to": True}
    reply["x"] = _alarm_fired[0]
    return reply


def serve(reader, env, channel):
    """Answers the judge's calls until its end of stdin closes."""
    while True:
        try:
            line = reader.readline(MAX_REQUEST_BYTES)
        except ValueError:
            return
        if line is None:
            return
        try:
            request = json.loads(line.decode("utf-8"))
            call_id = request["id"]
        except (ValueError, KeyError, TypeError, UnicodeDecodeError):
            continue
        reply = _call(env, request)
        if os.getpid() != RUNNER_PID:
            os._exit(0)
        raw = reply.pop("raw", None)
        if raw is not None:
            # The encoded value is spliced in as is (it was encoded under the alarm).
            head = json.dumps({"id": call_id, "x": reply["x"]}, ensure_ascii=True)
            data = (head[:-1] + ", " + raw[1:] + "\n").encode("ascii")
            view = memoryview(data)
            while view:
                view = view[os.write(RESULT_FD, view):]
        else:
            # The id goes first: the judge looks for lines that start with it.
            channel.emit(dict([("id", call_id)] + list(reply.items())))


def main():
    # argv may carry a tag (--comlrl-sandbox=...) that only serves to find the process by name.
    reader = LineReader(0)
    line = reader.readline(MAX_JOB_BYTES)
    job = json.loads((line or b"{}").decode("utf-8"))
    channel = Channel()
    cfg = job.get("sandbox", {})
    isolation = apply_sandbox(cfg)
    # Calls arrive on a private copy of stdin; fd 0 itself reads /dev/null, so candidate code
    # that calls input() gets EOFError (as with the reference's detached stdin) instead of
    # swallowing the judge's requests.
    reader._fd = os.dup(0)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    cap = int(cfg.get("output_chars", 65536))
    sys.stdout = CappedWriter(1, cap)
    sys.stderr = CappedWriter(2, cap)
    # Without `site` (-S) the exit()/quit() builtins are missing; candidates expect them.
    import site

    site.setquit()
    channel.emit({"ev": "ready", "isolation": isolation})
    if job.get("mode") == "probe":
        return
    if job.get("main_func") is not None:
        channel.emit({"ev": "analysis", "problems": aux_misuse(job["main_func"])})
    ok, message, line_no, offset, msg = syntax_check(job["code"])
    channel.emit({"ev": "syntax", "ok": ok, "message": message, "line": line_no,
                  "offset": offset, "msg": msg})
    if not ok or not job.get("exec"):
        return
    env = {"math": math} if job.get("inject_math") else {}
    code = job["code"]
    seconds = float(job.get("test_timeout_s", 10))
    job = line = None  # the job text is not left lying around for candidate code
    if _load(code, env, seconds, channel):
        serve(reader, env, channel)


if __name__ == "__main__":
    # os._exit skips interpreter shutdown: candidate atexit hooks, finalizers and threads never run.
    try:
        main()
    except BaseException:
        import traceback

        try:
            os.write(2, traceback.format_exc().encode("utf-8", "backslashreplace"))
        finally:
            os._exit(2)
    os._exit(0)
