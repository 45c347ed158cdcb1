// SPDX-License-Identifier: GPL-2.0
/*
 * The sending half of the data path: sendmsg() copies into the staging
 * ring and posts RDMA WRITE WITH IMMEDIATE into the peer's grants; our
 * grants and credit updates to the peer; send completions.
 *
 * One sender at a time (sendmsg holds the sock lock).  The shared state -
 * send queue accounting, credits, the staging ring's tail - is under
 * rs->lock: spin_lock_bh() in process context, spin_lock() in the
 * completion handlers, which run in softirq or with BHs off (cq.c).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/clock.h>
#include <linux/sched/signal.h>
#include <linux/uio.h>
#include <net/tcp_states.h>
#include <rdma/ib_verbs.h>

#include "rstream.h"

/* rsocket's RS_MAX_TRANSFER: one write never carries more. */
#define RSTREAM_MAX_CHUNK	65536
/* rsocket's RS_SNDLOWAT: do not wake a writer for less room than this. */
#define RSTREAM_SNDLOWAT	2048
/* How long small sends in a stream may gather for the next ones. */
#define RSTREAM_CORK_NS		(50 * NSEC_PER_USEC)
/* How long MSG_MORE and TCP_CORK may hold bytes: TCP's ceiling, 200 ms. */
#define RSTREAM_HOLD_NS		(200 * NSEC_PER_MSEC)

void rstream_wake(struct sock *sk, __poll_t events)
{
	struct socket_wq *wq;

	rcu_read_lock();
	wq = rcu_dereference(sk->sk_wq);
	if (skwq_has_sleeper(wq))
		wake_up_interruptible_poll(&wq->wait, events);
	rcu_read_unlock();
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		sk_wake_async(sk, SOCK_WAKE_WAITD, POLL_IN);
	if (events & EPOLLOUT)
		sk_wake_async(sk, SOCK_WAKE_SPACE, POLL_OUT);
}

/*
 * rs->lock held: room for more bytes, copied or zero-copy.  Zero-copy
 * writes in flight count against the send buffer as staged bytes do, as
 * TCP counts its zero-copy skbs against sk_sndbuf; they never take room
 * that staged bytes hold (rstream_tx_zc_room()), so this stays >= 0.
 */
static u32 rstream_sbuf_room(const struct rstream_sock *rs)
{
	return rs->sbuf_size - (u32)(rs->sbuf_head - rs->sbuf_tail) -
	       rs->zc_bytes;
}

/* SIOCOUTQ: bytes sent and not yet taken by the peer's device. */
u32 rstream_tx_unacked(struct rstream_sock *rs)
{
	u32 n;

	spin_lock_bh(&rs->lock);
	n = rs->sbuf_head - rs->sbuf_tail + rs->zc_bytes;
	spin_unlock_bh(&rs->lock);
	return n;
}

/* rs->lock held.  Data leaves RSTREAM_CTRL_SLOTS entries to control. */
static bool rstream_sq_room(const struct rstream_sock *rs, bool ctrl)
{
	u32 inflight = rstream_sq_inflight(&rs->sq);

	if (ctrl)
		return rs->sq_ctrl < RSTREAM_CTRL_SLOTS && inflight < rs->sq_size;
	return inflight < rs->sq_size - RSTREAM_CTRL_SLOTS;
}

static bool rstream_can_post(const struct rstream_sock *rs)
{
	return test_bit(RSTREAM_F_CONNECTED, &rs->flags) &&
	       !test_bit(RSTREAM_F_DEAD, &rs->flags);
}

static int rstream_tx_after_write_locked(struct rstream_sock *rs);

/*
 * rs->lock held: post one work request and account for its slot, which
 * holds @zc's pages (a zero-copy write) until its completion.
 */
static int rstream_post(struct rstream_sock *rs, struct ib_rdma_wr *wr,
			bool ctrl, bool signal, struct rstream_zc *zc)
{
	struct rstream_sq_slot *slot = rstream_sq_head(&rs->sq);
	int err;

	slot->sbuf_end = rs->sbuf_sent;
	slot->zc = zc;
	slot->signaled = signal;
	slot->ctrl = ctrl;
	wr->wr.wr_cqe = &rs->send_cqe;
	if (signal)
		wr->wr.send_flags |= IB_SEND_SIGNALED;
	err = ib_post_send(rs->qp, &wr->wr, NULL);
	if (err) {
		slot->zc = NULL;	/* the caller's again */
		return err;
	}
	/* The user timeout runs from here while nothing completes (conn.c). */
	if (!rstream_sq_inflight(&rs->sq))
		rs->busy_at = jiffies;
	/*
	 * TCP_INFO's round trip: one write at a time, to its completion, and
	 * no more than one a tick: the clock read is the dearest step here,
	 * between the post and the unlock that may start the device's work.
	 */
	if (signal && !rs->rtt_timing && time_after(jiffies, rs->rtt_at)) {
		rs->rtt_seq = rs->sq.posted;
		rs->rtt_start = local_clock();
		rs->rtt_at = jiffies;
		rs->rtt_timing = true;
	}
	rs->sq.posted++;
	if (ctrl)
		rs->sq_ctrl++;
	return 0;
}

/* An SGL entry as the peer reads it: in its byte order. */
static void rstream_fill_grant(struct rstream_sock *rs,
			       struct rstream_wire_sge *e, u64 addr, u32 key,
			       u32 len)
{
	if (rs->peer.big_endian != IS_ENABLED(CONFIG_CPU_BIG_ENDIAN)) {
		addr = swab64(addr);
		key = swab32(key);
		len = swab32(len);
	}
	e->addr = addr;
	e->key = key;
	e->length = len;
}

/*
 * rs->lock held: send the grants and credit updates that are due, as far
 * as control slots allow; a send completion calls again for the rest.
 */
void rstream_tx_updates_locked(struct rstream_sock *rs)
{
	/*
	 * After the peer's DISCONNECT nothing more comes to grant room or
	 * credits for, and its queue pair may be gone: a write to it would
	 * wait for retries to run out (a first grant held for the peer's
	 * first message, when that message is its DISCONNECT).
	 */
	if (test_bit(RSTREAM_F_DISC_RECV, &rs->flags))
		return;
	while (rstream_can_post(rs)) {
		enum rstream_rx_update kind = rstream_rx_update_due(&rs->rx);
		struct ib_rdma_wr wr = {};
		struct ib_sge sge;
		u32 grant_off = 0;
		u16 seq;

		if (kind == RSTREAM_RX_NONE) {
			clear_bit(RSTREAM_F_UPDATES_HELD, &rs->flags);
			return;
		}
		/*
		 * A first grant into the peer's entry 0 (we sent no buffer
		 * in the REP) waits for a message from the peer: an rsocket
		 * peer copies the REP into that entry only after its RTU has
		 * gone, and a grant that came before would be overwritten
		 * with nothing.  Its first look at its completion queue
		 * sends a grant, so it speaks as soon as it does anything;
		 * the receive that shows it calls again (rx.c).
		 */
		if (kind == RSTREAM_RX_GRANT && !rs->grant_count &&
		    !rs->remote_sge &&
		    !test_bit(RSTREAM_F_PEER_SPOKE, &rs->flags))
			return;
		/* A control write's completion frees a slot (cq.c). */
		if (!rstream_sq_room(rs, true)) {
			set_bit(RSTREAM_F_UPDATES_HELD, &rs->flags);
			return;
		}
		seq = rstream_rx_update_sent(&rs->rx, kind, &grant_off);
		wr.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM;
		wr.wr.ex.imm_data = cpu_to_be32(rstream_imm(RSTREAM_OP_SGL, seq));
		if (kind == RSTREAM_RX_GRANT) {
			/* Control slots bound grants in flight to their count. */
			u32 off = rs->sbuf_size + (rs->grant_count++ %
				  RSTREAM_CTRL_SLOTS) * sizeof(struct rstream_wire_sge);

			rstream_fill_grant(rs, rs->sbuf.vaddr + off,
					   rstream_buf_iova(&rs->ring, grant_off),
					   rs->ring.mr->rkey, rs->ring_size / 2);
			rstream_buf_sync_for_device(&rs->sbuf, off,
						    sizeof(struct rstream_wire_sge));
			sge.addr = rstream_buf_iova(&rs->sbuf, off);
			sge.length = sizeof(struct rstream_wire_sge);
			sge.lkey = rs->sbuf.mr->lkey;
			wr.wr.sg_list = &sge;
			wr.wr.num_sge = 1;
			wr.remote_addr = rs->peer.sgl_addr + rs->remote_sge *
					 sizeof(struct rstream_wire_sge);
			wr.rkey = rs->peer.sgl_key;
			rs->remote_sge = rstream_next_remote_sge(rs->remote_sge);
		}
		if (rstream_post(rs, &wr, true, true, NULL)) {
			rstream_conn_reset(rs, ECONNRESET, "cannot post a credit update");
			return;
		}
	}
}

void rstream_tx_updates(struct rstream_sock *rs)
{
	spin_lock_bh(&rs->lock);
	rstream_tx_updates_locked(rs);
	spin_unlock_bh(&rs->lock);
}

/*
 * Post a control message (DISCONNECT or SHUTDOWN): a 0-byte write with
 * immediate.  Process context; waits a little for a control slot.
 */
int rstream_send_ctrl(struct rstream_sock *rs, enum rstream_ctrl ctrl)
{
	unsigned long deadline = jiffies + HZ;
	bool stuck;
	int err;

	for (;;) {
		struct ib_rdma_wr wr = {};

		spin_lock_bh(&rs->lock);
		if (!rstream_can_post(rs)) {
			spin_unlock_bh(&rs->lock);
			return -ENOTCONN;
		}
		/* Corked data goes before the message that ends the stream. */
		err = rstream_tx_push_locked(rs);
		if (err) {
			spin_unlock_bh(&rs->lock);
			rstream_conn_reset(rs, ECONNRESET, "cannot post a write");
			return err;
		}
		if (!rstream_tx_pending(rs) && rstream_sq_room(rs, true)) {
			wr.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM;
			wr.wr.ex.imm_data =
				cpu_to_be32(rstream_imm(RSTREAM_OP_CTRL, ctrl));
			if (ctrl == RSTREAM_CTRL_DISCONNECT) {
				rs->disc_seq = rs->sq.posted;
				set_bit(RSTREAM_F_DISC_SENT, &rs->flags);
			} else {
				set_bit(RSTREAM_F_SHUT_SENT, &rs->flags);
			}
			err = rstream_post(rs, &wr, true, true, NULL);
			spin_unlock_bh(&rs->lock);
			/* Its completion ends a teardown's wait (conn.c). */
			rstream_cq_poll(rs);
			return err;
		}
		stuck = rstream_tx_pending(rs) != 0;
		spin_unlock_bh(&rs->lock);
		/* The slot, or the credit, comes with a completion. */
		rstream_cq_poll(rs);
		if (time_after(jiffies, deadline)) {
			/*
			 * Our bytes were copied within the credits the peer
			 * gave; only a peer that took them back leaves them
			 * here.  Ending the stream without them would let the
			 * peer read a clean end of a truncated stream.
			 */
			if (stuck)
				rstream_conn_reset(rs, ECONNRESET,
						   "peer withholds the credits for the last bytes");
			return -ETIMEDOUT;
		}
		usleep_range(1000, 2000);
	}
}

/*
 * rs->lock held: rsocket's keepalive probe, an RDMA WRITE of no bytes to
 * address 0 with rkey 0, which the peer's device answers without its
 * software (no receive, no completion, no rkey check for zero bytes), in
 * a control slot.  @seq gets its SQ sequence.
 */
int rstream_tx_probe_locked(struct rstream_sock *rs, u32 *seq)
{
	struct ib_rdma_wr wr = {};

	if (!rstream_can_post(rs) || !rstream_sq_room(rs, true))
		return -EAGAIN;
	wr.wr.opcode = IB_WR_RDMA_WRITE;
	*seq = rs->sq.posted;
	return rstream_post(rs, &wr, true, true, NULL);
}

/* rs->lock held: a round trip of @us, into TCP's estimator's state. */
static void rstream_rtt_sample(struct rstream_sock *rs, u32 us)
{
	s32 err;

	us = max(us, 1U);
	if (!rs->srtt_us) {
		rs->srtt_us = us << 3;
		rs->mdev_us = us << 1;
		return;
	}
	err = us - (rs->srtt_us >> 3);
	rs->srtt_us += err;
	rs->mdev_us += abs(err) - (rs->mdev_us >> 2);
}

/*
 * rs->lock held: @slot's chain - its write's pages, then the
 * notifications that wait for it - onto the end of the list whose last
 * link *@tail is, which then points at the new end: lists are given back,
 * and their notifications queued, in posting order.
 */
static void rstream_sq_take_zc(struct rstream_sock *rs,
			       struct rstream_sq_slot *slot,
			       struct rstream_zc ***tail)
{
	struct rstream_zc *zc;

	**tail = slot->zc;
	for (zc = slot->zc; zc; zc = zc->next) {
		WRITE_ONCE(rs->zc_bytes, rs->zc_bytes - zc->len);
		*tail = &zc->next;
	}
	slot->zc = NULL;
}

/*
 * rs->lock held: the oldest signaled work request in flight finished, and
 * with it every one before it.  Returns the zero-copy writes among them,
 * for rstream_zc_put() once rs->lock is dropped.
 */
static struct rstream_zc *rstream_sq_complete(struct rstream_sock *rs)
{
	struct rstream_zc *zc = NULL, **tail = &zc;

	while (rstream_sq_inflight(&rs->sq)) {
		struct rstream_sq_slot *slot = rstream_sq_tail(&rs->sq);

		rs->sq.done++;
		if (slot->ctrl)
			rs->sq_ctrl--;
		rs->sbuf_tail = slot->sbuf_end;
		if (slot->zc)
			rstream_sq_take_zc(rs, slot, &tail);
		if (slot->signaled)
			break;
	}
	return zc;
}

/*
 * The connection's verbs are gone (conn.c, process context, after the
 * queue pair and the CQ, before the device): the zero-copy writes that
 * never completed give their pages back and notify.
 */
void rstream_tx_zc_drop(struct rstream_sock *rs)
{
	struct rstream_zc *zc = NULL, **tail = &zc;
	u32 seq;

	if (!rs->sq.slots)
		return;
	spin_lock_bh(&rs->lock);
	/* The counters stay: these writes are not done, only abandoned. */
	for (seq = rs->sq.done; seq != rs->sq.posted; seq++) {
		struct rstream_sq_slot *slot = &rs->sq.slots[seq & rs->sq.mask];

		if (slot->zc)
			rstream_sq_take_zc(rs, slot, &tail);
	}
	WRITE_ONCE(rs->zc_bytes, 0);
	/* In order with any notification due (rstream_tx_zc_order()). */
	spin_lock(&rs->zc_lock);
	spin_unlock(&rs->lock);
	rstream_zc_put(rs->ibdev, zc);
	spin_unlock_bh(&rs->zc_lock);
}

/* Softirq: a signaled send finished, and with it every one before it. */
void rstream_send_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rstream_sock *rs = cq->cq_context;
	struct rstream_zc *zc;

	if (unlikely(wc->status != IB_WC_SUCCESS)) {
		rstream_wc_failed(rs, wc);
		/*
		 * Every work request asks for a completion, and a failed or
		 * flushed one is as finished as any: its zero-copy pages go
		 * back now, as TCP's do when a reset purges its queue.  The
		 * connection is dead or ending (rstream_wc_failed()), so
		 * nothing else here matters any more.
		 */
		spin_lock(&rs->lock);
		zc = rstream_sq_complete(rs);
		spin_lock(&rs->zc_lock);
		spin_unlock(&rs->lock);
		rstream_zc_put(rs->ibdev, zc);
		spin_unlock(&rs->zc_lock);
		complete_all(&rs->disc_done);
		return;
	}

	spin_lock(&rs->lock);
	/* The peer's device took it: the connection is alive (conn.c). */
	rs->alive_at = jiffies;
	zc = rstream_sq_complete(rs);
	if (test_bit(RSTREAM_F_DISC_SENT, &rs->flags) &&
	    (s32)(rs->sq.done - rs->disc_seq) > 0)
		complete_all(&rs->disc_done);
	if (rs->rtt_timing && (s32)(rs->sq.done - rs->rtt_seq) > 0) {
		/* local_clock() of another CPU may read a little behind. */
		s64 ns = local_clock() - rs->rtt_start;

		rs->rtt_timing = false;
		if (ns > 0)
			rstream_rtt_sample(rs, div_u64(ns, NSEC_PER_USEC));
	}
	rstream_tx_updates_locked(rs);
	/* What sendmsg corked behind the writes that just finished. */
	if (rstream_tx_pending(rs) && rstream_tx_after_write_locked(rs))
		rstream_conn_reset(rs, ECONNRESET, "cannot post a write");
	/*
	 * The pages go back, and notifications are queued, without rs->lock
	 * (the error queue wakes the socket's waiters), under zc_lock, taken
	 * before rs->lock goes: a copied send's notification waits for it
	 * (rstream_tx_zc_order()).
	 */
	spin_lock(&rs->zc_lock);
	spin_unlock(&rs->lock);
	rstream_zc_put(rs->ibdev, zc);
	spin_unlock(&rs->zc_lock);
	rstream_wake(&rs->sk, EPOLLOUT | EPOLLWRNORM | EPOLLWRBAND);
}

/* rs->lock held: make the next grant current if the peer has written it. */
static void rstream_tx_load_sge(struct rstream_sock *rs)
{
	struct rstream_wire_sge *shared, entry;
	size_t off;

	if (rs->tx.sge_left)
		return;
	off = rs->tx.sge_index * sizeof(*shared);
	shared = rs->sgl.vaddr + off;
	rstream_buf_sync_for_cpu(&rs->sgl, off, sizeof(*shared));
	if (!rstream_wire_sge_read(shared, &entry))
		return;
	if (rstream_tx_take_sge(&rs->tx, &entry)) {
		/* A length that turns non-zero again is the next grant. */
		WRITE_ONCE(shared->length, 0);
		rstream_buf_sync_for_device(&rs->sgl, off, sizeof(*shared));
	}
}

/*
 * rs->lock held: how many more bytes sendmsg may copy in now.  Bytes
 * copied and not yet posted (corked) go out in one write with them, so
 * together they stay within one chunk, the current grant and the credit
 * that write will take.
 */
static u32 rstream_tx_room(struct rstream_sock *rs, u32 want)
{
	u32 pending = rstream_tx_pending(rs);
	u32 room = rstream_sbuf_room(rs);

	if (!rstream_can_post(rs) || !rstream_sq_room(rs, false))
		return 0;
	rstream_tx_load_sge(rs);
	if (pending >= RSTREAM_MAX_CHUNK)
		return 0;
	want = min3(want, room, (u32)RSTREAM_MAX_CHUNK - pending);
	/* 0 also when the peer has taken back the credit corked bytes need. */
	room = rstream_tx_chunk(&rs->tx, pending + want);
	return room > pending ? room - pending : 0;
}

/* rs->lock held: the peer has left us no room to write into. */
bool rstream_tx_shut_out_locked(struct rstream_sock *rs)
{
	rstream_tx_load_sge(rs);
	return !rstream_tx_chunk(&rs->tx, 1);
}

bool rstream_tx_writable(struct rstream_sock *rs)
{
	bool ok;

	spin_lock_bh(&rs->lock);
	ok = rstream_tx_room(rs, RSTREAM_SNDLOWAT) &&
	     rstream_sbuf_room(rs) >= min_t(u32, RSTREAM_SNDLOWAT,
					    rs->sbuf_size / 2);
	spin_unlock_bh(&rs->lock);
	return ok;
}

/* Copy @len bytes of @from into the staging ring at byte position @pos. */
static size_t rstream_sbuf_fill(struct rstream_sock *rs, u64 pos, size_t len,
				struct iov_iter *from)
{
	return rstream_buf_copy_from_iter(&rs->sbuf, rs->sbuf_size, pos, len,
					  from);
}

/*
 * rs->lock held: post the @len bytes at sbuf_sent as one data message.
 * Every data write asks for a completion: it releases the staging bytes
 * and slots behind it, and it is when corked bytes go out.
 */
static int rstream_post_data(struct rstream_sock *rs, u32 len)
{
	struct ib_rdma_wr wr = {};
	struct ib_sge sge[2];
	u32 off = rs->sbuf_sent % rs->sbuf_size;
	u32 first = min(len, rs->sbuf_size - off);
	bool inline_data = len <= rs->inline_size;
	int i, n = len > first ? 2 : 1;

	sge[0].length = first;
	sge[1].length = len - first;
	for (i = 0; i < n; i++) {
		u32 o = i ? 0 : off;

		if (inline_data) {
			/* The provider copies from the CPU address now. */
			sge[i].addr = (uintptr_t)(rs->sbuf.vaddr + o);
		} else {
			sge[i].addr = rstream_buf_iova(&rs->sbuf, o);
			rstream_buf_sync_for_device(&rs->sbuf, o, sge[i].length);
		}
		sge[i].lkey = rs->sbuf.mr->lkey;
	}
	wr.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM;
	wr.wr.ex.imm_data = cpu_to_be32(rstream_imm(RSTREAM_OP_DATA, len));
	wr.wr.sg_list = sge;
	wr.wr.num_sge = n;
	if (inline_data)
		wr.wr.send_flags = IB_SEND_INLINE;
	wr.remote_addr = rs->tx.sge_addr;
	wr.rkey = rs->tx.sge_key;

	/* Read without rs->lock by rstream_tx_push(). */
	WRITE_ONCE(rs->sbuf_sent, rs->sbuf_sent + len);
	/* For rstream_tx_cork_window(). */
	rs->tx_rx_mark = rs->rx.written;
	rs->data_sent_at = jiffies;	/* TCP_INFO (options.c) */
	rstream_tx_consume(&rs->tx, len);
	return rstream_post(rs, &wr, false, true, NULL);
}

/*
 * rs->lock held: how many of @want bytes the next zero-copy write may
 * carry now.  Corked bytes go first (the stream's order): none while they
 * wait.  Then as for copied bytes: one chunk, the grant, a credit, a send
 * slot, and room in the send buffer.
 */
static u32 rstream_tx_zc_room(struct rstream_sock *rs, u32 want)
{
	if (rstream_tx_pending(rs) || !rstream_can_post(rs) ||
	    !rstream_sq_room(rs, false))
		return 0;
	rstream_tx_load_sge(rs);
	want = min3(want, rstream_sbuf_room(rs), (u32)RSTREAM_MAX_CHUNK);
	return rstream_tx_chunk(&rs->tx, want);
}

/*
 * rs->lock held, @zc->len bytes of room checked: post them from the
 * sender's pages as one data message.  On failure @zc is the caller's
 * again, unmapped (rstream_zc_put() needs no device for it).
 */
static int rstream_post_zc(struct rstream_sock *rs, struct rstream_zc *zc)
{
	struct ib_rdma_wr wr = {};
	int err;

	/* A mapping the device's DMA layer refuses: as TCP's ENOBUFS. */
	if (rstream_zc_map(rs->ibdev, rs->pd->local_dma_lkey, zc))
		return -ENOBUFS;
	wr.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM;
	wr.wr.ex.imm_data = cpu_to_be32(rstream_imm(RSTREAM_OP_DATA, zc->len));
	wr.wr.sg_list = zc->sge;
	wr.wr.num_sge = zc->mapped;
	wr.remote_addr = rs->tx.sge_addr;
	wr.rkey = rs->tx.sge_key;
	err = rstream_post(rs, &wr, false, true, zc);
	if (err) {
		/* Here, while the device is sure to be there. */
		rstream_zc_unmap(rs->ibdev, zc);
		return err;
	}
	WRITE_ONCE(rs->zc_bytes, rs->zc_bytes + zc->len);
	rs->zc_sent += zc->len;
	rs->tx_rx_mark = rs->rx.written;
	rs->data_sent_at = jiffies;
	rstream_tx_consume(&rs->tx, zc->len);
	return 0;
}

/*
 * rs->lock held: post the corked bytes, held or not.  They were copied
 * within the room rstream_tx_room() gave, so the grant is there; when the
 * send queue is full, a write is in flight whose completion calls again.
 */
int rstream_tx_push_locked(struct rstream_sock *rs)
{
	u32 pending = rstream_tx_pending(rs);

	if (!pending || !rstream_can_post(rs))
		return 0;
	/* Forced: a hold ends here even if the bytes must wait for room. */
	rs->tx_hold_until = 0;
	/*
	 * The peer has said it reads no more (its DISCONNECT): what is
	 * corked is lost, as bytes a TCP peer never read; a write now would
	 * only fail on a queue pair the peer may have destroyed.
	 */
	if (test_bit(RSTREAM_F_DISC_RECV, &rs->flags)) {
		WRITE_ONCE(rs->sbuf_sent, rs->sbuf_head);
		return 0;
	}
	if (!rstream_sq_room(rs, false))
		return 0;
	/*
	 * A peer may lower its credit limit to where we are: then the bytes
	 * wait for its next credit update, which calls again (rx.c).
	 */
	if (rstream_tx_chunk(&rs->tx, pending) != pending)
		return 0;
	return rstream_post_data(rs, pending);
}

/*
 * rs->lock held: whether MSG_MORE or TCP_CORK holds the corked bytes, and
 * for how much longer (*left, in ns).  Held bytes go out when a send
 * without either fills them in, when TCP_CORK is cleared or TCP_NODELAY
 * set, when they fill a write, when a writer needs their room, or after
 * RSTREAM_HOLD_NS (the cork timer, cq.c); not because the peer's credit
 * came back or a write completed, nor for a reader, as TCP holds them.
 */
bool rstream_tx_held(const struct rstream_sock *rs, u64 *left)
{
	s64 rest;

	/* Nothing is held on a connection that can post no more. */
	if (!rs->tx_hold_until || !rstream_can_post(rs))
		return false;
	rest = rs->tx_hold_until - local_clock();
	if (rest <= 0)
		return false;
	*left = rest;
	return true;
}

/* rs->lock held: post the corked bytes unless they are held. */
int rstream_tx_release_locked(struct rstream_sock *rs)
{
	u64 left;

	if (rstream_tx_held(rs, &left))
		return 0;
	return rstream_tx_push_locked(rs);
}

/*
 * rs->lock held, the connection able to post: the cork timer posts the
 * corked bytes in @ns, or sooner if it is already due sooner.  Started
 * here, under rs->lock after rstream_can_post(), it cannot start after
 * the teardown's cancel, which follows setting RSTREAM_F_DEAD under
 * rs->lock (conn.c).  A hold it finds at its end starts it again (cq.c).
 */
void rstream_tx_cork_timer(struct rstream_sock *rs, u64 ns)
{
	u64 at = local_clock() + ns;

	if (hrtimer_is_queued(&rs->cork_timer) &&
	    (s64)(at - rs->tx_timer_at) >= 0)
		return;
	rs->tx_timer_at = at;
	hrtimer_start(&rs->cork_timer, ns_to_ktime(ns), HRTIMER_MODE_REL_SOFT);
}

/*
 * rs->lock held: whether small sends may wait for the next ones although
 * no write of ours is in flight, and for how long (*left, in ns): sends
 * that come less than RSTREAM_CORK_NS apart, to a peer that has sent
 * nothing since our last data write (it is not waiting for these bytes to
 * answer them), with nobody waiting on the socket, gather for up to that
 * long.  A device that completes writes at once (6.1's soft-RoCE completes
 * a kernel QP's by the time the poster enables BHs again, from a tasklet)
 * would otherwise take one write per send;
 * a sender that pauses longer between sends loses nothing.
 * local_clock(): ktime_get() reads the HPET where the TSC is not trusted
 * (as in TCG guests), an MMIO access per send.
 */
bool rstream_tx_cork_window(struct rstream_sock *rs, u64 *left)
{
	/* The clock after the plain reads: it costs more than they do. */
	if (READ_ONCE(rs->nodelay) || rs->rx.written != rs->tx_rx_mark ||
	    local_clock() - READ_ONCE(rs->tx_last_send) >= RSTREAM_CORK_NS ||
	    rstream_has_waiter(rs))
		return false;
	*left = RSTREAM_CORK_NS;
	return true;
}

/*
 * rs->lock held, a write of ours just completed (rstream_send_done()):
 * post what was corked behind it, unless a hold keeps it, or it belongs to
 * a stream of sends that may gather a little longer (the window's timer
 * posts it then).  On 6.1's soft-RoCE the write ahead has usually
 * completed by the next send, only not yet been handled: without this,
 * every send would find it "in flight" and go out alone with its
 * completion, a write per send.
 */
static int rstream_tx_after_write_locked(struct rstream_sock *rs)
{
	u64 left;

	if (rstream_tx_held(rs, &left))
		return 0;
	if (rstream_can_post(rs) && rstream_tx_cork_window(rs, &left)) {
		rstream_tx_cork_timer(rs, left);
		return 0;
	}
	return rstream_tx_push_locked(rs);
}

/*
 * rs->lock held, after copying in: cork the bytes (leave them for later,
 * with whatever follows) or post them now.  Like TCP's autocorking, small
 * sends wait while an earlier write of ours is in flight: its completion
 * posts them (cq.c).  They also wait, briefly, in a stream of sends that
 * nobody waits for (rstream_tx_cork_window(); not with TCP_NODELAY).  A
 * sender that waits for each reply loses nothing: recvmsg and poll post
 * what is corked, and so does a waiter's arming of the CQ.  With @more
 * (MSG_MORE or TCP_CORK) they are held for what follows, up to
 * RSTREAM_HOLD_NS (rstream_tx_held()).  A full write goes out in any case.
 */
static int rstream_tx_flush_or_cork(struct rstream_sock *rs, bool more,
				    bool *behind)
{
	u32 pending = rstream_tx_pending(rs);
	u64 left;

	if (pending < RSTREAM_MAX_CHUNK && pending < rs->tx.sge_left &&
	    rstream_tx_has_credit(&rs->tx)) {
		if (more) {
			if (!rs->tx_hold_until)
				rs->tx_hold_until = local_clock() +
						    RSTREAM_HOLD_NS;
			/* Completions do not post held bytes: the timer does. */
			if (rstream_tx_held(rs, &left))
				rstream_tx_cork_timer(rs, left);
			return 0;
		}
		if (rs->tx_hold_until) {
			/* The last of them: the hold's timer has no work. */
			rs->tx_hold_until = 0;
			hrtimer_try_to_cancel(&rs->cork_timer);
		}
		/* The write ahead's completion posts them (cq.c). */
		if (rstream_data_inflight(rs)) {
			*behind = true;
			return 0;
		}
		if (rstream_tx_cork_window(rs, &left)) {
			rstream_tx_cork_timer(rs, left);
			return 0;
		}
	}
	return rstream_tx_push_locked(rs);
}

/*
 * Post what is corked now: the caller is about to wait for the peer, or
 * (@force) for room those bytes take, or TCP_CORK was cleared.  Corked
 * bytes always have a write in flight ahead of them or a timer whose end
 * posts them, so this only saves time: the unlocked look may miss bytes
 * corked a moment ago.  Process context.
 */
int rstream_tx_push(struct rstream_sock *rs, bool force)
{
	int err = 0;

	if (READ_ONCE(rs->sbuf_head) != READ_ONCE(rs->sbuf_sent)) {
		spin_lock_bh(&rs->lock);
		err = force ? rstream_tx_push_locked(rs) :
			      rstream_tx_release_locked(rs);
		spin_unlock_bh(&rs->lock);
		if (err)
			rstream_conn_reset(rs, ECONNRESET, "cannot post a write");
	}
	return err;
}

/*
 * Nothing more can be sent: an error waits to be reported, we or the
 * peer ended the stream, or the connection is gone.  Reads only, so that
 * a sleeper's wake-up condition leaves the error for the caller to take.
 */
static bool rstream_tx_stopped(struct rstream_sock *rs)
{
	struct sock *sk = &rs->sk;

	return READ_ONCE(sk->sk_err) ||
	       (READ_ONCE(sk->sk_shutdown) & SEND_SHUTDOWN) ||
	       test_bit(RSTREAM_F_DISC_RECV, &rs->flags) ||
	       test_bit(RSTREAM_F_DEAD, &rs->flags) ||
	       /* As TCP's sk_stream_wait_connect(): EPIPE when not connected. */
	       rstream_state(sk) != TCP_ESTABLISHED;
}

/*
 * As sk_stream_error(): the connection's own error, reported once, and
 * EPIPE from then on.  Sock lock held.
 */
static int rstream_tx_error(struct rstream_sock *rs)
{
	return sock_error(&rs->sk) ?: -EPIPE;
}

/*
 * Sock lock held, @len bytes of room seen: take the pages of the next
 * bytes of @msg and post them.  Returns the bytes posted, -EAGAIN when
 * the room went meanwhile (the caller waits for it again), or an errno.
 */
static int rstream_tx_zc_write(struct rstream_sock *rs, struct msghdr *msg,
			       u32 len, struct ubuf_info *uarg)
{
	struct rstream_zc *zc;
	int err;

	zc = rstream_zc_get(&msg->msg_iter, len, rs->tx_pages, uarg);
	if (IS_ERR(zc))
		return PTR_ERR(zc);
	spin_lock_bh(&rs->lock);
	if (!rstream_can_post(rs)) {
		err = -EPIPE;
	} else if (rstream_tx_zc_room(rs, zc->len) < zc->len) {
		/* As for copied bytes: a completion took the credit. */
		err = -EAGAIN;
	} else {
		err = rstream_post_zc(rs, zc);
		if (!err)
			err = zc->len;
	}
	spin_unlock_bh(&rs->lock);
	if (err > 0)
		return err;
	if (err == -EAGAIN)
		iov_iter_revert(&msg->msg_iter, zc->len);
	rstream_zc_put(NULL, zc);
	if (err != -EPIPE && err != -EAGAIN && err != -ENOBUFS) {
		rstream_conn_reset(rs, ECONNRESET, "cannot post a write");
		err = -EPIPE;
	}
	return err;
}

/*
 * Sock lock held: a send of @uarg's was copied, so its notification is
 * due now, but not before those of the sends before it whose writes are
 * still in flight: its @marker (rstream_zc_marker(), made before the send
 * began) waits on the last work request posted, whose completion comes
 * after theirs.  With nothing in flight, a completion may still be giving
 * back the last of them, holding zc_lock: the caller's notification goes
 * after it.
 */
static void rstream_tx_zc_order(struct rstream_sock *rs,
				struct rstream_zc *marker)
{
	spin_lock_bh(&rs->lock);
	if (rs->sq.slots && rstream_sq_inflight(&rs->sq)) {
		struct rstream_sq_slot *slot =
			&rs->sq.slots[(rs->sq.posted - 1) & rs->sq.mask];
		struct rstream_zc **tail = &slot->zc;

		while (*tail)
			tail = &(*tail)->next;
		*tail = marker;
		marker = NULL;
	}
	spin_lock(&rs->zc_lock);
	spin_unlock(&rs->zc_lock);
	spin_unlock_bh(&rs->lock);
	rstream_zc_put(NULL, marker);
}

/* A blocked writer's busy loop ends: room, or nothing more to send on. */
static bool rstream_tx_busy_done(struct rstream_sock *rs)
{
	return rstream_tx_stopped(rs) || rstream_tx_writable(rs);
}

int rstream_rdma_sendmsg(struct socket *sock, struct msghdr *msg, size_t size)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	int flags = msg->msg_flags;
	bool polled = false, spun = false, behind = false, more, zc = false;
	struct rstream_zc *marker = NULL;
	struct ubuf_info *uarg = NULL;
	size_t copied = 0;
	long timeo;
	int err = 0;

	if (flags & MSG_OOB)
		return -EOPNOTSUPP;

	lock_sock(sk);
	more = (flags & MSG_MORE) || rs->cork;
	timeo = sock_sndtimeo(sk, flags & MSG_DONTWAIT);
	/* A blocking send on a connection still being set up waits for it. */
	while (sk->sk_state == TCP_SYN_SENT || sk->sk_state == TCP_SYN_RECV) {
		err = rstream_may_wait(timeo);
		if (err)
			goto out;
		add_wait_queue(sk_sleep(sk), &wait);
		sk_wait_event(sk, &timeo, sk->sk_state != TCP_SYN_SENT &&
			      sk->sk_state != TCP_SYN_RECV, &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
	}

	/*
	 * MSG_ZEROCOPY, as TCP takes it: only with SO_ZEROCOPY set, a number
	 * for the send and its pages charged to RLIMIT_MEMLOCK, ENOBUFS if
	 * that cannot be.  A send the device takes inline is copied into
	 * the work request at its post anyway, and pages behind a kernel
	 * iterator are not the caller's to pin: such sends are copied, and
	 * their notification says so (SO_EE_CODE_ZEROCOPY_COPIED).
	 */
	if ((flags & MSG_ZEROCOPY) && size && sock_flag(sk, SOCK_ZEROCOPY) &&
	    rstream_state(sk) == TCP_ESTABLISHED) {
		uarg = msg_zerocopy_realloc(sk, size, NULL);
		if (!uarg) {
			err = -ENOBUFS;
			goto out;
		}
		zc = size > rs->inline_size && user_backed_iter(&msg->msg_iter);
		if (!zc) {
			uarg_to_msgzc(uarg)->zerocopy = 0;
			/* Its notification's place in line (below). */
			marker = rstream_zc_marker(uarg);
			if (!marker) {
				net_zcopy_put_abort(uarg, true);
				uarg = NULL;
				err = -ENOBUFS;
				goto out;
			}
		}
	}

	while (msg_data_left(msg)) {
		size_t want = msg_data_left(msg);
		u32 len;

		if (rstream_tx_stopped(rs)) {
			err = -EPIPE;
			break;
		}
		/* A zero-copy write goes after what is corked, not with it. */
		if (zc && READ_ONCE(rs->sbuf_head) != READ_ONCE(rs->sbuf_sent) &&
		    rstream_tx_push(rs, true)) {
			err = -EPIPE;
			break;
		}
		spin_lock_bh(&rs->lock);
		want = min_t(size_t, want, U32_MAX);
		len = zc ? rstream_tx_zc_room(rs, want) :
			   rstream_tx_room(rs, want);
		/* Not worth a message: wait for room, as rsocket does. */
		if (len < want && len < RSTREAM_SNDLOWAT &&
		    rstream_sbuf_room(rs) < min_t(u32, RSTREAM_SNDLOWAT,
						  rs->sbuf_size / 2))
			len = 0;
		if (!len && !polled) {
			/* Completions in the CQ may have made room. */
			polled = true;
			spin_unlock_bh(&rs->lock);
			rstream_cq_poll(rs);
			continue;
		}
		spin_unlock_bh(&rs->lock);

		if (!len) {
			/* Since when the sender waits for room (conn.c). */
			if (!READ_ONCE(rs->stall_at))
				WRITE_ONCE(rs->stall_at, jiffies | 1);
			/* Nothing may stay corked while the writer waits. */
			err = rstream_tx_push(rs, true);
			if (err) {
				err = -EPIPE;
				break;
			}
			err = rstream_may_wait(timeo);
			if (err)
				break;
			/* Spin (busy polling) once for each wait for room. */
			if (!spun) {
				spun = true;
				if (rstream_cq_busy_poll(rs,
							 rstream_tx_busy_done,
							 &timeo))
					continue;
			}
			add_wait_queue(sk_sleep(sk), &wait);
			/* A waiter now: the CQ is armed for the room. */
			rstream_cq_poll(rs);
			sk_wait_event(sk, &timeo, rstream_tx_stopped(rs) ||
				      rstream_tx_writable(rs), &wait);
			remove_wait_queue(sk_sleep(sk), &wait);
			continue;
		}

		if (zc) {
			err = rstream_tx_zc_write(rs, msg, len, uarg);
			if (err == -EAGAIN) {
				err = 0;
				continue;
			}
			if (err < 0)
				break;
			copied += err;
			err = 0;
			spun = false;
			if (READ_ONCE(rs->stall_at))
				WRITE_ONCE(rs->stall_at, 0);
			continue;
		}
		if (rstream_sbuf_fill(rs, rs->sbuf_head, len,
				      &msg->msg_iter) != len) {
			err = -EFAULT;
			break;
		}
		spin_lock_bh(&rs->lock);
		if (!rstream_can_post(rs)) {
			err = -EPIPE;
		} else if (rstream_tx_room(rs, len) < len) {
			/*
			 * While we copied, a completion posted what was
			 * corked and took the credit these bytes counted on:
			 * take them back and wait for room, rather than cork
			 * bytes that no credit covers.
			 */
			spin_unlock_bh(&rs->lock);
			iov_iter_revert(&msg->msg_iter, len);
			continue;
		} else {
			WRITE_ONCE(rs->sbuf_head, rs->sbuf_head + len);
			err = rstream_tx_flush_or_cork(rs, more, &behind);
		}
		spin_unlock_bh(&rs->lock);
		if (err) {
			if (err != -EPIPE)
				rstream_conn_reset(rs, ECONNRESET,
						   "cannot post a write");
			err = -EPIPE;
			break;
		}
		copied += len;
		spun = false;
		if (READ_ONCE(rs->stall_at))
			WRITE_ONCE(rs->stall_at, 0);
	}
	/*
	 * Bytes corked behind a write in flight go out with its completion:
	 * handle what the CQ holds now (it may have completed already), and
	 * arm it for the rest.
	 */
	if (behind && READ_ONCE(rs->sbuf_head) != READ_ONCE(rs->sbuf_sent))
		rstream_cq_poll(rs);
	/*
	 * Sends that follow within RSTREAM_CORK_NS are a stream; with
	 * TCP_NODELAY nothing gathers, and a time left from before it was
	 * set is only older than the window.
	 */
	if (copied && !READ_ONCE(rs->nodelay))
		WRITE_ONCE(rs->tx_last_send, local_clock());
out:
	/* Bytes sent stand; a reset's errno then waits for the next call. */
	if (!copied && err == -EPIPE)
		err = rstream_tx_error(rs);
	/* The send's own reference; with nothing sent, its number too. */
	if (marker && copied)
		rstream_tx_zc_order(rs, marker);
	else
		rstream_zc_put(NULL, marker);
	if (uarg) {
		if (copied)
			net_zcopy_put(uarg);
		else
			net_zcopy_put_abort(uarg, true);
	}
	release_sock(sk);
	if (copied)
		return copied;
	if (err == -EPIPE && !(flags & MSG_NOSIGNAL))
		send_sig(SIGPIPE, current, 0);
	/* A writer that will try again: the room may be in another's hands. */
	if (err == -EAGAIN)
		rstream_give_way();
	return err;
}
