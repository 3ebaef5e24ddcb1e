#!/usr/bin/env python3
"""A container's symlinks must not reach the host. In a private mount namespace, a running
workload's libc path is replaced by a symlink to an absolute path (a canary file the
namespace cannot see, as /etc/shadow would be), then `record --alloc exact --pid` attaches
to it. Opening /proc/PID/root/<that path> follows the link against memprofd's own root, i.e.
the host; memprofd must resolve it inside the target's root instead (openat2
RESOLVE_IN_ROOT), so the canary is never opened (inotify IN_OPEN on it stays silent) and
record says the file is missing inside the root, in one line."""
import argparse
import ctypes
import os
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402

IN_OPEN = 0x20
IN_NONBLOCK = 0o4000
LIBDIR = "/usr/lib/x86_64-linux-gnu"


def watch(path):
    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(IN_NONBLOCK)
    if fd < 0 or libc.inotify_add_watch(fd, path.encode(), IN_OPEN) < 0:
        raise OSError(ctypes.get_errno(), "inotify on " + path)
    return fd


def opens(fd):
    try:
        buf = os.read(fd, 4096)
    except BlockingIOError:
        return 0
    n, off = 0, 0
    while off + 16 <= len(buf):
        _, mask, _, length = struct.unpack_from("iIII", buf, off)
        n += bool(mask & IN_OPEN)
        off += 16 + length
    return n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--churn", required=True)
    a = ap.parse_args()
    t.require_bpf()
    for tool in ("/usr/bin/unshare", "/usr/bin/mount"):
        if not os.path.exists(tool):
            t.skip("no " + tool)
    if not os.path.exists(os.path.join(LIBDIR, "libc.so.6")):
        t.skip("libc is not at %s on this machine" % LIBDIR)
    tmp = tempfile.mkdtemp(prefix="mpd-hostile-")
    secret = os.path.join(tmp, "secret")
    os.mkdir(secret)
    canary = os.path.join(secret, "shadow")
    with open(canary, "w") as f:
        f.write("root:$6$not-for-memprofd:19000:0:99999:7:::\n")
    fake = os.path.join(tmp, "fakelib")
    os.mkdir(fake)
    os.symlink(canary, os.path.join(fake, "libc.so.6"))   # absolute: the host's file
    pidfile = os.path.join(tmp, "pid")
    # Start the workload (it maps the real libc), hide the canary's directory in the
    # namespace, then put the link where libc was: the last command, since nothing the
    # namespace runs afterwards could load libc.
    script = ("%s --seconds 10 --pidfile %s & "
              "while [ ! -s %s ]; do sleep 0.05; done; "
              "mount -t tmpfs none %s && exec mount --bind %s %s"
              % (a.churn, pidfile, pidfile, secret, fake, LIBDIR))
    ns = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", script])
    errs = []
    pid = None
    try:
        if ns.wait(timeout=30) != 0:
            t.finish(["building the namespace failed (rc %s)" % ns.returncode], "hostile root", tmp)
        pid = int(open(pidfile).read())
        if os.path.islink(os.path.join(LIBDIR, "libc.so.6")) and \
                os.readlink(os.path.join(LIBDIR, "libc.so.6")) == canary:
            t.skip("the mount namespace is not private here")
        inside = os.readlink("/proc/%d/root%s/libc.so.6" % (pid, LIBDIR))
        if inside != canary:
            t.finish(["the namespace's libc is %r, not the link to the canary" % inside],
                     "hostile root", tmp)
        fd = watch(canary)
        db = os.path.join(tmp, "h.db")
        p = t.run([a.memprofd, "record", "--alloc", "exact", "--access", "off", "--db", db,
                   "--duration", "1", "--pid", str(pid)], timeout=60)
        n = opens(fd)
        os.close(fd)
        t.log("record rc=%d, stderr: %s" % (p.returncode, p.stderr.strip()))
        if n:
            errs.append("memprofd opened the host file a container symlink pointed at "
                        "(%d IN_OPEN on %s)" % (n, canary))
        lines = p.stderr.strip().splitlines()
        if p.returncode != 1 or len(lines) != 1 or "inside its root" not in lines[0]:
            errs.append("want exit 1 and one line saying the file is not inside the target's "
                        "root; got " + t.describe(p))
    finally:
        if pid:
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
    t.finish(errs, "a container's symlink to a host file is never followed", tmp)


if __name__ == "__main__":
    main()
