/* `memprofd daemon`: the subcommand's entry, dispatched from cli/main.c's table. */
#pragma once
int cmd_daemon(int argc, char **argv);
