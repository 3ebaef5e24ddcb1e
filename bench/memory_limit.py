#!/usr/bin/env python3
"""The daemon's memory while its store cannot be written, long: the memory phase of
tests/integration/check_daemon_limits.py (test daemon_memory_limit: depth 7, 1M, 8 s)
with ctx_fanout at depth 10 (1,024 contexts a child), memory_limit = 2M and a 20 s
outage. Options after these pass through (the last one given wins): --outage-s,
--memory-limit (1G shows the growth without the bound: the check then fails), --depth.
bench/memory_limit.py --memprofd build/cli/memprofd --fanout build/tests/workloads/ctx_fanout"""
import os
import sys

CHECK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration",
                     "check_daemon_limits.py")
os.execv(sys.executable, [sys.executable, CHECK, "--phase", "memory", "--depth", "10",
                          "--memory-limit", "2M", "--outage-s", "20"] + sys.argv[1:])
