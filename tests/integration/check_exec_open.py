#!/usr/bin/env python3
"""An allocator call left open by exec does not swallow the new image's allocations
(issue 18 item 7): tests/workloads/exec_open execs itself from inside its own valloc (the
return probe never fires), then allocates 10 blocks at exec_open_site from far lower on
its stack. The per-thread BPF state outlives exec; before it was reset at exec, each of
those calls counted as nested in the open one and none was recorded (record --pid lost
its target's child's allocations that way in ~1 run of 5). ASLR is off (setarch -R, as
the recording's child inherits it), so the second image's stack is surely below the
first call's."""
import argparse
import os
import platform
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

COUNT = 10   # tests/workloads/exec_open.c EXEC_OPEN_COUNT


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--exec-open", required=True)
    a = ap.parse_args()
    t.require_bpf()
    if not shutil.which("setarch"):
        t.skip("setarch (util-linux) not installed: cannot turn ASLR off")
    d = tempfile.mkdtemp(prefix="check_exec_open.")
    db, fails = d + "/x.db", []
    p = t.run(["setarch", platform.machine(), "-R", a.memprofd, "record", "--alloc", "exact",
               "--access", "off", "--db", db, "--", os.path.abspath(a.exec_open)])
    if p.returncode != 0:
        fails.append("record: " + t.describe(p))
    else:
        ctxs = t.query_contexts(a.memprofd, db)
        n = sum(c["alloc_count"] for c in ctxs
                if any(f.get("function") == "exec_open_site" for f in c["frames"]))
        if n != COUNT:
            fails.append("exec_open_site: %d allocations recorded, want %d (record said: %s)"
                         % (n, COUNT, p.stderr.strip()))
        else:
            t.log("ok: the %d allocations after an exec from inside valloc recorded" % COUNT)
    t.finish(fails, "an allocator call left open by exec", d)


if __name__ == "__main__":
    main()
