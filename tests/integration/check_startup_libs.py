#!/usr/bin/env python3
"""startup_libs (issue 18): memprofd's own process start loads only the libraries every
command needs. libcurl, libdebuginfod, libcrypto and libsystemd (and the ~40 libraries
they pull in: gnutls, krb5, ldap...) are opened on first use (base/dynlib.h); linked, they
cost every start ~17M instructions of dynamic linking. The loader's own list
(LD_TRACE_LOADED_OBJECTS, what ldd prints) must name none of them, and a command that
needs libcurl still gets it: `query --from` an unreachable ClickHouse fails with libcurl's
connection error, not a loader error.
Usage: check_startup_libs.py --memprofd PATH"""
import argparse
import os
import socket
import subprocess
import sys

LAZY = ("libcurl", "libdebuginfod", "libcrypto", "libsystemd", "libgnutls", "libssl")
MAX_LIBS = 20   # 17 with vdso and ld.so on Debian 12; 53 when everything was linked


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    a = ap.parse_args()
    p = subprocess.run([a.memprofd], env=dict(os.environ, LD_TRACE_LOADED_OBJECTS="1"),
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=True)
    libs = [x.split()[0] for x in p.stdout.splitlines() if x.strip()]
    bad = [x for x in libs if x.startswith(LAZY)]
    if bad or len(libs) > MAX_LIBS:
        sys.exit("FAIL: memprofd loads %d libraries at start (<= %d), among them %s" %
                 (len(libs), MAX_LIBS, bad or "none of the lazy ones"))
    # A port nobody listens on: bind one and close it (not a fixed number).
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    q = subprocess.run([a.memprofd, "query", "contexts", "--from", "http://127.0.0.1:%d" % port],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=60)
    err = q.stderr.strip()
    if q.returncode == 0 or "libcurl" in err or "loading" in err or "connect" not in err.lower():
        sys.exit("FAIL: query --from an unreachable server: exit %d, %r" % (q.returncode, err))
    print("PASS: %d libraries at start; libcurl opened on use (%s)" % (len(libs), err))


if __name__ == "__main__":
    main()
