/* Entry-only probe placement (see probesite.h). The bytes are read from the binary at
 * the probe's file offset; a short read or undecodable bytes keep the function entry,
 * which is always correct, only slower. */
#include <capstone/capstone.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>
#include "symbolizer/probesite.h"

static int emulated(csh h, const cs_insn *in)
{
	const cs_x86 *x = &in->detail->x86;

	switch (in->id) {
	case X86_INS_PUSH:
		/* push reg only: push imm/mem are single-stepped */
		return x->op_count == 1 && x->operands[0].type == X86_OP_REG;
	case X86_INS_NOP:
		return in->size == 1;     /* 0x90; multi-byte nops are stepped */
	case X86_INS_CALL:
		return x->op_count == 1 && x->operands[0].type == X86_OP_IMM;
	default:
		/* jmp and jcc with an immediate target */
		return cs_insn_group(h, in, CS_GRP_JUMP) && x->op_count == 1 &&
		       x->operands[0].type == X86_OP_IMM;
	}
}

static int is_arg_reg(unsigned reg, unsigned args)
{
	static const unsigned fam[3][4] = {
		{ X86_REG_RDI, X86_REG_EDI, X86_REG_DI, X86_REG_DIL },
		{ X86_REG_RSI, X86_REG_ESI, X86_REG_SI, X86_REG_SIL },
		{ X86_REG_RDX, X86_REG_EDX, X86_REG_DX, X86_REG_DL },
	};

	for (unsigned a = 0; a < 3; a++)
		for (unsigned k = 0; (args & (1u << a)) && k < 4; k++)
			if (reg == fam[a][k] || (a == 2 && reg == X86_REG_DH))
				return 1;
	return 0;
}

static int unsafe_to_skip(csh h, const cs_insn *in, unsigned args)
{
	cs_regs rd, wr;
	uint8_t nrd, nwr;

	if (cs_insn_group(h, in, CS_GRP_JUMP) || cs_insn_group(h, in, CS_GRP_CALL) ||
	    cs_insn_group(h, in, CS_GRP_RET) || cs_insn_group(h, in, CS_GRP_INT) ||
	    cs_insn_group(h, in, CS_GRP_IRET))
		return 1;
	if (cs_regs_access(h, in, rd, &nrd, wr, &nwr))
		return 1;
	for (unsigned i = 0; i < nwr; i++)
		if (is_arg_reg(wr[i], args) || wr[i] == X86_REG_RSP || wr[i] == X86_REG_ESP)
			return 1;
	return 0;
}

int probesite_find(const char *path, uint64_t func_off, unsigned args, uint64_t *out)
{
	unsigned char buf[PROBESITE_MAX_SKIP * 15];
	cs_insn *ins = NULL;
	csh h;
	ssize_t n;
	size_t count;
	int fd;

	*out = func_off;
#if !defined(__x86_64__)
	return 0;
#endif
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = pread(fd, buf, sizeof(buf), (off_t)func_off);
	close(fd);
	if (n <= 0)
		return 0;
	if (cs_open(CS_ARCH_X86, CS_MODE_64, &h) != CS_ERR_OK)
		return 0;
	cs_option(h, CS_OPT_DETAIL, CS_OPT_ON);
	count = cs_disasm(h, buf, (size_t)n, func_off, PROBESITE_MAX_SKIP, &ins);
	for (size_t i = 0; i < count; i++) {
		if (emulated(h, &ins[i])) {
			*out = ins[i].address;
			break;
		}
		if (unsafe_to_skip(h, &ins[i], args))
			break;
	}
	if (count)
		cs_free(ins, count);
	cs_close(&h);
	return 0;
}
