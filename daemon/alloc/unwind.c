/* DWARF unwinding over a BPF stack copy with libdwfl: modules come from /proc/PID/maps
 * (reported once per process image and again only when an address falls outside every
 * known module), CFI from each module's .eh_frame (libdwfl caches it per module), stack
 * reads from the copy only: a read outside it ends the walk (the context is truncated),
 * never a guess. Cost: one dwfl_getthread_frames per record, a few microseconds per frame
 * once the modules' CFI is loaded. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include "base/cleanup.h"
#include "daemon/alloc/unwind.h"
#include "daemon/alloc/unwind_rules.h"

#define UNWIND_REPORTS_MAX 8     /* module re-reports per process image (dlopen storms) */
#define UNWIND_ENTRY_SPAN 128    /* bytes past an object's entry point that its entry code
                                  * may span (glibc's ld.so _start/_dl_start_user: 0x40) */
#define UNWIND_ENTRY_SCAN 4      /* outermost frames looked at for one (libdwfl's guesses
                                  * past a frame without CFI: a frame or two) */

struct unwinder {
	Dwfl *dwfl;
	uint32_t pid;
	unsigned reports;
	const struct ev_ustack *u;   /* the record being unwound */
	size_t len;                  /* its stack bytes */
	bool read_failed;            /* a read fell outside the copy: libdwfl takes an
	                              * unreadable return address for the outermost frame */
	struct unwind_rules *rules;  /* the fast path's per-address rules */
	uint64_t top;                /* the last walk's highest word read (0: unknown) */
	enum unwind_stop stop;       /* why the last walk ended */
	bool known_only;             /* /proc shows another image: modules from known */
};

struct walk {
	uint64_t *pcs;
	unsigned max, n;
	bool full;                   /* max reached */
};

/* No separate debug files: .eh_frame is in the object itself. */
static int no_debuginfo(Dwfl_Module *mod, void **ud, const char *name, Dwarf_Addr base,
			const char *file, const char *debuglink, GElf_Word crc, char **dbg)
{
	(void)mod; (void)ud; (void)name; (void)base; (void)file; (void)debuglink; (void)crc;
	*dbg = NULL;
	return -1;
}

static const Dwfl_Callbacks proc_callbacks = {
	.find_elf = dwfl_linux_proc_find_elf,
	.find_debuginfo = no_debuginfo,
};

static pid_t next_thread(Dwfl *dwfl, void *arg, void **thread_arg)
{
	struct unwinder *uw = arg;

	(void)dwfl;
	if (*thread_arg)
		return 0;
	*thread_arg = uw;
	return (pid_t)uw->pid;
}

static bool memory_read(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
	struct unwinder *uw = arg;
	uint64_t v;

	(void)dwfl;
	if (!ustack_read_word(uw->u, uw->len, addr, &v)) {
		uw->read_failed = true;
		return false;
	}
	*result = v;
	return true;
}

static bool set_initial_registers(Dwfl_Thread *thread, void *arg)
{
	struct unwinder *uw = arg;
	Dwarf_Word regs[ALLOC_NREGS - 1];

	for (unsigned i = 0; i < ALLOC_NREGS - 1; i++)
		regs[i] = uw->u->regs[i];
	return dwfl_thread_state_registers(thread, 0, ALLOC_NREGS - 1, regs) &&
	       (dwfl_thread_state_register_pc(thread, uw->u->regs[ALLOC_NREGS - 1]), true);
}

static const Dwfl_Thread_Callbacks thread_callbacks = {
	.next_thread = next_thread,
	.memory_read = memory_read,
	.set_initial_registers = set_initial_registers,
};

/* Reports the modules of known (the process is gone): its mappings as /proc/PID/maps
 * text, which libdwfl parses as it would the file (a module per file, its bias from the
 * lowest mapping). */
static int report_known(Dwfl *dwfl, const struct maps *known)
{
	_cleanup_free_ char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	if (!f)
		return -ENOMEM;
	for (size_t i = 0; i < known->n; i++) {
		const struct map_entry *e = &known->v[i];
		fprintf(f, "%llx-%llx %c%c%cp %llx %02x:%02x %llu %s\n", (unsigned long long)e->start,
			(unsigned long long)e->end, e->prot & PROT_READ ? 'r' : '-',
			e->prot & PROT_WRITE ? 'w' : '-', e->prot & PROT_EXEC ? 'x' : '-',
			(unsigned long long)e->offset, e->dev_major, e->dev_minor,
			(unsigned long long)e->inode, e->path);
	}
	if (fclose(f) || !len)
		return -ENOENT;
	f = fmemopen(buf, len, "r");
	if (!f)
		return -ENOMEM;
	int err = dwfl_linux_proc_maps_report(dwfl, f);
	fclose(f);
	return err ? -ENOENT : 0;
}

/* A new Dwfl of the process's modules, from /proc (known NULL) or from known, attached
 * to the unwinder's thread callbacks; NULL when no module could be reported. */
static Dwfl *report_from(struct unwinder *uw, const struct maps *known)
{
	Dwfl *dwfl = dwfl_begin(&proc_callbacks);

	if (!dwfl)
		return NULL;
	dwfl_report_begin(dwfl);
	int err = known ? report_known(dwfl, known) : dwfl_linux_proc_report(dwfl, (pid_t)uw->pid);
	/* An exiting process's maps read empty: no module, and attach fails for want of
	 * one to tell the machine. */
	if (dwfl_report_end(dwfl, NULL, NULL) || err ||
	    !dwfl_attach_state(dwfl, NULL, (pid_t)uw->pid, &thread_callbacks, uw)) {
		dwfl_end(dwfl);
		return NULL;
	}
	return dwfl;
}

/* Whether dwfl (read from /proc) has a module of the same file at every executable
 * file mapping of known: /proc read again after known was checked to be the records'
 * image may show another one since (a shell's child that exec'd between the two reads:
 * its copy then unwound against expr's modules, one frame and cut, under load). */
static bool covers(Dwfl *dwfl, const struct maps *known)
{
	for (size_t i = 0; known && i < known->n; i++) {
		const struct map_entry *e = &known->v[i];
		if (!(e->prot & PROT_EXEC) || e->path[0] != '/')
			continue;
		Dwfl_Module *m = dwfl_addrmodule(dwfl, e->start);
		const char *name = m ? dwfl_module_info(m, NULL, NULL, NULL, NULL, NULL, NULL,
							NULL) : NULL;
		if (!name || strcmp(name, e->path))
			return false;
	}
	return true;
}

/* (Re)reads the process's modules: from /proc while it lives and shows what known holds,
 * else from known. */
static int report(struct unwinder *uw, const struct maps *known)
{
	if (uw->dwfl)
		dwfl_end(uw->dwfl);
	rules_clear(uw->rules);   /* they hold no pointer into the Dwfl, but a new module
	                           * may cover an address that had none */
	uw->reports++;
	uw->dwfl = uw->known_only ? NULL : report_from(uw, NULL);
	if (uw->dwfl && !covers(uw->dwfl, known)) {
		dwfl_end(uw->dwfl);
		uw->dwfl = NULL;
	}
	if (!uw->dwfl && known && known->n)
		uw->dwfl = report_from(uw, known);
	return uw->dwfl ? 0 : -ESRCH;
}

static int on_frame(Dwfl_Frame *f, void *arg)
{
	struct walk *w = arg;
	Dwarf_Addr pc;
	bool activation;

	if (!dwfl_frame_pc(f, &pc, &activation))
		return DWARF_CB_ABORT;
	if (w->n == w->max) {
		w->full = true;
		return DWARF_CB_ABORT;
	}
	w->pcs[w->n++] = pc;
	return DWARF_CB_OK;
}

/* Whether every frame lies in a module the Dwfl knows. */
static bool all_known(Dwfl *dwfl, const uint64_t *pcs, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (!dwfl_addrmodule(dwfl, pcs[i]))
			return false;
	return true;
}

/* Whether return address pc lies in an object's entry code that has no CFI: the dynamic
 * loader's _start/_dl_start_user, which calls _dl_init and through it the libraries'
 * constructors. The kernel jumped there; nothing called it: the outermost frame. */
static bool entry_frame(Dwfl *dwfl, uint64_t pc)
{
	Dwfl_Module *mod = dwfl_addrmodule(dwfl, pc - 1);
	Dwarf_Addr bias, cbias;
	GElf_Ehdr eh;
	Elf *elf;

	if (!mod || !(elf = dwfl_module_getelf(mod, &bias)) || !gelf_getehdr(elf, &eh) ||
	    !eh.e_entry || pc - 1 < eh.e_entry + bias || pc - 1 >= eh.e_entry + bias + UNWIND_ENTRY_SPAN)
		return false;
	Dwarf_CFI *cfi = dwfl_module_eh_cfi(mod, &cbias);
	Dwarf_Frame *frame = NULL;
	if (cfi && dwarf_cfi_addrframe(cfi, pc - 1 - cbias, &frame) == 0) {
		free(frame);
		return false;   /* described: its CFI says where the walk ends */
	}
	return true;
}

/* A walk that stopped for want of CFI in an entry stub ended at the outermost frame:
 * frames past it (libdwfl's frame-pointer guess) are dropped, the stack is whole. */
static void end_at_entry(Dwfl *dwfl, uint64_t *pcs, unsigned *n, bool *truncated)
{
	unsigned stop = *n > UNWIND_ENTRY_SCAN ? *n - UNWIND_ENTRY_SCAN : 0;

	for (unsigned i = *n; *truncated && i-- > stop; ) {
		if (entry_frame(dwfl, pcs[i])) {
			*n = i + 1;
			*truncated = false;
		}
	}
}

/* MEMPROFD_UNWIND_RULES=off walks every stack with libdwfl: for tests and benches that
 * compare the fast path with it (same frames, cost per stack). */
static bool rules_on(void)
{
	static int on = -1;

	if (on < 0) {
		const char *e = getenv("MEMPROFD_UNWIND_RULES");
		on = !(e && !strcmp(e, "off"));
	}
	return on;
}

int unwind_stack(struct unwinder **uwp, uint32_t pid, const struct maps *known, bool proc_ok,
		 const struct ev_ustack *u, size_t len,
		 uint64_t *pcs, unsigned max, unsigned *n, bool *truncated)
{
	struct unwinder *uw = *uwp;
	struct walk w = { .pcs = pcs, .max = max };
	int rc;

	*n = 0;
	*truncated = true;
	if (!uw) {
		uw = *uwp = calloc(1, sizeof(*uw));
		if (!uw)
			return -ENOMEM;
		uw->pid = pid;
	}
	uw->stop = UNWIND_STOP_CFI;
	uw->known_only = !proc_ok;
	if (!uw->dwfl) {
		if (uw->reports >= UNWIND_REPORTS_MAX)
			return -ESRCH;
		if ((rc = report(uw, known)))
			return rc;
	}
	uw->top = 0;
	if (rules_on() &&
	    rules_walk(&uw->rules, uw->dwfl, u, len, pcs, max, n, truncated, &uw->top) == RULES_WALKED) {
		/* rules_walk's truncated walk either filled pcs or read past the copy */
		uw->stop = !*truncated ? UNWIND_STOP_ROOT : *n == max ? UNWIND_STOP_FRAMES : UNWIND_STOP_COPY;
		end_at_entry(uw->dwfl, pcs, n, truncated);
		if (!*truncated)
			uw->stop = UNWIND_STOP_ROOT;
		return *n ? 0 : -ENOENT;
	}
	uw->top = 0;
	uw->u = u;
	uw->len = len;
	uw->read_failed = false;
	rc = dwfl_getthread_frames(uw->dwfl, (pid_t)pid, on_frame, &w);
	if (!all_known(uw->dwfl, pcs, w.n) && uw->reports < UNWIND_REPORTS_MAX && !report(uw, known)) {
		/* An object mapped since the modules were read (dlopen): read them again. */
		w.n = 0;
		w.full = false;
		uw->read_failed = false;
		rc = dwfl_getthread_frames(uw->dwfl, (pid_t)pid, on_frame, &w);
	}
	/* 0: the outermost frame was reached (its return address is undefined in the CFI). */
	*truncated = rc != 0 || w.full || uw->read_failed;
	uw->stop = !*truncated ? UNWIND_STOP_ROOT : w.full ? UNWIND_STOP_FRAMES
		 : uw->read_failed ? UNWIND_STOP_COPY : UNWIND_STOP_CFI;
	*n = w.n;
	end_at_entry(uw->dwfl, pcs, n, truncated);
	if (!*truncated)
		uw->stop = UNWIND_STOP_ROOT;
	return w.n ? 0 : -ENOENT;
}

uint64_t unwind_top(const struct unwinder *uw)
{
	return uw ? uw->top : 0;
}

enum unwind_stop unwind_stop(const struct unwinder *uw)
{
	return uw ? uw->stop : UNWIND_STOP_CFI;
}

void unwinder_free(struct unwinder *uw)
{
	if (!uw)
		return;
	if (uw->dwfl)
		dwfl_end(uw->dwfl);
	rules_free(uw->rules);
	free(uw);
}
