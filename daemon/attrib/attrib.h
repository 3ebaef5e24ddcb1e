/* Attribution of access samples: heap -> the allocation live at that address at the
 * sample's time (per-process interval tree, each interval carrying its [alloc_ns,
 * free_ns) lifetime), static data -> (binary, symbol), and the rest counted by class.
 * Invariant: a sample is credited to an object iff alloc_ns <= t < free_ns and the
 * address is inside it, whatever order samples and alloc/free events arrive in; an
 * object is reported (settled) only once no sample older than its free can still come,
 * i.e. when the caller's watermark (and, for sources that see both ends, the allocation
 * watermark) has passed free_ns. Object insert/free/settle cost O(log n), a sample
 * O(log n + k) (k: unsettled objects holding its address). */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "symbolizer/maps.h"
#include "daemon/access/access_sample.h"

#define ATTRIB_GRANULE 64                 /* bytes per AccessHistogram entry */
#define ATTRIB_HIST_MAX_BYTES (64 << 10)  /* objects larger than this get no histogram */
#define ATTRIB_PENDING_MAX (1u << 20)     /* heap-candidate samples held for objects not yet
                                           * known (exact mode learns objects at free) */
#define ATTRIB_TLS_WINDOW (64 << 10)      /* bytes below fs_base taken as the static TLS block */
#define ATTRIB_DATA_MAX (1u << 20)        /* distinct (binary, symbol) entries kept */
#define ATTRIB_OBJECTS_MAX (1u << 20)     /* objects indexed at once (live, or dead and not
                                           * settled yet; ~160 bytes each): beyond it
                                           * attrib_alloc/attrib_object return -ENOSPC and
                                           * the caller aggregates the object without accesses */
#define ATTRIB_DEFER_MAX (1u << 16)       /* samples waiting for the allocation watermark;
                                           * beyond it they are attributed at once */
#define ATTRIB_WEIGHT_ONE (1ull << 16)    /* weight_q16 of an object that stands for itself */


enum attrib_class {
	ATTRIB_HEAP = 0,          /* inside a tracked allocation live at that time */
	ATTRIB_HEAP_UNTRACKED,    /* [heap] but no tracked allocation (allocated before attach) */
	ATTRIB_STATIC,            /* a file-backed data mapping or its .bss */
	ATTRIB_STACK,
	ATTRIB_TLS,
	ATTRIB_ANON,              /* anonymous mmap outside any tracked allocation */
	ATTRIB_FILE,              /* other file mappings (shared memory, mapped data files) */
	ATTRIB_UNKNOWN,           /* no mapping (or the process's maps were unavailable) */
	ATTRIB_HEAP_UNSAMPLED,    /* [heap] in no sampled object (objects_sampled): an
	                           * allocation the sampler skipped; the contexts' weighted
	                           * estimates already stand for these accesses */
	ATTRIB_CLASS_MAX,
};
const char *attrib_class_name(enum attrib_class c);   /* "heap", "heap_untracked", ... */

/* What a mapping says about an address (attrib_region_from_maps). */
enum region_kind { REGION_NONE, REGION_HEAP, REGION_ANON, REGION_STACK, REGION_DATA, REGION_FILE };
struct attrib_region {
	enum region_kind kind;
	const char *path;         /* REGION_DATA/FILE: the file (owned by the maps) */
	uint64_t map_start, map_offset;   /* REGION_DATA: the file mapping (for .bss: the one before) */
	uint64_t dev, inode;      /* REGION_DATA/FILE: the file's (major << 32 | minor, inode) */
};
/* Classifies addr with a process's maps: [heap]; the mapping holding sp (or [stack*]);
 * a writable or read-only private file mapping, or the anonymous mapping right after
 * one (.bss), as REGION_DATA; other anonymous mappings; other files. */
void attrib_region_from_maps(const struct maps *m, uint64_t addr, uint64_t sp,
			     struct attrib_region *out);

/* A static data symbol as the resolver names it; strings must stay valid while the
 * attrib lives (interned by the caller). */
struct attrib_datasym {
	const char *binary;       /* build-id hex (or path) of the binary */
	const char *symbol;       /* "" if no symbol covers the address */
	const char *section;
	uint64_t sym_addr, sym_size;
};

struct attrib_data_entry {
	struct attrib_datasym sym;
	uint64_t samples, est_accesses;
	uint64_t reads, writes;
};

/* A settled heap object: everything MemProf's per-object MIB needs. */
struct attrib_object {
	uint32_t tgid;
	uint64_t start_ns;
	uint64_t addr, size;
	void *ctx;                /* the caller's allocation context (struct istack *) */
	uint64_t alloc_ns, free_ns;
	uint32_t alloc_cpu, free_cpu;
	bool live_at_end;         /* free_ns is the end of the run, not a free */
	uint64_t probe_ns;        /* of its lifetime, the time exact mode's probes took
	                           * (attrib_object's; mib_net_of_probes) */
	uint64_t weight_q16;      /* objects it stands for, Q48.16 (ATTRIB_WEIGHT_ONE: itself) */
	uint64_t samples, est_accesses;   /* of this object alone, never weighted */
	uint64_t est_err;         /* the samples' weight_err in quadrature (access_sample.h) */
	uint64_t est_bytes;       /* bytes those accesses read or wrote (access_sample_bytes) */
	const uint64_t *hist;     /* est accesses per ATTRIB_GRANULE bytes, NULL if none */
	uint32_t hist_len;
};

struct attrib_ops {
	/* Region of addr in process (tgid, start_ns); NULL: attrib treats every address not
	 * in a tracked object as unknown. */
	void (*region)(void *arg, uint32_t tgid, uint64_t start_ns, uint64_t addr, uint64_t sp,
		       struct attrib_region *out);
	/* Data symbol at addr of a REGION_DATA mapping: 0 with out filled (symbol "" when
	 * the binary has none there), -ERANGE when addr lies past the binary's image (an
	 * anonymous mapping merged onto its .bss: the sample is anonymous memory), or other
	 * non-zero when the file is not a binary (the sample then counts as ATTRIB_FILE).
	 * NULL: static data of symbol "" under the path. */
	int (*datasym)(void *arg, const struct attrib_region *r, uint64_t addr,
		       struct attrib_datasym *out);
	/* A heap object settled (its counts are final). Required. */
	void (*object)(void *arg, const struct attrib_object *o);
	void *arg;
	/* The objects are a sample of the allocations (--alloc sampled): a [heap] address
	 * in none of them is ATTRIB_HEAP_UNSAMPLED rather than ATTRIB_HEAP_UNTRACKED. */
	bool objects_sampled;
};

struct attrib_counts {
	uint64_t samples;
	uint64_t by_class[ATTRIB_CLASS_MAX];      /* samples */
	uint64_t est_by_class[ATTRIB_CLASS_MAX];  /* estimated accesses */
	uint64_t pending;                         /* held now for objects not yet known */
	uint64_t pending_resolved;                /* held samples later matched to an object */
	uint64_t pending_overflow;                /* classified at once: pending was full */
	uint64_t late;                            /* older than a watermark already passed */
	uint64_t objects_settled;
	uint64_t objects;                         /* indexed now */
	uint64_t objects_overflow;                /* refused: ATTRIB_OBJECTS_MAX indexed */
	uint64_t deferred;                        /* waiting now for the allocation watermark */
	uint64_t defer_overflow;                  /* attributed at once: ATTRIB_DEFER_MAX waiting */
	uint64_t unmatched_free;                  /* attrib_free of an address not live */
	uint64_t data_overflow;                   /* data symbols beyond ATTRIB_DATA_MAX */
};

struct attrib;

int attrib_open(struct attrib **out, const struct attrib_ops *ops);
void attrib_close(struct attrib *a);

/* Allocation events. attrib_alloc/attrib_free for sources that see both ends (they
 * should also call attrib_alloc_watermark); attrib_object for a source that reports a
 * whole object at its death (exact mode's EV_FREE). ctx is opaque; weight_q16 is handed
 * back untouched in attrib_object. 0, -ENOMEM, or -ENOSPC (ATTRIB_OBJECTS_MAX): then the
 * object is not indexed and the caller keeps it. attrib_free: -ENOENT when no object
 * starting at addr is live (counted in unmatched_free; the caller still owns it). */
int attrib_alloc(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		 uint64_t size, void *ctx, uint64_t alloc_ns, uint32_t cpu, uint64_t weight_q16);
int attrib_free(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		uint64_t free_ns, uint32_t cpu);
int attrib_object(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t addr,
		  uint64_t size, void *ctx, uint64_t alloc_ns, uint64_t free_ns,
		  uint32_t alloc_cpu, uint32_t free_cpu, uint64_t probe_ns);

/* One access sample. Returns the class it was counted in, or -1 while it is held
 * waiting for its object (heap candidates that hit no known object yet) or deferred
 * (at or past the allocation watermark). */
int attrib_sample(struct attrib *a, const struct access_sample *s);

/* Every sample with time < watermark_ns has been delivered: objects freed at or before
 * it settle (ops->object). Call after each drain of the sample ring. */
void attrib_advance(struct attrib *a, uint64_t watermark_ns);
/* Every alloc and free with time < watermark_ns has been given (sources that see both
 * ends). From the first call on, a sample is looked up only once this watermark has
 * passed it (deferred until then), and then the index is complete at its time, so a
 * miss is counted by region at once instead of held; objects settle only behind both
 * watermarks. */
void attrib_alloc_watermark(struct attrib *a, uint64_t watermark_ns);
/* End of the run at end_ns: objects still live settle with free_ns = end_ns (flag
 * live_at_end), then held samples that matched nothing are counted by their region. */
void attrib_finish(struct attrib *a, uint64_t end_ns);
/* A process is gone: its live objects settle at ts_ns (call after its exit, once the
 * source gave its last objects); held samples no object claimed go to their class. */
void attrib_process_exit(struct attrib *a, uint32_t tgid, uint64_t start_ns, uint64_t ts_ns);

/* Whether attribution still holds anything of process (tgid, start_ns): objects not yet
 * settled, or samples held for objects not yet known. */
bool attrib_holds(struct attrib *a, uint32_t tgid, uint64_t start_ns);
/* A long-running recorder (the daemon) forgets processes: every process that holds no
 * unsettled object and that gone() says has ended is dropped, its held samples counted
 * in their classes first. Returns the processes dropped. */
typedef bool (*attrib_gone_fn)(void *arg, uint32_t tgid, uint64_t start_ns);
size_t attrib_forget_gone(struct attrib *a, attrib_gone_fn gone, void *arg);

const struct attrib_counts *attrib_counts(const struct attrib *a);
/* Static-data table, unordered; the pointer is valid until the next attrib call. */
const struct attrib_data_entry *attrib_data(const struct attrib *a, size_t *n);

/* ---- Density arithmetic (MemProf's definitions, seed mempgo-llvm-memprof). */

/* MemProf's per-object fixed-point densities (MemInfoBlock's constructor): access density
 * = accesses * 100 / size; lifetime access density = that * 1000 / lifetime_ms (min 1 ms).
 * Both saturate at UINT32_MAX like the uint32 MIB fields. */
uint32_t attrib_access_density_x100(uint64_t accesses, uint64_t size);
uint32_t attrib_lifetime_access_density_x100(uint64_t accesses, uint64_t size, uint64_t lifetime_ns);
