/* memprofd: one binary, git-style subcommands dispatched from one table. Exit codes:
 * 0 success, 1 runtime failure, 2 bad usage; errors are one line on stderr. */
#include <stdio.h>
#include <string.h>
#include "cli/cmds.h"
#include "base/log.h"

static const struct {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *help;
} cmds[] = {
	{ "record", cmd_record, "profile a command or a running process into the store" },
	{ "query", cmd_query, "read the store: contexts, data, binaries, processes, status" },
	{ "export", cmd_export, "pprof, folded stacks, an HTML report (and compiler/linker inputs)" },
	{ "daemon", cmd_daemon, "the systemd service: profile the processes the config selects" },
	{ "merge", cmd_merge, "merge several hosts' databases into one" },
	{ "push", cmd_push, "send a host's store to the fleet's ClickHouse" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: memprofd <command> [options]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].help);
	fprintf(f, "\n`memprofd <command> --help` describes each.\n");
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("memprofd " MEMPROFD_VERSION "\n");
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
		if (!strcmp(argv[1], cmds[i].name))
			return cmds[i].fn(argc - 1, argv + 1);
	log_error("%s: not a memprofd command (see memprofd --help)", argv[1]);
	return 2;
}
