/* `memprofd export pprof`: a gzipped perftools.profiles.Profile (reporter/profile.proto).
 * One sample per allocation context, leaf location first, with the values
 * alloc_objects/count, alloc_space/bytes, accesses/count (estimated) and
 * lifetime/milliseconds (total over the context's objects) and a "class" label.
 * Locations are (mapping, file offset) with addresses as file offsets, so mappings start
 * at 0; each mapping carries its build-id. Lines come from export_frame_lines(): one per
 * inline level, innermost first, as pprof expects. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "reporter/classify.h"
#include "reporter/export.h"
#include "reporter/progress.h"
#include "reporter/strtab.h"
#include "reporter/profile.pb-c.h"
#include "base/array.h"

#define PPROF_GZ_CHUNK 65536   /* bytes of compressed output written at a time */
#define PPROF_NVALUES 4

typedef Perftools__Profiles__Profile pb_profile;
typedef Perftools__Profiles__ValueType pb_value_type;
typedef Perftools__Profiles__Sample pb_sample;
typedef Perftools__Profiles__Label pb_label;
typedef Perftools__Profiles__Mapping pb_mapping;
typedef Perftools__Profiles__Location pb_location;
typedef Perftools__Profiles__Line pb_line;
typedef Perftools__Profiles__Function pb_function;

struct vec {
	void **v;
	size_t n, cap;
};

static int vec_push(struct vec *v, void *p)
{
	if (!p)
		return -ENOMEM;
	if (ARRAY_GROW(v->v, v->cap, v->n, 256) < 0) {
		free(p);
		return -ENOMEM;
	}
	v->v[v->n++] = p;
	return 0;
}

struct pprof {
	struct strtab strings, funcs, locs, maps;
	struct vec samples, locations, functions, mappings;
	pb_label class_label[CLASSIFY_NCLASSES];
	pb_label *class_label_p[CLASSIFY_NCLASSES];
	struct classify_evidence ev;   /* the store's, for every context's class */
	bool has_lines, has_files, has_inline;
	struct progress pr;
};

static void pprof_free(struct pprof *p)
{
	for (size_t i = 0; i < p->samples.n; i++) {
		pb_sample *s = p->samples.v[i];

		free(s->location_id);
		free(s->value);
		free(s);
	}
	for (size_t i = 0; i < p->locations.n; i++) {
		pb_location *l = p->locations.v[i];

		for (size_t k = 0; k < l->n_line; k++)
			free(l->line[k]);
		free(l->line);
		free(l);
	}
	for (size_t i = 0; i < p->functions.n; i++)
		free(p->functions.v[i]);
	for (size_t i = 0; i < p->mappings.n; i++)
		free(p->mappings.v[i]);
	free(p->samples.v);
	free(p->locations.v);
	free(p->functions.v);
	free(p->mappings.v);
	strtab_free(&p->strings);
	strtab_free(&p->funcs);
	strtab_free(&p->locs);
	strtab_free(&p->maps);
}

/* Index of s in the string table (NULL is ""), or -ENOMEM. */
static int64_t str(struct pprof *p, const char *s)
{
	size_t idx;

	if (!s)
		s = "";
	return strtab_intern(&p->strings, s, strlen(s), &idx) < 0 ? -ENOMEM : (int64_t)idx;
}

/* Mappings are keyed by build-id, or by path for binaries without one. */
static int mapping_id(struct pprof *p, const char *build_id, const char *path, uint64_t *id)
{
	bool by_id = build_id && *build_id;
	const char *k = by_id ? build_id : path ? path : "";
	size_t len = strlen(k) + 1, idx;
	char *key = malloc(len + 1);
	int r;

	if (!key)
		return -ENOMEM;
	key[0] = by_id ? 'b' : 'p';
	memcpy(key + 1, k, len);
	r = strtab_intern(&p->maps, key, len, &idx);
	free(key);
	if (r < 0)
		return r;
	*id = idx + 1;
	if (r == 0)
		return 0;

	pb_mapping *m = malloc(sizeof(*m));

	if (!m)
		return -ENOMEM;
	perftools__profiles__mapping__init(m);
	m->id = *id;

	int64_t fn = str(p, path), bid = str(p, build_id);

	if (fn < 0 || bid < 0) {
		free(m);
		return -ENOMEM;
	}
	m->filename = fn;
	m->build_id = bid;
	return vec_push(&p->mappings, m);
}

static int function_id(struct pprof *p, const struct export_line *l, uint64_t *id)
{
	const char *mangled = l->mangled ? l->mangled : l->function, *file = l->file ? l->file : "";
	size_t a = strlen(l->function), b = strlen(mangled), c = strlen(file), idx;
	char *key = malloc(a + b + c + 3 + sizeof(l->start_line));
	int r;

	if (!key)
		return -ENOMEM;
	memcpy(key, l->function, a + 1);
	memcpy(key + a + 1, mangled, b + 1);
	memcpy(key + a + b + 2, file, c + 1);
	memcpy(key + a + b + c + 3, &l->start_line, sizeof(l->start_line));
	r = strtab_intern(&p->funcs, key, a + b + c + 3 + sizeof(l->start_line), &idx);
	free(key);
	if (r < 0)
		return r;
	*id = idx + 1;
	if (r == 0)
		return 0;

	pb_function *f = malloc(sizeof(*f));

	if (!f)
		return -ENOMEM;
	perftools__profiles__function__init(f);
	f->id = *id;

	int64_t name = str(p, l->function), sys = str(p, mangled), fname = str(p, file);

	if (name < 0 || sys < 0 || fname < 0) {
		free(f);
		return -ENOMEM;
	}
	f->name = name;
	f->system_name = sys;
	f->filename = fname;
	f->start_line = l->start_line;
	return vec_push(&p->functions, f);
}

static int location_id(struct pprof *p, const struct store_frame *fr, uint64_t *id)
{
	uint64_t map, key[2];
	size_t idx;
	int r = mapping_id(p, fr->build_id, fr->path, &map);

	if (r < 0)
		return r;
	key[0] = map;
	key[1] = fr->offset;
	r = strtab_intern(&p->locs, key, sizeof(key), &idx);
	if (r < 0)
		return r;
	*id = idx + 1;
	if (r == 0)
		return 0;

	struct export_line lines[EXPORT_MAX_INLINE];
	unsigned n = export_frame_lines(fr, lines, EXPORT_MAX_INLINE);
	pb_location *loc = malloc(sizeof(*loc));

	if (!loc)
		return -ENOMEM;
	perftools__profiles__location__init(loc);
	loc->id = *id;
	loc->mapping_id = map;
	loc->address = fr->offset;
	loc->line = n ? calloc(n, sizeof(*loc->line)) : NULL;
	r = vec_push(&p->locations, loc);
	if (r < 0)
		return r;
	if (n && !loc->line)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		pb_line *ln = malloc(sizeof(*ln));

		if (!ln)
			return -ENOMEM;
		perftools__profiles__line__init(ln);
		loc->line[loc->n_line++] = ln;
		r = function_id(p, &lines[i], &ln->function_id);
		if (r < 0)
			return r;
		ln->line = lines[i].line;
		ln->column = lines[i].column;
		p->has_lines |= lines[i].line > 0;
		p->has_files |= lines[i].file != NULL;
	}
	p->has_inline |= n > 1;
	if (n)
		((pb_mapping *)p->mappings.v[map - 1])->has_functions = true;
	return 0;
}

static int64_t clamp64(uint64_t v)
{
	return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int sample_cb(const struct store_ctx_row *r, void *arg)
{
	struct pprof *p = arg;
	pb_sample *s = malloc(sizeof(*s));
	int rc;

	progress_step(&p->pr);
	if (!s)
		return -ENOMEM;
	perftools__profiles__sample__init(s);
	s->location_id = calloc(r->nframes ? r->nframes : 1, sizeof(*s->location_id));
	s->value = calloc(PPROF_NVALUES, sizeof(*s->value));
	if (!s->location_id || !s->value) {
		free(s->location_id);
		free(s->value);
		free(s);
		return -ENOMEM;
	}
	rc = vec_push(&p->samples, s);
	if (rc < 0)
		return rc;
	for (unsigned i = 0; i < r->nframes; i++) {
		rc = location_id(p, &r->frames[i], &s->location_id[s->n_location_id]);
		if (rc < 0)
			return rc;
		s->n_location_id++;
	}
	s->n_value = PPROF_NVALUES;
	s->value[0] = clamp64(r->mib.alloc_count);
	s->value[1] = clamp64(r->mib.total_size);
	s->value[2] = clamp64(r->mib.total_access_count);
	s->value[3] = clamp64(r->mib.total_lifetime_ns / 1000000);
	s->n_label = 1;
	s->label = &p->class_label_p[classify_mib(&r->mib, &p->ev)];
	return 0;
}

/* ---- gzip on the way out: protobuf-c packs into this buffer, zlib deflates ---- */

struct gz_buffer {
	ProtobufCBuffer base;
	z_stream z;
	FILE *out;
	int err;
	unsigned char chunk[PPROF_GZ_CHUNK];
};

static void gz_run(struct gz_buffer *g, int flush)
{
	do {
		g->z.next_out = g->chunk;
		g->z.avail_out = sizeof(g->chunk);

		int zr = deflate(&g->z, flush);

		if (zr == Z_STREAM_ERROR) {
			g->err = -EIO;
			return;
		}

		size_t have = sizeof(g->chunk) - g->z.avail_out;

		if (have && fwrite(g->chunk, 1, have, g->out) != have) {
			g->err = -EIO;
			return;
		}
	} while (g->z.avail_out == 0);
}

static void gz_append(ProtobufCBuffer *b, size_t len, const uint8_t *data)
{
	struct gz_buffer *g = (struct gz_buffer *)b;

	while (len && !g->err) {
		uInt n = len > UINT32_MAX ? UINT32_MAX : (uInt)len;

		g->z.next_in = (Bytef *)data;
		g->z.avail_in = n;
		gz_run(g, Z_NO_FLUSH);
		data += n;
		len -= n;
	}
}

static int write_gzip(FILE *out, const pb_profile *prof)
{
	struct gz_buffer *g = calloc(1, sizeof(*g));
	int r;

	if (!g)
		return -ENOMEM;
	g->base.append = gz_append;
	g->out = out;
	/* 15 + 16: a gzip header and trailer around the deflate stream, as pprof reads. */
	if (deflateInit2(&g->z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8,
			 Z_DEFAULT_STRATEGY) != Z_OK) {
		free(g);
		return -ENOMEM;
	}
	protobuf_c_message_pack_to_buffer(&prof->base, &g->base);
	if (!g->err) {
		g->z.next_in = NULL;
		g->z.avail_in = 0;
		gz_run(g, Z_FINISH);
	}
	deflateEnd(&g->z);
	r = g->err;
	free(g);
	return r;
}

int export_pprof(FILE *out, struct store *s, const struct export_opts *o)
{
	static const char *const types[PPROF_NVALUES][2] = {
		{ "alloc_objects", "count" }, { "alloc_space", "bytes" },
		{ "accesses", "count" }, { "lifetime", "milliseconds" },
	};
	struct pprof p = {0};
	pb_value_type vt[PPROF_NVALUES], *vtp[PPROF_NVALUES];
	pb_profile prof;
	int64_t comments[2] = {0};
	char comment[2][512];
	uint64_t main_map;
	int r = 0;

	perftools__profiles__profile__init(&prof);
	r = classify_evidence_load(s, &p.ev);
	if (r == 0 && str(&p, "") < 0)   /* string_table[0] must be "" */
		r = -ENOMEM;
	for (unsigned i = 0; i < PPROF_NVALUES && r == 0; i++) {
		perftools__profiles__value_type__init(&vt[i]);
		vt[i].type = str(&p, types[i][0]);
		vt[i].unit = str(&p, types[i][1]);
		vtp[i] = &vt[i];
		if (vt[i].type < 0 || vt[i].unit < 0)
			r = -ENOMEM;
	}
	for (unsigned c = 0; c < CLASSIFY_NCLASSES && r == 0; c++) {
		perftools__profiles__label__init(&p.class_label[c]);
		p.class_label[c].key = str(&p, "class");
		p.class_label[c].str = str(&p, classify_name((enum classify_class)c));
		p.class_label_p[c] = &p.class_label[c];
		if (p.class_label[c].key < 0 || p.class_label[c].str < 0)
			r = -ENOMEM;
	}
	/* The profiled executable is mapping 1, as pprof takes the first as the main one. */
	if (r == 0 && ((o->build_id && *o->build_id) || (o->path && *o->path)))
		r = mapping_id(&p, o->build_id, o->path, &main_map);
	if (r == 0) {
		struct store_ctx_filter f = { .binary = o->binary, .sort = STORE_SORT_BYTES };

		progress_start(&p.pr, "export pprof", o->contexts, EXPORT_PROGRESS_MIN_CONTEXTS,
			       o->progress);
		r = store_query_contexts(s, &f, sample_cb, &p);
		progress_end(&p.pr);
	}
	if (r == 0) {
		snprintf(comment[0], sizeof(comment[0]), "memprofd export pprof");
		snprintf(comment[1], sizeof(comment[1]), "binary %s build-id %s",
			 o->path && *o->path ? o->path : "?",
			 o->build_id && *o->build_id ? o->build_id : "none");
		for (int i = 0; i < 2 && r == 0; i++)
			if ((comments[i] = str(&p, comment[i])) < 0)
				r = -ENOMEM;
	}
	if (r == 0) {
		for (size_t i = 0; i < p.mappings.n; i++) {
			pb_mapping *m = p.mappings.v[i];

			m->has_filenames = p.has_files;
			m->has_line_numbers = p.has_lines;
			m->has_inline_frames = p.has_inline;
		}
		prof.n_sample_type = PPROF_NVALUES;
		prof.sample_type = vtp;
		prof.n_sample = p.samples.n;
		prof.sample = (pb_sample **)p.samples.v;
		prof.n_mapping = p.mappings.n;
		prof.mapping = (pb_mapping **)p.mappings.v;
		prof.n_location = p.locations.n;
		prof.location = (pb_location **)p.locations.v;
		prof.n_function = p.functions.n;
		prof.function = (pb_function **)p.functions.v;
		prof.n_string_table = p.strings.n;
		prof.string_table = p.strings.keys;
		prof.time_nanos = o->now_ns;
		prof.n_comment = 2;
		prof.comment = comments;
		prof.default_sample_type = vt[1].type;   /* alloc_space */
		r = write_gzip(out, &prof);
	}
	pprof_free(&p);
	return r;
}
