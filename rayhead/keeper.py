"""raystep's head keeper: it owns every process started for one private Ray head.

raystep runs it as `python -I -S - GRACE TEMPDIR RECORD -- RAY ARGS...` with
this program on stdin. The keeper makes itself a child subreaper, so every process
the head starts stays in its tree whatever session or process group it moves
to, and starts RAY ARGS in a process group of its own. It tears the head down
when raystep writes "stop" on fd 3, when fd 3 reaches end of file (raystep is
gone, even by SIGKILL: only raystep holds the write end), on SIGTERM, or when
ray exits: SIGTERM to every descendant, GRACE seconds, then SIGKILL until none
is left, then it removes TEMPDIR unless it is empty.

A detached head (RECORD not empty) outlives raystep: once raystep writes
"detach" on fd 3, the keeper reads the head's expiry from RECORD, a JSON file
whose "expires" field is an RFC 3339 time, says "detached", and from then on
ignores fd 3. It tears the head down at that expiry, on SIGTERM, or when ray
exits. It reads RECORD again at the expiry it knows, on SIGHUP, and at least
every RECHECK seconds, so a record rewritten with a later expiry extends the
head and SIGHUP makes an earlier one count at once. Its notes go to stderr,
which raystep points at a log file for a detached head.

A detached head whose RECORD has "idleSeconds" also stops once idle that
long: no Ray job but the notebook's (metadata raystep.dev/kind "notebook"
and raystep.dev/cluster the record's "name") pending or running on its
dashboard ("dashboardURL", with the token in "tokenFile"), and no kernel
busy on the notebook whose port and token TEMPDIR/raystep-notebook.json
holds, counted from the latest of "created", "activeAt", the last job's
end and the notebook's last activity. It asks
every quarter of that (1 to 30 seconds), keeps since when the head is idle
in TEMPDIR/raystep-idle.json for `raystep ls`, and counts a head it cannot
ask as in use.

It reports on fd 4, one line each: "started PID" once ray runs, "detached"
once it holds an expiry, "exited CODE" when ray ended by itself, "left PID
COMMAND" for a process it could not kill, "error TEXT" for anything else it
could not do, and "done" last.
It keeps fd 5, raystep's flock on TEMPDIR/raystep-head.lock, open until it
exits, so a keeper that was killed leaves a lock the next head start can take,
and writes ray's pid into it: the process group that a keeper that was killed
leaves for the next raystep to kill.
"""

import calendar
import ctypes
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36
KILL_BOUND = 30.0  # seconds of SIGKILL rounds before survivors are reported
RECHECK = 60.0  # longest wait before a detached keeper reads its record again
CONTROL, STATUS, LOCK = 3, 4, 5
DETACHED = False  # set once a detached keeper holds its expiry


def note(text):
    """Writes a timestamped note to a detached keeper's log."""
    if not DETACHED:
        return
    try:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        sys.stderr.write("%s raystep keeper: %s\n" % (stamp, text))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def report(line):
    """Writes one status line; raystep may be gone, which is fine."""
    if line.startswith(("left ", "error ", "exited ")):
        note(line)
    try:
        os.write(STATUS, (line.replace("\n", " ") + "\n").encode())
    except OSError:
        pass


def parse_time(text):
    """Returns the seconds since the epoch of an RFC 3339 time as Go writes it."""
    base, rest = text[:19], text[19:]
    frac = ""
    if rest.startswith("."):
        end = 1
        while end < len(rest) and rest[end].isdigit():
            end += 1
        frac, rest = rest[:end], rest[end:]
    seconds = calendar.timegm(time.strptime(base, "%Y-%m-%dT%H:%M:%S"))
    if rest not in ("Z", "z"):
        hours, minutes = rest[1:].split(":")
        offset = int(hours) * 3600 + int(minutes) * 60
        seconds -= offset if rest[0] == "+" else -offset
    return seconds + (float(frac) if len(frac) > 1 else 0.0)


def read_expiry(record, known):
    """Returns the expiry in RECORD, else known (a record being replaced or removed)."""
    try:
        with open(record, "rb") as f:
            expires = parse_time(json.load(f)["expires"])
    except (OSError, ValueError, KeyError, TypeError, IndexError):
        return known
    if expires != known:
        note("expiry %s" % time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires)))
    return expires


IDLE_FILE = "raystep-idle.json"
NOTEBOOK_FILE = "raystep-notebook.json"


def read_json(path):
    try:
        with open(path, "rb") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def get_json(url, headers):
    """GETs url through no proxy (the head is on loopback) and decodes it."""
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(urllib.request.Request(url, headers=headers), timeout=10) as resp:
        return json.load(resp)


def activity(rec, temp_dir):
    """Returns (why the head is in use or None, when it was last used or 0)."""
    with open(rec["tokenFile"], "rb") as f:
        token = f.read().decode().strip()
    auth = {"Authorization": "Bearer " + token, "X-Ray-Authorization": "Bearer " + token}
    busy, last = None, 0.0
    for job in get_json(rec["dashboardURL"].rstrip("/") + "/api/jobs/", auth):
        meta = job.get("metadata") or {}
        if meta.get("raystep.dev/kind") == "notebook" and meta.get("raystep.dev/cluster") == rec.get("name"):
            continue
        if job.get("status") in ("PENDING", "RUNNING") and busy is None:
            busy = "Ray job %s is %s" % (job.get("submission_id") or job.get("job_id"), job.get("status"))
        last = max(last, (job.get("end_time") or 0) / 1000.0)
    nb = read_json(os.path.join(temp_dir, NOTEBOOK_FILE)) if temp_dir else None
    if nb:
        base = "http://127.0.0.1:%d/api/" % int(nb["port"])
        auth = {"Authorization": "token " + nb["token"]}
        status = get_json(base + "status?no_track_activity=1", auth)
        if status.get("last_activity"):
            last = max(last, parse_time(status["last_activity"]))
        for k in get_json(base + "kernels?no_track_activity=1", auth):
            if k.get("execution_state") == "busy" and busy is None:
                busy = "notebook kernel %s is busy" % k.get("id")
    return busy, last


class Idle:
    """Judges a detached head's idleness from its record."""

    def __init__(self, record, temp_dir):
        self.record, self.temp_dir = record, temp_dir
        self.next, self.failing = 0.0, False

    def interval(self, rec):
        return min(max(float(rec.get("idleSeconds") or 0) / 4.0, 1.0), 30.0)

    def due(self):
        """Returns seconds until the next look; None without idleSeconds."""
        rec = read_json(self.record)
        if not rec or not rec.get("idleSeconds"):
            return None
        return max(self.next - time.time(), 0.0)

    def mark(self, since):
        if not self.temp_dir:
            return
        path = os.path.join(self.temp_dir, IDLE_FILE)
        try:
            if since is None:
                if os.path.exists(path):
                    os.remove(path)
                return
            tmp = path + ".tmp"
            with open(tmp, "w") as f:
                json.dump({"idleSince": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since))}, f)
            os.replace(tmp, path)
        except OSError as e:
            note("keep the idle time: %s" % e)

    def check(self):
        """Returns why the head must stop for idleness, or None."""
        rec = read_json(self.record)
        if not rec or not rec.get("idleSeconds") or time.time() < self.next:
            return None
        limit = float(rec["idleSeconds"])
        self.next = time.time() + self.interval(rec)
        try:
            busy, last = activity(rec, self.temp_dir)
        except Exception as e:  # an unreachable head is in use, not idle
            if not self.failing:
                note("activity unknown, the head is kept: %s" % e)
            self.failing = True
            self.mark(None)
            return None
        self.failing = False
        if busy:
            self.mark(None)
            return None
        since = last
        for key in ("created", "activeAt"):
            try:
                since = max(since, parse_time(rec[key]))
            except (KeyError, ValueError, TypeError, IndexError):
                pass
        since = min(float(int(since)), time.time())
        self.mark(since)
        idle = time.time() - since
        if idle >= limit:
            return "idle for %ds (since %s), past %ds" % (
                idle, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since)), limit)
        return None


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


def wait_for_reason(ray, wake_r, record, temp_dir):
    """Blocks until the head must go; returns ray's exit code if it ended."""
    global DETACHED
    watch, expires, idle = [CONTROL, wake_r], None, Idle(record, temp_dir)
    while True:
        timeout = None
        if expires is not None:
            timeout = min(max(expires - time.time(), 0.0), RECHECK)
            due = idle.due()
            if due is not None:
                timeout = min(timeout, due)
        ready, _, _ = select.select(watch, [], [], timeout)
        if CONTROL in ready:
            data = os.read(CONTROL, 512)
            if not data or b"stop" in data:
                return None
            if record and b"detach" in data:
                expires = read_expiry(record, None)
                if expires is None:
                    report("error read the expiry in %s" % record)
                    return None
                DETACHED, watch = True, [wake_r]
                os.close(CONTROL)
                note("detached: ray pid %d, expiry %s" % (
                    ray.pid, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires))))
                report("detached")
        if wake_r in ready and signal.SIGTERM in os.read(wake_r, 512):
            note("stopping the head: SIGTERM")
            return None
        exited = reap()
        if ray.pid in exited:
            return exited[ray.pid]
        if expires is not None:
            expires = read_expiry(record, expires)
            if time.time() >= expires:
                note("stopping the head: it expired")
                return None
            why = idle.check()
            if why:
                note("stopping the head: " + why)
                return None


def main():
    grace, temp_dir, record, cmd = float(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[5:]
    for fd in (CONTROL, STATUS, LOCK):
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
    try:
        os.pwrite(LOCK, b"%d\n" % ray.pid, 0)
    except OSError:
        pass
    report("started %d" % ray.pid)
    code = wait_for_reason(ray, wake_r, record, temp_dir)
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
    note("done: every process of the head is gone" if ok else "done, with the errors above")
    report("done")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
