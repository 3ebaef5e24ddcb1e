/* The daemon's ownership of its database (db_owner.c): one daemon per database file,
 * whatever path names it, and the write check of `daemon --check`. */
#pragma once

#define DB_OWNER_LOCK_SUFFIX ".lock"   /* RESOLVED.lock: the holder's pid, for the message */

struct db_owner {
	int db_fd;          /* flock on the database file itself: its identity */
	int pid_fd;         /* RESOLVED.lock, holding our pid */
};

/* Takes the database: 0, or 1 after a one-line error (another daemon holds it, or the
 * file cannot be opened). The file is created if missing (SQLite takes an empty file as
 * an empty database), and so are the directories above it (0750). */
int db_owner_lock(struct db_owner *o, const char *db);
void db_owner_release(struct db_owner *o);
/* Opens db for writing and rolls back a write transaction (leaving no file behind that
 * was not there): 0, or 1 after a one-line error saying why it cannot be written. */
int db_owner_check(const char *db);
