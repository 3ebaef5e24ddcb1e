/* `memprofd record`: the subcommand's entry, dispatched from cli/main.c's table. */
#pragma once
int cmd_record(int argc, char **argv);
