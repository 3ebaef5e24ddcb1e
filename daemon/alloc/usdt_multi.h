/* USDT probes through multi-uprobe links (daemon/alloc/usdt_multi.c): one link per
 * provider:name per file, so detaching costs one RCU grace period per link instead of
 * one per probe site (libbpf 1.1's bpf_program__attach_usdt makes classic uprobes).
 * The programs keep reading their arguments through usdt.bpf.h: the argument specs go
 * into the object's __bpf_usdt_specs map, each site's cookie is its spec id. */
#pragma once
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define USDT_SPECS_MAX 256        /* usdt.bpf.h's BPF_USDT_MAX_SPEC_CNT: distinct specs */
#define USDT_SITES_MAX 256        /* sites of one provider:name in one file */
#define USDT_NOTES_MAX 65536      /* notes read from one file (hostile input bound) */
#define USDT_ARGS_MAX 12          /* usdt.bpf.h's BPF_USDT_MAX_ARG_CNT */

/* usdt.bpf.h's struct __bpf_usdt_arg_spec and struct __bpf_usdt_spec, as the BPF side
 * reads them (usdt_specs_init checks the map's value size against it). */
enum usdt_arg_type { USDT_ARG_CONST, USDT_ARG_REG, USDT_ARG_REG_DEREF };
struct usdt_arg_spec {
	uint64_t val_off;
	uint32_t arg_type;             /* enum usdt_arg_type */
	short reg_off;                 /* offsetof(struct pt_regs, reg) */
	bool arg_signed;
	char arg_bitshift;             /* 64 - size in bits */
};
struct usdt_spec {
	struct usdt_arg_spec args[USDT_ARGS_MAX];
	uint64_t usdt_cookie;
	short arg_cnt;
};

/* The spec ids handed out for one BPF object's __bpf_usdt_specs map: one per distinct
 * argument string, never freed (a few per sampler build; USDT_SPECS_MAX at most). */
struct usdt_specs {
	int map_fd;
	char *args[USDT_SPECS_MAX];
	unsigned n;
};

/* Parses a note's argument string ("8@%rdi -4@-20(%rbp) 4@$1", x86-64 only) into *spec.
 * 0, or -EINVAL (malformed), -EOPNOTSUPP (a form or architecture not handled). */
int usdt_parse_args(const char *args, struct usdt_spec *spec);
/* Uses map_fd (the object's __bpf_usdt_specs, value_size bytes per entry). 0 or -EINVAL. */
int usdt_specs_init(struct usdt_specs *s, int map_fd, size_t value_size);
void usdt_specs_free(struct usdt_specs *s);
/* The provider:name sites of the ELF file path as a multi-uprobe link takes them (file
 * offsets, semaphore offsets, cookies = spec ids, registered in s): 0, -ENOENT (none),
 * or -errno. For links made elsewhere (another thread: s is not touched there). */
struct usdt_sites {
	uint64_t off[USDT_SITES_MAX], ref[USDT_SITES_MAX], cookie[USDT_SITES_MAX];
	size_t n;
};
int usdt_multi_sites(struct usdt_specs *s, const char *path, const char *provider,
		     const char *name, struct usdt_sites *out);
/* Attaches program prog_fd (loaded for multi-uprobe links) at every provider:name site
 * of the ELF file path, semaphores counted; pid > 0 limits it to that process, else
 * every process that maps path, including later ones. Returns the link's fd (close it
 * to detach), -ENOENT when path has no such probe, or -errno. */
int usdt_multi_attach(struct usdt_specs *s, int prog_fd, const char *path, int pid,
		      const char *provider, const char *name);

/* A USDT attachment either way: a libbpf link (classic uprobes) or a multi link's fd.
 * All zero is "none". */
struct bpf_link;
struct usdt_link {
	struct bpf_link *link;
	int fd;
	bool multi;                    /* fd is a multi-uprobe link */
};
void usdt_link_destroy(struct usdt_link *l);
