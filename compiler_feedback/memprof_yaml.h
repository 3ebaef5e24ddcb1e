/* MemProf YAML export (LLVM >= 20): see memprof_yaml.c. */
#pragma once
#include <stdio.h>
#include "reporter/export.h"

int export_memprof_yaml(FILE *out, struct store *s, const struct export_opts *o);
