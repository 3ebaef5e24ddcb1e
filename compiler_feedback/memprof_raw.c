/* `memprofd export memprof-raw`: one binary's contexts as a MemProf raw v4 profile that
 * `llvm-profdata merge --profiled-binary` indexes. The file is built in memory (the
 * header needs every section's size) and written in one go. Densities are chosen so
 * that LLVM's getAllocType() sees memprofd's own (reporter/classify.h) density:
 * TotalLifetimeAccessDensity / AllocCount / 100 == classify_density(). Access counts
 * are the samples that hit each object times their weights (estimated); Min/Max
 * AccessDensity and Min/MaxLifetimeAccessDensity are the extremes of the objects' own
 * values (store/mib.h), or, for rows recorded before schema 12, their bounds from the
 * per-object extremes of count, size and lifetime. */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "compiler_feedback/cf.h"
#include "compiler_feedback/memprof_raw.h"
#include "reporter/classify.h"
#include "store/mib.h"
#include "symbolizer/elfsym.h"
#include "base/log.h"

struct buf {
	uint8_t *p;
	size_t n, cap;
	bool oom;
};

static void put(struct buf *b, const void *d, size_t n)
{
	if (b->oom)
		return;
	if (b->n + n > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		uint8_t *p;

		while (cap < b->n + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->oom = true;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, d, n);
	b->n += n;
}

static void put64(struct buf *b, uint64_t v)
{
	uint8_t le[8];

	for (int i = 0; i < 8; i++)
		le[i] = (uint8_t)(v >> (8 * i));
	put(b, le, 8);
}

static uint8_t *w32(uint8_t *p, uint64_t v)
{
	uint32_t x = v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;

	for (int i = 0; i < 4; i++)
		*p++ = (uint8_t)(x >> (8 * i));
	return p;
}

static uint8_t *w64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		*p++ = (uint8_t)(v >> (8 * i));
	return p;
}

static uint64_t d2u(double d)
{
	return d <= 0 ? 0 : d >= 1.8e19 ? UINT64_MAX : (uint64_t)(d + 0.5);
}

void memprof_mib_fields(const struct mib *m, bool undecided, uint64_t ts_base_ns,
			uint64_t v[MEMPROF_MIB_NFIELDS])
{
	double n = (double)m->alloc_count;
	double d = classify_density(m);
	double tlad = (undecided && d < CLASSIFY_COLD_DENSITY ? CLASSIFY_COLD_DENSITY : d) *
		      100.0 * n;
	double min_ad, max_ad, min_lad, max_lad;
	int i = 0;

	mib_density_extremes(m, &min_ad, &max_ad, &min_lad, &max_lad);
	v[i++] = m->alloc_count;
	v[i++] = m->total_access_count;
	v[i++] = m->min_access_count;
	v[i++] = m->max_access_count;
	v[i++] = m->total_size;
	v[i++] = m->min_size;
	v[i++] = m->max_size;
	v[i++] = m->alloc_ts_ns > ts_base_ns ? (m->alloc_ts_ns - ts_base_ns) / 1000000 : 0;
	v[i++] = m->dealloc_ts_ns > ts_base_ns ? (m->dealloc_ts_ns - ts_base_ns) / 1000000 : 0;
	v[i++] = m->total_lifetime_ns / 1000000;
	v[i++] = m->min_lifetime_ns / 1000000;
	v[i++] = m->max_lifetime_ns / 1000000;
	v[i++] = m->alloc_cpu;
	v[i++] = m->dealloc_cpu;
	v[i++] = m->num_migrated_cpu;
	v[i++] = m->num_lifetime_overlaps;
	v[i++] = m->num_same_alloc_cpu;
	v[i++] = m->num_same_dealloc_cpu;
	v[i++] = 0;                                         /* DataTypeId */
	v[i++] = m->total_size ? d2u((double)m->total_access_count * 100.0 * n /
				    (double)m->total_size) : 0;
	v[i++] = d2u(min_ad * 100.0);
	v[i++] = d2u(max_ad * 100.0);
	v[i++] = d2u(tlad);
	v[i++] = d2u(min_lad * 100.0);
	v[i++] = d2u(max_lad * 100.0);
}

const struct memprof_mib_field memprof_mib_fields_def[MEMPROF_MIB_NFIELDS] = {
	{ "AllocCount", 4 }, { "TotalAccessCount", 8 }, { "MinAccessCount", 8 },
	{ "MaxAccessCount", 8 }, { "TotalSize", 8 }, { "MinSize", 4 }, { "MaxSize", 4 },
	{ "AllocTimestamp", 4 }, { "DeallocTimestamp", 4 }, { "TotalLifetime", 8 },
	{ "MinLifetime", 4 }, { "MaxLifetime", 4 }, { "AllocCpuId", 4 },
	{ "DeallocCpuId", 4 }, { "NumMigratedCpu", 4 }, { "NumLifetimeOverlaps", 4 },
	{ "NumSameAllocCpu", 4 }, { "NumSameDeallocCpu", 4 }, { "DataTypeId", 8 },
	{ "TotalAccessDensity", 8 }, { "MinAccessDensity", 4 }, { "MaxAccessDensity", 4 },
	{ "TotalLifetimeAccessDensity", 8 }, { "MinLifetimeAccessDensity", 4 },
	{ "MaxLifetimeAccessDensity", 4 },
};

void memprof_raw_mib(uint8_t out[MEMPROF_RAW_MIB_SIZE], const struct mib *m, bool undecided,
		     uint32_t hist_len, uint64_t ts_base_ns)
{
	uint64_t v[MEMPROF_MIB_NFIELDS];
	uint8_t *p = out;

	memprof_mib_fields(m, undecided, ts_base_ns, v);
	for (int i = 0; i < MEMPROF_MIB_NFIELDS; i++)
		p = memprof_mib_fields_def[i].width == 4 ? w32(p, v[i]) : w64(p, v[i]);
	p = w32(p, hist_len);   /* AccessHistogramSize */
	w64(p, 0);              /* AccessHistogram: a pointer in the runtime, 0 in the file */
}

size_t memprof_raw_mib_record_size(const struct mib_hist *h)
{
	return 8 + MEMPROF_RAW_MIB_SIZE + (h ? (size_t)h->len * 8 : 0);
}

size_t memprof_raw_mib_record(uint8_t *out, uint64_t stack_id, const struct mib *m,
			      bool undecided, const struct mib_hist *h, uint64_t ts_base_ns)
{
	uint32_t n = h ? h->len : 0;
	uint8_t *p = w64(out, stack_id);

	memprof_raw_mib(p, m, undecided, n, ts_base_ns);
	p += MEMPROF_RAW_MIB_SIZE;
	for (uint32_t i = 0; i < n; i++)
		p = w64(p, h->v[i]);
	return (size_t)(p - out);
}

static int hexval(int c)
{
	return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 :
	       c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

int memprof_raw_check_binary(const char *bin, const char *want_build_id,
			     struct memprof_raw_seg *seg, char *err, size_t errsz)
{
	char hex[2 * ELFSYM_BUILD_ID_MAX + 1];
	int fd, r = 0, nexec = 0;
	bool debug = false;
	Elf *e = NULL;
	GElf_Ehdr eh;
	size_t nph, shstrndx;

	memset(seg, 0, sizeof(*seg));
	r = elf_build_id_of(bin, hex, sizeof(hex));
	if (r == -ENOENT) {
		snprintf(err, errsz, "%s has no build-id (link with -Wl,--build-id)", bin);
		return -ENOENT;
	}
	if (r < 0) {
		snprintf(err, errsz, "%s: reading the build-id: %s", bin, strerror(-r));
		return r;
	}
	if (want_build_id && *want_build_id && strcmp(hex, want_build_id)) {
		snprintf(err, errsz, "%s has build-id %s, the profile is of %s", bin, hex,
			 want_build_id);
		return -ESTALE;
	}
	if (strlen(hex) / 2 > MEMPROF_RAW_BUILDID_MAX) {
		snprintf(err, errsz, "%s: build-id longer than %d bytes", bin,
			 MEMPROF_RAW_BUILDID_MAX);
		return -E2BIG;
	}
	seg->build_id_size = (unsigned)(strlen(hex) / 2);
	for (unsigned i = 0; i < seg->build_id_size; i++)
		seg->build_id[i] = (uint8_t)(hexval(hex[2 * i]) << 4 | hexval(hex[2 * i + 1]));

	elf_version(EV_CURRENT);
	fd = open(bin, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		r = -errno;
		snprintf(err, errsz, "%s: %s", bin, strerror(errno));
		return r;
	}
	e = elf_begin(fd, ELF_C_READ, NULL);
	if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh) ||
	    elf_getphdrnum(e, &nph) || elf_getshdrstrndx(e, &shstrndx)) {
		snprintf(err, errsz, "%s: not a readable ELF file", bin);
		r = -ENOEXEC;
		goto out;
	}
	if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64) {
		snprintf(err, errsz, "%s: not an x86-64 ELF file (llvm-profdata reads only those)",
			 bin);
		r = -ENOEXEC;
		goto out;
	}
	for (size_t i = 0; i < nph; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
			continue;
		if (++nexec > 1 || ph.p_offset != 0) {
			snprintf(err, errsz, "%s: the executable segment is not the one at file "
				 "offset 0 (link with -Wl,-z,noseparate-code)", bin);
			r = -ENOEXEC;
			goto out;
		}
		seg->p_vaddr = ph.p_vaddr;
		seg->base = eh.e_type == ET_DYN ? MEMPROF_RAW_PIE_BASE : 0;
		seg->start = seg->base + ph.p_vaddr;
		seg->end = seg->start + ph.p_memsz;
	}
	if (!nexec) {
		snprintf(err, errsz, "%s: no executable PT_LOAD segment", bin);
		r = -ENOEXEC;
		goto out;
	}
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(e, scn));) {
		GElf_Shdr sh;
		const char *name;

		if (gelf_getshdr(scn, &sh) && (name = elf_strptr(e, shstrndx, sh.sh_name)) &&
		    !strcmp(name, ".debug_info"))
			debug = true;
	}
	if (!debug) {
		snprintf(err, errsz, "%s has no DWARF debug info (build with -gmlt "
			 "-fdebug-info-for-profiling)", bin);
		r = -ENODATA;
	}
out:
	if (e)
		elf_end(e);
	close(fd);
	return r;
}

/* The raw profile's header, its one segment, and the MIB section's count (the MIB
 * records of mib_bytes and the stacks of stack_bytes follow it). */
static void put_header(struct buf *hdr, const struct memprof_raw_seg *seg, size_t mib_bytes,
		       size_t stack_bytes, uint64_t nstacks)
{
	uint64_t seg_off = MEMPROF_RAW_HEADER_SIZE;
	uint64_t mib_off = seg_off + 8 + MEMPROF_RAW_SEGMENT_SIZE;
	uint64_t stack_off = mib_off + 8 + mib_bytes;
	uint64_t total = stack_off + 8 + stack_bytes;
	uint8_t id[MEMPROF_RAW_BUILDID_MAX] = { 0 };

	put64(hdr, MEMPROF_RAW_MAGIC_64);
	put64(hdr, MEMPROF_RAW_VERSION);
	put64(hdr, total);
	put64(hdr, seg_off);
	put64(hdr, mib_off);
	put64(hdr, stack_off);
	put64(hdr, 1);
	put64(hdr, seg->start);
	put64(hdr, seg->end);
	put64(hdr, seg->base);
	put64(hdr, seg->build_id_size);
	memcpy(id, seg->build_id, seg->build_id_size);
	put(hdr, id, sizeof(id));
	put64(hdr, nstacks);
}

int export_memprof_raw(FILE *out, struct store *s, const struct export_opts *o)
{
	const char *bin = o->binary && strchr(o->binary, '/') ? o->binary : o->path;
	struct memprof_raw_seg seg;
	struct elfsym *es = NULL;
	struct cf_ctxs c;
	struct buf mibs = { 0 }, stacks = { 0 }, hdr = { 0 };
	uint64_t ts_base = UINT64_MAX, nstacks = 0;
	char err[512];
	int r;

	if (!bin || !*bin) {
		return export_fail(o, "memprof-raw", -ENOENT, "no path for the binary; pass "
				   "--binary PATH");
	}
	r = memprof_raw_check_binary(bin, o->build_id, &seg, err, sizeof(err));
	if (r < 0)
		return export_fail(o, "memprof-raw", r, "%s", err);
	r = elfsym_open(&es, bin);
	if (r < 0)
		return export_fail(o, "memprof-raw", r, "%s: reading its symbols: %s", bin,
				   strerror(-r));
	r = cf_load_contexts(s, o, &c);
	if (r < 0) {
		elfsym_close(es);
		return r;
	}
	for (size_t i = 0; i < c.n; i++)
		if (c.v[i].mib.alloc_ts_ns && c.v[i].mib.alloc_ts_ns < ts_base)
			ts_base = c.v[i].mib.alloc_ts_ns;
	for (size_t i = 0; i < c.n; i++) {
		const struct cf_ctx *x = &c.v[i];
		uint64_t pcs[STORE_MAX_FRAMES], npc = 0;
		uint8_t *rec;

		/* Frames of other objects (libc, libstdc++) would not symbolize against the
		 * profiled binary; the reader drops them, so they are left out here. */
		for (unsigned k = 0; k < x->nframes && npc < STORE_MAX_FRAMES; k++) {
			uint64_t va;

			if (!x->frames[k].build_id || strcmp(x->frames[k].build_id, o->build_id) ||
			    elfsym_offset_to_vaddr(es, x->frames[k].offset, &va) < 0 ||
			    va <= seg.p_vaddr)
				continue;
			pcs[npc++] = seg.start + (va - seg.p_vaddr) - 1;
		}
		if (!npc)
			continue;
		rec = malloc(memprof_raw_mib_record_size(&x->hist));
		if (!rec) {
			mibs.oom = true;
			break;
		}
		put(&mibs, rec, memprof_raw_mib_record(rec, (uint64_t)x->id, &x->mib,
							   x->cls == CLASSIFY_UNKNOWN, &x->hist,
						      ts_base == UINT64_MAX ? 0 : ts_base));
		free(rec);
		put64(&stacks, (uint64_t)x->id);
		put64(&stacks, npc);
		for (uint64_t k = 0; k < npc; k++)
			put64(&stacks, pcs[k]);
		nstacks++;
	}
	cf_free_contexts(&c);
	elfsym_close(es);
	if (mibs.oom || stacks.oom) {
		r = -ENOMEM;
		goto out;
	}
	if (!nstacks) {
		r = export_fail(o, "memprof-raw", -ENODATA, "no context of %s has a frame in "
				"its executable segment", bin);
		goto out;
	}

	put_header(&hdr, &seg, mibs.n, stacks.n, nstacks);
	if (hdr.oom || mibs.oom || stacks.oom) {
		r = -ENOMEM;
		goto out;
	}
	if (fwrite(hdr.p, 1, hdr.n, out) != hdr.n || fwrite(mibs.p, 1, mibs.n, out) != mibs.n) {
		r = -EIO;
		goto out;
	}
	uint8_t cnt[8];

	for (int i = 0; i < 8; i++)
		cnt[i] = (uint8_t)(nstacks >> (8 * i));
	if (fwrite(cnt, 1, 8, out) != 8 || fwrite(stacks.p, 1, stacks.n, out) != stacks.n)
		r = -EIO;
out:
	free(hdr.p);
	free(mibs.p);
	free(stacks.p);
	return r;
}
