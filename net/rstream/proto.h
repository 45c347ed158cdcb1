/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The rsockets v1 wire format and the flow-control arithmetic around it,
 * as pure functions of their arguments: no locks, no verbs, no memory
 * allocation.  Callers serialise access to the state structures (the
 * connection's data-path lock); the KUnit suite rstream_proto drives every
 * function here directly.
 *
 * Names follow librdmacm's rsocket.c where a field has a counterpart there
 * (rseq_no, sseq_comp, ...), so that the two can be read side by side.
 */
#ifndef _NET_RSTREAM_PROTO_H
#define _NET_RSTREAM_PROTO_H

#include <linux/build_bug.h>
#include <linux/log2.h>
#include <linux/types.h>

#define RSTREAM_PROTO_VERSION	1
#define RSTREAM_CONN_FLAG_NET	0x01	/* sender's host is big-endian */
#define RSTREAM_CONN_FLAG_IOMAP	0x02	/* sender understands iomap */
#define RSTREAM_SGL_ENTRIES	2	/* rsocket's RS_SGL_SIZE */
#define RSTREAM_CTRL_SLOTS	4	/* rsocket's RS_QP_CTRL_SIZE */
#define RSTREAM_QP_MIN		16	/* rsocket's RS_QP_MIN_SIZE */
#define RSTREAM_QP_MAX		0xfffe	/* rsocket's RS_QP_MAX_SIZE */
#define RSTREAM_IMM_DATA_MAX	0x1fffffff	/* 29-bit length field */

/* The immediate value: op in bits 31..29, data in 28..0. */
enum rstream_op {
	RSTREAM_OP_DATA = 0,
	RSTREAM_OP_RSVD_DATA_MORE = 1,
	RSTREAM_OP_WRITE = 2,		/* local tag in rsocket, never sent */
	RSTREAM_OP_RSVD_DRA_MORE = 3,
	RSTREAM_OP_SGL = 4,
	RSTREAM_OP_RSVD = 5,
	RSTREAM_OP_IOMAP_SGL = 6,
	RSTREAM_OP_CTRL = 7,
};

enum rstream_ctrl {
	RSTREAM_CTRL_DISCONNECT = 0,
	RSTREAM_CTRL_KEEPALIVE = 1,
	RSTREAM_CTRL_SHUTDOWN = 2,
};

/* An SGL entry as written into the peer's target array: owner's byte order. */
struct rstream_wire_sge {
	u64 addr;
	u32 key;
	u32 length;
} __packed;

/* The 40-byte CM private data block, big-endian, the same in REQ and REP. */
struct rstream_conn_data {
	u8 version;
	u8 flags;
	__be16 credits;
	u8 reserved[3];
	u8 target_iomap_size;
	__be64 target_sgl_addr;
	__be32 target_sgl_key;
	__be32 target_sgl_length;
	__be64 data_buf_addr;
	__be32 data_buf_key;
	__be32 data_buf_length;
} __packed;

static_assert(sizeof(struct rstream_wire_sge) == 16);
static_assert(sizeof(struct rstream_conn_data) == 40);

/* One side's view of a connection, as carried in the private data. */
struct rstream_conn_params {
	bool big_endian;	/* decoded from RSTREAM_CONN_FLAG_NET */
	u16 credits;		/* data messages the side can hold */
	u64 sgl_addr;
	u32 sgl_key;
	u64 buf_addr;		/* first half of its receive ring */
	u32 buf_key;
	u32 buf_length;
};

void rstream_conn_data_build(struct rstream_conn_data *cd,
			     const struct rstream_conn_params *p);
int rstream_conn_data_parse(const void *data, unsigned int len, bool reply,
			    struct rstream_conn_params *p, const char **why);

static inline u32 rstream_imm(enum rstream_op op, u32 data)
{
	return ((u32)op << 29) | (data & RSTREAM_IMM_DATA_MAX);
}

static inline enum rstream_op rstream_imm_op(u32 imm)
{
	return imm >> 29;
}

static inline u32 rstream_imm_data(u32 imm)
{
	return imm & RSTREAM_IMM_DATA_MAX;
}

/*
 * Reader side of one direction: our receive ring and the data messages
 * the peer has written into it.  Byte positions are 64-bit totals since
 * the connection began (they never wrap in practice); message sequence
 * numbers are rsocket's 16-bit ones.
 */
struct rstream_rx_state {
	u32 ring_size;		/* even; granted in halves */
	u16 rq_size;		/* the credits we advertised */
	u64 written;		/* bytes the peer has placed */
	u64 consumed;		/* bytes the application has taken */
	u64 granted;		/* end of the space the peer may write */
	u16 msgs_in;		/* data messages received */
	u16 rseq_no;		/* data messages completely consumed */
	u16 rseq_comp;		/* a credit update is due when rseq_no reaches it */
	u16 credit_limit;	/* the last sequence number advertised */
};

enum rstream_rx_update {
	RSTREAM_RX_NONE,	/* nothing to tell the peer yet */
	RSTREAM_RX_CREDIT,	/* message credits only (0-byte write) */
	RSTREAM_RX_GRANT,	/* credits and the free half of the ring */
};

void rstream_rx_init(struct rstream_rx_state *rx, u32 ring_size, u16 rq_size,
		     bool first_half_granted);
int rstream_rx_data(struct rstream_rx_state *rx, u32 len, u32 *ring_offset);
void rstream_rx_consume(struct rstream_rx_state *rx, u32 bytes,
			bool message_done);
enum rstream_rx_update rstream_rx_update_due(const struct rstream_rx_state *rx);
u16 rstream_rx_update_sent(struct rstream_rx_state *rx,
			   enum rstream_rx_update kind, u32 *grant_offset);

/*
 * Writer side of one direction: message credits and the position within
 * the peer's current grant.  The grant entries themselves live in our
 * target array, which the peer writes; the caller copies an entry in with
 * rstream_tx_take_sge() once the peer's SGL message has arrived.
 */
struct rstream_tx_state {
	u16 peer_credits;	/* the peer's rq_size, from its private data */
	u16 sseq_no;		/* data messages sent */
	u16 sseq_comp;		/* sending is allowed while sseq_no differs */
	u8 sge_index;		/* the target array entry in use next */
	u64 sge_addr;		/* what is left of the current grant */
	u32 sge_key;
	u32 sge_left;
};

void rstream_tx_init(struct rstream_tx_state *tx,
		     const struct rstream_conn_params *peer);
int rstream_tx_credit_update(struct rstream_tx_state *tx, u32 seq);
bool rstream_wire_sge_read(const struct rstream_wire_sge *shared,
			   struct rstream_wire_sge *entry);
bool rstream_tx_take_sge(struct rstream_tx_state *tx,
			 struct rstream_wire_sge *entry);
u32 rstream_tx_chunk(const struct rstream_tx_state *tx, u32 want);
void rstream_tx_consume(struct rstream_tx_state *tx, u32 len);

static inline bool rstream_tx_has_credit(const struct rstream_tx_state *tx)
{
	return tx->sseq_no != tx->sseq_comp;
}

/*
 * The send queue's bookkeeping: one slot per work request in flight, in
 * posting order, found from free-running 32-bit counters.  The slot array
 * has a power-of-two size no smaller than the queue, so that a counter
 * names the same slot before and after it wraps at 2^32; with any other
 * size the slot index jumps at the wrap and a new post could take the slot
 * of a write still in flight.
 */
struct rstream_zc;

struct rstream_sq_slot {
	u64 sbuf_end;		/* staging bytes released by its completion */
	struct rstream_zc *zc;	/* zero-copy pages and notifications, or NULL */
	u8 signaled;
	u8 ctrl;		/* counts against the control slots */
};

struct rstream_sq_ring {
	struct rstream_sq_slot *slots;
	u32 mask;		/* number of slots - 1 */
	u32 posted;		/* work requests posted, ever */
	u32 done;		/* of those, completed */
};

/* How many slots a send queue of @sq_size entries needs. */
static inline u32 rstream_sq_nslots(u32 sq_size)
{
	return roundup_pow_of_two(sq_size);
}

static inline u32 rstream_sq_inflight(const struct rstream_sq_ring *sq)
{
	return sq->posted - sq->done;
}

/* The slot the next post takes. */
static inline struct rstream_sq_slot *
rstream_sq_head(const struct rstream_sq_ring *sq)
{
	return &sq->slots[sq->posted & sq->mask];
}

/* The slot of the oldest work request still in flight. */
static inline struct rstream_sq_slot *
rstream_sq_tail(const struct rstream_sq_ring *sq)
{
	return &sq->slots[sq->done & sq->mask];
}

/* Grant entries go to the peer's entries 1, 0, 1, 0, ... */
static inline u8 rstream_next_remote_sge(u8 index)
{
	return (index + 1) % RSTREAM_SGL_ENTRIES;
}

#endif /* _NET_RSTREAM_PROTO_H */
