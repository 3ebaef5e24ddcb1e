/* Subcommands of the memprofd binary, one file each, dispatched from main.c's table. */
#pragma once
int cmd_record(int argc, char **argv);
int cmd_query(int argc, char **argv);
int cmd_daemon(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_push(int argc, char **argv);
