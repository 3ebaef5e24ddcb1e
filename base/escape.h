/* Strings for machine-read output, shared by every writer: JSON strings that are valid
 * JSON whatever the bytes (invalid UTF-8 becomes U+FFFD) and RFC 4180 CSV fields. */
#pragma once
#include <stdio.h>

void fmt_json_str(FILE *out, const char *s);    /* "..." escaped, or null for NULL */
void fmt_csv_field(FILE *out, const char *s);   /* quoted only when needed; NULL is empty */
