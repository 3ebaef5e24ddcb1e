/* Arm SPE packet and record decoding. Header classes (Arm ARM, SPE packet headers):
 *   0x00 padding, 0x01 end, 0x71 timestamp (8-byte payload)
 *   01ss0010 events, 01ss0011 data source     (ss: payload 1 << ss bytes)
 *   011001ii context (4 bytes), 010010cc operation type (1 byte)
 *   10110iii address (8 bytes), 10011iii counter (2 bytes)
 *   001000ii + an address/counter header: extended header, index ii:iii
 *   001000ii + 0x00: alignment padding to a 2 << ii byte boundary
 * A record is a run of packets closed by an end or a timestamp packet. */
#include <endian.h>
#include <errno.h>
#include <string.h>
#include "daemon/access/spe_decode.h"

#define HDR_PAD 0x00
#define HDR_END 0x01
#define HDR_TIMESTAMP 0x71
#define HDR_MASK_EV 0xcf           /* events/data source: bits 7:6 and 3:0 */
#define HDR_EVENTS 0x42
#define HDR_SOURCE 0x43
#define HDR_MASK_CTX 0xfc          /* context/op/extended: bits 7:2 */
#define HDR_CONTEXT 0x64
#define HDR_OP_TYPE 0x48
#define HDR_EXTENDED 0x20
#define HDR_MASK_ADDR 0xf8         /* address/counter: bits 7:3 */
#define HDR_ADDRESS 0xb0
#define HDR_COUNTER 0x98
#define HDR1_ALIGN 0x00

#define ADDR_BITS 0x00ffffffffffffffULL   /* address bits 55:0 */

static unsigned payload_bytes(uint8_t hdr)
{
	return 1u << ((hdr >> 4) & 3);
}

static int take_payload(const uint8_t *buf, size_t len, unsigned hdr_len, uint8_t sz_hdr,
			struct spe_packet *p)
{
	unsigned n = payload_bytes(sz_hdr);

	const uint8_t *q = buf + hdr_len;

	if (len < hdr_len + n)
		return 0;
	switch (n) {                              /* little-endian, any alignment */
	case 1: p->payload = q[0]; break;
	case 2: { uint16_t v; memcpy(&v, q, 2); p->payload = le16toh(v); break; }
	case 4: { uint32_t v; memcpy(&v, q, 4); p->payload = le32toh(v); break; }
	default: { uint64_t v; memcpy(&v, q, 8); p->payload = le64toh(v); break; }
	}
	p->payload_len = (uint8_t)n;
	p->len = (uint8_t)(hdr_len + n);
	return p->len;
}

int spe_packet_decode(const uint8_t *buf, size_t len, uint64_t buf_off, struct spe_packet *p)
{
	uint8_t h;

	memset(p, 0, sizeof(*p));
	if (!len)
		return 0;
	h = buf[0];
	if (h == HDR_PAD || h == HDR_END) {
		p->type = h == HDR_PAD ? SPE_PKT_PAD : SPE_PKT_END;
		p->len = 1;
		return 1;
	}
	if (h == HDR_TIMESTAMP) {
		p->type = SPE_PKT_TIMESTAMP;
		return take_payload(buf, len, 1, h, p);
	}
	if ((h & HDR_MASK_EV) == HDR_EVENTS || (h & HDR_MASK_EV) == HDR_SOURCE) {
		p->type = (h & HDR_MASK_EV) == HDR_EVENTS ? SPE_PKT_EVENTS : SPE_PKT_DATA_SOURCE;
		return take_payload(buf, len, 1, h, p);
	}
	if ((h & HDR_MASK_CTX) == HDR_CONTEXT) {
		p->type = SPE_PKT_CONTEXT;
		p->index = h & 3;
		return take_payload(buf, len, 1, h, p);
	}
	if ((h & HDR_MASK_CTX) == HDR_OP_TYPE) {
		p->type = SPE_PKT_OP_TYPE;
		p->index = h & 3;
		return take_payload(buf, len, 1, h, p);
	}
	unsigned hdr_len = 1, idx_hi = 0;
	if ((h & HDR_MASK_CTX) == HDR_EXTENDED) {
		if (len < 2)
			return 0;
		idx_hi = h & 3;
		if (buf[1] == HDR1_ALIGN) {
			/* Padding up to the next (2 << ii)-byte boundary of the buffer. */
			uint64_t align = 2ULL << idx_hi, skip = align - (buf_off & (align - 1));
			if (skip < 2)
				skip += align;
			p->type = SPE_PKT_ALIGN;
			p->len = (uint8_t)(skip < len ? skip : len);
			return p->len;
		}
		h = buf[1];
		hdr_len = 2;
	}
	if ((h & HDR_MASK_ADDR) == HDR_ADDRESS || (h & HDR_MASK_ADDR) == HDR_COUNTER) {
		p->type = (h & HDR_MASK_ADDR) == HDR_ADDRESS ? SPE_PKT_ADDRESS : SPE_PKT_COUNTER;
		p->index = (uint8_t)(idx_hi << 3 | (h & 7));
		return take_payload(buf, len, hdr_len, h, p);
	}
	return -EBADMSG;
}

void spe_decoder_init(struct spe_decoder *d)
{
	memset(d, 0, sizeof(*d));
}

void spe_decoder_reset(struct spe_decoder *d, const void *buf, size_t len, uint64_t base_off)
{
	d->buf = buf;
	d->len = buf ? len : 0;
	d->pos = 0;
	d->base_off = base_off;
	d->resync = false;
}

/* Bits 55:0 sign-extended from bit 55 (which selects TTBR0/TTBR1): user addresses keep
 * bit 55 clear, so a top-byte tag (TBI) disappears; kernel addresses get 0xff back. */
static uint64_t sext55(uint64_t v)
{
	v &= ADDR_BITS;
	return (v & (1ULL << 55)) ? v | ~ADDR_BITS : v;
}

static uint16_t sat16(uint64_t v)
{
	return v > UINT16_MAX ? UINT16_MAX : (uint16_t)v;
}

static void op_type(struct spe_record *r, uint8_t cls, uint8_t v, struct spe_decode_stats *st)
{
	r->op_class = cls;
	r->op_payload = v;
	r->has |= SPE_HAS_OP;
	switch (cls) {
	case SPE_OPC_LDST:
		r->op = (v & 1) ? SPE_OP_STORE : SPE_OP_LOAD;
		if ((v & 0xe2) == 0x02) {          /* atomic / exclusive / acquire-release form */
			if (v & 0x04)
				r->op_flags |= SPE_OPF_ATOMIC;
			if (v & 0x08)
				r->op_flags |= SPE_OPF_EXCL;
			if (v & 0x10)
				r->op_flags |= SPE_OPF_ACQREL;
		} else if ((v & 0x0a) == 0x08) {   /* SVE: EVL in bits 6:4, 32 << n bits */
			r->op_flags |= SPE_OPF_SVE;
			r->sve_evl_bits = (uint16_t)(32u << ((v >> 4) & 7));
			if (v & 0x80)
				r->op_flags |= SPE_OPF_SVE_SG;
			if (v & 0x04)
				r->op_flags |= SPE_OPF_SVE_PRED;
		} else if ((v & 0xfe) == 0x04) {
			r->op_flags |= SPE_OPF_SIMD_FP;
		}
		break;
	case SPE_OPC_BRANCH:
		r->op = SPE_OP_BRANCH;
		break;
	case SPE_OPC_OTHER:
		r->op = SPE_OP_OTHER;
		break;
	default:
		r->op = SPE_OP_OTHER;
		st->unknown_index++;
	}
}

static void apply(struct spe_record *r, const struct spe_packet *p, struct spe_decode_stats *st)
{
	switch (p->type) {
	case SPE_PKT_ADDRESS:
		switch (p->index) {
		case SPE_ADDR_PC:
			r->pc = sext55(p->payload);
			r->pc_el = (uint8_t)((p->payload >> 61) & 3);
			r->pc_ns = (p->payload >> 63) != 0;
			r->has |= SPE_HAS_PC;
			break;
		case SPE_ADDR_BRANCH_TARGET:
			r->branch_target = sext55(p->payload);
			break;
		case SPE_ADDR_DATA_VA:
			r->va = sext55(p->payload);
			r->has |= SPE_HAS_VA;
			break;
		case SPE_ADDR_DATA_PA:
			r->pa = p->payload & ADDR_BITS;
			r->has |= SPE_HAS_PA;
			break;
		case SPE_ADDR_PREV_BRANCH:
			break;
		default:
			st->unknown_index++;
		}
		break;
	case SPE_PKT_COUNTER:
		switch (p->index) {
		case SPE_CNT_TOTAL: r->lat_total = sat16(p->payload); r->has |= SPE_HAS_LAT; break;
		case SPE_CNT_ISSUE: r->lat_issue = sat16(p->payload); r->has |= SPE_HAS_ISSUE; break;
		case SPE_CNT_XLAT: r->lat_xlat = sat16(p->payload); r->has |= SPE_HAS_XLAT; break;
		default: st->unknown_index++;
		}
		break;
	case SPE_PKT_CONTEXT:
		if (p->index > 1) {
			st->unknown_index++;
			break;
		}
		r->context = (uint32_t)p->payload;
		r->context_el = (uint8_t)(p->index + 1);
		r->has |= SPE_HAS_CONTEXT;
		break;
	case SPE_PKT_OP_TYPE:
		op_type(r, p->index, (uint8_t)p->payload, st);
		break;
	case SPE_PKT_EVENTS:
		r->events = p->payload;
		r->has |= SPE_HAS_EVENTS;
		break;
	case SPE_PKT_DATA_SOURCE:
		r->data_source = p->payload;
		r->has |= SPE_HAS_SOURCE;
		break;
	default:
		break;
	}
}

int spe_decoder_next(struct spe_decoder *d, struct spe_record *r)
{
	unsigned npk = 0;
	struct spe_packet p;

	memset(r, 0, sizeof(*r));
	while (d->pos < d->len) {
		size_t at = d->pos;
		int n = spe_packet_decode(d->buf + at, d->len - at, d->base_off + at, &p);
		if (n < 0) {
			/* Not a packet: skip the byte and drop the record the stream ends next
			 * (the one this byte was in, or one whose start is unknowable). */
			d->st.bad_packets++;
			d->pos++;
			d->resync = true;
			npk = 0;
			memset(r, 0, sizeof(*r));
			continue;
		}
		if (n == 0) {
			d->st.truncated++;
			if (npk || d->resync)
				d->st.dropped_records++;
			d->pos = d->len;
			d->resync = false;
			return 0;
		}
		d->pos += (size_t)n;
		if (p.type == SPE_PKT_PAD || p.type == SPE_PKT_ALIGN) {
			d->st.pad_bytes += (uint64_t)n;
			continue;
		}
		if (!npk)
			r->offset = d->base_off + at;
		if (p.type == SPE_PKT_TIMESTAMP) {
			r->ts = p.payload;
			r->has |= SPE_HAS_TS;
		} else if (p.type != SPE_PKT_END) {
			if (++npk > SPE_RECORD_MAX_PACKETS) {
				d->st.dropped_records++;
				d->resync = true;
				npk = 0;
				memset(r, 0, sizeof(*r));
				continue;
			}
			apply(r, &p, &d->st);
			continue;
		}
		/* End or timestamp: the record is complete. */
		if (d->resync) {
			d->resync = false;
			d->st.dropped_records++;
			npk = 0;
			memset(r, 0, sizeof(*r));
			continue;
		}
		if (!npk) {                 /* an end with nothing before it: no record */
			memset(r, 0, sizeof(*r));
			continue;
		}
		d->st.records++;
		if (r->op == SPE_OP_LOAD)
			d->st.loads++;
		else if (r->op == SPE_OP_STORE)
			d->st.stores++;
		else
			d->st.other_ops++;
		return 1;
	}
	if (npk || d->resync) {
		d->st.truncated++;
		d->st.dropped_records++;
	}
	d->resync = false;
	return 0;
}
