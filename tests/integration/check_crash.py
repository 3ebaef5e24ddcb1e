#!/usr/bin/env python3
"""check_crash: kill -9 the recorder at random moments; the DB must survive every time.
Each iteration records a churn workload into the SAME database, reads it while the
recorder runs (a reader must not be blocked), kills the recorder with SIGKILL after a
random delay (and then the workload), and checks that PRAGMA integrity_check is ok, that
memprofd query still works, that nothing seen before the kill is lost (per-site
alloc_count never goes down), and that everything the workload had allocated and freed
1.5 s before the kill was committed (flush interval at most 1 s). Every fifth iteration
waits 3 s, so that rule always bites. A last uninterrupted run must work.
Usage: check_crash.py --memprofd PATH --churn PATH [--iterations N] [--seed N]"""
import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

SITES = ("churn_malloc", "churn_calloc")
# A flush interval of at most 1 s, plus the ring-buffer poll and the commit itself.
FLUSH_WINDOW_S = 1.5


def read_progress(path):
    """churn's last progress line as (monotonic seconds, objects done), or None."""
    try:
        with open(path) as f:
            ts, n = f.read(64).split()
        return int(ts) / 1e9, int(n)
    except (OSError, ValueError):
        return None


def counts(ctxs):
    """alloc_count per churn site."""
    out = dict.fromkeys(SITES, 0)
    for c in ctxs:
        fn = t.first_fn(c)
        if fn in out:
            out[fn] += c["alloc_count"]
    return out


def children_of(pid):
    kids = set()
    try:
        for tid in os.listdir("/proc/%d/task" % pid):
            with open("/proc/%d/task/%s/children" % (pid, tid)) as f:
                kids.update(int(x) for x in f.read().split())
    except OSError:
        pass
    return kids


def kill_and_reap(pid):
    """SIGKILLs a process that is not our child and waits until it is gone."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        return True
    for _ in range(500):
        try:
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            if state in ("Z", "X"):
                return True
        except OSError:
            return True
        time.sleep(0.01)
    return False


def snapshot(memprofd, db):
    """Counts visible to a reader now; None if the DB is not there yet."""
    if not os.path.exists(db):
        return None, None
    last = None
    for _ in range(2):
        try:
            return counts(t.query_contexts(memprofd, db, timeout=20)), None
        except RuntimeError as e:
            last = str(e)
            time.sleep(0.2)
    return None, last


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--churn", required=True)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--seed", type=int)
    a = ap.parse_args()
    t.require_bpf()
    seed = a.seed if a.seed is not None else random.SystemRandom().randrange(1 << 31)
    rnd = random.Random(seed)
    t.log("seed %d (rerun with --seed %d)" % (seed, seed))
    tmp = tempfile.mkdtemp(prefix="mpd-crash-")
    db, pidfile = os.path.join(tmp, "crash.db"), os.path.join(tmp, "churn.pid")
    progress = os.path.join(tmp, "churn.progress")
    t.log("database: " + db)
    churn = [os.path.abspath(a.churn), "--seconds", "60", "--pdeathsig", "1",
             "--pidfile", pidfile, "--progress", progress]
    errs = []
    high = dict.fromkeys(SITES, 0)  # the most a reader has ever seen: must never go down
    had_db = False

    for i in range(a.iterations):
        long_wait = i % 5 == 4
        delay = 3.0 if long_wait else rnd.uniform(0.05, 1.5)
        for f in (pidfile, progress):
            if os.path.exists(f):
                os.unlink(f)
        errf = open(os.path.join(tmp, "record-%d.stderr" % i), "w+")
        # The long waits churn slowly (~7k objects/s), so that a recorder which only
        # drains its ring buffer when the buffer fills up cannot meet the flush rule by luck.
        slow = ["--batch", "20", "--pause-us", "4000"] if long_wait else []
        rec = subprocess.Popen([a.memprofd, "record", "--alloc", "exact", "--db", db, "--",
                                *churn, *slow], stdout=subprocess.DEVNULL, stderr=errf,
                               start_new_session=True)
        t0 = time.monotonic()
        before_run = dict(high)
        samples = []       # (monotonic s, objects churn had allocated and freed)
        seen, qerr, snapped = None, None, delay <= 0.3
        while time.monotonic() < t0 + delay:
            smp = read_progress(progress)
            if smp:
                samples.append(smp)
            if not snapped and time.monotonic() >= t0 + 0.7 * delay:
                seen, qerr = snapshot(a.memprofd, db)
                snapped = True
            time.sleep(0.05)
        if qerr and had_db:
            errs.append("iteration %d: a reader failed while the recorder ran: %s" % (i, qerr))
        kids = children_of(rec.pid)
        exited = rec.poll()
        t_kill = time.monotonic()
        try:
            os.kill(rec.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # What churn had finished FLUSH_WINDOW_S before the kill must be committed.
        owed = max([n for ts, n in samples if ts <= t_kill - FLUSH_WINDOW_S] or [0])
        rec.wait()
        errf.seek(0)
        stderr = errf.read().strip()
        errf.close()
        if exited is not None:
            errs.append("iteration %d: the recorder exited by itself (rc %s) before the kill: %s"
                        % (i, exited, stderr[:300]))
        # The workload: by pidfile, by the children seen, and by the process group.
        if os.path.exists(pidfile):
            with open(pidfile) as f:
                kids.add(int(f.read().strip() or 0))
        try:
            os.killpg(rec.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        for k in kids:
            if k > 0 and not kill_and_reap(k):
                errs.append("iteration %d: workload %d would not die" % (i, k))

        note = ""
        if not os.path.exists(db):
            if i >= 2:
                errs.append("iteration %d: no database after %d runs" % (i, i + 1))
            t.log("%2d: killed after %.2fs: no database yet" % (i, delay))
            continue
        had_db = True
        try:
            after = counts(t.query_contexts(a.memprofd, db))
        except RuntimeError as e:
            errs.append("iteration %d (killed after %.2fs): query after the kill failed: %s"
                        % (i, delay, e))
            after = None
        try:
            ic = t.integrity(db)
        except Exception as e:
            ic = "integrity_check failed to run: %s" % e
        if ic != "ok":
            errs.append("iteration %d (killed after %.2fs): PRAGMA integrity_check: %s"
                        % (i, delay, ic))
        if after is not None:
            for s in SITES:
                floor = max(high[s], (seen or {}).get(s, 0))
                if after[s] < floor:
                    errs.append("iteration %d (killed after %.2fs): %s alloc_count went down "
                                "from %d (seen by a reader before the kill) to %d" %
                                (i, delay, s, floor, after[s]))
                high[s] = max(high[s], after[s])
            added = sum(after.values()) - sum(before_run.values())
            if added < owed:
                errs.append("iteration %d (killed after %.2fs): the workload had allocated and "
                            "freed %d objects %.1fs before the kill, but only %d of this run "
                            "were committed (flushes must commit at least every second)" %
                            (i, delay, owed, FLUSH_WINDOW_S, added))
            elif long_wait and added <= 0:
                errs.append("iteration %d: killed after %.1fs of recording, but nothing of that "
                            "run was flushed (flushes must commit at least every second)"
                            % (i, delay))
            note = "%s, this run %d, owed %d" % (after, added, owed)
        t.log("%2d: killed after %.2fs: integrity %s, counts %s%s" % (
            i, delay, ic, note, "; reader saw %s" % seen if seen else ""))

    # One clean run on the tortured DB.
    if os.path.exists(pidfile):
        os.unlink(pidfile)
    p = t.record(a.memprofd, db, [os.path.abspath(a.churn), "--seconds", "2"], timeout=60)
    if p.returncode != 0:
        errs.append("a clean record on the DB after the kills failed: " + t.describe(p))
    else:
        try:
            final = counts(t.query_contexts(a.memprofd, db))
            ic = t.integrity(db)
            t.log("final clean run: integrity %s, counts %s" % (ic, final))
            if ic != "ok":
                errs.append("after the clean run: integrity_check: " + ic)
            for s in SITES:
                if final[s] <= high[s]:
                    errs.append("the clean run added nothing at %s (%d before, %d after)" %
                                (s, high[s], final[s]))
        except RuntimeError as e:
            errs.append("query after the clean run failed: %s" % e)
    t.finish(errs, "kill -9 torture, %d iterations (seed %d)" % (a.iterations, seed), tmp)


if __name__ == "__main__":
    main()
