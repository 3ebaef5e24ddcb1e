/* The hold watchdog (exec_hold.h): a process forked by the daemon that holds only the
 * hold maps and the read end of a pipe whose write end only the daemon holds. Every
 * EXEC_HOLD_WATCH_MS it continues a process held longer than EXEC_HOLD_LATE_NS (counted
 * in hold_late); at EOF (the daemon stopped or died) it empties hold_files, continues
 * every held process, sweeps once more for holds in flight, and exits. After fork it
 * makes only system calls (the daemon has threads). Cost: one map walk per sweep. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <bpf/bpf.h>
#include "daemon/service/exec_hold.h"

#define WD_HELD_FD 3
#define WD_FILES_FD 4
#define WD_LATE_FD 5
#define WD_ALIVE_FD 6
#define WD_FINAL_SWEEPS 3     /* sweeps after hold_files is emptied: holds in flight */

static uint64_t now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
}

/* Continues every process held for longer than min_ns; returns how many. */
static uint64_t sweep(uint64_t min_ns)
{
	uint32_t pid, next;
	uint64_t n = 0, now = now_ns();
	struct hold_val v;
	int more = bpf_map_get_next_key(WD_HELD_FD, NULL, &next) == 0;

	while (more) {
		pid = next;
		more = bpf_map_get_next_key(WD_HELD_FD, &pid, &next) == 0;
		if (bpf_map_lookup_elem(WD_HELD_FD, &pid, &v) || now - v.held_ns < min_ns)
			continue;
		if (bpf_map_delete_elem(WD_HELD_FD, &pid) == 0) {   /* not released meanwhile */
			kill((pid_t)pid, SIGCONT);
			n++;
		}
	}
	return n;
}

static _Noreturn void watchdog_main(void)
{
	uint64_t late = 0;
	struct hold_key k;

	for (;;) {
		struct pollfd p = { .fd = WD_ALIVE_FD, .events = POLLIN };
		int r = poll(&p, 1, EXEC_HOLD_WATCH_MS);
		if (r > 0)
			break;   /* EOF (nothing is ever written): the daemon is gone */
		uint64_t n = sweep(EXEC_HOLD_LATE_NS);
		if (n) {
			late += n;
			bpf_map_update_elem(WD_LATE_FD, &(uint32_t){ 0 }, &late, BPF_ANY);
		}
	}
	while (bpf_map_get_next_key(WD_FILES_FD, NULL, &k) == 0)
		bpf_map_delete_elem(WD_FILES_FD, &k);
	for (int i = 0; i < WD_FINAL_SWEEPS; i++) {
		sweep(0);
		struct timespec d = { 0, EXEC_HOLD_WATCH_MS * 1000000L };
		nanosleep(&d, NULL);
	}
	_exit(0);
}

pid_t exec_hold_watchdog(int held_fd, int files_fd, int late_fd, int *alive)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) < 0)
		return -errno;
	pid = fork();
	if (pid == 0) {
		/* Deaf to the signals that stop a service's processes together: it must outlive
		 * the daemon to continue what the daemon held. SIGKILL still ends it. */
		sigset_t all;
		sigfillset(&all);
		sigprocmask(SIG_BLOCK, &all, NULL);
		/* Into fixed slots (dup never lands above a free one), then nothing else: no
		 * link or program survives the daemon through us. */
		int src[4] = { held_fd, files_fd, late_fd, p[0] }, tmp[4];
		for (int i = 0; i < 4; i++)
			if ((tmp[i] = fcntl(src[i], F_DUPFD_CLOEXEC, 64)) < 0)
				_exit(1);
		for (int i = 0; i < 4; i++)
			if (dup2(tmp[i], WD_HELD_FD + i) < 0)
				_exit(1);
		int null = open("/dev/null", O_RDWR | O_CLOEXEC);
		for (int i = 0; i < 3 && null >= 0; i++)
			dup2(null, i);   /* no pipe of the daemon's kept open past its exit */
		syscall(SYS_close_range, WD_ALIVE_FD + 1, ~0U, 0);
		watchdog_main();
	}
	if (pid < 0) {
		int e = -errno;
		close(p[0]);
		close(p[1]);
		return e;
	}
	close(p[0]);
	*alive = p[1];
	return pid;
}
