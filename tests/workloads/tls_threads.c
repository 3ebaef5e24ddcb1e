/* tls_threads: THREADS threads alive at once, each touching a TLS variable, so glibc
 * allocates a fresh stack and TLS block for each: ld.so's _dl_allocate_tls ->
 * allocate_dtv -> calloc, where calloc is include/rtld-malloc.h's inline wrapper around
 * __rtld_calloc (libc's calloc once relocated). Built at test time by
 * tests/integration/check_alloc_trim.py (cc -pthread). */
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#define THREADS 8
#define LINGER_MS 300   /* alive after the threads: the recorder reads /proc/PID/maps for
			 * the stacks' modules while the process still exists */

static __thread char tls_block[4096];

static void *run(void *arg)
{
	tls_block[0] = (char)(long)arg;
	return malloc(64 + (size_t)tls_block[0]);
}

int main(void)
{
	pthread_t t[THREADS];
	void *r;

	for (long i = 0; i < THREADS; i++)
		if (pthread_create(&t[i], NULL, run, (void *)i))
			return 1;
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], &r);
		free(r);
	}
	nanosleep(&(struct timespec){ .tv_nsec = LINGER_MS * 1000000L }, NULL);
	return 0;
}
