/* churn: allocates and frees continuously for --seconds, at two sites, for crash tests
 * that kill the recorder at random moments. --pidfile gets its pid once it runs;
 * --pdeathsig 1 makes it die with the process that started it; --progress FILE is
 * rewritten after every batch with "<CLOCK_MONOTONIC ns> <objects allocated and freed>",
 * so a checker knows how much a recorder must have flushed by a given moment.
 * --wait-file FILE: allocates nothing until FILE exists (up to a minute), so that a
 * daemon discovering the process at its exec has attached before the first allocation;
 * the --seconds start then. */
#include "ledger.h"

#include <signal.h>
#include <sys/prctl.h>


static uint64_t rng_state = 88172645463325252ULL;

static uint64_t rng(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return rng_state;
}

/* A batch of mallocs of 16..1039 bytes into `out`. */
SITE void churn_malloc(void **out, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		out[i] = malloc(16 + rng() % 1024);
		if (!out[i])
			_exit(3);
	}
}

SITE void churn_calloc(void **out, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		out[i] = calloc(1 + rng() % 8, 64);
		if (!out[i])
			_exit(3);
	}
}

static void free_all(void **p, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		free(p[i]);
}

int main(int argc, char **argv)
{
	long seconds = 30, batch = 50, pause_us = 2000, pdeathsig = 0;
	const char *pidfile = NULL, *progress = NULL, *wait_file = NULL;
	/* Options with a path: the ledger parser takes only numbers, so take these out first. */
	for (int i = 1; i + 1 < argc;) {
		const char **dst = strcmp(argv[i], "--pidfile") == 0 ? &pidfile :
				   strcmp(argv[i], "--progress") == 0 ? &progress :
				   strcmp(argv[i], "--wait-file") == 0 ? &wait_file : NULL;
		if (!dst) {
			i++;
			continue;
		}
		*dst = argv[i + 1];
		for (int j = i; j + 2 <= argc; j++)
			argv[j] = argv[j + 2];
		argc -= 2;
	}
	const struct ledger_opt opts[] = {
		{"seconds", &seconds}, {"batch", &batch}, {"pause-us", &pause_us},
		{"pdeathsig", &pdeathsig},
	};
	ledger_args(argc, argv, opts, sizeof(opts) / sizeof(opts[0]));
	if (batch < 1 || batch > 4096)
		batch = 50;
	if (pdeathsig) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			return 0;
	}
	if (pidfile) {
		char buf[32];
		int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
		int fd = open(pidfile, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0 || write(fd, buf, (size_t)n) != n || close(fd) != 0)
			ledger_die(pidfile);
	}
	int pfd = -1;
	if (progress && (pfd = open(progress, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644)) < 0)
		ledger_die(progress);
	for (int n = 0; wait_file && access(wait_file, F_OK) && n < 6000; n++)
		usleep(10000);
	void *p[4096];
	unsigned long long done = 0;
	int64_t end = ledger_now() + (int64_t)seconds * 1000000000;
	while (ledger_now() < end) {
		churn_malloc(p, (unsigned)batch);
		free_all(p, (unsigned)batch);
		churn_calloc(p, (unsigned)batch / 2 + 1);
		free_all(p, (unsigned)batch / 2 + 1);
		done += (unsigned long long)batch + (unsigned long long)batch / 2 + 1;
		if (pfd >= 0) {
			char line[48];
			int n = snprintf(line, sizeof(line), "%020lld %020llu\n",
					 (long long)ledger_now(), done);
			if (pwrite(pfd, line, (size_t)n, 0) != n)
				ledger_die(progress);
		}
		if (pause_us) {
			struct timespec ts = {0, pause_us * 1000};
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}
