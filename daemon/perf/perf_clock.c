/* perf clock -> CLOCK_MONOTONIC offset (see perf_clock.h). The two timestamps come from
 * one perf_event_comm() call, a few instructions apart, so the offset's error is far
 * below a microsecond; the prctl renames this thread to its own name. */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/perf_event.h>
#include "daemon/perf/perf_aux.h"
#include "daemon/perf/perf_clock.h"
#include "daemon/perf/perf_sample.h"

struct comm_seen {
	uint64_t time;
	uint32_t tid;
	int n;
};

static void on_record(void *arg, const struct perf_event_header *h, const void *rec)
{
	struct comm_seen *c = arg;
	struct perf_sample_id id;

	if (h->type != PERF_RECORD_COMM ||
	    perf_sample_id_parse(rec, h->size, PERF_SAMPLE_TID | PERF_SAMPLE_TIME, &id) < 0 ||
	    id.tid != c->tid)
		return;
	c->time = id.time;
	c->n++;
}

static int open_dummy(int mono)
{
	struct perf_event_attr a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;
	a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	a.sample_id_all = 1;
	a.comm = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	if (mono) {
		a.use_clockid = 1;
		a.clockid = CLOCK_MONOTONIC;
	}
	long fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : (int)fd;
}

int perf_clock_offset(int64_t *mono_minus_perf)
{
	struct perf_ring ring[2];
	struct comm_seen seen[2];
	char name[17] = "";
	int fd[2] = { -1, -1 }, err = 0;

	memset(ring, 0, sizeof(ring));
	memset(seen, 0, sizeof(seen));
	for (int i = 0; i < 2 && !err; i++) {
		seen[i].tid = (uint32_t)syscall(SYS_gettid);
		if ((fd[i] = open_dummy(i)) < 0)
			err = fd[i];
		else
			err = perf_ring_mmap(&ring[i], fd[i], 1, 0);
	}
	if (!err && (prctl(PR_GET_NAME, name) || prctl(PR_SET_NAME, name)))
		err = -errno;
	for (int i = 0; i < 2 && !err; i++) {
		struct perf_ring_ops ops = { .record = on_record, .arg = &seen[i] };
		perf_ring_drain(&ring[i], &ops);
		if (seen[i].n != 1)
			err = -ENODATA;   /* no (or more than one) COMM record of our rename */
	}
	if (!err)
		*mono_minus_perf = (int64_t)(seen[1].time - seen[0].time);
	for (int i = 0; i < 2; i++) {
		perf_ring_free(&ring[i]);
		if (fd[i] >= 0)
			close(fd[i]);
	}
	return err;
}
