/* The sample_id trailer of perf records, per the perf ABI (linux/perf_event.h), as the
 * SPE reader and the perf clock see it. Records are hostile input: every field is
 * bounds-checked against header.size and the buffer; a trailer that does not fit is
 * -EBADMSG, never a partial result. */
#pragma once
#include <stddef.h>
#include <stdint.h>
#include <linux/perf_event.h>

/* The sample_id trailer attr.sample_id_all appends to every non-sample record: of the
 * TID, TIME, ID, STREAM_ID, CPU and IDENTIFIER bits of sample_type, in that order, as
 * the record's last bytes. */
struct perf_sample_id {
	uint32_t pid, tid, cpu;
	uint64_t time, id, stream_id;
};
/* 0, -EINVAL (rec shorter than its header.size says, or than len), -EBADMSG (header.size
 * cannot hold the trailer). */
int perf_sample_id_parse(const void *rec, size_t len, uint64_t sample_type,
			 struct perf_sample_id *out);
