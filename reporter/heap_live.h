/* Bytes live over time for the HTML report's heap chart (reporter/heap_live.c), from
 * what the store keeps: per context and 60 s bucket of the objects' ends (free, or the
 * process's exit for objects live at exit), their count, bytes and total lifetime; not
 * each object's times. A row's objects are taken to end mid-bucket after their mean
 * lifetime, so each row's bytes x seconds is exact when its objects share one size and
 * lifetime (the chart's total always equals sum(bytes x mean lifetime)); each bar is the
 * average of bytes live over its bucket. */
#pragma once
#include <stdint.h>
#include <stdio.h>

#define HEAP_LIVE_COLUMNS 3           /* hot, notcold, cold */
#define HEAP_LIVE_TOP 5               /* contexts drawn as lines */
#define HEAP_LIVE_MAX_BUCKETS 1500    /* bars at most: past that a bar spans several buckets */

struct heap_live_row {
	int64_t end_ns;          /* the middle of the row's end bucket */
	uint64_t bytes, life_ns; /* bytes of the row's objects, their mean lifetime */
	unsigned col;            /* < HEAP_LIVE_COLUMNS */
	int top;                 /* < HEAP_LIVE_TOP, or -1 */
};

struct heap_live {
	struct heap_live_row *v;
	size_t n, cap;
	int64_t bucket_ns;       /* the store's bucket */
};

/* One store bucket row: bucket_start, its bytes, count and total lifetime. */
int heap_live_add(struct heap_live *hl, int64_t bucket_start, uint64_t bytes, uint64_t count,
		  uint64_t total_lifetime_ns, unsigned col, int top);
/* Writes the bars, "[t_ns, hot, notcold, cold]" comma-separated (buckets with bytes live
 * only), and each top context's "[t_ns, bytes]" points (its first to its last bucket with
 * bytes live) to top[i]; *width_ns: one bar's span. 0 or -ENOMEM. */
int heap_live_write(const struct heap_live *hl, FILE *bars, FILE *const top[HEAP_LIVE_TOP],
		    int64_t *width_ns);
void heap_live_free(struct heap_live *hl);
