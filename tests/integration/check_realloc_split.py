#!/usr/bin/env python3
"""bench/realloc_split.c, the realloc shim bench/access_dhat_cmd.py preloads under valgrind
DHAT: without it DHAT files a grown or shrunk block under its first allocation's stack
(alloc_site), with it each realloc's result goes under the realloc's own stack
(grow_site, shrink_site), the grouping memprofd and MemProf use, and the shrunk block's
writes are shrink_site's. Builds tests/workloads/realloc_sites.c with cc; ~5 s."""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import access_dhat_cmd   # noqa: E402
import mpdtest           # noqa: E402


def sites(got):
    """{innermost workload function: bytes written} from DHAT's contexts (key depth 1)."""
    return {k[0]: g for k, g in got.items() if k and k[0].endswith("_site")}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    a = ap.parse_args()
    for tool in ("valgrind", "cc"):
        if not shutil.which(tool):
            mpdtest.skip("%s not installed" % tool)
    tmp = tempfile.mkdtemp(prefix="realloc_split.")
    exe = os.path.join(tmp, "realloc_sites")
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", exe, a.source],
                   check=True)
    native = sites(access_dhat_cmd.dhat_contexts([exe], "", 1, tmp, None, split=False))
    split = sites(access_dhat_cmd.dhat_contexts([exe], "", 1, tmp, None, split=True))
    mpdtest.log("native: %s" % {k: (v["blocks"], v["acc"]) for k, v in native.items()})
    mpdtest.log("split:  %s" % {k: (v["blocks"], v["acc"]) for k, v in split.items()})
    ok = set(native) == {"alloc_site"}
    ok &= set(split) == {"alloc_site", "grow_site", "shrink_site"}
    # The shrunk block is written 10 x 1000 bytes: under shrink_site, not alloc_site.
    ok &= split.get("shrink_site", {}).get("acc", 0) >= 10000
    ok &= split.get("alloc_site", {}).get("acc", 1e9) < 10000
    shutil.rmtree(tmp, ignore_errors=True)
    if not ok:
        print("memprofd: realloc_split: DHAT's grouping is not the realloc's own stack",
              file=sys.stderr)
        sys.exit(1)
    mpdtest.log("ok")


if __name__ == "__main__":
    main()
