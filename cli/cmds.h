/* Subcommands of the memprofd binary, one file each, dispatched from main.c's table;
 * each layer declares its own commands (cli/ includes them, they include nothing of cli/). */
#pragma once
#include "daemon/record/cmd_record.h"
#include "daemon/service/cmd_daemon.h"
int cmd_query(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_export(int argc, char **argv);   /* cli/cmd_export.c */
int cmd_push(int argc, char **argv);
