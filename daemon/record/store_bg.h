/* record's store opened on a thread while the main thread loads BPF (issue 18: the two
 * are independent, and a new store costs ~10M instructions and a few fsyncs). Invariant:
 * the store is used by no one before store_bg_join returns (SQLite's connection then
 * belongs to the main thread alone), and store_bg_join runs before the command is forked
 * (a failed open fails the start before the command runs, as before). */
#pragma once
#include <pthread.h>
#include <stdbool.h>

#define STORE_BG_ERR_MAX 512

struct store;

struct store_bg {
	const char *path;
	pthread_t thread;
	bool running;                 /* started and not joined yet */
	int err;                      /* store_open's result, once joined */
	struct store *store;          /* once joined, NULL on failure */
	char errbuf[STORE_BG_ERR_MAX];
};

/* Starts opening path read-write; opens it on the caller's thread if no thread can
 * start. */
void store_bg_start(struct store_bg *b, const char *path);
/* Waits for the open (at once when done or never started): 0 with *out the store, or
 * store_open's -errno with b->errbuf naming the file. */
int store_bg_join(struct store_bg *b, struct store **out);
