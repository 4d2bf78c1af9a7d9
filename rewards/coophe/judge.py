"""comlrl CoopHE judge: the trusted side of a CoopHE run.

Node starts this script with ``python3 -I -S -B judge.py`` and writes JSON jobs to stdin, one per
line; for each, the judge reports newline-delimited JSON events on stdout, ending with ``done``,
then waits for the next. It never executes candidate code. It
starts the sandboxed runner (``runner.py``, possibly under ``unshare``) as a child with nothing
but four pipes (job and calls in, candidate stdout, candidate stderr, answers out), and runs the
problem's tests itself: every name a test uses that is not a built-in (the entry point, usually)
is a stub whose calls go to the runner, which answers with the plain value the candidate
function returned or the exception it raised.

Why candidate code cannot fake a pass: the tests, the expected values, the comparisons, the
timeout rule and the result events live in this process, which shares no memory, interpreter,
file descriptor or secret with the candidate. An answer is only data: it is parsed with size
caps into fresh built-in objects (None, bool, int, float, complex, str, bytes, list, tuple, dict,
set, frozenset; exact types), and anything else (another type, a malformed or oversized answer,
a crash, a hang) makes that call fail. So a candidate passes a test only by returning a value
equal to the expected one, as computed by trusted code.

Semantics kept from the reference (``execute_reward_aux``): the definitions are executed once in
fresh globals (``{"math": math}`` in the upstream variant); each test runs under one 10 s limit,
raised inside candidate code (SIGALRM in the runner) so that code catching ``Exception`` swallows
it as there; with double evaluation, ``f(args)`` and the expected value are evaluated before the
assert, so the function runs twice and its side effects count; after ``max_timeouts`` timeouts the
rest are skipped. Where the reference would crash or hang (candidate ``exit()``, a killed or
stuck interpreter), the test at fault fails (or times out) and a fresh runner resumes with the
next test.

What stays untrusted: whether loading the definitions raised is reported by the runner after
candidate code (default arguments) has run, so a definition that raises after planting a working
function under the tested name can still be credited for that function's correct answers (the
reference would credit none). Results that are not plain data (a ``Fraction``, a generator) fail
even where the reference's comparison would have accepted them.
"""

import builtins
import json
import math
import os
import re
import select
import signal
import sys
import time

MAX_JOB_BYTES = 512 * 1024 * 1024
# One message from the runner, and everything read from it while waiting for one answer.
MAX_LINE_BYTES = 16 * 1024 * 1024
MAX_READ_PER_WAIT = 64 * 1024 * 1024
MAX_DEPTH = 100
BIG_INT = 1 << 63
_HEX = re.compile(r"-?[1-9a-f][0-9a-f]*")
MAX_MESSAGE_CHARS = 65536
TIMEOUT_MESSAGE = "Code execution timed out"
EQ_TEST = re.compile(r"assert\s+(\w+)\(([^)]*)\)\s*==\s*(.+)")
BUILTIN_NAMES = frozenset(dir(builtins))


class TimeoutException(Exception):
    """The test overran its limit."""


class CandidateError(Exception):
    """A call raised in the candidate's process (type name and message as reported there)."""

    def __init__(self, error_type, message):
        super().__init__(message)
        self.error_type = error_type
        self.message = message


class RunnerLost(Exception):
    """The runner died, hung or broke the protocol; it has been killed.
    ``kind`` is ``timeout`` (it overran), ``deadline`` (the call's wall clock) or ``fail``."""

    def __init__(self, kind, message):
        super().__init__(message)
        self.kind = kind
        self.message = message


class _DecodeOverrun(BaseException):
    """SIGALRM while decoding an answer (a BaseException: nothing in the decoder catches it)."""


def _decode_overrun(signum, frame):
    raise _DecodeOverrun()


class HarnessLimit(Exception):
    """A test passes something to the candidate that cannot cross the process boundary."""


def _cap(text):
    text = text if type(text) is str else str(text)
    return text[:MAX_MESSAGE_CHARS]


def _emit(event):
    data = (json.dumps(event, ensure_ascii=True) + "\n").encode("ascii")
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(1, view):]
    except OSError:  # Node is gone: nothing left to report to
        os._exit(3)


# ---------------------------------------------------------------------------------------------
# Wire values (the decoder is the trusted boundary: it builds fresh built-in objects only)
# ---------------------------------------------------------------------------------------------

def to_wire(value, depth=0):
    """JSON-ready form of an argument (see runner.py ``to_wire``; exact types only)."""
    if depth > MAX_DEPTH:
        raise HarnessLimit("an argument nested more than %d levels deep" % MAX_DEPTH)
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        # Large ints travel in hex: decimal conversion is capped (4300 digits) and quadratic.
        return value if -BIG_INT < value < BIG_INT else {"x": format(value, "x")}
    if t is float:
        return {"f": repr(value)}
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
        return {"c": [repr(value.real), repr(value.imag)]}
    if t is bytes:
        return {"b": value.hex()}
    raise HarnessLimit("an argument of type %s cannot be passed to the sandboxed candidate"
                       % type(value).__name__)


class BadAnswer(Exception):
    """The answer is not a well-formed plain value."""


def _float(text):
    # Only the canonical repr is accepted, so each float has exactly one spelling.
    if type(text) is not str or len(text) > 40:
        raise BadAnswer("malformed float")
    try:
        value = float(text)
    except ValueError:
        raise BadAnswer("malformed float") from None
    if repr(value) != text:
        raise BadAnswer("malformed float")
    return value


def from_wire(value, depth=0):
    """A fresh plain value from an answer's JSON (already parsed by ``json.loads``, which only
    produces dict, list, str, int, bool and None here: floats and NaN/Infinity are refused)."""
    if depth > MAX_DEPTH:
        raise BadAnswer("a value nested more than %d levels deep" % MAX_DEPTH)
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
            if type(body) is not str or not _HEX.fullmatch(body):
                raise BadAnswer("malformed int")
            value = int(body, 16)
            if -BIG_INT < value < BIG_INT:
                raise BadAnswer("malformed int")  # one spelling per value
            return value
        if tag == "c":
            if type(body) is not list or len(body) != 2:
                raise BadAnswer("malformed complex")
            return complex(_float(body[0]), _float(body[1]))
        if tag == "b":
            if type(body) is not str:
                raise BadAnswer("malformed bytes")
            try:
                return bytes.fromhex(body)
            except ValueError:
                raise BadAnswer("malformed bytes") from None
        if type(body) is not list:
            raise BadAnswer("malformed container")
        if tag == "t":
            return tuple(from_wire(v, depth + 1) for v in body)
        if tag == "d":
            out = {}
            for pair in body:
                if type(pair) is not list or len(pair) != 2:
                    raise BadAnswer("malformed dict item")
                key = from_wire(pair[0], depth + 1)
                try:
                    out[key] = from_wire(pair[1], depth + 1)
                except TypeError:
                    raise BadAnswer("unhashable dict key") from None
            return out
        if tag in ("s", "z"):
            try:
                items = set(from_wire(v, depth + 1) for v in body)
            except TypeError:
                raise BadAnswer("unhashable set element") from None
            return items if tag == "s" else frozenset(items)
    raise BadAnswer("not a plain value")


def _refuse(text):
    raise ValueError("non-integer number " + text[:20])


def parse_message(line):
    """One runner message as a dict, or None when it is not JSON of that shape."""
    try:
        value = json.loads(line.decode("utf-8"), parse_float=_refuse, parse_constant=_refuse)
    except (ValueError, RecursionError, UnicodeDecodeError, MemoryError):
        return None
    return value if type(value) is dict else None


# ---------------------------------------------------------------------------------------------
# The runner process
# ---------------------------------------------------------------------------------------------

class Output:
    """The candidate's stdout or stderr: the first ``cap`` bytes of all runners together."""

    def __init__(self, cap):
        self.cap = cap
        self.data = bytearray()

    def add(self, chunk):
        room = self.cap - len(self.data)
        if room > 0:
            self.data += chunk[:room]

    def text(self):
        return self.data.decode("utf-8", "replace")


class Runner:
    """One sandboxed runner process and its pipes. Everything it sends is untrusted except the
    events it writes before executing candidate code (ready, analysis, syntax)."""

    def __init__(self, command, cwd, stdout, stderr):
        self.status = None
        self.buffer = bytearray()
        self.events_eof = False
        self.budget = MAX_READ_PER_WAIT
        child_in, self.to_runner = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        ev_r, ev_w = os.pipe()
        # The child gets exactly these four descriptors (the judge's own are close-on-exec).
        actions = [(os.POSIX_SPAWN_DUP2, child_in, 0), (os.POSIX_SPAWN_DUP2, out_w, 1),
                   (os.POSIX_SPAWN_DUP2, err_w, 2), (os.POSIX_SPAWN_DUP2, ev_w, 3)]
        old = os.getcwd()
        os.chdir(cwd)
        try:
            spawn = os.posix_spawn if os.path.isabs(command[0]) else os.posix_spawnp
            self.pid = spawn(command[0], command, {}, file_actions=actions)
        finally:
            os.chdir(old)
            for fd in (child_in, out_w, err_w, ev_w):
                os.close(fd)
        os.set_blocking(self.to_runner, False)
        self.events = ev_r
        self.outputs = {out_r: stdout, err_r: stderr}

    def _wait(self, until, for_write):
        """Drains stdout/stderr and fd 3 (into ``buffer``) until fd 3 brought data or ended
        (reading) or the runner's stdin is writable (writing). False at ``until``."""
        while True:
            left = until - time.monotonic()
            if left <= 0:
                return False
            readers = list(self.outputs) + ([] if self.events_eof else [self.events])
            writers = [self.to_runner] if for_write else []
            r, w, _ = select.select(readers, writers, [], left)
            got_event = False
            for fd in r:
                try:
                    chunk = os.read(fd, 1 << 20)
                except OSError:
                    chunk = b""
                if fd == self.events:
                    got_event = True
                    if not chunk:
                        self.events_eof = True
                    else:
                        self.buffer += chunk
                        self.budget -= len(chunk)
                        if self.budget < 0:
                            self.lose("fail", "the sandbox sent over %d bytes for one answer"
                                      % MAX_READ_PER_WAIT)
                elif chunk:
                    self.outputs[fd].add(chunk)
                else:
                    del self.outputs[fd]
                    os.close(fd)
            if w or (got_event and not for_write):
                return True

    def send(self, message, until, deadline_kind):
        self.budget = MAX_READ_PER_WAIT
        data = (json.dumps(message, ensure_ascii=True) + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            if not self._wait(until, for_write=True):
                self.lose(deadline_kind, TIMEOUT_MESSAGE)
            try:
                view = view[os.write(self.to_runner, view):]
            except BlockingIOError:
                continue
            except OSError:  # EPIPE: the runner is gone
                self.lose("fail", None)

    def read_line(self, until, deadline_kind, prefix=None):
        """The next line from fd 3 (without its newline); with ``prefix``, the next line that
        starts with it, everything else being skipped in bulk (junk costs no parsing)."""
        while True:
            if prefix is not None:
                at = 0 if self.buffer.startswith(prefix) else self.buffer.find(b"\n" + prefix)
                if at < 0:
                    # Keep only the last partial line, which may still become a match.
                    cut = self.buffer.rfind(b"\n")
                    if cut >= 0:
                        del self.buffer[: cut + 1]
                elif at > 0:
                    del self.buffer[: at + 1]
            nl = self.buffer.find(b"\n")
            if nl >= 0 and (prefix is None or self.buffer.startswith(prefix)):
                line = bytes(self.buffer[:nl])
                del self.buffer[: nl + 1]
                return line
            if len(self.buffer) > MAX_LINE_BYTES:
                self.lose("fail", "the sandbox sent a message over %d bytes" % MAX_LINE_BYTES)
            if self.events_eof:
                self.lose("fail", None)
            if not self._wait(until, for_write=False):
                self.lose(deadline_kind, TIMEOUT_MESSAGE)

    def lose(self, kind, message):
        """Kills the runner and raises RunnerLost (message None: describe how it ended)."""
        self.kill(wait_for_exit=message is None)
        if message is None:
            message = self.describe_exit()
        raise RunnerLost(kind, message)

    def describe_exit(self):
        status = self.status
        if status is None:
            return "the test process ended"
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            try:
                name = signal.Signals(sig).name
            except ValueError:
                name = "signal %d" % sig
            return "the test process was killed by %s" % name
        return "the test process exited with status %d" % os.WEXITSTATUS(status)

    def kill(self, wait_for_exit=False):
        if self.status is not None:
            return
        try:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            # fd 3 closed: the runner is most likely exiting; give it a moment so that its own
            # exit status (not our SIGKILL) describes what happened.
            stop = time.monotonic() + (0.2 if wait_for_exit else 0)
            while pid == 0 and time.monotonic() < stop:
                time.sleep(0.005)
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid == 0:
                os.kill(self.pid, signal.SIGKILL)
                pid, status = os.waitpid(self.pid, 0)
            self.status = status
        except ChildProcessError:
            self.status = 0
        self._drain_outputs()
        for fd in [self.events, self.to_runner] + list(self.outputs):
            try:
                os.close(fd)
            except OSError:
                pass
        self.outputs = {}

    def _drain_outputs(self):
        # What the runner printed before it ended (its write ends are closed now).
        for fd, sink in list(self.outputs.items()):
            try:
                os.set_blocking(fd, False)
                while True:
                    chunk = os.read(fd, 1 << 16)
                    if not chunk:
                        break
                    sink.add(chunk)
            except OSError:
                pass

    def close(self):
        """Ends the runner after a finished job: closing its stdin lets it exit by itself."""
        if self.status is not None:
            return
        try:
            os.close(self.to_runner)
        except OSError:
            pass
        stop = time.monotonic() + 0.5
        try:
            while not self.events_eof and self._wait(stop, for_write=False):
                self.buffer.clear()
        except RunnerLost:
            return
        self.kill(wait_for_exit=True)


# ---------------------------------------------------------------------------------------------
# The judge
# ---------------------------------------------------------------------------------------------

class CandidateFunction:
    """Stands for the candidate's global ``name`` in the test code: calling it calls the function
    of that name in the sandbox and returns a fresh copy of the plain value it returned."""

    def __init__(self, judge, name):
        self._judge = judge
        self._name = name

    def __call__(self, *args, **kwargs):
        return self._judge.call(self._name, args, kwargs)

    def __repr__(self):
        return "<candidate %s>" % self._name


class Judge:
    def __init__(self, job):
        self.job = job
        self.code = job["code"]
        self.tests = list(job.get("tests", []))
        self.T = float(job.get("test_timeout_s", 10))
        self.grace = float(job.get("grace_s", 5))
        self.startup = float(job.get("startup_s", 20))
        self.deadline = time.monotonic() + float(job.get("wall_s", 600))
        self.max_timeouts = int(job.get("max_timeouts", 3))
        self.double_eval = bool(job.get("double_eval"))
        self.inject_math = bool(job.get("inject_math"))
        self.imports = job.get("imports") or ""
        self.import_names = None
        self.imported = None
        cap = int(job.get("output_limit", 65536))
        self.stdout = Output(cap)
        self.stderr = Output(cap)
        self.runner = None
        self.attempts = 0
        self.test_deadline = None
        self.alarm_spent = False
        self.warned = set()

    # -- runner life cycle ---------------------------------------------------------------

    def _until(self, seconds):
        return min(time.monotonic() + seconds, self.deadline)

    def _kind(self, until_phase):
        return "deadline" if until_phase >= self.deadline else "timeout"

    def start_runner(self, first):
        """Starts a runner and reads its trusted events. Returns (isolation, analysis, syntax),
        or raises RunnerLost; a runner that never reports ready raises RuntimeError."""
        self.attempts += 1
        sandbox = dict(self.job.get("sandbox", {}))
        remaining = max(1.0, self.deadline - time.monotonic())
        left_tests = len(self.tests)
        sandbox["cpu_s"] = int(math.ceil((left_tests + 2) * self.T + 10))
        sandbox["wall_clock_s"] = remaining + self.grace
        cwd = "attempt-%d" % self.attempts
        os.mkdir(cwd, 0o700)
        command = list(self.job["launcher"]) + [self.job["runner"],
                                                "--comlrl-sandbox=%s" % self.job.get("tag", "")]
        self.runner = Runner(command, cwd, self.stdout, self.stderr)
        message = {"mode": self.job.get("mode", "reward"), "sandbox": sandbox, "code": self.code,
                   "inject_math": self.inject_math, "test_timeout_s": self.T,
                   "exec": bool(self.tests),
                   "main_func": self.job.get("main_func") if first else None}
        until = self._until(self.startup)
        try:
            self.runner.send(message, until, "timeout")
            ready = parse_message(self.runner.read_line(until, "timeout"))
        except RunnerLost as e:
            if first:
                raise RuntimeError("the runner ended before locking itself down (%s): %s"
                                   % (e.message, self.stderr.text()[-1000:]))
            raise
        if not ready or ready.get("ev") != "ready":
            self.runner.kill()
            raise RuntimeError("the runner did not report ready: %s" % self.stderr.text()[-1000:])
        analysis = None
        syntax = None
        until = self._until(self.T + self.grace)
        try:
            while syntax is None:
                event = parse_message(self.runner.read_line(until, self._kind(until))) or {}
                if event.get("ev") == "analysis":
                    analysis = event.get("problems")
                elif event.get("ev") == "syntax":
                    syntax = event
        except RunnerLost as e:
            # The trusted parse itself did not finish (pathological input).
            syntax = {"ev": "syntax", "ok": False, "line": None, "offset": None, "msg": None,
                      "message": "Combined code has syntax error: the syntax check did not "
                                 "complete (%s)" % e.message}
            self.runner = None
        return ready.get("isolation"), analysis, syntax

    def load(self):
        """Waits for the runner's report on executing the definitions (untrusted: a faked "ok"
        only lets the tests call functions whose answers are still checked here)."""
        until = self._until(self.T + self.grace)
        self.runner.budget = MAX_READ_PER_WAIT
        try:
            while True:
                line = self.runner.read_line(until, self._kind(until), b'{"ev": "exec", ')
                event = parse_message(line)
                if event and event.get("ev") == "exec" and type(event.get("ok")) is bool:
                    if event["ok"]:
                        return {"ev": "exec", "ok": True}
                    return {"ev": "exec", "ok": False,
                            "error_type": _cap(event.get("error_type", "Exception")),
                            "error_message": _cap(event.get("error_message", ""))}
        except RunnerLost as e:
            self.runner = None
            if e.kind == "timeout":
                return {"ev": "exec", "ok": False, "error_type": "TimeoutException",
                        "error_message": TIMEOUT_MESSAGE}
            if e.kind == "deadline":
                e.message = "the call exceeded its wall-clock limit"
            return {"ev": "exec", "ok": False, "error_type": "ProcessExit",
                    "error_message": e.message}

    # -- calls ---------------------------------------------------------------------------

    def call(self, name, args, kwargs):
        """One call of the candidate's ``name`` within the current test's limit."""
        if self.runner is None:
            raise RunnerLost("fail", "the test process is gone")
        now = time.monotonic()
        if not self.alarm_spent and now >= self.test_deadline:
            raise TimeoutException(TIMEOUT_MESSAGE)
        try:
            wire_args = [to_wire(a) for a in args]
            wire_kwargs = [[k, to_wire(v)] for k, v in kwargs.items()]
        except RecursionError:
            raise HarnessLimit("an argument nested too deeply") from None
        # A random id: an answer can only come from code that has read this call's request.
        call_id = int.from_bytes(os.urandom(6), "big")
        # The reference's alarm fires once per test: once candidate code has swallowed it, the
        # rest of the test runs without one (the hard limit below still holds).
        alarm = None if self.alarm_spent else self.test_deadline - now
        message = {"id": call_id, "f": name, "a": wire_args, "k": wire_kwargs, "t": alarm}
        hard = min(self.test_deadline + self.grace, self.deadline)
        kind = self._kind(hard)
        runner = self.runner
        try:
            runner.send(message, hard, kind)
            prefix = b'{"id": %d, ' % call_id
            while True:
                reply = parse_message(runner.read_line(hard, kind, prefix))
                if reply is not None and type(reply.get("id")) is int and reply["id"] == call_id:
                    break
        except RunnerLost:
            self.runner = None
            raise
        if reply.get("x") is True:
            self.alarm_spent = True
        if "r" in reply:
            # Decoding is bounded in time too: sets and dicts of ints with colliding hashes
            # would otherwise make it quadratic.
            signal.signal(signal.SIGALRM, _decode_overrun)
            signal.setitimer(signal.ITIMER_REAL, max(1e-3, hard - time.monotonic()))
            try:
                return from_wire(reply["r"])
            except (BadAnswer, RecursionError, ValueError, MemoryError) as e:
                raise CandidateError("TypeError", "the answer is not plain data: %s" % e) from None
            except _DecodeOverrun:
                raise TimeoutException(TIMEOUT_MESSAGE) from None
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        if reply.get("to") is True:
            self.alarm_spent = True
            raise TimeoutException(_cap(reply.get("m", TIMEOUT_MESSAGE)))
        error_type = reply.get("e")
        if type(error_type) is not str:
            raise CandidateError("TypeError", "the answer is malformed")
        message = reply.get("m", "")
        raise CandidateError(_cap(error_type), _cap(message if type(message) is str else ""))

    # -- tests ---------------------------------------------------------------------------

    def _environment(self, evals, test):
        """Globals for a test: the built-ins, ``math`` where the variant injects it, and a
        :class:`CandidateFunction` for every other name the test uses (usually just the entry
        point). Built-in names stay the judge's own, whatever the candidate did to its copies."""
        env = {"__builtins__": builtins}
        if self.inject_math:
            env["math"] = math
        sources = [(piece, "eval") for piece in evals] + [(test, "exec")]
        for source, mode in sources:
            try:
                code = compile(source, "<test>", mode)
            except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
                continue  # running it raises the same error: a failed test
            for name in _names(code):
                if name in env:
                    continue
                if name in self.imports and name in self._import_names() and name in self._imported():
                    env[name] = self.imported[name]
                elif name not in BUILTIN_NAMES:
                    env[name] = CandidateFunction(self, name)
        return env

    def _import_names(self):
        if self.import_names is None:
            self.import_names = _bound_names(self.imports)
        return self.import_names

    def _imported(self):
        """The problem's own imports (trusted prompt text, the first lines of the combined code),
        executed here once, only when a test uses a name they bind (``math.sqrt(2)``, say)."""
        if self.imported is None:
            self.imported = {}
            try:
                exec(self.imports, self.imported)
            except Exception:
                pass  # the candidate's definitions fail to load as well: no test runs
        return self.imported

    def run_test(self, test):
        """Returns (status, error_type, message)."""
        self.test_deadline = time.monotonic() + self.T
        self.alarm_spent = False
        m = EQ_TEST.search(test) if self.double_eval else None
        evals = ["%s(%s)" % (m.group(1), m.group(2)), m.group(3)] if m else []
        env = self._environment(evals, test)
        try:
            for piece in evals:
                # The reference evaluates the call and the expected value before the assert
                # itself, so the function runs twice (deliberate: side effects count).
                eval(piece, env)
            exec(test, env)
            return "pass", None, None
        except TimeoutException as e:
            return "timeout", "TimeoutException", str(e) or TIMEOUT_MESSAGE
        except RunnerLost as e:
            if e.kind == "timeout":
                return "timeout", "TimeoutException", TIMEOUT_MESSAGE
            if e.kind == "deadline":
                return "fail", "ProcessExit", "the call exceeded its wall-clock limit"
            return "fail", "ProcessExit", e.message
        except CandidateError as e:
            return "fail", e.error_type, e.message
        except HarnessLimit as e:
            warning = "CoopHE judge: a test could not be run as written (%s): %s" % (e, test[:200])
            if warning not in self.warned:
                self.warned.add(warning)
                _emit({"ev": "warning", "message": _cap(warning)})
            return "fail", "HarnessLimit", _cap(str(e))
        except BaseException as e:  # AssertionError, NameError, SyntaxError, ... of the test
            return "fail", type(e).__name__, _cap(_safe_str(e))

    def run(self):
        try:
            isolation, analysis, syntax = self.start_runner(first=True)
        except RuntimeError as e:
            _emit({"ev": "fatal", "message": _cap(str(e))})
            return
        _emit({"ev": "ready", "isolation": isolation})
        if analysis is not None:
            _emit({"ev": "analysis", "problems": analysis})
        _emit(syntax)
        if not syntax.get("ok") or not self.tests or self.runner is None:
            return
        exec_event = self.load()
        _emit(exec_event)
        if not exec_event["ok"]:
            return
        timeouts = 0
        i = 0
        n = len(self.tests)
        while i < n and timeouts < self.max_timeouts and time.monotonic() < self.deadline:
            if self.runner is None:
                # The last runner died or was killed: a fresh one resumes with this test.
                try:
                    _, _, syntax = self.start_runner(first=False)
                except (RunnerLost, RuntimeError, OSError) as e:
                    _emit({"ev": "warning", "message": _cap("CoopHE judge: could not restart "
                                                            "the sandbox: %s" % e)})
                    return
                if self.runner is None or not syntax.get("ok"):
                    return
                again = self.load()
                if not again["ok"]:
                    for j in range(i, n):
                        _emit({"ev": "result", "i": j, "status": "fail",
                               "error_type": again.get("error_type"),
                               "error_message": again.get("error_message")})
                    return
            status, error_type, message = self.run_test(self.tests[i])
            if status == "timeout":
                timeouts += 1
            event = {"ev": "result", "i": i, "status": status}
            if error_type is not None:
                event["error_type"] = _cap(error_type)
                event["error_message"] = _cap(message)
            _emit(event)
            i += 1

    def finish(self):
        if self.runner is not None:
            self.runner.close()
            self.runner = None
        _emit({"ev": "done", "attempts": self.attempts, "stdout": self.stdout.text(),
               "stderr": self.stderr.text()})


def _bound_names(imports):
    """Names bound by the import statements in ``imports``."""
    import ast

    names = set()
    try:
        tree = ast.parse(imports)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return names
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.split(".")[0])
    return names


def _names(code):
    names = set(code.co_names)
    for const in code.co_consts:
        if type(const) is type(code):
            names |= _names(const)
    return names


def _safe_str(value):
    try:
        return str(value)
    except Exception:
        return "<unprintable>"


def _limit_self():
    """The judge runs only dataset test code and parses capped answers; bound its memory anyway
    (a soft limit: the runners it starts set their own)."""
    try:
        import resource
    except ImportError:
        return
    for name, soft in (("RLIMIT_AS", 2048 * 1024 * 1024), ("RLIMIT_CORE", 0)):
        res = getattr(resource, name, None)
        if res is None:
            continue
        try:
            _, hard = resource.getrlimit(res)
            if hard != resource.RLIM_INFINITY:
                soft = min(soft, hard)
            resource.setrlimit(res, (soft, hard))
        except (ValueError, OSError):
            pass


class _Jobs:
    """Job lines from stdin (``os.read``: no buffering surprises across jobs)."""

    def __init__(self):
        self.buffer = bytearray()

    def next(self):
        while True:
            nl = self.buffer.find(b"\n")
            if nl >= 0:
                line = bytes(self.buffer[:nl])
                del self.buffer[: nl + 1]
                return line
            if len(self.buffer) > MAX_JOB_BYTES:
                raise ValueError("job over %d bytes" % MAX_JOB_BYTES)
            chunk = os.read(0, 1 << 20)
            if not chunk:
                return None
            self.buffer += chunk


def _harden():
    """Not dumpable: a same-user process (a runner without Landlock or namespaces, say) can
    neither ptrace this process nor read its memory through /proc. Dies with its parent (Node)."""
    if not sys.platform.startswith("linux"):
        return
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
        libc.prctl(ctypes.c_int(PR_SET_DUMPABLE), ctypes.c_ulong(0), ctypes.c_ulong(0),
                   ctypes.c_ulong(0), ctypes.c_ulong(0))
        libc.prctl(ctypes.c_int(PR_SET_PDEATHSIG), ctypes.c_ulong(signal.SIGKILL),
                   ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (OSError, AttributeError):
        pass


def main():
    _harden()
    _limit_self()
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    jobs = _Jobs()
    home = os.getcwd()
    while True:
        line = jobs.next()
        if line is None:
            return
        job = json.loads(line.decode("utf-8"))
        # Each job works in its own directory (Node creates and removes it).
        os.chdir(job["workdir"])
        judge = Judge(job)
        try:
            judge.run()
        finally:
            judge.finish()
            os.chdir(home)


if __name__ == "__main__":
    try:
        main()
    except BaseException:
        import traceback

        try:
            os.write(2, traceback.format_exc().encode("utf-8", "backslashreplace"))
        finally:
            os._exit(2)
    os._exit(0)
