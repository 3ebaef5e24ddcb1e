"""mpdtest: what the integration checks share: skipping where BPF cannot work, running
memprofd, validating `query contexts --format json` against the DESIGN.md contract, and
comparing it with a workload's own account (tests/workloads/ledger.h --expect JSON).
Invariant: every check exits 0 (pass), 1 (fail) or 77 (skip, meson's code), and says why."""
import json
import math
import os
import re
import shutil
import sqlite3
import struct
import subprocess
import sys

SKIP = 77
CAP_SYS_ADMIN = 21
CAP_PERFMON = 38
CAP_BPF = 39

# Slack on lifetime upper bounds. A workload brackets every allocator call with
# CLOCK_MONOTONIC reads, so a recorder timestamping in the probes is inside the bracket;
# the slack only absorbs clock-domain and rounding differences. Blocks live at exit end
# when the recorder sees the exit, which may be a little after the workload's last read.
LIFETIME_SLACK_MS = 50
EXIT_SLACK_MS = 2000

CONTEXT_KEYS = {
    "build_id": str, "binary": str, "frames": list,
    "alloc_count": int, "total_size": int, "min_size": int, "max_size": int,
    "total_lifetime_ms": int, "min_lifetime_ms": int, "max_lifetime_ms": int,
    "access_samples": int, "est_accesses": int, "lifetime_access_density": (int, float),
    "density_interval": list, "class": str, "truncated": bool,
}
# Additive fields (issue 21): live at exit (DESIGN.md), the evidence behind the estimates.
# Allowed beside CONTEXT_KEYS; each of type int or null (unknown) unless said.
EVIDENCE_KEYS = {
    "live_at_exit_count": int, "live_at_exit_bytes": int, "live_at_exit_lifetime_ms": int,
    "freed_lifetime_ms": int, "alloc_samples": (int, type(None)),
    "alloc_count_lo": (int, type(None)), "alloc_count_hi": (int, type(None)),
    "total_size_lo": (int, type(None)), "total_size_hi": (int, type(None)),
    "est_accesses_lo": (int, type(None)), "est_accesses_hi": (int, type(None)),
    "few_samples": bool,
    "est_access_bytes": (int, type(None)),   # issue 17: bytes read or written by est_accesses
    # issue 15: the context's own hardware-watch traps and watched granule-nanoseconds
    "watch_hits": int, "watch_ns": int,
}
FRAME_KEYS = {
    "function": (str, type(None)), "file": (str, type(None)), "line": (int, type(None)),
    "column": (int, type(None)), "inlined": bool, "address": str,
    "module": (str, type(None)), "build_id": str,
}
CLASSES = {"cold", "notcold", "hot", "unknown"}

# Names that must never be a context's first frame: allocator frames are removed.
ALLOCATOR_NAMES = {
    "malloc", "calloc", "realloc", "reallocarray", "free", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc", "__libc_malloc", "__libc_calloc",
    "__libc_realloc", "__libc_reallocarray", "__libc_memalign", "__libc_valloc",
    "__libc_pvalloc", "__posix_memalign", "_mid_memalign", "__libc_free",
    "__libc_aligned_alloc", "_int_malloc", "_int_realloc", "_int_memalign",
}


class Skip(Exception):
    pass


def log(msg=""):
    print(msg, flush=True)


def skip(msg):
    log("SKIP: " + msg)
    sys.exit(SKIP)


def cap_eff():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0


def bpf_unavailable():
    """Why real BPF cannot work here, or None."""
    if os.geteuid() != 0:
        return "not root (memprofd record needs CAP_BPF and CAP_PERFMON)"
    if not os.path.exists("/sys/kernel/btf/vmlinux"):
        return "/sys/kernel/btf/vmlinux missing (no kernel BTF for CO-RE)"
    caps = cap_eff()
    if not (caps >> CAP_BPF & 1 or caps >> CAP_SYS_ADMIN & 1):
        return "CAP_BPF not in the effective set"
    return None


def breakpoints_unavailable(touches=64):
    """Why hardware watchpoints cannot be tested here, or None: the breakpoint PMU is
    missing, perf_event_open refuses one, or one opens but counts none of `touches`
    user-space accesses to the word it watches (a hypervisor that does not virtualise
    the debug registers: seen on a CI host, where windows then measure nothing). The
    probe watches a word of its own, on this thread only, and reads it `touches` times
    through ctypes (each read is a user-space load of that word)."""
    import ctypes
    if not os.path.exists("/sys/bus/event_source/devices/breakpoint/type"):
        return "no breakpoint PMU (/sys/bus/event_source/devices/breakpoint)"
    libc = ctypes.CDLL(None, use_errno=True)
    word = ctypes.c_uint64(0)
    attr = bytearray(128)
    # struct perf_event_attr: type, size, config, sample_period, sample_type, read_format,
    # flags (disabled=bit 0, exclude_kernel=bit 5, exclude_hv=bit 6), wakeup_events,
    # bp_type, bp_addr, bp_len.
    struct.pack_into("=IIQQQQQIIQQ", attr, 0, 5, 112, 0, 0, 0, 0, (1 << 5) | (1 << 6), 0,
                     3, ctypes.addressof(word), 8)
    buf = (ctypes.c_char * len(attr)).from_buffer(attr)
    nr_perf_event_open = {"x86_64": 298, "aarch64": 241}.get(os.uname().machine)
    if nr_perf_event_open is None:
        return "breakpoint probe: perf_event_open's number unknown on " + os.uname().machine
    fd = libc.syscall(nr_perf_event_open, buf, 0, -1, -1, 8)   # PERF_FLAG_FD_CLOEXEC
    if fd < 0:
        return "breakpoint watch refused: " + os.strerror(ctypes.get_errno())
    try:
        s = 0
        for _ in range(touches):
            s += word.value
        got = struct.unpack("=Q", os.read(fd, 8))[0]
    finally:
        os.close(fd)
    if got == 0:
        return "breakpoints open but never fire (0 of %d watched loads counted)" % touches
    return None


def require_breakpoints():
    why = breakpoints_unavailable()
    if why:
        skip(why)


def run_started(db):
    """A recorder's run row is in the store at db: its probes are attached."""
    try:
        con = sqlite3.connect("file:%s?mode=ro" % db, uri=True, timeout=1)
        try:
            return con.execute("SELECT count(*) FROM runs").fetchone()[0] > 0
        finally:
            con.close()
    except sqlite3.Error:
        return False


def require_bpf():
    why = bpf_unavailable()
    if why:
        skip(why)


def run(cmd, timeout=120, **kw):
    """Runs cmd, capturing text output; a timeout is reported as rc 124."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
        return subprocess.CompletedProcess(cmd, 124, out, err + "\n[timed out after %ss]" % timeout)


def _descendants(root):
    """pids under root (not root itself), from /proc's ppid fields."""
    kids = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open("/proc/%s/stat" % d) as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    out, todo = [], [root]
    while todo:
        for k in kids.get(todo.pop(), []):
            out.append(k)
            todo.append(k)
    return out


def _dump_hang(what):
    import faulthandler
    log("HANG: %s still running at its watchdog deadline; the test's threads:" % what)
    faulthandler.dump_traceback(all_threads=True)
    for pid in _descendants(os.getpid()):
        try:
            with open("/proc/%d/cmdline" % pid, "rb") as f:
                cmd = f.read(200).replace(b"\0", b" ").decode(errors="replace")
            with open("/proc/%d/stat" % pid) as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open("/proc/%d/wchan" % pid) as f:
                wchan = f.read(64)
            with open("/proc/%d/stack" % pid) as f:
                stack = " < ".join(l.split()[-1] for l in f.read(2000).splitlines()[:6])
        except OSError:
            continue
        log("  pid %d state %s wchan %s: %s [%s]" % (pid, state, wchan, cmd, stack))
    # Children left running would hold meson's output pipe open until its timeout.
    for pid in _descendants(os.getpid()):
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    sys.stdout.flush()
    os._exit(1)


def watchdog(seconds, what):
    """After seconds, prints every thread's Python stack and each child process's state,
    wait channel and kernel stack, kills them all, then exits 1: a hang reads as a diagnosed failure, not
    as meson's bare timeout. Set it below the test's meson timeout."""
    import threading
    tm = threading.Timer(seconds, _dump_hang, args=(what,))
    tm.daemon = True
    tm.start()
    return tm


def mount_tmpfs(mnt, size):
    """Mounts a tmpfs of size ("2m") at mnt, made here: None, or why it cannot be mounted
    (a check skips what needs it, saying so). umount_lazy(mnt) takes it away."""
    os.makedirs(mnt, exist_ok=True)
    p = run(["mount", "-t", "tmpfs", "-o", "size=" + size, "tmpfs", mnt], timeout=10)
    return None if p.returncode == 0 else "mount -t tmpfs fails here: " + p.stderr.strip()


def umount_lazy(mnt):
    run(["umount", "-l", mnt], timeout=10)


def record(memprofd, db, argv, extra=(), timeout=120, alloc="exact", env=None):
    """memprofd record --alloc ALLOC --db DB [extra] -- argv (env: extra environment
    variables). A check calls require_bpf() first: a failure here is a failure, never a
    skip read from memprofd's message."""
    cmd = [memprofd, "record", "--alloc", alloc, "--db", db, *extra, "--", *argv]
    p = run(cmd, timeout=timeout, env=dict(os.environ, **env) if env else None)
    return p


def describe(p):
    return "rc=%s\n  cmd: %s\n  stderr: %s" % (
        p.returncode, " ".join(map(str, p.args)),
        (p.stderr.strip() or "(empty)").replace("\n", "\n          "))


def record_soft(memprofd, db, argv, freq="1000", timeout=120):
    """record --alloc exact --access soft --freq FREQ (the access checks' recording)."""
    return record(memprofd, db, argv, extra=("--access", "soft", "--freq", freq),
                  timeout=timeout)


def frames_have(c, name):
    """Whether context c has a frame in function name (C++ names without their
    parameter list)."""
    return any((f.get("function") or "").split("(")[0] == name for f in c.get("frames", []))


def access_sums(ctxs, fn):
    """(access_samples, est_accesses, contexts) summed over the contexts through fn."""
    cs = [c for c in ctxs if frames_have(c, fn)]
    return (sum(c.get("access_samples", 0) for c in cs),
            sum(c.get("est_accesses", 0) for c in cs), len(cs))


def query_contexts(memprofd, db, extra=(), timeout=60):
    """All contexts as parsed JSON; raises RuntimeError with the reason on failure."""
    cmd = [memprofd, "query", "contexts", "--db", db, "--format", "json", "--limit", "0", *extra]
    p = run(cmd, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError("query failed: " + describe(p))
    try:
        return json.loads(p.stdout)
    except json.JSONDecodeError as e:
        raise RuntimeError("query output is not JSON (%s): %r" % (e, p.stdout[:400]))


def integrity(db):
    """PRAGMA integrity_check of db, as one string ('ok' when sound)."""
    con = sqlite3.connect(db, timeout=10)
    try:
        rows = con.execute("PRAGMA integrity_check").fetchall()
    finally:
        con.close()
    return "; ".join(str(r[0]) for r in rows)


def elf_build_id(path):
    """The NT_GNU_BUILD_ID of an ELF64 little-endian file, lowercase hex, or None."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        return None
    e_shoff, = struct.unpack_from("<Q", data, 0x28)
    e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
    for i in range(e_shnum):
        off = e_shoff + i * e_shentsize
        sh_type, = struct.unpack_from("<I", data, off + 4)
        if sh_type != 7:  # SHT_NOTE
            continue
        sh_offset, sh_size = struct.unpack_from("<QQ", data, off + 0x18)
        p, end = sh_offset, sh_offset + sh_size
        while p + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, p)
            name = data[p + 12:p + 12 + namesz]
            desc_off = p + 12 + ((namesz + 3) & ~3)
            if ntype == 3 and name.rstrip(b"\0") == b"GNU":
                return data[desc_off:desc_off + descsz].hex()
            p = desc_off + ((descsz + 3) & ~3)
    return None


def _type_ok(v, t):
    if isinstance(v, bool) and t is not bool and (t is int or (isinstance(t, tuple) and bool not in t)):
        return False  # JSON true is not a number
    return isinstance(v, t)


def contract_errors(ctxs):
    """Everything in the query output that breaks the DESIGN.md contract."""
    errs = []
    if not isinstance(ctxs, list):
        return ["top level is %s, not a JSON array" % type(ctxs).__name__]
    for i, c in enumerate(ctxs):
        where = "context #%d" % i
        if not isinstance(c, dict):
            errs.append("%s is %s, not an object" % (where, type(c).__name__))
            continue
        fn0 = first_fn(c) if isinstance(c.get("frames"), list) else None
        if fn0:
            where += " (%s)" % fn0
        keys = set(c) - set(EVIDENCE_KEYS)
        for k, t in EVIDENCE_KEYS.items():
            if k in c and not _type_ok(c[k], t):
                errs.append("%s: %s is %r, want %s" % (where, k, c[k], t))
        if keys != set(CONTEXT_KEYS):
            miss, extra = set(CONTEXT_KEYS) - keys, keys - set(CONTEXT_KEYS)
            errs.append("%s: keys differ from the contract: missing %s, extra %s" %
                        (where, sorted(miss), sorted(extra)))
        for k, t in CONTEXT_KEYS.items():
            if k in c and not _type_ok(c[k], t):
                errs.append("%s: %s is %r (%s), contract type %s" %
                            (where, k, c[k], type(c[k]).__name__, t))
        if isinstance(c.get("build_id"), str) and not re.fullmatch(r"[0-9a-f]*", c["build_id"]):
            errs.append("%s: build_id %r is not lowercase hex" % (where, c["build_id"]))
        if c.get("class") not in CLASSES:
            errs.append("%s: class %r not one of %s" % (where, c.get("class"), sorted(CLASSES)))
        nums = ["alloc_count", "total_size", "min_size", "max_size", "total_lifetime_ms",
                "min_lifetime_ms", "max_lifetime_ms", "access_samples", "est_accesses"]
        if all(_type_ok(c.get(k), int) for k in nums):
            if any(c[k] < 0 for k in nums):
                errs.append("%s: negative counter" % where)
            n = c["alloc_count"]
            if n < 1:
                errs.append("%s: alloc_count %d < 1" % (where, n))
            elif not (c["min_size"] <= c["max_size"] and
                      n * c["min_size"] <= c["total_size"] <= n * c["max_size"]):
                errs.append("%s: sizes inconsistent: count %d total %d min %d max %d" %
                            (where, n, c["total_size"], c["min_size"], c["max_size"]))
            elif not (c["min_lifetime_ms"] <= c["max_lifetime_ms"] and
                      n * c["min_lifetime_ms"] - n <= c["total_lifetime_ms"] <=
                      n * (c["max_lifetime_ms"] + 1)):
                errs.append("%s: lifetimes inconsistent: count %d total %d min %d max %d" %
                            (where, n, c["total_lifetime_ms"], c["min_lifetime_ms"],
                             c["max_lifetime_ms"]))
        frames = c.get("frames")
        if isinstance(frames, list):
            if not frames:
                errs.append("%s: no frames" % where)
            for j, fr in enumerate(frames):
                if not isinstance(fr, dict):
                    errs.append("%s frame %d is not an object" % (where, j))
                    continue
                if set(fr) != set(FRAME_KEYS):
                    errs.append("%s frame %d: keys %s, contract %s" %
                                (where, j, sorted(fr), sorted(FRAME_KEYS)))
                for k, t in FRAME_KEYS.items():
                    if k in fr and not _type_ok(fr[k], t):
                        errs.append("%s frame %d: %s is %r, contract type %s" %
                                    (where, j, k, fr[k], t))
                if isinstance(fr.get("address"), str) and not re.fullmatch(r"0x[0-9a-fA-F]+", fr["address"]):
                    errs.append("%s frame %d: address %r is not 0x-hex" % (where, j, fr["address"]))
            if frames and isinstance(frames[0], dict):
                f0 = frames[0].get("function") or ""
                if f0 in ALLOCATOR_NAMES or f0.startswith(("operator new", "operator delete")):
                    errs.append("%s: first frame is the allocator %r: allocator frames must be "
                                "removed (or a nested allocator call was counted twice)" % (where, f0))
    return errs


def sampled_rel_se(count, sizes, mean, keep=1.0):
    """Relative standard error of the sampler's weighted (Horvitz-Thompson) estimate of
    `count` objects with these (equally likely) sizes, each sampled with probability
    1 - exp(-size / mean) and then kept with probability keep."""
    inv = sum(1 / (-math.expm1(-s / mean) * keep) for s in sizes) / len(sizes)
    return math.sqrt(max(inv - 1, 0) / count)


def first_fn(c):
    fr = c.get("frames") or []
    return fr[0].get("function") if fr and isinstance(fr[0], dict) else None


def second_fn(c):
    fr = c.get("frames") or []
    return fr[1].get("function") if len(fr) > 1 and isinstance(fr[1], dict) else None


def _ms_floor(ns):
    return ns // 1000000


def _ms_ceil(ns):
    return -(-ns // 1000000)


def compare(ctxs, expect, workload, label=""):
    """Per-site comparison of query output with a workload's --expect JSON. Returns
    (errors, report lines). Contexts are grouped by their first frame's function;
    a site reached through several call stacks is the sum of those contexts."""
    errs, lines = [], []
    pfx = (label + ": ") if label else ""
    real_wl = os.path.realpath(workload)
    want_bid = elf_build_id(workload)
    by_fn = {}
    for c in ctxs:
        if isinstance(c, dict):
            by_fn.setdefault(first_fn(c), []).append(c)
    seen_fns = sorted(f for f in by_fn if f)

    for fn in expect.get("not_sites", []):
        g = by_fn.get(fn, [])
        if g:
            errs.append("%s%d contexts (%d allocations) have %r as first frame, but it never "
                        "calls an allocator: the allocator's direct caller was dropped from the "
                        "stack (at a uprobe on function entry the caller's return address is at "
                        "[rsp], not above the frame pointer)" %
                        (pfx, len(g), sum(c.get("alloc_count", 0) for c in g), fn))

    fmt = "%-58s %8s %8s %10s %10s %6s %6s %7s %7s %8s"
    lines.append(fmt % ("site", "count", "want", "total", "want", "min", "max", "minlt", "maxlt", "ctx"))
    for site in expect["sites"]:
        fn = site["function"]
        group = by_fn.get(fn, [])
        if site["alloc_count"] == 0:  # a site switched off by the workload's options
            if group:
                errs.append("%ssite %r: the workload made no allocations there, memprofd has "
                            "%d contexts" % (pfx, fn, len(group)))
            continue
        if not group:
            hint = ""
            base = fn.split("(")[0]
            near = [f for f in seen_fns if f.split("(")[0] == base or base.split("::")[-1] in f]
            if near:
                hint = " (similar names seen: %s: demangling or symbol choice differs)" % near[:3]
            errs.append("%ssite %r: no context has it as first frame; expected %d allocations "
                        "of %d bytes%s" % (pfx, fn, site["alloc_count"], site["total_size"], hint))
            lines.append(fmt % (fn[:58], "-", site["alloc_count"], "-", site["total_size"],
                                "-", "-", "-", "-", "0/%d" % site["contexts"]))
            continue
        got = {
            "alloc_count": sum(c["alloc_count"] for c in group),
            "total_size": sum(c["total_size"] for c in group),
            "min_size": min(c["min_size"] for c in group),
            "max_size": max(c["max_size"] for c in group),
        }
        lines.append(fmt % (fn[:58], got["alloc_count"], site["alloc_count"], got["total_size"],
                            site["total_size"], got["min_size"], got["max_size"],
                            min(c["min_lifetime_ms"] for c in group),
                            max(c["max_lifetime_ms"] for c in group),
                            "%d/%d" % (len(group), site["contexts"])))
        for k, v in got.items():
            if v != site[k]:
                errs.append("%ssite %r: %s is %d, the workload did %d (%+d%s)" %
                            (pfx, fn, k, v, site[k], v - site[k],
                             ", %.3gx" % (v / site[k]) if site[k] and abs(v / site[k] - 1) > 0.01 else ""))
        if len(group) != site["contexts"]:
            errs.append("%ssite %r: %d contexts, expected %d distinct call stacks (second frames "
                        "seen: %s, expected %s)" % (pfx, fn, len(group), site["contexts"],
                                                   sorted(str(second_fn(c)) for c in group),
                                                   site["callers"]))
        callers = {second_fn(c) for c in group}
        if callers != set(site["callers"]):
            errs.append("%ssite %r: second frames %s, expected %s" %
                        (pfx, fn, sorted(map(str, callers)), sorted(site["callers"])))
        for c in group:
            if os.path.realpath(c["binary"]) != real_wl:
                errs.append("%ssite %r: binary %r, expected %r" % (pfx, fn, c["binary"], real_wl))
            if want_bid and c["build_id"] != want_bid:
                errs.append("%ssite %r: build_id %r, the ELF says %r" %
                            (pfx, fn, c["build_id"], want_bid))
            f0 = c["frames"][0]
            src = expect.get("source")
            if f0.get("file") and src and os.path.basename(f0["file"]) != src:
                errs.append("%ssite %r: frame file %r is not %r" % (pfx, fn, f0["file"], src))
        # Lifetimes: the workload's brackets in ns -> ms bounds, floor/ceil so that any
        # rounding a recorder does stays inside; a sum over k contexts may lose k ms.
        lt = site["lifetime_ns"]
        slack = LIFETIME_SLACK_MS + (EXIT_SLACK_MS if site.get("live_at_exit") else 0)
        k = len(group)
        checks = [
            ("min_lifetime_ms", min(c["min_lifetime_ms"] for c in group),
             _ms_floor(lt["min"][0]), _ms_ceil(lt["min"][1]) + slack),
            ("max_lifetime_ms", max(c["max_lifetime_ms"] for c in group),
             _ms_floor(lt["max"][0]), _ms_ceil(lt["max"][1]) + slack),
            ("total_lifetime_ms", sum(c["total_lifetime_ms"] for c in group),
             max(0, _ms_floor(lt["total"][0]) - k),
             _ms_ceil(lt["total"][1]) + k + slack * max(1, site.get("live_at_exit", 0))),
        ]
        for name, v, lo, hi in checks:
            if not lo <= v <= hi:
                errs.append("%ssite %r: %s is %d, the workload measured it within [%d, %d] ms"
                            "%s" % (pfx, fn, name, v, lo, hi,
                                    " (live at exit: %d)" % site["live_at_exit"]
                                    if site.get("live_at_exit") else ""))
    return errs, lines


def load_expect(path):
    with open(path) as f:
        return json.load(f)


def finish(errs, what, tmp=None):
    """Prints the verdict and exits 0 or 1; a pass removes tmp, a failure keeps it."""
    if errs:
        log("FAIL: %s: %d problem(s):" % (what, len(errs)))
        for e in errs:
            log("  - " + e)
        if tmp:
            log("kept for inspection: " + tmp)
        sys.exit(1)
    if tmp:
        shutil.rmtree(tmp, ignore_errors=True)
    log("PASS: " + what)
    sys.exit(0)
