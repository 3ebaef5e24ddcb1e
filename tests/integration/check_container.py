#!/usr/bin/env python3
"""A process in another mount namespace (as in a container): its executable exists only
on a tmpfs mounted in that namespace, so the host cannot open the path /proc/PID/maps
names. `record --pid` must still attach to it (through /proc/PID/root) and symbolize its
frames; without that the sites come out with no function name."""
import argparse
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--churn", required=True)
    a = ap.parse_args()
    t.require_bpf()
    if not os.path.exists("/usr/bin/unshare"):
        t.skip("no unshare(1)")
    tmp = tempfile.mkdtemp(prefix="mpd-container-")
    mnt = os.path.join(tmp, "mnt")
    os.mkdir(mnt)
    pidfile = os.path.join(tmp, "pid")
    app = os.path.join(mnt, "app")
    script = ("mount -t tmpfs none %s && cp %s %s && exec %s --seconds 6 --pidfile %s"
              % (mnt, a.churn, app, app, pidfile))
    w = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script])
    errs = []
    try:
        for _ in range(100):
            if os.path.exists(pidfile) and open(pidfile).read().strip():
                break
            time.sleep(0.05)
        else:
            t.finish(["the namespaced workload did not start"], "container", tmp)
        pid = int(open(pidfile).read())
        if os.path.exists(app):
            t.skip("the mount namespace is not private here (%s visible from the host)" % app)
        db = os.path.join(tmp, "c.db")
        p = t.run([a.memprofd, "record", "--alloc", "exact", "--db", db, "--duration", "2",
                   "--pid", str(pid)], timeout=60)
        if p.returncode != 0:
            t.finish(["record --pid failed: " + t.describe(p)], "container", tmp)
        ctxs = t.query_contexts(a.memprofd, db)
        errs += t.contract_errors(ctxs)
        first = {c["frames"][0]["function"] for c in ctxs if c["frames"]}
        t.log("first frames: %s" % sorted(map(str, first)))
        for site in ("churn_malloc", "churn_calloc"):
            if site not in first:
                errs.append("%s not symbolized in the namespaced binary (first frames: %s)"
                            % (site, sorted(map(str, first))))
        mine = [c for c in ctxs if c["frames"] and c["frames"][0]["function"] == "churn_malloc"]
        if mine and mine[0]["binary"] != app:
            errs.append("binary %r, want the path in its namespace %r" % (mine[0]["binary"], app))
    finally:
        w.kill()
        w.wait()
    t.finish(errs, "process in another mount namespace", tmp)


if __name__ == "__main__":
    main()
