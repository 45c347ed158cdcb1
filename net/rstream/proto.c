// SPDX-License-Identifier: GPL-2.0
/*
 * rsockets v1 encoding and flow-control arithmetic (see proto.h).
 *
 * Everything here is a pure function of its arguments, so that the rules
 * the peer is held to can be tested exhaustively by KUnit; any context,
 * any lock the caller holds.
 */
#include <asm/barrier.h>
#include <linux/errno.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <kunit/visibility.h>

#include "proto.h"

void rstream_conn_data_build(struct rstream_conn_data *cd,
			     const struct rstream_conn_params *p)
{
	memset(cd, 0, sizeof(*cd));
	cd->version = RSTREAM_PROTO_VERSION;
	/* No iomap: target_iomap_size stays 0 and so does the flag. */
	cd->flags = IS_ENABLED(CONFIG_CPU_BIG_ENDIAN) ? RSTREAM_CONN_FLAG_NET : 0;
	cd->credits = cpu_to_be16(p->credits);
	cd->target_sgl_addr = cpu_to_be64(p->sgl_addr);
	cd->target_sgl_key = cpu_to_be32(p->sgl_key);
	cd->target_sgl_length = cpu_to_be32(RSTREAM_SGL_ENTRIES);
	cd->data_buf_addr = cpu_to_be64(p->buf_addr);
	cd->data_buf_key = cpu_to_be32(p->buf_key);
	cd->data_buf_length = cpu_to_be32(p->buf_length);
}
EXPORT_SYMBOL_IF_KUNIT(rstream_conn_data_build);

/*
 * @data is what the peer sent: hostile until this returns 0.  On failure
 * *why says which rule was broken, for the log.  A @reply (the REP) may
 * grant no first receive buffer: its sender grants it later, into our
 * entry 0 (rstream's passive side does, conn.c).  A request may not: a
 * passive rsocket makes its first grant into our entry 1, and our sends
 * would wait for entry 0 for ever.
 */
int rstream_conn_data_parse(const void *data, unsigned int len, bool reply,
			    struct rstream_conn_params *p, const char **why)
{
	struct rstream_conn_data cd;

	if (!data || len < sizeof(cd)) {
		*why = "private data shorter than 40 bytes";
		return -EPROTO;
	}
	memcpy(&cd, data, sizeof(cd));
	if (cd.version != RSTREAM_PROTO_VERSION) {
		*why = "unsupported rsockets protocol version";
		return -EPROTONOSUPPORT;
	}
	if (!cd.credits || be16_to_cpu(cd.credits) > RSTREAM_QP_MAX) {
		*why = "message credits out of range";
		return -EPROTO;
	}
	if (be32_to_cpu(cd.target_sgl_length) != RSTREAM_SGL_ENTRIES) {
		*why = "target SGL is not two entries";
		return -EPROTO;
	}
	if ((!cd.data_buf_length && !reply) ||
	    be32_to_cpu(cd.data_buf_length) > RSTREAM_IMM_DATA_MAX) {
		*why = "first receive buffer length out of range";
		return -EPROTO;
	}

	p->big_endian = cd.flags & RSTREAM_CONN_FLAG_NET;
	p->credits = be16_to_cpu(cd.credits);
	p->sgl_addr = be64_to_cpu(cd.target_sgl_addr);
	p->sgl_key = be32_to_cpu(cd.target_sgl_key);
	p->buf_addr = be64_to_cpu(cd.data_buf_addr);
	p->buf_key = be32_to_cpu(cd.data_buf_key);
	p->buf_length = be32_to_cpu(cd.data_buf_length);
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(rstream_conn_data_parse);

/*
 * @first_half_granted: the first half of the ring went to the peer in the
 * private data; else nothing is granted yet and both halves are due.
 */
void rstream_rx_init(struct rstream_rx_state *rx, u32 ring_size, u16 rq_size,
		     bool first_half_granted)
{
	memset(rx, 0, sizeof(*rx));
	rx->ring_size = ring_size;
	rx->rq_size = rq_size;
	rx->granted = first_half_granted ? ring_size / 2 : 0;
	rx->rseq_comp = rq_size / 2;
	rx->credit_limit = rq_size;
}
EXPORT_SYMBOL_IF_KUNIT(rstream_rx_init);

/*
 * A data message of @len bytes has arrived.  The writer must stay within
 * its message credits and the space granted, and must never let one write
 * span two grants (each grant is one half of the ring); anything else is a
 * protocol error.  On success *ring_offset is where the bytes are.
 */
int rstream_rx_data(struct rstream_rx_state *rx, u32 len, u32 *ring_offset)
{
	u32 half = rx->ring_size / 2;

	if (!len)
		return -EPROTO;
	if (rx->msgs_in == rx->credit_limit)
		return -EPROTO;
	if (len > rx->granted - rx->written)
		return -EPROTO;
	if (rx->written % half + len > half)
		return -EPROTO;

	*ring_offset = rx->written % rx->ring_size;
	/* Read without the lock by rstream_rx_ready(). */
	WRITE_ONCE(rx->written, rx->written + len);
	rx->msgs_in++;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(rstream_rx_data);

void rstream_rx_consume(struct rstream_rx_state *rx, u32 bytes,
			bool message_done)
{
	WRITE_ONCE(rx->consumed, rx->consumed + bytes);
	if (message_done)
		rx->rseq_no++;
}
EXPORT_SYMBOL_IF_KUNIT(rstream_rx_consume);

/*
 * rsocket's two triggers: half of the ring consumed and not yet granted
 * again, or half the message credits consumed since the last update.
 * Without the second, small messages exhaust credits long before half the
 * ring is consumed, and both sides wait for ever.
 */
enum rstream_rx_update rstream_rx_update_due(const struct rstream_rx_state *rx)
{
	u32 half = rx->ring_size / 2;

	if (rx->granted + half <= rx->consumed + rx->ring_size)
		return RSTREAM_RX_GRANT;
	if ((s16)(rx->rseq_no - rx->rseq_comp) >= 0)
		return RSTREAM_RX_CREDIT;
	return RSTREAM_RX_NONE;
}
EXPORT_SYMBOL_IF_KUNIT(rstream_rx_update_due);

/*
 * The update of @kind is being sent: returns the sequence number it
 * carries and, for a grant, the ring offset of the half it grants.
 */
u16 rstream_rx_update_sent(struct rstream_rx_state *rx,
			   enum rstream_rx_update kind, u32 *grant_offset)
{
	rx->rseq_comp = rx->rseq_no + rx->rq_size / 2;
	rx->credit_limit = rx->rseq_no + rx->rq_size;
	if (kind == RSTREAM_RX_GRANT) {
		*grant_offset = rx->granted % rx->ring_size;
		rx->granted += rx->ring_size / 2;
	}
	return rx->credit_limit;
}
EXPORT_SYMBOL_IF_KUNIT(rstream_rx_update_sent);

/* The peer's private data grants its first half-ring as our entry 0. */
void rstream_tx_init(struct rstream_tx_state *tx,
		     const struct rstream_conn_params *peer)
{
	memset(tx, 0, sizeof(*tx));
	tx->peer_credits = peer->credits;
	tx->sseq_comp = peer->credits;
	tx->sge_addr = peer->buf_addr;
	tx->sge_key = peer->buf_key;
	tx->sge_left = peer->buf_length;
}
EXPORT_SYMBOL_IF_KUNIT(rstream_tx_init);

/*
 * The peer says we may send until sseq_no reaches @seq (low 16 bits).  It
 * computes that as its consumed count plus its queue size, so the new
 * limit can be at most peer_credits messages ahead of what we have sent.
 */
int rstream_tx_credit_update(struct rstream_tx_state *tx, u32 seq)
{
	u16 limit = seq;

	if ((u16)(limit - tx->sseq_no) > tx->peer_credits)
		return -EPROTO;
	tx->sseq_comp = limit;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(rstream_tx_credit_update);

/*
 * Read the grant the peer wrote into our target array entry @shared into
 * @entry; false if the entry holds none (length 0).  The peer's RDMA write
 * may land while we read it (rs->lock does not stop the device), and it
 * lands in order: address, key, then length, the entry's mark of a grant.
 * So the length is read first and the rest only after it, as rdma-core's
 * rsocket does; the other way round a new length could come with the
 * entry's old address and key (zeros on its first grant), and our next
 * write would reach the peer with a key it never gave.
 */
bool rstream_wire_sge_read(const struct rstream_wire_sge *shared,
			   struct rstream_wire_sge *entry)
{
	entry->length = READ_ONCE(shared->length);
	if (!entry->length)
		return false;
	/* The device wrote address and key before the length. */
	dma_rmb();
	entry->addr = READ_ONCE(shared->addr);
	entry->key = READ_ONCE(shared->key);
	return true;
}
EXPORT_SYMBOL_IF_KUNIT(rstream_wire_sge_read);

/*
 * Load the grant in @entry (a copy of target array entry sge_index) once
 * the current one is used up.  Returns true if there is grant space to
 * write into; the caller then zeroes the entry's length in the shared
 * array, which is how the next grant into it becomes visible.
 */
bool rstream_tx_take_sge(struct rstream_tx_state *tx,
			 struct rstream_wire_sge *entry)
{
	if (tx->sge_left)
		return true;
	if (!entry->length)
		return false;
	tx->sge_addr = entry->addr;
	tx->sge_key = entry->key;
	tx->sge_left = min_t(u32, entry->length, RSTREAM_IMM_DATA_MAX);
	return true;
}
EXPORT_SYMBOL_IF_KUNIT(rstream_tx_take_sge);

/* How much of @want the next data message may carry: 0 if none. */
u32 rstream_tx_chunk(const struct rstream_tx_state *tx, u32 want)
{
	if (!rstream_tx_has_credit(tx))
		return 0;
	return min(want, tx->sge_left);
}
EXPORT_SYMBOL_IF_KUNIT(rstream_tx_chunk);

/* A data message of @len (from rstream_tx_chunk()) is being posted. */
void rstream_tx_consume(struct rstream_tx_state *tx, u32 len)
{
	tx->sge_addr += len;
	tx->sge_left -= len;
	tx->sseq_no++;
	if (!tx->sge_left)
		tx->sge_index = rstream_next_remote_sge(tx->sge_index);
}
EXPORT_SYMBOL_IF_KUNIT(rstream_tx_consume);
