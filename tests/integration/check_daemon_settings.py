#!/usr/bin/env python3
"""The daemon's run settings (runs.settings) are JSON whatever its config path holds: a
daemon started with a config whose path has a double quote, a backslash, a tab and a
non-ASCII letter writes settings that json.loads() reads back with that very path under
"config", and `memprofd query status --format json` stays valid JSON. Skips (77) where
BPF cannot work."""
import argparse
import json
import os
import signal
import sqlite3
import sys
import tempfile

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import mpdtest as t  # noqa: E402
from check_daemon_stress import config, exe_rule, start  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--memprofd", required=True)
    ap.add_argument("--churn", required=True)
    a = ap.parse_args()
    t.require_bpf()
    tmp = tempfile.mkdtemp(prefix="check_daemon_settings.")
    odd = os.path.join(tmp, 'we"ird\\dir\tné')
    os.mkdir(odd)
    db, conf = os.path.join(tmp, "s.db"), os.path.join(odd, 'a"b\\c.conf')
    with open(conf, "w") as f:
        f.write(config(db, exe_rule(a.churn)))
    fails = []
    d = start(a.memprofd, conf, tmp)
    d.p.send_signal(signal.SIGTERM)
    rc = d.p.wait(timeout=10)
    err = d.stderr()
    with sqlite3.connect("file:%s?mode=ro" % db, uri=True) as con:
        text = con.execute("SELECT settings FROM runs ORDER BY id DESC LIMIT 1").fetchone()[0]
    t.log("settings: %s" % text)
    try:
        got = json.loads(text).get("config")
        if got != conf:
            fails.append("settings name config %r, want %r" % (got, conf))
    except json.JSONDecodeError as e:
        fails.append("settings are not JSON (%s): %r" % (e, text))
    p = t.run([a.memprofd, "query", "status", "--db", db, "--format", "json"])
    try:
        json.loads(p.stdout)
    except json.JSONDecodeError as e:
        fails.append("query status --format json is not JSON (%s): %s" % (e, t.describe(p)))
    if rc != 0:
        fails.append("daemon rc %s at SIGTERM: %s" % (rc, err))
    t.finish(fails, "daemon settings JSON with a hostile config path", tmp)


if __name__ == "__main__":
    sys.exit(main())
