"""Where a whole stack ends, judged independently of memprofd's `truncated` flag: at
main's caller, at a thread's start routine, or in the dynamic loader's entry code (the
libraries' constructors, run by _dl_init before main). Shared by check_sweep_stacks.py
and bench/stack_sweep.py."""
import struct

ROOT_FUNCS = {"__libc_start_call_main", "__libc_start_main_impl", "__libc_start_main", "_start",
              "start_thread", "clone3", "__clone3", "clone", "__clone"}
ENTRY_SPAN = 128   # daemon/alloc/unwind.c UNWIND_ENTRY_SPAN
_entries = {}


def elf_entry_offset(path):
    """The file offset of an ELF object's entry point (None: unreadable)."""
    if path not in _entries:
        _entries[path] = None
        try:
            with open(path, "rb") as f:
                h = f.read(64)
                entry, phoff = struct.unpack_from("<QQ", h, 24)
                phentsize, phnum = struct.unpack_from("<HH", h, 54)
                f.seek(phoff)
                ph = f.read(phentsize * phnum)
            for i in range(phnum):
                typ, _, off, vaddr, _, filesz = struct.unpack_from("<IIQQQQ", ph, i * phentsize)
                if typ == 1 and vaddr <= entry < vaddr + filesz:
                    _entries[path] = entry - vaddr + off
        except (OSError, struct.error):
            pass
    return _entries[path]


def in_loader_entry(f):
    """Frame f (a return address) lies in the dynamic loader's entry code."""
    mod = f.get("module") or ""
    entry = "/ld-linux" in mod and elf_entry_offset(mod)
    return bool(entry) and entry < int(f["address"], 16) <= entry + ENTRY_SPAN


def is_root(f):
    return (f.get("function") or "") in ROOT_FUNCS or in_loader_entry(f)


def whole(c):
    """Context c's stack reaches a root."""
    return any(is_root(f) for f in c["frames"])
