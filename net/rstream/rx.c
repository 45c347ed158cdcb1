// SPDX-License-Identifier: GPL-2.0
/*
 * The receiving half of the data path: receive completions (in softirq,
 * or with BHs off in a process polling the CQ: cq.c) decode the peer's
 * immediates, check them and queue data notifications;
 * recvmsg() copies out of the ring and hands space and credits back.
 *
 * Receives carry no buffer (the data is already in the ring when the
 * completion arrives) and are reposted at once, whether or not the
 * application reads, as rsocket does.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/sched/signal.h>
#include <linux/uio.h>
#include <net/tcp_states.h>
#include <rdma/ib_verbs.h>

#include "rstream.h"

/* Post @n empty receives.  Any context. */
int rstream_post_recvs(struct rstream_sock *rs, unsigned int n)
{
	struct ib_recv_wr wr = {
		.wr_cqe = &rs->recv_cqe,
		.num_sge = 0,
	};
	int err = 0;

	while (n-- && !err)
		err = ib_post_recv(rs->qp, &wr, NULL);
	return err;
}

static void rstream_ring_sync(struct rstream_sock *rs, u32 off, u32 len)
{
	u32 first = min(len, rs->ring_size - off);

	rstream_buf_sync_for_cpu(&rs->ring, off, first);
	if (len > first)
		rstream_buf_sync_for_cpu(&rs->ring, 0, len - first);
}

/* rs->lock held: handle one immediate; *events are the waiters to wake. */
static int rstream_rx_imm(struct rstream_sock *rs, u32 imm, __poll_t *events,
			  const char **why)
{
	u32 data = rstream_imm_data(imm);
	u32 off;

	switch (rstream_imm_op(imm)) {
	case RSTREAM_OP_DATA:
		if (rstream_rx_data(&rs->rx, data, &off)) {
			*why = "data message outside its grant or credits";
			return -EPROTO;
		}
		rs->data_recv_at = jiffies;	/* TCP_INFO (options.c) */
		/*
		 * Make the bytes visible to the CPU here, while the mapping is
		 * certainly alive (a removed device unmaps the ring).
		 */
		rstream_ring_sync(rs, off, data);
		rs->rmsg[rs->rmsg_tail] = data;
		rs->rmsg_tail = (rs->rmsg_tail + 1) % rs->rmsg_size;
		*events = EPOLLIN | EPOLLRDNORM;
		return 0;
	case RSTREAM_OP_SGL:
		if (rstream_tx_credit_update(&rs->tx, data)) {
			*why = "credit update beyond the advertised credits";
			return -EPROTO;
		}
		/* Bytes corked when the peer had taken its credits back. */
		if (rstream_tx_release_locked(rs)) {
			*why = "cannot post a write";
			return -EIO;
		}
		*events = EPOLLOUT | EPOLLWRNORM;
		return 0;
	case RSTREAM_OP_IOMAP_SGL:
		/* We advertise no iomap; rsocket ignores these too. */
		return 0;
	case RSTREAM_OP_CTRL:
		if (data == RSTREAM_CTRL_DISCONNECT) {
			set_bit(RSTREAM_F_DISC_RECV, &rs->flags);
			*events = EPOLLIN | EPOLLRDNORM | EPOLLRDHUP |
				  EPOLLHUP | EPOLLOUT;
			return 0;
		}
		if (data == RSTREAM_CTRL_SHUTDOWN) {
			set_bit(RSTREAM_F_SHUT_RECV, &rs->flags);
			*events = EPOLLIN | EPOLLRDNORM | EPOLLRDHUP;
			return 0;
		}
		return 0;	/* keepalive and unknown values: ignored */
	default:
		*why = "reserved opcode in an immediate";
		return -EPROTO;
	}
}

/* Softirq. */
void rstream_recv_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rstream_sock *rs = cq->cq_context;
	const char *why = NULL;
	__poll_t events = 0;
	int err;

	if (unlikely(wc->status != IB_WC_SUCCESS)) {
		rstream_wc_failed(rs, wc);
		return;
	}
	if (unlikely(wc->opcode != IB_WC_RECV_RDMA_WITH_IMM ||
		     !(wc->wc_flags & IB_WC_WITH_IMM))) {
		rstream_conn_reset(rs, ECONNRESET,
				   "peer sent something other than a write with immediate");
		return;
	}

	spin_lock(&rs->lock);
	rs->alive_at = jiffies;		/* the peer wrote: alive (conn.c) */
	err = rstream_rx_imm(rs, be32_to_cpu(wc->ex.imm_data), &events, &why);
	if (!err && rstream_post_recvs(rs, 1)) {
		err = -EIO;
		why = "cannot repost a receive";
	}
	/* The first grant may have waited for this (tx.c). */
	if (unlikely(!test_bit(RSTREAM_F_PEER_SPOKE, &rs->flags)) && !err &&
	    !test_and_set_bit(RSTREAM_F_PEER_SPOKE, &rs->flags))
		rstream_tx_updates_locked(rs);
	spin_unlock(&rs->lock);

	if (err)
		rstream_conn_reset(rs, ECONNRESET, why);
	else if (events)
		rstream_wake(&rs->sk, events);
}

/* The peer will send nothing more: EOF once the ring is empty. */
static bool rstream_rx_eof(const struct rstream_sock *rs)
{
	return (rs->sk.sk_shutdown & RCV_SHUTDOWN) ||
	       test_bit(RSTREAM_F_SHUT_RECV, &rs->flags) ||
	       test_bit(RSTREAM_F_DISC_RECV, &rs->flags) ||
	       test_bit(RSTREAM_F_DEAD, &rs->flags) ||
	       rs->sk.sk_state == TCP_CLOSE;
}

/* Copy @len bytes at ring position @pos (a byte count) to @to. */
static int rstream_ring_copy(struct rstream_sock *rs, u64 pos, size_t len,
			     struct msghdr *msg, bool discard)
{
	if (discard)
		return 0;
	if (rstream_buf_copy_to_iter(&rs->ring, rs->ring_size, pos, len,
				     &msg->msg_iter) != len)
		return -EFAULT;
	return 0;
}

/* rs->lock held: @n bytes were read; retire messages, return space. */
static void rstream_rx_take(struct rstream_sock *rs, u32 n)
{
	while (n) {
		u32 *head = &rs->rmsg[rs->rmsg_head];
		u32 t = min(n, *head);

		*head -= t;
		n -= t;
		rstream_rx_consume(&rs->rx, t, !*head);
		if (!*head)
			rs->rmsg_head = (rs->rmsg_head + 1) % rs->rmsg_size;
	}
}

/* A blocking reader's busy loop ends: something to read or report. */
static bool rstream_rx_busy_done(struct rstream_sock *rs)
{
	return rstream_rx_ready(rs) || READ_ONCE(rs->sk.sk_err) ||
	       rstream_rx_eof(rs);
}

int rstream_rdma_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
			 int flags)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	bool peek = flags & MSG_PEEK;
	/* TCP's MSG_TRUNC: the bytes are consumed and thrown away. */
	bool discard = flags & MSG_TRUNC;
	size_t copied = 0, target;
	bool spun = false;
	long timeo;
	int err = 0;

	if (flags & MSG_OOB)
		return -EOPNOTSUPP;
	/*
	 * Zero-copy notifications (zc.c); an IPv6 connection's as IPv6's.
	 * A caller that loops on the error queue without poll() gets them
	 * as the writes complete: their completions are handled here.
	 */
	if (flags & MSG_ERRQUEUE) {
		rstream_cq_poll(rs);
		return rstream_zc_recv_err(sk, msg, len,
					   rs->peer_addr.ss_family == AF_INET6);
	}

	/*
	 * A reader about to wait for the peer: what we corked goes now (the
	 * peer may be waiting for it before it answers).
	 */
	rstream_tx_push(rs, false);
	/*
	 * Bytes the device has placed and no handler has seen yet, and the
	 * completions of our writes, which free room and control slots.
	 */
	rstream_cq_poll(rs);
	/*
	 * A nonblocking read that finds nothing, the common case of a reader
	 * that polls in a loop, needs neither the sock lock nor rs->lock.
	 * The end, an error or data arriving after these unlocked looks are
	 * what the next call or a poll() sees, as if they came a moment
	 * later; anything else takes the locked path below.
	 */
	if ((flags & MSG_DONTWAIT) && !rstream_rx_ready(rs) &&
	    rstream_state(sk) == TCP_ESTABLISHED && !READ_ONCE(sk->sk_err) &&
	    !READ_ONCE(sk->sk_shutdown) &&
	    !(READ_ONCE(rs->flags) & (BIT(RSTREAM_F_SHUT_RECV) |
				      BIT(RSTREAM_F_DISC_RECV) |
				      BIT(RSTREAM_F_DEAD)))) {
		/* A reader that will try again: the bytes may be on the way. */
		rstream_give_way();
		return -EAGAIN;
	}

	lock_sock(sk);
	if (sk->sk_state == TCP_LISTEN) {
		err = -ENOTCONN;
		goto out;
	}
	timeo = sock_rcvtimeo(sk, flags & MSG_DONTWAIT);
	target = sock_rcvlowat(sk, flags & MSG_WAITALL, len);

	while (copied < len) {
		bool eof;
		u32 ready;
		u64 pos;

		/*
		 * Pairs with the completion handler: the bytes are there.
		 * The end of stream is read in the same section: the handler
		 * counts a message's bytes before it handles a SHUTDOWN or
		 * DISCONNECT behind it, so an end seen here has every byte
		 * before it in @ready.  Seen later, it could overtake them.
		 */
		spin_lock_bh(&rs->lock);
		ready = rs->rx.written - rs->rx.consumed;
		pos = rs->rx.consumed + (peek ? copied : 0);
		eof = rstream_rx_eof(rs);
		spin_unlock_bh(&rs->lock);

		if (peek)
			ready = ready > copied ? ready - copied : 0;
		if (ready) {
			size_t n = min_t(size_t, ready, len - copied);

			err = rstream_ring_copy(rs, pos, n, msg, discard);
			if (err)
				break;
			copied += n;
			spun = false;
			if (!peek) {
				spin_lock_bh(&rs->lock);
				rstream_rx_take(rs, n);
				rstream_tx_updates_locked(rs);
				spin_unlock_bh(&rs->lock);
			}
			continue;
		}
		if (copied >= target)
			break;
		if (copied && (sk->sk_err || eof))
			break;
		if (sk->sk_err) {
			err = sock_error(sk);
			break;
		}
		if (eof) {
			/* Dead with an error: the error, not EOF (see reset). */
			smp_rmb();
			if (sk->sk_err) {
				err = sock_error(sk);
				break;
			}
			if (sk->sk_state == TCP_CLOSE &&
			    !test_bit(RSTREAM_F_CONNECTED, &rs->flags))
				err = -ENOTCONN;
			break;
		}
		err = rstream_may_wait(timeo);
		if (err)
			break;
		/*
		 * Spin (busy polling) before the sleep, once for each wait
		 * for more; not for more than a peek has seen, which the
		 * spin's end does not count.
		 */
		if (!spun && !(peek && copied)) {
			spun = true;
			if (rstream_cq_busy_poll(rs, rstream_rx_busy_done,
						 &timeo))
				continue;
		}
		add_wait_queue(sk_sleep(sk), &wait);
		/*
		 * A waiter now: this poll arms the CQ, and what it finds in
		 * it may spare the sleep (the condition is tested first).
		 */
		rstream_cq_poll(rs);
		sk_wait_event(sk, &timeo, rstream_rx_ready(rs) >
			      (peek ? copied : 0) || sk->sk_err ||
			      rstream_rx_eof(rs), &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
	}
out:
	release_sock(sk);
	/* A grant or credit update waits for a control write to complete. */
	if (test_bit(RSTREAM_F_UPDATES_HELD, &rs->flags))
		rstream_cq_poll(rs);
	if (copied)
		return copied;
	if (err == -EAGAIN)
		rstream_give_way();
	return err;
}
