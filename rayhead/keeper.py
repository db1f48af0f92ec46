"""raystep's head keeper: it owns every process started for one private Ray head.

raystep runs it as `python -I -S - GRACE TEMPDIR -- RAY ARGS...` with this
program on stdin. The keeper makes itself a child subreaper, so every process
the head starts stays in its tree whatever session or process group it moves
to, and starts RAY ARGS in a process group of its own. It tears the head down
when raystep writes "stop" on fd 3, when fd 3 reaches end of file (raystep is
gone, even by SIGKILL: only raystep holds the write end), on SIGTERM, or when
ray exits: SIGTERM to every descendant, GRACE seconds, then SIGKILL until none
is left, then it removes TEMPDIR unless it is empty.

It reports on fd 4, one line each: "started PID" once ray runs, "exited CODE"
when ray ended by itself, "left PID COMMAND" for a process it could not kill,
"error TEXT" for anything else it could not do, and "done" last.
It keeps fd 5, raystep's flock on TEMPDIR/raystep-head.lock, open until it
exits, so a keeper that was killed leaves a lock the next head start can take.
"""

import ctypes
import os
import select
import shutil
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
KILL_BOUND = 30.0  # seconds of SIGKILL rounds before survivors are reported
CONTROL, STATUS = 3, 4


def report(line):
    """Writes one status line; raystep may be gone, which is fine."""
    try:
        os.write(STATUS, (line.replace("\n", " ") + "\n").encode())
    except OSError:
        pass


def reap():
    """Reaps every exited child; returns {pid: exit code}."""
    out = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return out
        if pid == 0:
            return out
        out[pid] = os.waitstatus_to_exitcode(status)


def descendants():
    """Lists the pids below this process, read from /proc."""
    children = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % name, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(name))
    out, todo = [], [os.getpid()]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def signal_all(pids, sig):
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:
            pass


def command(pid):
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return "?"


def kill_tree(grace):
    """Stops every descendant; returns those still there after KILL_BOUND."""
    signal_all(descendants(), signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        reap()
        if not descendants():
            return []
        time.sleep(0.05)
    deadline = time.monotonic() + KILL_BOUND
    while True:
        reap()
        left = descendants()
        if not left or time.monotonic() > deadline:
            return left
        signal_all(left, signal.SIGKILL)
        time.sleep(0.05)


def wait_for_reason(ray, wake_r):
    """Blocks until the head must go; returns ray's exit code if it ended."""
    while True:
        ready, _, _ = select.select([CONTROL, wake_r], [], [])
        if CONTROL in ready:
            data = os.read(CONTROL, 512)
            if not data or b"stop" in data:
                return None
        if wake_r in ready and signal.SIGTERM in os.read(wake_r, 512):
            return None
        exited = reap()
        if ray.pid in exited:
            return exited[ray.pid]


def main():
    grace, temp_dir, cmd = float(sys.argv[1]), sys.argv[2], sys.argv[4:]
    for fd in (CONTROL, STATUS, 5):
        try:
            os.set_inheritable(fd, False)
        except OSError:
            pass
    # Handlers, not SIG_IGN: ray must start with default dispositions.
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD):
        signal.signal(sig, lambda *_: None)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        report("error prctl(PR_SET_CHILD_SUBREAPER): " + os.strerror(ctypes.get_errno()))
        return finish(temp_dir, False)
    try:
        ray = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, preexec_fn=os.setpgrp)
    except OSError as e:
        report("error start %s: %s" % (cmd[0], e))
        return finish(temp_dir, False)
    report("started %d" % ray.pid)
    code = wait_for_reason(ray, wake_r)
    if code is not None:
        report("exited %d" % code)
    ok = True
    for pid in kill_tree(grace):
        ok = False
        report("left %d %s" % (pid, command(pid)))
    ray.returncode = code if code is not None else -1
    return finish(temp_dir, ok)


def finish(temp_dir, ok):
    """Removes the temp dir, says "done" and returns the exit code."""
    if temp_dir:
        try:
            shutil.rmtree(temp_dir)
        except FileNotFoundError:
            pass
        except OSError as e:
            ok = False
            report("error remove %s: %s" % (temp_dir, e))
    report("done")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
