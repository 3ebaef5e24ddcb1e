/* kvcache: an allocation-heavy key-value cache, the demo workload of the README and the
 * workload of the overhead benchmark. One allocation per put (the value), plus entry
 * nodes, a periodic long-lived snapshot buffer and a log line buffer: several distinct
 * allocation contexts with different sizes and lifetimes.
 * --work R adds R rounds of compute per operation standing for the application's own work
 * (0, the default, is the allocation-heavy workload itself); bench/overhead.py uses it for
 * a variant whose share of instructions in malloc/free is that of a typical fleet.
 * usage: kvcache [--ops N] [--threads T] [--keys K] [--seed S] [--work R]; prints ops/s (wall)
 * and the process's CPU time (all threads; also what a profiler's probes cost it). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>

struct entry {
	uint64_t key;
	char *value;
	size_t len;
	struct entry *next;
};

struct cache {
	struct entry **buckets;
	size_t nbuckets;
	pthread_mutex_t lock;
};

struct worker {
	struct cache *c;
	uint64_t ops, keys, seed, done, work;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Mixed sizes: mostly small, some medium, a few large, as in real caches. */
static size_t value_size(uint64_t *s)
{
	uint64_t r = rnd(s) % 100;

	if (r < 70)
		return 16 + rnd(s) % 112;
	if (r < 95)
		return 128 + rnd(s) % 896;
	return 1024 + rnd(s) % 3072;
}

__attribute__((noinline)) static char *make_value(size_t len, uint64_t key)
{
	char *v = malloc(len);

	if (v)
		memset(v, (int)(key & 0x7f), len);
	return v;
}

__attribute__((noinline)) static struct entry *make_entry(uint64_t key)
{
	return calloc(1, sizeof(struct entry));
}

__attribute__((noinline)) static char *snapshot(const struct cache *c)
{
	/* Long-lived and rarely touched: the cold context of the demo. */
	char *buf = malloc(c->nbuckets * sizeof(uint64_t));

	if (buf)
		memset(buf, 0, c->nbuckets * sizeof(uint64_t));
	return buf;
}

static void put(struct cache *c, uint64_t key, uint64_t *s)
{
	size_t b = key % c->nbuckets, len = value_size(s);
	char *v = make_value(len, key);
	struct entry *e;

	if (!v)
		return;
	pthread_mutex_lock(&c->lock);
	for (e = c->buckets[b]; e && e->key != key; e = e->next)
		;
	if (!e && (e = make_entry(key))) {
		e->key = key;
		e->next = c->buckets[b];
		c->buckets[b] = e;
	}
	if (e) {
		free(e->value);
		e->value = v;
		e->len = len;
		v = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	free(v);
}

/* The application's own work on an operation: `rounds` dependent mixing steps. */
__attribute__((noinline)) static uint64_t app_work(uint64_t x, uint64_t rounds)
{
	for (uint64_t i = 0; i < rounds; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	return x;
}

static uint64_t get(struct cache *c, uint64_t key)
{
	uint64_t sum = 0;

	pthread_mutex_lock(&c->lock);
	for (struct entry *e = c->buckets[key % c->nbuckets]; e; e = e->next)
		if (e->key == key && e->value)
			sum = (unsigned char)e->value[0] + e->len;
	pthread_mutex_unlock(&c->lock);
	return sum;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	uint64_t s = w->seed | 1, sink = 0;
	char *snaps[4] = { 0 };

	for (uint64_t i = 0; i < w->ops; i++) {
		uint64_t key = rnd(&s) % w->keys;
		if (w->work)
			sink += app_work(key | 1, w->work);
		if (rnd(&s) % 4 == 0)
			put(w->c, key, &s);
		else
			sink += get(w->c, key);
		if (i % (w->ops / 4 + 1) == 0) {
			free(snaps[(i / (w->ops / 4 + 1)) % 4]);
			snaps[(i / (w->ops / 4 + 1)) % 4] = snapshot(w->c);
		}
	}
	for (int i = 0; i < 4; i++)
		free(snaps[i]);
	w->done = sink;
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t ops = 400000, keys = 20000, seed = 42, work = 0;
	int threads = 1;

	for (int i = 1; i + 1 < argc; i += 2) {
		if (!strcmp(argv[i], "--ops"))
			ops = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--threads"))
			threads = atoi(argv[i + 1]);
		else if (!strcmp(argv[i], "--keys"))
			keys = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--seed"))
			seed = strtoull(argv[i + 1], NULL, 10);
		else if (!strcmp(argv[i], "--work"))
			work = strtoull(argv[i + 1], NULL, 10);
		else {
			fprintf(stderr, "kvcache: unknown option %s\n", argv[i]);
			return 2;
		}
	}
	if (threads < 1 || threads > 64 || keys == 0) {
		fprintf(stderr, "kvcache: bad --threads or --keys\n");
		return 2;
	}
	struct cache c = { .nbuckets = keys };
	c.buckets = calloc(keys, sizeof(*c.buckets));
	pthread_mutex_init(&c.lock, NULL);
	pthread_t tid[64];
	struct worker w[64];
	struct timespec t0, t1;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < threads; i++) {
		w[i] = (struct worker){ .c = &c, .ops = ops / threads, .keys = keys, .seed = seed + i,
				       .work = work };
		pthread_create(&tid[i], NULL, run, &w[i]);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double secs = (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	double cpu = ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
	printf("kvcache: %llu ops in %.3f s: %.0f ops/s, cpu %.3f s\n", (unsigned long long)ops, secs,
	       ops / secs, cpu);
	for (size_t b = 0; b < c.nbuckets; b++) {
		for (struct entry *e = c.buckets[b], *n; e; e = n) {
			n = e->next;
			free(e->value);
			free(e);
		}
	}
	free(c.buckets);
	return 0;
}
