/* For BPF programs: libbpf's usdt.bpf.h includes <linux/errno.h>, which wants the
 * arch header the BPF target has no directory for; every arch uses the generic one. */
#include <asm-generic/errno.h>
