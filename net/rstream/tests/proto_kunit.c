// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for the rsockets v1 wire format and flow control (proto.c):
 * the 40-byte CM private data byte for byte, every rule a peer's block is
 * checked against, the 32-bit immediate value, and the reader's and the
 * writer's credit and grant arithmetic, through ring and 16-bit sequence
 * number wrap-around, ending with a writer and a reader joined in memory.
 * An unmodified librdmacm rsocket peer depends on every byte and every
 * sequence number here, and a hostile one is held to these rules, so they
 * are tested exhaustively as the pure functions they are.
 */
#include <kunit/test.h>
#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/log2.h>
#include <linux/sched.h>
#include <linux/sizes.h>
#include <linux/stddef.h>
#include <linux/string.h>

#include "../proto.h"

/* A connection's parameters with a distinct value in every byte. */
static const struct rstream_conn_params rstream_test_params = {
	.big_endian = IS_ENABLED(CONFIG_CPU_BIG_ENDIAN),
	.credits = 384,			/* 0x0180, rsocket's default */
	.sgl_addr = 0x0102030405060708ULL,
	.sgl_key = 0x11121314,
	.buf_addr = 0x2122232425262728ULL,
	.buf_key = 0x31323334,
	.buf_length = 0x1a2b3c4d,
};

/* rstream_test_params as rsocket puts them on the wire, flags for LE. */
static const u8 rstream_test_wire[40] = {
	0x01, 0x00, 0x01, 0x80, 0x00, 0x00, 0x00, 0x00,	/* ver, flags, credits */
	0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,	/* target SGL addr */
	0x11, 0x12, 0x13, 0x14, 0x00, 0x00, 0x00, 0x02,	/* its key, entries */
	0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28,	/* data buffer addr */
	0x31, 0x32, 0x33, 0x34, 0x1a, 0x2b, 0x3c, 0x4d,	/* its key, length */
};

static void rstream_expect_params_eq(struct kunit *test,
				     const struct rstream_conn_params *p,
				     const struct rstream_conn_params *q)
{
	KUNIT_EXPECT_EQ(test, p->big_endian, q->big_endian);
	KUNIT_EXPECT_EQ(test, p->credits, q->credits);
	KUNIT_EXPECT_EQ(test, p->sgl_addr, q->sgl_addr);
	KUNIT_EXPECT_EQ(test, p->sgl_key, q->sgl_key);
	KUNIT_EXPECT_EQ(test, p->buf_addr, q->buf_addr);
	KUNIT_EXPECT_EQ(test, p->buf_key, q->buf_key);
	KUNIT_EXPECT_EQ(test, p->buf_length, q->buf_length);
}

/* The structures are rsocket's struct rs_conn_data and struct rs_sge. */
static void rstream_proto_layout_test(struct kunit *test)
{
	KUNIT_EXPECT_EQ(test, sizeof(struct rstream_conn_data), (size_t)40);
	KUNIT_EXPECT_EQ(test, offsetof(struct rstream_conn_data, version), 0);
	KUNIT_EXPECT_EQ(test, offsetof(struct rstream_conn_data, flags), 1);
	KUNIT_EXPECT_EQ(test, offsetof(struct rstream_conn_data, credits), 2);
	KUNIT_EXPECT_EQ(test, offsetof(struct rstream_conn_data, reserved), 4);
	KUNIT_EXPECT_EQ(test,
			offsetof(struct rstream_conn_data, target_iomap_size), 7);
	KUNIT_EXPECT_EQ(test,
			offsetof(struct rstream_conn_data, target_sgl_addr), 8);
	KUNIT_EXPECT_EQ(test,
			offsetof(struct rstream_conn_data, target_sgl_key), 16);
	KUNIT_EXPECT_EQ(test,
			offsetof(struct rstream_conn_data, target_sgl_length), 20);
	KUNIT_EXPECT_EQ(test,
			offsetof(struct rstream_conn_data, data_buf_addr), 24);
	KUNIT_EXPECT_EQ(test,
			offsetof(struct rstream_conn_data, data_buf_key), 32);
	KUNIT_EXPECT_EQ(test,
			offsetof(struct rstream_conn_data, data_buf_length), 36);

	KUNIT_EXPECT_EQ(test, sizeof(struct rstream_wire_sge), (size_t)16);
	KUNIT_EXPECT_EQ(test, offsetof(struct rstream_wire_sge, addr), 0);
	KUNIT_EXPECT_EQ(test, offsetof(struct rstream_wire_sge, key), 8);
	KUNIT_EXPECT_EQ(test, offsetof(struct rstream_wire_sge, length), 12);

	KUNIT_EXPECT_EQ(test, RSTREAM_SGL_ENTRIES, 2);
	KUNIT_EXPECT_EQ(test, RSTREAM_QP_MIN, 16);
	KUNIT_EXPECT_EQ(test, RSTREAM_QP_MAX, 0xfffe);
	KUNIT_EXPECT_EQ(test, rstream_next_remote_sge(0), 1);
	KUNIT_EXPECT_EQ(test, rstream_next_remote_sge(1), 0);
}

/*
 * Every byte of the block, big-endian whatever the host, reserved bytes
 * and the iomap size zero even over a dirty buffer; the flags describe
 * this host, not the caller's big_endian.
 */
static void rstream_conn_data_build_test(struct kunit *test)
{
	struct rstream_conn_params p = rstream_test_params;
	struct rstream_conn_data cd;
	const u8 *b = (const u8 *)&cd;
	u8 expected[40];
	unsigned int i;

	memcpy(expected, rstream_test_wire, sizeof(expected));
	expected[1] = IS_ENABLED(CONFIG_CPU_BIG_ENDIAN) ?
		      RSTREAM_CONN_FLAG_NET : 0;

	memset(&cd, 0xa5, sizeof(cd));
	rstream_conn_data_build(&cd, &p);
	for (i = 0; i < sizeof(cd); i++)
		KUNIT_EXPECT_EQ_MSG(test, b[i], expected[i], "byte %u", i);

	p.big_endian = !p.big_endian;
	memset(&cd, 0x5a, sizeof(cd));
	rstream_conn_data_build(&cd, &p);
	for (i = 0; i < sizeof(cd); i++)
		KUNIT_EXPECT_EQ_MSG(test, b[i], expected[i],
				    "byte %u, big_endian %d", i, p.big_endian);
}

/* build -> parse gives the parameters back, at the edges of each range. */
static void rstream_conn_data_round_trip_test(struct kunit *test)
{
	static const struct rstream_conn_params cases[] = {
		{
			.credits = 384,
			.sgl_addr = 0x0102030405060708ULL,
			.sgl_key = 0x11121314,
			.buf_addr = 0x2122232425262728ULL,
			.buf_key = 0x31323334,
			.buf_length = 0x1a2b3c4d,
		}, {
			.credits = 1,
			.sgl_addr = 0,
			.sgl_key = 0,
			.buf_addr = 0,
			.buf_key = 0,
			.buf_length = 1,
		}, {
			.credits = RSTREAM_QP_MAX,
			.sgl_addr = U64_MAX,
			.sgl_key = U32_MAX,
			.buf_addr = U64_MAX,
			.buf_key = U32_MAX,
			.buf_length = RSTREAM_IMM_DATA_MAX,
		}, {
			.credits = RSTREAM_QP_MIN,
			.sgl_addr = 0xffff888012345000ULL,
			.sgl_key = 0x00abcdef,
			.buf_addr = 0xffff888012346000ULL,
			.buf_key = 0x00abcdf0,
			.buf_length = SZ_64K,
		},
	};
	struct rstream_conn_params in, out;
	struct rstream_conn_data cd;
	const char *why;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		in = cases[i];
		in.big_endian = IS_ENABLED(CONFIG_CPU_BIG_ENDIAN);
		rstream_conn_data_build(&cd, &in);
		memset(&out, 0, sizeof(out));
		KUNIT_EXPECT_EQ_MSG(test, rstream_conn_data_parse(&cd, sizeof(cd), false,
								  &out, &why),
				    0, "case %u", i);
		rstream_expect_params_eq(test, &out, &in);
	}
}

/* Parsing @len bytes at @data fails with @err, says why, writes nothing. */
static void rstream_expect_parse_fails(struct kunit *test, const void *data,
				       unsigned int len, int err,
				       const char *what)
{
	struct rstream_conn_params p, untouched;
	const char *why = NULL;

	memset(&p, 0x5a, sizeof(p));
	memcpy(&untouched, &p, sizeof(p));
	KUNIT_EXPECT_EQ_MSG(test, rstream_conn_data_parse(data, len, false, &p, &why),
			    err, "%s", what);
	KUNIT_EXPECT_NOT_NULL_MSG(test, why, "%s", what);
	if (why)
		KUNIT_EXPECT_GT_MSG(test, strlen(why), (size_t)0, "%s", what);
	KUNIT_EXPECT_EQ_MSG(test, memcmp(&p, &untouched, sizeof(p)), 0,
			    "%s: parameters written on error", what);
}

/* Each rule a peer's block breaks, one field at a time. */
static void rstream_conn_data_parse_reject_test(struct kunit *test)
{
	static const u8 versions[] = { 0, 2, 255 };
	static const u16 credits[] = { 0, 0xffff };
	static const u32 entries[] = { 0, 1, 3, 0x02000000, U32_MAX };
	static const u32 lengths[] = { 0, 0x20000000, U32_MAX };
	struct rstream_conn_data good, cd;
	unsigned int i;

	rstream_conn_data_build(&good, &rstream_test_params);

	rstream_expect_parse_fails(test, NULL, sizeof(good), -EPROTO, "NULL");
	rstream_expect_parse_fails(test, NULL, 0, -EPROTO, "NULL, length 0");
	rstream_expect_parse_fails(test, &good, 0, -EPROTO, "length 0");
	rstream_expect_parse_fails(test, &good, 1, -EPROTO, "length 1");
	rstream_expect_parse_fails(test, &good, sizeof(good) - 1, -EPROTO,
				   "length 39");

	for (i = 0; i < ARRAY_SIZE(versions); i++) {
		cd = good;
		cd.version = versions[i];
		rstream_expect_parse_fails(test, &cd, sizeof(cd),
					   -EPROTONOSUPPORT, "version");
	}
	for (i = 0; i < ARRAY_SIZE(credits); i++) {
		cd = good;
		cd.credits = cpu_to_be16(credits[i]);
		rstream_expect_parse_fails(test, &cd, sizeof(cd), -EPROTO,
					   "credits");
	}
	for (i = 0; i < ARRAY_SIZE(entries); i++) {
		cd = good;
		cd.target_sgl_length = cpu_to_be32(entries[i]);
		rstream_expect_parse_fails(test, &cd, sizeof(cd), -EPROTO,
					   "target SGL entries");
	}
	for (i = 0; i < ARRAY_SIZE(lengths); i++) {
		cd = good;
		cd.data_buf_length = cpu_to_be32(lengths[i]);
		rstream_expect_parse_fails(test, &cd, sizeof(cd), -EPROTO,
					   "data buffer length");
	}
}

/*
 * A reply may grant no first buffer (rstream's passive side grants it
 * once established); a request may not, and an over-long one is refused
 * in either.
 */
static void rstream_conn_data_parse_reply_test(struct kunit *test)
{
	struct rstream_conn_params p;
	struct rstream_conn_data cd;
	const char *why = NULL;

	rstream_conn_data_build(&cd, &rstream_test_params);
	cd.data_buf_length = 0;
	KUNIT_EXPECT_EQ(test, rstream_conn_data_parse(&cd, sizeof(cd), false,
						      &p, &why), -EPROTO);
	memset(&p, 0x5a, sizeof(p));
	KUNIT_EXPECT_EQ(test, rstream_conn_data_parse(&cd, sizeof(cd), true,
						      &p, &why), 0);
	KUNIT_EXPECT_EQ(test, p.buf_length, 0U);
	KUNIT_EXPECT_EQ(test, p.sgl_key, rstream_test_params.sgl_key);
	cd.data_buf_length = cpu_to_be32(0x20000000);
	KUNIT_EXPECT_EQ(test, rstream_conn_data_parse(&cd, sizeof(cd), true,
						      &p, &why), -EPROTO);
}

/*
 * IB's CM delivers 56 bytes of private data (and iWARP's may be longer),
 * at any alignment: only the first 40 count.
 */
static void rstream_conn_data_parse_long_test(struct kunit *test)
{
	static const unsigned int lens[] = { 40, 41, 56, 92 };
	struct rstream_conn_params p;
	const char *why;
	u8 buf[1 + 92];
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		memset(buf, 0xee, sizeof(buf));
		memcpy(buf + 1, rstream_test_wire, sizeof(rstream_test_wire));
		memset(&p, 0, sizeof(p));
		KUNIT_EXPECT_EQ_MSG(test, rstream_conn_data_parse(buf + 1, lens[i], false,
								  &p, &why),
				    0, "length %u", lens[i]);
		KUNIT_EXPECT_FALSE(test, p.big_endian);
		KUNIT_EXPECT_EQ(test, p.credits, 384);
		KUNIT_EXPECT_EQ(test, p.sgl_addr, 0x0102030405060708ULL);
		KUNIT_EXPECT_EQ(test, p.sgl_key, 0x11121314U);
		KUNIT_EXPECT_EQ(test, p.buf_addr, 0x2122232425262728ULL);
		KUNIT_EXPECT_EQ(test, p.buf_key, 0x31323334U);
		KUNIT_EXPECT_EQ(test, p.buf_length, 0x1a2b3c4dU);
	}
}

/*
 * Flag bit 0 is the peer's byte order; the other bits, the reserved
 * bytes and the iomap size are for features we do not offer, and a peer
 * setting them is not refused.
 */
static void rstream_conn_data_parse_flags_test(struct kunit *test)
{
	static const struct {
		u8 flags;
		bool big_endian;
	} cases[] = {
		{ 0x00, false },
		{ RSTREAM_CONN_FLAG_NET, true },
		{ RSTREAM_CONN_FLAG_IOMAP, false },
		{ RSTREAM_CONN_FLAG_NET | RSTREAM_CONN_FLAG_IOMAP, true },
		{ 0xfe, false },
		{ 0xff, true },
		{ 0x80, false },
	};
	struct rstream_conn_params p;
	struct rstream_conn_data cd;
	const char *why;
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		rstream_conn_data_build(&cd, &rstream_test_params);
		cd.flags = cases[i].flags;
		memset(&p, 0, sizeof(p));
		p.big_endian = !cases[i].big_endian;
		KUNIT_EXPECT_EQ_MSG(test, rstream_conn_data_parse(&cd, sizeof(cd), false,
								  &p, &why),
				    0, "flags %#x", cases[i].flags);
		KUNIT_EXPECT_EQ_MSG(test, p.big_endian, cases[i].big_endian,
				    "flags %#x", cases[i].flags);
		KUNIT_EXPECT_EQ(test, p.credits, 384);
	}

	rstream_conn_data_build(&cd, &rstream_test_params);
	memset(cd.reserved, 0xff, sizeof(cd.reserved));
	cd.target_iomap_size = 0xff;
	KUNIT_EXPECT_EQ(test, rstream_conn_data_parse(&cd, sizeof(cd), false, &p, &why),
			0);
	KUNIT_EXPECT_EQ(test, p.buf_length, 0x1a2b3c4dU);
}

/* The immediate values rsocket sends, and its RS_OP_* values. */
static void rstream_imm_constants_test(struct kunit *test)
{
	static const u32 rsocket_op[] = {
		[RSTREAM_OP_DATA] = 0x00000000,
		[RSTREAM_OP_RSVD_DATA_MORE] = 0x20000000,
		[RSTREAM_OP_WRITE] = 0x40000000,
		[RSTREAM_OP_RSVD_DRA_MORE] = 0x60000000,
		[RSTREAM_OP_SGL] = 0x80000000,
		[RSTREAM_OP_RSVD] = 0xa0000000,
		[RSTREAM_OP_IOMAP_SGL] = 0xc0000000,
		[RSTREAM_OP_CTRL] = 0xe0000000,
	};
	unsigned int op;

	KUNIT_EXPECT_EQ(test, rstream_imm(RSTREAM_OP_SGL, 384), 0x80000180U);
	KUNIT_EXPECT_EQ(test, rstream_imm(RSTREAM_OP_CTRL,
					  RSTREAM_CTRL_DISCONNECT),
			0xe0000000U);
	KUNIT_EXPECT_EQ(test, rstream_imm(RSTREAM_OP_CTRL,
					  RSTREAM_CTRL_KEEPALIVE),
			0xe0000001U);
	KUNIT_EXPECT_EQ(test, rstream_imm(RSTREAM_OP_CTRL,
					  RSTREAM_CTRL_SHUTDOWN),
			0xe0000002U);
	KUNIT_EXPECT_EQ(test, rstream_imm(RSTREAM_OP_DATA, 4096), 0x00001000U);
	KUNIT_EXPECT_EQ(test, rstream_imm(RSTREAM_OP_DATA, 1), 0x00000001U);

	KUNIT_EXPECT_EQ(test, rstream_imm_op(0x80000180), RSTREAM_OP_SGL);
	KUNIT_EXPECT_EQ(test, rstream_imm_data(0x80000180), 384U);
	KUNIT_EXPECT_EQ(test, rstream_imm_op(0xe0000000), RSTREAM_OP_CTRL);
	KUNIT_EXPECT_EQ(test, rstream_imm_data(0xe0000000),
			(u32)RSTREAM_CTRL_DISCONNECT);
	KUNIT_EXPECT_EQ(test, rstream_imm_op(0xe0000002), RSTREAM_OP_CTRL);
	KUNIT_EXPECT_EQ(test, rstream_imm_data(0xe0000002),
			(u32)RSTREAM_CTRL_SHUTDOWN);
	KUNIT_EXPECT_EQ(test, rstream_imm_op(0x00001000), RSTREAM_OP_DATA);
	KUNIT_EXPECT_EQ(test, rstream_imm_data(0x00001000), 4096U);

	for (op = 0; op < ARRAY_SIZE(rsocket_op); op++)
		KUNIT_EXPECT_EQ_MSG(test, rstream_imm(op, 0), rsocket_op[op],
				    "op %u", op);
}

/* Data is cut to 29 bits and never reaches the op; every op decodes. */
static void rstream_imm_fields_test(struct kunit *test)
{
	static const u32 data[] = {
		0, 1, 384, 0xffff, 0x10000, 0x12345678, 0x1ffffffe,
		RSTREAM_IMM_DATA_MAX, 0x20000000, 0x20000001, 0xe0000180,
		0xfffffffe, U32_MAX,
	};
	unsigned int op, i;
	u32 imm;

	KUNIT_EXPECT_EQ(test, RSTREAM_IMM_DATA_MAX, 0x1fffffff);
	KUNIT_EXPECT_EQ(test, rstream_imm(RSTREAM_OP_DATA, U32_MAX),
			0x1fffffffU);
	KUNIT_EXPECT_EQ(test, rstream_imm(RSTREAM_OP_DATA, 0x20000000), 0U);
	KUNIT_EXPECT_EQ(test, rstream_imm(RSTREAM_OP_SGL, 0xe0000180),
			0x80000180U);
	KUNIT_EXPECT_EQ(test, rstream_imm(RSTREAM_OP_CTRL, U32_MAX), U32_MAX);
	KUNIT_EXPECT_EQ(test, rstream_imm_op(U32_MAX), RSTREAM_OP_CTRL);
	KUNIT_EXPECT_EQ(test, rstream_imm_data(U32_MAX), 0x1fffffffU);
	KUNIT_EXPECT_EQ(test, rstream_imm_op(0), RSTREAM_OP_DATA);
	KUNIT_EXPECT_EQ(test, rstream_imm_data(0), 0U);

	for (op = RSTREAM_OP_DATA; op <= RSTREAM_OP_CTRL; op++) {
		for (i = 0; i < ARRAY_SIZE(data); i++) {
			imm = rstream_imm(op, data[i]);
			KUNIT_EXPECT_EQ_MSG(test, imm >> 29, op,
					    "op %u data %#x", op, data[i]);
			KUNIT_EXPECT_EQ_MSG(test, (unsigned int)rstream_imm_op(imm),
					    op, "op %u data %#x", op, data[i]);
			KUNIT_EXPECT_EQ_MSG(test, rstream_imm_data(imm),
					    data[i] & 0x1fffffff,
					    "op %u data %#x", op, data[i]);
		}
	}
}

/* The first half goes out in the private data, the second at once. */
static void rstream_rx_init_test(struct kunit *test)
{
	struct rstream_rx_state rx;
	u32 off = 0xdead;

	memset(&rx, 0xa5, sizeof(rx));
	rstream_rx_init(&rx, 4096, 384, true);
	KUNIT_EXPECT_EQ(test, rx.ring_size, 4096U);
	KUNIT_EXPECT_EQ(test, rx.rq_size, 384);
	KUNIT_EXPECT_EQ(test, rx.written, 0ULL);
	KUNIT_EXPECT_EQ(test, rx.consumed, 0ULL);
	KUNIT_EXPECT_EQ(test, rx.granted, 2048ULL);
	KUNIT_EXPECT_EQ(test, rx.msgs_in, 0);
	KUNIT_EXPECT_EQ(test, rx.rseq_no, 0);
	KUNIT_EXPECT_EQ(test, rx.rseq_comp, 192);
	KUNIT_EXPECT_EQ(test, rx.credit_limit, 384);

	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_GRANT);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_sent(&rx, RSTREAM_RX_GRANT, &off),
			384);
	KUNIT_EXPECT_EQ(test, off, 2048U);
	KUNIT_EXPECT_EQ(test, rx.granted, 4096ULL);
	KUNIT_EXPECT_EQ(test, rx.rseq_comp, 192);
	KUNIT_EXPECT_EQ(test, rx.credit_limit, 384);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_NONE);

	rstream_rx_init(&rx, SZ_1M, 16, true);
	KUNIT_EXPECT_EQ(test, rx.granted, (u64)SZ_512K);
	KUNIT_EXPECT_EQ(test, rx.rseq_comp, 8);
	KUNIT_EXPECT_EQ(test, rx.credit_limit, 16);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_GRANT);
}

/* Nothing in the private data: both halves are due, half 0 before half 1. */
static void rstream_rx_init_deferred_test(struct kunit *test)
{
	struct rstream_rx_state rx;
	u32 off = 0xdead, at;

	memset(&rx, 0xa5, sizeof(rx));
	rstream_rx_init(&rx, 4096, 384, false);
	KUNIT_EXPECT_EQ(test, rx.granted, 0ULL);
	KUNIT_EXPECT_EQ(test, rx.credit_limit, 384);
	/* Nothing may be written before a grant. */
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1, &at), -EPROTO);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_GRANT);
	rstream_rx_update_sent(&rx, RSTREAM_RX_GRANT, &off);
	KUNIT_EXPECT_EQ(test, off, 0U);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_GRANT);
	rstream_rx_update_sent(&rx, RSTREAM_RX_GRANT, &off);
	KUNIT_EXPECT_EQ(test, off, 2048U);
	KUNIT_EXPECT_EQ(test, rx.granted, 4096ULL);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_NONE);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 2048, &at), 0);
	KUNIT_EXPECT_EQ(test, at, 0U);
}

/* Before the second half is granted only the first may be written. */
static void rstream_rx_data_first_half_test(struct kunit *test)
{
	struct rstream_rx_state rx;
	u32 off;

	rstream_rx_init(&rx, 4096, 384, true);
	off = 0xdead;
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 0, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 2049, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, U32_MAX, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, off, 0xdeadU);
	KUNIT_EXPECT_EQ(test, rx.written, 0ULL);
	KUNIT_EXPECT_EQ(test, rx.msgs_in, 0);

	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1000, &off), 0);
	KUNIT_EXPECT_EQ(test, off, 0U);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1048, &off), 0);
	KUNIT_EXPECT_EQ(test, off, 1000U);
	KUNIT_EXPECT_EQ(test, rx.written, 2048ULL);
	KUNIT_EXPECT_EQ(test, rx.msgs_in, 2);

	/* Full; the next byte would be in the half not yet granted. */
	off = 0xdead;
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 0, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, off, 0xdeadU);
	KUNIT_EXPECT_EQ(test, rx.written, 2048ULL);
	KUNIT_EXPECT_EQ(test, rx.msgs_in, 2);

	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_GRANT);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_sent(&rx, RSTREAM_RX_GRANT, &off),
			384);
	KUNIT_EXPECT_EQ(test, off, 2048U);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1, &off), 0);
	KUNIT_EXPECT_EQ(test, off, 2048U);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 2047, &off), 0);
	KUNIT_EXPECT_EQ(test, off, 2049U);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, rx.written, 4096ULL);
	KUNIT_EXPECT_EQ(test, rx.msgs_in, 4);
}

/* With the whole ring granted, no write may span its two halves. */
static void rstream_rx_data_half_boundary_test(struct kunit *test)
{
	struct rstream_rx_state rx;
	u32 off;

	rstream_rx_init(&rx, 4096, 384, true);
	rstream_rx_update_sent(&rx, RSTREAM_RX_GRANT, &off);
	KUNIT_ASSERT_EQ(test, rx.granted, 4096ULL);

	off = 0xdead;
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 2049, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 4096, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1000, &off), 0);
	KUNIT_EXPECT_EQ(test, off, 0U);
	off = 0xdead;
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1049, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 3096, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, off, 0xdeadU);
	KUNIT_EXPECT_EQ(test, rx.written, 1000ULL);
	KUNIT_EXPECT_EQ(test, rx.msgs_in, 1);

	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1048, &off), 0);
	KUNIT_EXPECT_EQ(test, off, 1000U);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 2047, &off), 0);
	KUNIT_EXPECT_EQ(test, off, 2048U);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 2, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1, &off), 0);
	KUNIT_EXPECT_EQ(test, off, 4095U);
	/* The ring is full: nothing more until the reader consumes. */
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, rx.written, 4096ULL);
	KUNIT_EXPECT_EQ(test, rx.msgs_in, 4);
}

/* No message beyond the credits, however much space is granted. */
static void rstream_rx_data_credits_test(struct kunit *test)
{
	struct rstream_rx_state rx;
	u32 off, i;

	rstream_rx_init(&rx, SZ_1M, 16, true);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_sent(&rx, RSTREAM_RX_GRANT, &off),
			16);
	KUNIT_EXPECT_EQ(test, off, (u32)SZ_512K);
	for (i = 0; i < 16; i++) {
		KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1, &off), 0);
		KUNIT_EXPECT_EQ(test, off, i);
	}
	off = 0xdead;
	KUNIT_EXPECT_EQ(test, rx.msgs_in, rx.credit_limit);
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, off, 0xdeadU);
	KUNIT_EXPECT_EQ(test, rx.written, 16ULL);
	KUNIT_EXPECT_EQ(test, rx.msgs_in, 16);

	/* Consuming half of them brings new credits, and only those. */
	for (i = 0; i < 8; i++)
		rstream_rx_consume(&rx, 1, true);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_CREDIT);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_sent(&rx, RSTREAM_RX_CREDIT, &off),
			24);
	for (i = 0; i < 8; i++) {
		KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1, &off), 0);
		KUNIT_EXPECT_EQ(test, off, 16 + i);
	}
	KUNIT_EXPECT_EQ(test, rstream_rx_data(&rx, 1, &off), -EPROTO);
	KUNIT_EXPECT_EQ(test, rx.msgs_in, 24);
}

/*
 * Small messages exhaust credits long before half the ring is consumed:
 * half the credits consumed is a trigger of its own, carrying no grant.
 */
static void rstream_rx_credit_only_test(struct kunit *test)
{
	struct rstream_rx_state rx;
	u32 off, i;

	rstream_rx_init(&rx, SZ_1M, 16, true);
	rstream_rx_update_sent(&rx, RSTREAM_RX_GRANT, &off);
	KUNIT_ASSERT_EQ(test, rx.granted, (u64)SZ_1M);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_NONE);

	for (i = 0; i < 16; i++)
		KUNIT_ASSERT_EQ(test, rstream_rx_data(&rx, 1, &off), 0);

	/* A message consumed in parts counts once, when it is done. */
	rstream_rx_consume(&rx, 0, false);
	KUNIT_EXPECT_EQ(test, rx.rseq_no, 0);
	for (i = 0; i < 7; i++) {
		rstream_rx_consume(&rx, 1, true);
		KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx),
				RSTREAM_RX_NONE);
	}
	KUNIT_EXPECT_EQ(test, rx.rseq_no, 7);
	KUNIT_EXPECT_EQ(test, rx.consumed, 7ULL);
	rstream_rx_consume(&rx, 1, true);
	KUNIT_EXPECT_EQ(test, rx.rseq_no, 8);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_CREDIT);

	off = 0xdead;
	KUNIT_EXPECT_EQ(test, rstream_rx_update_sent(&rx, RSTREAM_RX_CREDIT, &off),
			8 + 16);
	KUNIT_EXPECT_EQ(test, off, 0xdeadU);
	KUNIT_EXPECT_EQ(test, rx.granted, (u64)SZ_1M);
	KUNIT_EXPECT_EQ(test, rx.rseq_comp, 16);
	KUNIT_EXPECT_EQ(test, rx.credit_limit, 24);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_NONE);

	/* Partly consumed messages bring no credit. */
	for (i = 0; i < 8; i++)
		rstream_rx_consume(&rx, 1, false);
	KUNIT_EXPECT_EQ(test, rx.rseq_no, 8);
	KUNIT_EXPECT_EQ(test, rx.consumed, 16ULL);
	KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_NONE);
}

/*
 * Several laps of the ring, one half at a time and each consumed in
 * pieces: the grant is due only once a whole half is consumed, and
 * names that half, so grants alternate 0, 2048, 0, ...
 */
static void rstream_rx_ring_cycles_test(struct kunit *test)
{
	struct rstream_rx_state rx;
	u32 off, lap;

	rstream_rx_init(&rx, 4096, 384, true);
	KUNIT_ASSERT_EQ(test, rstream_rx_update_due(&rx), RSTREAM_RX_GRANT);
	rstream_rx_update_sent(&rx, RSTREAM_RX_GRANT, &off);
	KUNIT_ASSERT_EQ(test, off, 2048U);

	for (lap = 0; lap < 10; lap++) {
		u32 half = lap % 2 ? 2048 : 0;

		KUNIT_EXPECT_EQ_MSG(test, rstream_rx_data(&rx, 1000, &off), 0,
				    "lap %u", lap);
		KUNIT_EXPECT_EQ_MSG(test, off, half, "lap %u", lap);
		KUNIT_EXPECT_EQ_MSG(test, rstream_rx_data(&rx, 1048, &off), 0,
				    "lap %u", lap);
		KUNIT_EXPECT_EQ_MSG(test, off, half + 1000, "lap %u", lap);
		KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx),
				RSTREAM_RX_NONE);

		rstream_rx_consume(&rx, 1000, true);
		KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx),
				RSTREAM_RX_NONE);
		rstream_rx_consume(&rx, 1047, false);
		KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx),
				RSTREAM_RX_NONE);
		rstream_rx_consume(&rx, 1, true);
		KUNIT_EXPECT_EQ_MSG(test, rstream_rx_update_due(&rx),
				    RSTREAM_RX_GRANT, "lap %u", lap);

		off = 0xdead;
		KUNIT_EXPECT_EQ(test,
				rstream_rx_update_sent(&rx, RSTREAM_RX_GRANT,
						       &off),
				(u16)(2 * (lap + 1) + 384));
		KUNIT_EXPECT_EQ_MSG(test, off, half, "lap %u", lap);
		KUNIT_EXPECT_EQ(test, rstream_rx_update_due(&rx),
				RSTREAM_RX_NONE);
		KUNIT_EXPECT_EQ(test, rx.granted,
				(u64)2048 * (lap + 3));
	}
	KUNIT_EXPECT_EQ(test, rx.written, 10ULL * 2048);
	KUNIT_EXPECT_EQ(test, rx.consumed, 10ULL * 2048);
	KUNIT_EXPECT_EQ(test, rx.msgs_in, 20);
	KUNIT_EXPECT_EQ(test, rx.rseq_no, 20);
}

/* The writer starts with the half-ring in the peer's private data. */
static void rstream_tx_init_test(struct kunit *test)
{
	struct rstream_tx_state tx;

	memset(&tx, 0xa5, sizeof(tx));
	rstream_tx_init(&tx, &rstream_test_params);
	KUNIT_EXPECT_EQ(test, tx.peer_credits, 384);
	KUNIT_EXPECT_EQ(test, tx.sseq_no, 0);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 384);
	KUNIT_EXPECT_EQ(test, tx.sge_index, 0);
	KUNIT_EXPECT_EQ(test, tx.sge_addr, 0x2122232425262728ULL);
	KUNIT_EXPECT_EQ(test, tx.sge_key, 0x31323334U);
	KUNIT_EXPECT_EQ(test, tx.sge_left, 0x1a2b3c4dU);
	KUNIT_EXPECT_TRUE(test, rstream_tx_has_credit(&tx));
}

/* A message is bounded by the grant, and there is none without credit. */
static void rstream_tx_chunk_test(struct kunit *test)
{
	struct rstream_conn_params peer = rstream_test_params;
	struct rstream_wire_sge e = { .addr = 0x9000, .key = 7, .length = 4096 };
	struct rstream_tx_state tx;

	peer.credits = 2;
	peer.buf_length = 2048;
	rstream_tx_init(&tx, &peer);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 0), 0U);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 1), 1U);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 100), 100U);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 2048), 2048U);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 2049), 2048U);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, U32_MAX), 2048U);

	rstream_tx_consume(&tx, 2000);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 100), 48U);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 48), 48U);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 47), 47U);
	rstream_tx_consume(&tx, 48);

	/* Both credits used, and the grant: nothing. */
	KUNIT_EXPECT_EQ(test, tx.sseq_no, tx.sseq_comp);
	KUNIT_EXPECT_FALSE(test, rstream_tx_has_credit(&tx));
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 100), 0U);

	/* A new grant, still no credit: nothing. */
	KUNIT_EXPECT_TRUE(test, rstream_tx_take_sge(&tx, &e));
	KUNIT_EXPECT_EQ(test, tx.sge_left, 4096U);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 100), 0U);

	/* A credit: the new grant can be written into. */
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 3), 0);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 100), 100U);

	/* A credit, no grant left: nothing. */
	rstream_tx_consume(&tx, 4096);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 4), 0);
	KUNIT_EXPECT_TRUE(test, rstream_tx_has_credit(&tx));
	KUNIT_EXPECT_EQ(test, tx.sge_left, 0U);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 100), 0U);
}

/* Each message moves along the grant; a used-up entry hands on. */
static void rstream_tx_consume_test(struct kunit *test)
{
	struct rstream_conn_params peer = rstream_test_params;
	struct rstream_wire_sge e1 = { .addr = 0x10000, .key = 11, .length = 50 };
	struct rstream_wire_sge e0 = { .addr = 0x20000, .key = 12, .length = 30 };
	struct rstream_tx_state tx;

	peer.buf_addr = 0x1000;
	peer.buf_length = 100;
	rstream_tx_init(&tx, &peer);

	rstream_tx_consume(&tx, 40);
	KUNIT_EXPECT_EQ(test, tx.sge_addr, 0x1000ULL + 40);
	KUNIT_EXPECT_EQ(test, tx.sge_left, 60U);
	KUNIT_EXPECT_EQ(test, tx.sseq_no, 1);
	KUNIT_EXPECT_EQ(test, tx.sge_index, 0);
	KUNIT_EXPECT_EQ(test, tx.sge_key, 0x31323334U);

	rstream_tx_consume(&tx, 60);
	KUNIT_EXPECT_EQ(test, tx.sge_addr, 0x1000ULL + 100);
	KUNIT_EXPECT_EQ(test, tx.sge_left, 0U);
	KUNIT_EXPECT_EQ(test, tx.sseq_no, 2);
	KUNIT_EXPECT_EQ(test, tx.sge_index, 1);

	KUNIT_EXPECT_TRUE(test, rstream_tx_take_sge(&tx, &e1));
	KUNIT_EXPECT_EQ(test, tx.sge_index, 1);
	rstream_tx_consume(&tx, 49);
	KUNIT_EXPECT_EQ(test, tx.sge_addr, 0x10000ULL + 49);
	KUNIT_EXPECT_EQ(test, tx.sge_key, 11U);
	KUNIT_EXPECT_EQ(test, tx.sge_left, 1U);
	KUNIT_EXPECT_EQ(test, tx.sge_index, 1);
	rstream_tx_consume(&tx, 1);
	KUNIT_EXPECT_EQ(test, tx.sge_left, 0U);
	KUNIT_EXPECT_EQ(test, tx.sseq_no, 4);
	KUNIT_EXPECT_EQ(test, tx.sge_index, 0);

	KUNIT_EXPECT_TRUE(test, rstream_tx_take_sge(&tx, &e0));
	rstream_tx_consume(&tx, 30);
	KUNIT_EXPECT_EQ(test, tx.sge_addr, 0x20000ULL + 30);
	KUNIT_EXPECT_EQ(test, tx.sge_key, 12U);
	KUNIT_EXPECT_EQ(test, tx.sseq_no, 5);
	KUNIT_EXPECT_EQ(test, tx.sge_index, 1);
}

/* A grant is loaded only when the current one is used up. */
static void rstream_tx_take_sge_test(struct kunit *test)
{
	struct rstream_conn_params peer = rstream_test_params;
	struct rstream_wire_sge e = { .addr = 0x9000, .key = 7, .length = 200 };
	struct rstream_tx_state tx;

	peer.buf_addr = 0x1000;
	peer.buf_key = 5;
	peer.buf_length = 100;
	rstream_tx_init(&tx, &peer);

	/* The current grant has space: the entry is not looked at. */
	KUNIT_EXPECT_TRUE(test, rstream_tx_take_sge(&tx, &e));
	KUNIT_EXPECT_EQ(test, tx.sge_addr, 0x1000ULL);
	KUNIT_EXPECT_EQ(test, tx.sge_key, 5U);
	KUNIT_EXPECT_EQ(test, tx.sge_left, 100U);
	e.length = 0;
	KUNIT_EXPECT_TRUE(test, rstream_tx_take_sge(&tx, &e));
	KUNIT_EXPECT_EQ(test, tx.sge_left, 100U);

	/* Used up, and the peer has not granted more. */
	rstream_tx_consume(&tx, 100);
	KUNIT_EXPECT_FALSE(test, rstream_tx_take_sge(&tx, &e));
	KUNIT_EXPECT_EQ(test, tx.sge_addr, 0x1000ULL + 100);
	KUNIT_EXPECT_EQ(test, tx.sge_key, 5U);
	KUNIT_EXPECT_EQ(test, tx.sge_left, 0U);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 10), 0U);

	e.length = 200;
	KUNIT_EXPECT_TRUE(test, rstream_tx_take_sge(&tx, &e));
	KUNIT_EXPECT_EQ(test, tx.sge_addr, 0x9000ULL);
	KUNIT_EXPECT_EQ(test, tx.sge_key, 7U);
	KUNIT_EXPECT_EQ(test, tx.sge_left, 200U);
	KUNIT_EXPECT_EQ(test, tx.sge_index, 1);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 1000), 200U);

	/* No grant can be longer than the immediate data can count. */
	rstream_tx_consume(&tx, 200);
	e.length = U32_MAX;
	KUNIT_EXPECT_TRUE(test, rstream_tx_take_sge(&tx, &e));
	KUNIT_EXPECT_EQ(test, tx.sge_left, (u32)RSTREAM_IMM_DATA_MAX);
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, U32_MAX),
			(u32)RSTREAM_IMM_DATA_MAX);
}

/*
 * The peer's limit is its consumed count plus its queue size: from 0 to
 * peer_credits messages ahead of what we have sent, modulo 2^16, taken
 * from the low 16 bits of the immediate data.
 */
static void rstream_tx_credit_update_test(struct kunit *test)
{
	struct rstream_conn_params peer = rstream_test_params;
	struct rstream_tx_state tx;

	rstream_tx_init(&tx, &peer);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 385), -EPROTO);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 384);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 0xffff), -EPROTO);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 384);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 0), 0);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 0);
	KUNIT_EXPECT_FALSE(test, rstream_tx_has_credit(&tx));
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 384), 0);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 384);

	/* Near the wrap: 65530 + 384 is 378 modulo 2^16. */
	tx.sseq_no = 65530;
	tx.sseq_comp = 65530;
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 10), 0);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 10);
	KUNIT_EXPECT_TRUE(test, rstream_tx_has_credit(&tx));
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 1), 1U);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 378), 0);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 378);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 65535), 0);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 65535);

	/* More than peer_credits ahead, or behind: refused, limit kept. */
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 379), -EPROTO);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 65535);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 65529), -EPROTO);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 65535);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 32768), -EPROTO);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 65535);

	/* Exactly what we have sent: valid, and no credit. */
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 65530), 0);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 65530);
	KUNIT_EXPECT_FALSE(test, rstream_tx_has_credit(&tx));
	KUNIT_EXPECT_EQ(test, rstream_tx_chunk(&tx, 1), 0U);

	/* Bits 16..28 of the data are not part of the sequence number. */
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 0x1fff0000 | 10), 0);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 10);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 0x10000 | 378), 0);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 378);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 0x10000 | 379),
			-EPROTO);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx,
						       RSTREAM_IMM_DATA_MAX),
			0);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 65535);

	/* A peer with the fewest credits allowed. */
	peer.credits = RSTREAM_QP_MIN;
	rstream_tx_init(&tx, &peer);
	tx.sseq_no = 65535;
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 15), 0);
	KUNIT_EXPECT_EQ(test, rstream_tx_credit_update(&tx, 16), -EPROTO);
	KUNIT_EXPECT_EQ(test, tx.sseq_comp, 15);
}

/*
 * A writer and a reader joined in memory: the reader's grants go into the
 * writer's target array (entries 1, 0, 1, ...) as its RDMA writes would,
 * its updates are delivered as SGL immediate data, and each data message
 * is handed to the reader as its immediate data says.
 */
#define RSTREAM_SIM_QUEUE	16
#define RSTREAM_SIM_BASE	0x7f3a00000000ULL	/* the reader's ring */
#define RSTREAM_SIM_KEY		0x00c0ffee

struct rstream_sim {
	struct rstream_rx_state rx;
	struct rstream_tx_state tx;
	struct rstream_wire_sge target[RSTREAM_SGL_ENTRIES];
	u8 remote_sge;		/* the reader's next entry in target[] */
	u32 queue_len[RSTREAM_SIM_QUEUE];	/* received, not consumed */
	u32 queue_off[RSTREAM_SIM_QUEUE];
	u32 head;
	u32 count;
	u32 part;		/* bytes of the head message consumed */
	u64 sent;
	u32 msgs;
	u32 grants;
	u32 credits;
	u32 seq_wraps;
	u16 last_seq;
};

/* Send every update the reader has due, as rsocket does after a read. */
static void rstream_sim_updates(struct kunit *test, struct rstream_sim *s)
{
	enum rstream_rx_update kind;
	struct rstream_wire_sge *e;
	unsigned int n;
	u32 off, imm;
	u16 seq;

	for (n = 0; n < 2; n++) {
		kind = rstream_rx_update_due(&s->rx);
		if (kind == RSTREAM_RX_NONE)
			return;
		seq = rstream_rx_update_sent(&s->rx, kind, &off);
		KUNIT_ASSERT_EQ(test, seq, (u16)(s->rx.rseq_no + s->rx.rq_size));
		if (seq < s->last_seq)
			s->seq_wraps++;
		s->last_seq = seq;
		if (kind == RSTREAM_RX_GRANT) {
			KUNIT_ASSERT_EQ(test, off % (s->rx.ring_size / 2), 0U);
			e = &s->target[s->remote_sge];
			/* The writer has taken what was last granted here. */
			KUNIT_ASSERT_EQ(test, e->length, 0U);
			e->addr = RSTREAM_SIM_BASE + off;
			e->key = RSTREAM_SIM_KEY;
			e->length = s->rx.ring_size / 2;
			s->remote_sge = rstream_next_remote_sge(s->remote_sge);
			s->grants++;
		} else {
			s->credits++;
		}
		imm = rstream_imm(RSTREAM_OP_SGL, seq);
		KUNIT_ASSERT_EQ(test, rstream_imm_op(imm), RSTREAM_OP_SGL);
		KUNIT_ASSERT_EQ(test,
				rstream_tx_credit_update(&s->tx,
							 rstream_imm_data(imm)),
				0);
	}
	KUNIT_ASSERT_EQ(test, rstream_rx_update_due(&s->rx), RSTREAM_RX_NONE);
}

/*
 * @deferred: the reader's private data grants no first buffer, as
 * rstream's passive side sends it: both halves go as grants, to entries
 * 0 and 1.
 */
static void rstream_sim_init(struct kunit *test, struct rstream_sim *s,
			     u32 ring_size, u16 rq_size, bool deferred)
{
	struct rstream_conn_params reader = {
		.big_endian = IS_ENABLED(CONFIG_CPU_BIG_ENDIAN),
		.credits = rq_size,
		.sgl_addr = 0x7f3a10000000ULL,
		.sgl_key = 0x1234,
		.buf_addr = RSTREAM_SIM_BASE,
		.buf_key = RSTREAM_SIM_KEY,
		.buf_length = deferred ? 0 : ring_size / 2,
	};
	struct rstream_conn_params seen;
	struct rstream_conn_data cd;
	const char *why = NULL;

	KUNIT_ASSERT_LE(test, rq_size, RSTREAM_SIM_QUEUE);
	memset(s, 0, sizeof(*s));
	rstream_conn_data_build(&cd, &reader);
	KUNIT_ASSERT_EQ(test, rstream_conn_data_parse(&cd, sizeof(cd), true,
						      &seen, &why), 0);
	rstream_tx_init(&s->tx, &seen);
	rstream_rx_init(&s->rx, ring_size, rq_size, !deferred);
	s->remote_sge = deferred ? 0 : 1;
	s->last_seq = rq_size;
	rstream_sim_updates(test, s);
	KUNIT_ASSERT_EQ(test, s->grants, deferred ? 2U : 1U);
}

/* The writer sends up to @want bytes: returns how many, 0 if blocked. */
static u32 rstream_sim_write(struct kunit *test, struct rstream_sim *s,
			     u32 want)
{
	struct rstream_wire_sge *e = &s->target[s->tx.sge_index];
	u32 len, imm, off, tail;

	if (!s->tx.sge_left) {
		if (!rstream_tx_take_sge(&s->tx, e))
			return 0;
		e->length = 0;
	}
	len = rstream_tx_chunk(&s->tx, want);
	if (!len)
		return 0;
	KUNIT_ASSERT_LE(test, len, want);
	KUNIT_ASSERT_EQ(test, s->tx.sge_key, (u32)RSTREAM_SIM_KEY);
	KUNIT_ASSERT_LT(test, s->count, (u32)RSTREAM_SIM_QUEUE);

	imm = rstream_imm(RSTREAM_OP_DATA, len);
	KUNIT_ASSERT_EQ(test, rstream_imm_op(imm), RSTREAM_OP_DATA);
	KUNIT_ASSERT_EQ(test, rstream_rx_data(&s->rx, rstream_imm_data(imm),
					      &off), 0);
	/* The reader finds the bytes where the writer put them. */
	KUNIT_ASSERT_EQ(test, RSTREAM_SIM_BASE + off, s->tx.sge_addr);
	rstream_tx_consume(&s->tx, len);

	tail = (s->head + s->count) % RSTREAM_SIM_QUEUE;
	s->queue_len[tail] = len;
	s->queue_off[tail] = off;
	s->count++;
	s->sent += len;
	s->msgs++;
	return len;
}

/* The reader consumes up to @want bytes of one message: returns how many. */
static u32 rstream_sim_read(struct kunit *test, struct rstream_sim *s,
			    u32 want)
{
	u32 left, len;
	bool done;

	if (!s->count)
		return 0;
	/* The stream continues where the last read stopped. */
	KUNIT_ASSERT_EQ(test, (u32)(s->rx.consumed % s->rx.ring_size),
			s->queue_off[s->head] + s->part);
	left = s->queue_len[s->head] - s->part;
	len = min(want, left);
	done = len == left;
	rstream_rx_consume(&s->rx, len, done);
	s->part += len;
	if (done) {
		s->head = (s->head + 1) % RSTREAM_SIM_QUEUE;
		s->count--;
		s->part = 0;
	}
	rstream_sim_updates(test, s);
	return len;
}

/* Deterministic pseudo-random numbers (Numerical Recipes' LCG). */
static u32 rstream_lcg(u32 *x)
{
	*x = *x * 1664525 + 1013904223;
	return *x >> 8;
}

/*
 * 1 MiB through a 4096-byte ring with 16 credits, messages of 1 to 64 and
 * of 1 to 3000 bytes, the reader taking them in pieces at its own pace:
 * every message is accepted, lands where the writer aimed it, and neither
 * side ever waits for the other for ever.
 */
static void rstream_proto_simulation_run(struct kunit *test, bool deferred)
{
	struct rstream_sim s;
	u32 x = 1, r, want;
	bool write;

	rstream_sim_init(test, &s, 4096, 16, deferred);
	while (s.sent < SZ_1M) {
		r = rstream_lcg(&x);
		want = r & 0x100 ? 1 + r % 64 : 1 + (r >> 9) % 3000;
		want = min_t(u64, want, SZ_1M - s.sent);
		write = r & 0x200;
		if (write && rstream_sim_write(test, &s, want))
			continue;
		if (rstream_sim_read(test, &s, 1 + (r >> 12) % 2500))
			continue;
		/* The reader has nothing: the writer must be able to go on. */
		KUNIT_ASSERT_GT_MSG(test, rstream_sim_write(test, &s, want), 0U,
				    "stuck after %llu bytes", s.sent);
	}
	while (s.count)
		rstream_sim_read(test, &s, U32_MAX);

	KUNIT_EXPECT_EQ(test, s.sent, (u64)SZ_1M);
	KUNIT_EXPECT_EQ(test, s.rx.written, (u64)SZ_1M);
	KUNIT_EXPECT_EQ(test, s.rx.consumed, (u64)SZ_1M);
	KUNIT_EXPECT_EQ(test, s.rx.granted, (u64)SZ_1M + 4096);
	KUNIT_EXPECT_EQ(test, s.grants, (deferred ? 2U : 1U) + SZ_1M / 2048);
	KUNIT_EXPECT_EQ(test, s.rx.msgs_in, (u16)s.msgs);
	KUNIT_EXPECT_EQ(test, s.rx.rseq_no, (u16)s.msgs);
	KUNIT_EXPECT_EQ(test, s.tx.sseq_no, (u16)s.msgs);
	KUNIT_EXPECT_GT(test, s.credits, 0U);
	KUNIT_EXPECT_TRUE(test, rstream_tx_has_credit(&s.tx));
}

static void rstream_proto_simulation_test(struct kunit *test)
{
	rstream_proto_simulation_run(test, false);
}

/* The same when the reader's first half came as a grant (conn.c). */
static void rstream_proto_simulation_deferred_test(struct kunit *test)
{
	rstream_proto_simulation_run(test, true);
}

/*
 * More than 2^16 one-byte messages, 16 credits at a time: the writer
 * always gets all 16 before it has to wait, and the sequence numbers on
 * both sides and in the updates wrap around.
 */
static void rstream_proto_seq_wrap_test(struct kunit *test)
{
	const u32 total = 70000;	/* a multiple of 8 */
	struct rstream_sim s;

	rstream_sim_init(test, &s, 4096, 16, false);
	while (s.msgs < total) {
		while (s.msgs < total && rstream_sim_write(test, &s, 1))
			;
		KUNIT_ASSERT_EQ_MSG(test, s.count, s.msgs < total ? 16U : s.count,
				    "after %u messages", s.msgs);
		while (s.count)
			KUNIT_ASSERT_EQ(test, rstream_sim_read(test, &s, 1), 1U);
	}

	KUNIT_EXPECT_EQ(test, s.msgs, total);
	KUNIT_EXPECT_EQ(test, s.rx.written, (u64)total);
	KUNIT_EXPECT_EQ(test, s.rx.consumed, (u64)total);
	/* 16-bit sequence numbers, wrapped once. */
	KUNIT_EXPECT_EQ(test, s.rx.msgs_in, total - 65536);
	KUNIT_EXPECT_EQ(test, s.rx.rseq_no, total - 65536);
	KUNIT_EXPECT_EQ(test, s.tx.sseq_no, total - 65536);
	KUNIT_EXPECT_EQ(test, s.rx.credit_limit, total + 16 - 65536);
	KUNIT_EXPECT_EQ(test, s.tx.sseq_comp, total + 16 - 65536);
	KUNIT_EXPECT_EQ(test, s.seq_wraps, 1U);
	/* One update per 8 messages, plus the first grant. */
	KUNIT_EXPECT_EQ(test, s.grants, 1 + total / 2048);
	KUNIT_EXPECT_EQ(test, s.grants + s.credits, 1 + total / 8);
}

/*
 * The target array entry, its peer's writes and our reads on two CPUs.
 * The writer plays the peer's device: once we have taken a grant (length
 * zeroed), it writes the next one, address, key and length in that order,
 * as an RDMA write lands; grant i carries i in every field, so a read that
 * mixes two grants shows.
 */
struct rstream_sge_race {
	struct rstream_wire_sge entry;
	struct completion started;
};

static int rstream_sge_race_writer(void *data)
{
	struct rstream_sge_race *r = data;
	u32 i = 0;

	complete(&r->started);
	while (!kthread_should_stop()) {
		if (READ_ONCE(r->entry.length)) {
			cond_resched();
			continue;
		}
		i++;
		WRITE_ONCE(r->entry.addr, i);
		smp_wmb();	/* in order, as the device's write lands */
		WRITE_ONCE(r->entry.key, i);
		smp_wmb();	/* the length last: it marks the grant */
		WRITE_ONCE(r->entry.length, i);
	}
	return 0;
}

static void rstream_wire_sge_read_race_test(struct kunit *test)
{
	const unsigned long end = jiffies + 3 * HZ;
	struct rstream_sge_race *r;
	struct task_struct *writer;
	u32 grants = 0, torn = 0, spins = 0;
	struct rstream_wire_sge got, first_torn = {};

	if (num_online_cpus() < 2)
		kunit_skip(test, "needs two CPUs for the reads to race the writes");
	r = kunit_kzalloc(test, sizeof(*r), GFP_KERNEL);
	KUNIT_ASSERT_NOT_NULL(test, r);
	init_completion(&r->started);
	writer = kthread_run(rstream_sge_race_writer, r, "rstream_sge_race");
	KUNIT_ASSERT_FALSE(test, IS_ERR(writer));
	wait_for_completion(&r->started);

	while (grants < 200000 && time_before(jiffies, end)) {
		if (!rstream_wire_sge_read(&r->entry, &got)) {
			if (!(++spins % 1024))
				cond_resched();
			continue;
		}
		if (got.addr != got.length || got.key != got.length) {
			if (!torn++)
				first_torn = got;
		}
		grants++;
		/* Taken: what rstream_tx_load_sge() does next. */
		WRITE_ONCE(r->entry.length, 0);
	}
	kthread_stop(writer);

	kunit_info(test, "%u grants read, %u torn", grants, torn);
	KUNIT_EXPECT_GT(test, grants, 1000U);
	KUNIT_EXPECT_EQ_MSG(test, torn, 0U,
			    "first torn read: addr %llu key %u length %u",
			    first_torn.addr, first_torn.key, first_torn.length);
}

/*
 * The send queue's slots across the wrap of its 32-bit counters: with a
 * queue kept full, every completion must find the slot its post filled.
 * Indexing by the counter modulo a queue size that is not a power of two
 * (384, rsocket's default) jumps at the wrap, and a post then overwrites
 * the slot of a write still in flight.
 */
static void rstream_sq_ring_wrap_test(struct kunit *test)
{
	static const u32 sizes[] = { 16, 100, 384, 1000, 65534 };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(sizes); i++) {
		u32 size = sizes[i], start = 0U - size - 3, step;
		struct rstream_sq_ring sq = {};

		sq.mask = rstream_sq_nslots(size) - 1;
		KUNIT_ASSERT_GE(test, sq.mask + 1, size);
		KUNIT_ASSERT_TRUE(test, is_power_of_2(sq.mask + 1));
		sq.slots = kunit_kcalloc(test, sq.mask + 1, sizeof(*sq.slots),
					 GFP_KERNEL);
		KUNIT_ASSERT_NOT_NULL(test, sq.slots);
		sq.posted = start;
		sq.done = start;

		/* Full, then one completion per post, well past the wrap. */
		for (step = 0; step < 3 * size; step++) {
			struct rstream_sq_slot *slot;

			if (rstream_sq_inflight(&sq) == size) {
				slot = rstream_sq_tail(&sq);
				KUNIT_ASSERT_EQ_MSG(test, slot->sbuf_end,
						    (u64)sq.done,
						    "queue of %u: completion %u found the slot of post %llu",
						    size, sq.done, slot->sbuf_end);
				sq.done++;
			}
			slot = rstream_sq_head(&sq);
			slot->sbuf_end = sq.posted;
			sq.posted++;
		}
		KUNIT_EXPECT_LT(test, sq.posted, start);	/* it wrapped */
		KUNIT_EXPECT_EQ(test, rstream_sq_inflight(&sq), size);
	}
}

static struct kunit_case rstream_proto_test_cases[] = {
	KUNIT_CASE(rstream_proto_layout_test),
	KUNIT_CASE(rstream_conn_data_build_test),
	KUNIT_CASE(rstream_conn_data_round_trip_test),
	KUNIT_CASE(rstream_conn_data_parse_reject_test),
	KUNIT_CASE(rstream_conn_data_parse_reply_test),
	KUNIT_CASE(rstream_conn_data_parse_long_test),
	KUNIT_CASE(rstream_conn_data_parse_flags_test),
	KUNIT_CASE(rstream_imm_constants_test),
	KUNIT_CASE(rstream_imm_fields_test),
	KUNIT_CASE(rstream_rx_init_test),
	KUNIT_CASE(rstream_rx_init_deferred_test),
	KUNIT_CASE(rstream_rx_data_first_half_test),
	KUNIT_CASE(rstream_rx_data_half_boundary_test),
	KUNIT_CASE(rstream_rx_data_credits_test),
	KUNIT_CASE(rstream_rx_credit_only_test),
	KUNIT_CASE(rstream_rx_ring_cycles_test),
	KUNIT_CASE(rstream_tx_init_test),
	KUNIT_CASE(rstream_tx_chunk_test),
	KUNIT_CASE(rstream_tx_consume_test),
	KUNIT_CASE(rstream_tx_take_sge_test),
	KUNIT_CASE(rstream_wire_sge_read_race_test),
	KUNIT_CASE(rstream_tx_credit_update_test),
	KUNIT_CASE(rstream_proto_simulation_test),
	KUNIT_CASE(rstream_proto_simulation_deferred_test),
	KUNIT_CASE(rstream_proto_seq_wrap_test),
	KUNIT_CASE(rstream_sq_ring_wrap_test),
	{}
};

static struct kunit_suite rstream_proto_test_suite = {
	.name = "rstream_proto",
	.test_cases = rstream_proto_test_cases,
};

kunit_test_suite(rstream_proto_test_suite);
