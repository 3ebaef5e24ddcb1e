/* SIGTRAP guard for the in-process watches: under this hypervisor a target with hardware
 * watches died of a debug trap now and then (issue 15), a trap the kernel's breakpoint
 * handler did not claim. At the first watch armed, if SIGTRAP's disposition is SIG_DFL,
 * a handler is installed that swallows the debug-register traps (TRAP_HWBKPT, and
 * TRAP_BRKPT on a thread that armed a watch) and counts them; any other SIGTRAP puts
 * SIG_DFL back and is raised again, so int3, kill and ptrace keep their meaning. A target
 * that installs its own handler (before or after) owns SIGTRAP: ours never comes back.
 * Async-signal-safe: atomics and syscalls only. */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include "sampler/sampler_trap.h"

enum { GUARD_NONE, GUARD_BUSY, GUARD_OURS, GUARD_DECLINED };

static int state;                     /* GUARD_*: installed at most once per process */
static uint64_t swallowed, unreported;
static __thread int armed_here __attribute__((tls_model("initial-exec")));

static int ours(const siginfo_t *si)
{
	if (si->si_code == TRAP_HWBKPT)
		return 1;
	/* A #DB whose DR6 names no cause (the kernel's "icebp" path) comes as TRAP_BRKPT;
	 * int1 in a program of its own is not told apart on a thread that armed a watch. */
	return si->si_code == TRAP_BRKPT && armed_here;
}

static void on_trap(int sig, siginfo_t *si, void *uc)
{
	int saved = errno;

	(void)uc;
	if (ours(si)) {
		__atomic_fetch_add(&swallowed, 1, __ATOMIC_RELAXED);
		__atomic_fetch_add(&unreported, 1, __ATOMIC_RELAXED);
		errno = saved;
		return;   /* a data breakpoint is a trap: the access already completed */
	}
	struct sigaction dfl;

	memset(&dfl, 0, sizeof(dfl));
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	sigaction(sig, &dfl, NULL);
	__atomic_store_n(&state, GUARD_DECLINED, __ATOMIC_RELAXED);
	/* Delivered again at the return, with the default action (the handler's mask
	 * blocks it until then). */
	syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
	errno = saved;
}

void sampler_trap_guard(void)
{
	int expect = GUARD_NONE;

	armed_here = 1;
	if (__atomic_load_n(&state, __ATOMIC_RELAXED) != GUARD_NONE ||
	    !__atomic_compare_exchange_n(&state, &expect, GUARD_BUSY, 0, __ATOMIC_ACQ_REL,
					 __ATOMIC_RELAXED))
		return;
	struct sigaction old, sa;
	int next = GUARD_DECLINED;

	/* A thread of the target could install its handler between the query and ours:
	 * a window of two syscalls, once per process. */
	if (sigaction(SIGTRAP, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
	    old.sa_handler == SIG_DFL) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_sigaction = on_trap;
		sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
		sigemptyset(&sa.sa_mask);
		if (sigaction(SIGTRAP, &sa, NULL) == 0)
			next = GUARD_OURS;
	}
	__atomic_store_n(&state, next, __ATOMIC_RELEASE);
}

unsigned sampler_trap_take_unreported(unsigned max)
{
	uint64_t n = __atomic_exchange_n(&unreported, 0, __ATOMIC_RELAXED);

	if (n > max) {
		__atomic_fetch_add(&unreported, n - max, __ATOMIC_RELAXED);
		n = max;
	}
	return (unsigned)n;
}

uint64_t sampler_trap_swallowed(void)
{
	return __atomic_load_n(&swallowed, __ATOMIC_RELAXED);
}

int sampler_trap_installed(void)
{
	return __atomic_load_n(&state, __ATOMIC_ACQUIRE) == GUARD_OURS;
}
