// SPDX-License-Identifier: GPL-2.0
/*
 * The verbs resources of one connection and their life cycle.
 *
 * rstream manages its QP itself instead of handing it to rdma_cm, because
 * rsockets advertises the rkeys of the receive ring and the target SGL in
 * the CM private data: the regions must be registered (IB_WR_REG_MR, which
 * needs a send queue in RTS) before the peer can use those keys.
 *  - passive side: on CONNECT_REQUEST the QP goes INIT -> RTR -> RTS, the
 *    target SGL is registered, then rdma_accept() sends the REP with its
 *    key and no receive buffer.  The rings come only with the RTU
 *    (rstream_conn_alloc_data()): a peer that sends requests and never
 *    completes them holds a QP and a page each, not two rings, as TCP
 *    keeps little for a half-open connection;
 *  - active side: the keys are those of the prepared regions; on
 *    CONNECT_RESPONSE the QP goes to RTS, the registrations complete, and
 *    only then does the RTU let the peer start writing.
 * Both run in the CM handler (process context, the id's handler mutex held).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/slab.h>
#include <net/tcp.h>
#include <rdma/rdma_cm.h>

#include "rstream.h"

#define RSTREAM_REG_WRS		3	/* ring, target SGL, staging */
#define RSTREAM_DRAIN_WRS	1	/* ib_drain_qp()'s marker */
#define RSTREAM_REG_TIMEOUT	(5 * HZ)
#define RSTREAM_DISC_TIMEOUT	(2 * HZ)
#define RSTREAM_DREP_WAIT	(HZ / 2)

struct workqueue_struct *rstream_wq;

static void rstream_reg_done(struct ib_cq *cq, struct ib_wc *wc)
{
	struct rstream_sock *rs = cq->cq_context;

	if (wc->status != IB_WC_SUCCESS)
		rs->reg_status = -EIO;
	if (atomic_dec_and_test(&rs->reg_pending))
		complete(&rs->reg_done);
}

/*
 * QP events come in any context.  COMM_EST means the peer's first message
 * arrived before the RTU: rdma_cm must hear of it, or the passive side
 * waits for an RTU that may be lost.
 */
static void rstream_qp_event(struct ib_event *event, void *context)
{
	struct rstream_sock *rs = context;
	unsigned long flags;

	switch (event->event) {
	case IB_EVENT_COMM_EST:
		/* rdma_notify() only takes the CM's spinlock. */
		spin_lock_irqsave(&rs->qp_event_lock, flags);
		if (rs->cm_id)
			rdma_notify(rs->cm_id, IB_EVENT_COMM_EST);
		spin_unlock_irqrestore(&rs->qp_event_lock, flags);
		break;
	case IB_EVENT_SQ_DRAINED:
	case IB_EVENT_QP_LAST_WQE_REACHED:
		break;
	default:
		rstream_conn_reset(rs, ECONNRESET, ib_event_msg(event->event));
		break;
	}
}

/*
 * Forget the connection's id, which the caller is about to destroy, so
 * that the QP's event handler, which can run until the QP is destroyed,
 * no longer uses it.  Returns the id.  rs->cm_lock held.
 */
struct rdma_cm_id *rstream_cm_id_detach(struct rstream_sock *rs)
{
	struct rdma_cm_id *id = rs->cm_id;

	lockdep_assert_held(&rs->cm_lock);
	spin_lock_irq(&rs->qp_event_lock);
	rs->cm_id = NULL;
	spin_unlock_irq(&rs->qp_event_lock);
	return id;
}

/*
 * Destroy the id, if any.  Process context, no lock held (rdma_destroy_id()
 * waits for the CM handler, which takes cm_lock).
 */
void rstream_cm_drop_id(struct rstream_sock *rs)
{
	struct rdma_cm_id *id;

	mutex_lock(&rs->cm_lock);
	id = rstream_cm_id_detach(rs);
	mutex_unlock(&rs->cm_lock);
	if (id)
		rdma_destroy_id(id);
}

/*
 * Move the QP to @state with the attributes rdma_cm gives for it.  Once
 * the QP has left RESET it must be drained before it is destroyed, and
 * only then: a drain moves it to the error state, which RESET cannot go
 * to (ib_drain_qp() warns).
 */
static int rstream_qp_to(struct rstream_sock *rs, struct rdma_cm_id *id,
			 enum ib_qp_state state)
{
	struct ib_qp_attr attr = { .qp_state = state };
	int mask, err;

	err = rdma_init_qp_attr(id, &attr, &mask);
	if (!err)
		err = ib_modify_qp(rs->qp, &attr, mask);
	if (!err)
		set_bit(RSTREAM_F_QP_LIVE, &rs->flags);
	return err;
}

/* Work requests the send queue holds: data, registrations, a drain. */
u32 rstream_conn_send_wrs(u32 sq_size)
{
	return sq_size + RSTREAM_REG_WRS + RSTREAM_DRAIN_WRS;
}

/* Receives: one per message credit, the control slots', a drain. */
u32 rstream_conn_recv_wrs(u32 rq_size)
{
	return rq_size + RSTREAM_CTRL_SLOTS + RSTREAM_DRAIN_WRS;
}

/* Entries of the completion queue: every kind of work request in flight. */
u32 rstream_conn_cq_entries(u32 sq_size, u32 rq_size)
{
	return sq_size + rq_size + RSTREAM_CTRL_SLOTS + RSTREAM_REG_WRS +
	       2 * RSTREAM_DRAIN_WRS;
}

/*
 * The queue sizes the socket asked for (RDMA_SQSIZE, RDMA_RQSIZE, up to
 * 65534 each), cut down to what the device allows: its largest queue and
 * its largest completion queue, which holds both.
 */
static void rstream_conn_fit_queues(struct rstream_sock *rs,
				    const struct ib_device_attr *attrs)
{
	u32 max_wr = max_t(u32, attrs->max_qp_wr, RSTREAM_QP_MIN + 8) - 8;
	u32 max_cqe = attrs->max_cqe, half;

	rs->sq_size = clamp_t(u32, rs->sq_size, RSTREAM_QP_MIN, max_wr);
	rs->rq_size = clamp_t(u32, rs->rq_size, RSTREAM_QP_MIN, max_wr);
	if (rstream_conn_cq_entries(rs->sq_size, rs->rq_size) <= max_cqe)
		return;
	/* Share the completion queue between the two, each its half. */
	half = (max_t(u32, max_cqe, rstream_conn_cq_entries(2 * RSTREAM_QP_MIN, 0)) -
		rstream_conn_cq_entries(0, 0)) / 2;
	rs->sq_size = clamp_t(u32, rs->sq_size, RSTREAM_QP_MIN, half);
	rs->rq_size = clamp_t(u32, rs->rq_size, RSTREAM_QP_MIN, half);
}

/* The receive ring and the send staging ring.  The memcg is the socket's. */
static int rstream_conn_alloc_rings(struct rstream_sock *rs)
{
	int err;

	err = rstream_buf_alloc(&rs->ring, rs->pd, rs->ring_size,
				DMA_FROM_DEVICE,
				IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE);
	if (!err)
		err = rstream_buf_alloc(&rs->sbuf, rs->pd,
					rs->sbuf_size + RSTREAM_CTRL_BYTES,
					DMA_TO_DEVICE, IB_ACCESS_LOCAL_WRITE);
	return err;
}

/*
 * Post the registrations of the regions that exist and wait for them: the
 * QP is in RTS.  CM handler.
 */
static int rstream_conn_register(struct rstream_sock *rs,
				 struct rstream_buf **bufs, int n)
{
	struct ib_reg_wr reg[RSTREAM_REG_WRS];
	int i, err;

	atomic_set(&rs->reg_pending, n);
	rs->reg_status = 0;
	reinit_completion(&rs->reg_done);
	for (i = 0; i < n; i++) {
		rstream_buf_reg_wr(bufs[i], &reg[i]);
		reg[i].wr.wr_cqe = &rs->reg_cqe;
		reg[i].wr.send_flags = IB_SEND_SIGNALED;
		reg[i].wr.next = i + 1 < n ? &reg[i + 1].wr : NULL;
	}
	err = ib_post_send(rs->qp, &reg[0].wr, NULL);
	if (err)
		return err;
	if (!wait_for_completion_timeout(&rs->reg_done, RSTREAM_REG_TIMEOUT))
		return -ETIMEDOUT;
	return rs->reg_status;
}

/*
 * Create the PD, CQ, QP and the regions of a connection on the device
 * rdma_cm chose for @id, and post the receives: all three regions for an
 * active side (@rings), the target SGL alone for a passive one.  On an
 * error the caller frees what exists, once, with rstream_conn_destroy().
 * The socket has been charged for all of it (mem.c); what is allocated
 * here also counts against the socket's memory cgroup.  CM handler.
 */
int rstream_conn_create(struct rstream_sock *rs, struct rdma_cm_id *id,
			bool rings)
{
	struct ib_device *ibdev = id->device;
	struct ib_qp_init_attr attr = {};
	struct mem_cgroup *old_memcg;
	int err;

	/*
	 * rdma_cm tells us of the device's removal only through an id: once
	 * a teardown has destroyed the id (before the QP when set-up may still
	 * be running), nothing would stop the device from being freed under
	 * what is left.  So the device is held until rstream_conn_destroy().
	 */
	if (!ib_device_try_get(ibdev))
		return -ENODEV;
	rs->ibdev = ibdev;
	rs->port = id->port_num;

	rstream_conn_fit_queues(rs, &ibdev->attrs);
	old_memcg = set_active_memcg(rstream_memcg(&rs->sk));
	rs->pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(rs->pd)) {
		err = PTR_ERR(rs->pd);
		rs->pd = NULL;
		goto out;
	}
	err = rstream_cq_create(rs, rstream_conn_cq_entries(rs->sq_size,
							    rs->rq_size));
	if (err)
		goto out;

	attr.event_handler = rstream_qp_event;
	attr.qp_context = rs;
	attr.send_cq = rs->cq;
	attr.recv_cq = rs->cq;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	attr.cap.max_send_wr = rstream_conn_send_wrs(rs->sq_size);
	attr.cap.max_recv_wr = rstream_conn_recv_wrs(rs->rq_size);
	/*
	 * Two for the staging ring, which wraps; a zero-copy write's pages
	 * take one each (zc.c), as many as the device allows.
	 */
	attr.cap.max_send_sge = clamp_t(u32, rs->ibdev->attrs.max_send_sge, 2,
					RSTREAM_ZC_PAGES);
	attr.cap.max_recv_sge = 1;
	attr.cap.max_inline_data = rs->inline_size;
	rs->qp = ib_create_qp(rs->pd, &attr);
	if (IS_ERR(rs->qp) && attr.cap.max_send_sge > 2) {
		/*
		 * Larger work requests may cut the queue a device allows:
		 * zero-copy writes then take two pages at a time.
		 */
		attr.cap.max_send_sge = 2;
		rs->qp = ib_create_qp(rs->pd, &attr);
	}
	if (IS_ERR(rs->qp) && rs->inline_size) {
		/* Some devices refuse the inline size: go without. */
		attr.cap.max_inline_data = 0;
		rs->inline_size = 0;
		rs->qp = ib_create_qp(rs->pd, &attr);
	}
	if (IS_ERR(rs->qp)) {
		err = PTR_ERR(rs->qp);
		rs->qp = NULL;
		goto out;
	}
	/*
	 * A device may give more than was asked (soft-RoCE's inline room is
	 * that of the scatter entries): the threshold stays the one asked.
	 */
	rs->inline_size = min_t(u32, rs->inline_size,
				attr.cap.max_inline_data);
	rs->tx_pages = min_t(u32, attr.cap.max_send_sge, RSTREAM_ZC_PAGES);

	err = rstream_buf_alloc(&rs->sgl, rs->pd, RSTREAM_SGL_BYTES,
				DMA_BIDIRECTIONAL,
				IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE);
	if (!err && rings)
		err = rstream_conn_alloc_rings(rs);
	if (err)
		goto out;

	rs->rmsg_size = rs->rq_size + 1;
	rs->rmsg = kvcalloc(rs->rmsg_size, sizeof(*rs->rmsg),
			    GFP_KERNEL_ACCOUNT);
	rs->sq.mask = rstream_sq_nslots(rs->sq_size) - 1;
	rs->sq.slots = kvcalloc(rs->sq.mask + 1, sizeof(*rs->sq.slots),
				GFP_KERNEL_ACCOUNT);
	if (!rs->rmsg || !rs->sq.slots) {
		err = -ENOMEM;
		goto out;
	}

	rs->send_cqe.done = rstream_send_done;
	rs->recv_cqe.done = rstream_recv_done;
	rs->reg_cqe.done = rstream_reg_done;
	set_bit(RSTREAM_F_VERBS, &rs->flags);

	err = rstream_qp_to(rs, id, IB_QPS_INIT);
	if (!err)
		err = rstream_post_recvs(rs, rs->rq_size + RSTREAM_CTRL_SLOTS);
out:
	set_active_memcg(old_memcg);
	return err;
}

/* What our side tells the peer in the private data. */
void rstream_conn_build_params(struct rstream_sock *rs,
			       struct rstream_conn_params *p)
{
	memset(p, 0, sizeof(*p));
	p->credits = rs->rq_size;
	p->sgl_addr = rstream_buf_iova(&rs->sgl, 0);
	p->sgl_key = rs->sgl.mr->rkey;
	/* A passive side has no ring yet: no first buffer (see above). */
	if (rs->ring.mr) {
		p->buf_addr = rstream_buf_iova(&rs->ring, 0);
		p->buf_key = rs->ring.mr->rkey;
		p->buf_length = rs->ring_size / 2;
	}
}

/*
 * The peer's parameters are in rs->peer: bring the QP to RTS, register
 * the regions and wait for the registrations, and set up both directions'
 * state.  CM handler, before the REP (passive) or the RTU (active) goes
 * out, so the peer cannot use our keys before they are valid.
 */
int rstream_conn_start(struct rstream_sock *rs, struct rdma_cm_id *id)
{
	struct rstream_buf *bufs[RSTREAM_REG_WRS] = { &rs->sgl };
	bool rings = rs->ring.mr;
	int err;

	/* Again at INIT: the access flags come from the CM's exchange. */
	err = rstream_qp_to(rs, id, IB_QPS_INIT);
	if (!err)
		err = rstream_qp_to(rs, id, IB_QPS_RTR);
	if (!err)
		err = rstream_qp_to(rs, id, IB_QPS_RTS);
	if (err)
		return err;

	if (rings) {
		bufs[1] = &rs->ring;
		bufs[2] = &rs->sbuf;
	}
	err = rstream_conn_register(rs, bufs, rings ? RSTREAM_REG_WRS : 1);
	if (err)
		return err;

	spin_lock_bh(&rs->lock);
	rstream_rx_init(&rs->rx, rs->ring_size, rs->rq_size, rings);
	rstream_tx_init(&rs->tx, &rs->peer);
	/*
	 * Our grants go to the peer's entries 1, 0, 1, ... after a first
	 * buffer in the private data; without one, to 0, 1, 0, ...
	 */
	rs->remote_sge = rings ? 1 : 0;
	spin_unlock_bh(&rs->lock);
	return 0;
}

/*
 * A passive side's connection is established: allocate and register the
 * rings it did not take while half-open.  Nothing posts before the
 * connection reads as connected, so nothing uses them before this
 * returns.  CM handler; the child is not yet in the accept queue.
 */
int rstream_conn_alloc_data(struct rstream_sock *rs)
{
	struct rstream_buf *bufs[] = { &rs->ring, &rs->sbuf };
	struct mem_cgroup *old_memcg;
	int err = -ENOTCONN;

	mutex_lock(&rs->cm_lock);
	/*
	 * A device removal may have freed the connection meanwhile; one that
	 * was reset (its peer broke a rule) is not worth its rings.
	 */
	if (!test_bit(RSTREAM_F_VERBS, &rs->flags) ||
	    test_bit(RSTREAM_F_DEAD, &rs->flags) || rs->ring.mr)
		goto out;
	old_memcg = set_active_memcg(rstream_memcg(&rs->sk));
	err = rstream_conn_alloc_rings(rs);
	set_active_memcg(old_memcg);
	if (!err)
		err = rstream_conn_register(rs, bufs, ARRAY_SIZE(bufs));
out:
	mutex_unlock(&rs->cm_lock);
	return err;
}

/*
 * Liveness, TCP's way.  The device's own retries cannot tell a dead peer
 * in time: rsockets connect with a retry count of 7, which soft-RoCE
 * takes for "retry forever", and a peer that died idle sends nothing to
 * notice.  So a timer does what TCP's keepalive and retransmission
 * timers do, with the same options and defaults:
 *  - SO_KEEPALIVE: a connection that no successful completion has shown
 *    alive for TCP_KEEPIDLE gets a probe, rsocket's (tx.c), and another
 *    each TCP_KEEPINTVL; TCP_KEEPCNT of them unanswered (or, with a user
 *    timeout, that long) reset it with ETIMEDOUT.  A probe the device is
 *    still retrying is not posted again: the next interval counts it.
 *  - writes in flight that nothing has completed for TCP_USER_TIMEOUT,
 *    or by default for as long as TCP retransmits (net.ipv4.tcp_retries2
 *    at the minimum RTO, about 15 minutes), reset it with ETIMEDOUT;
 *  - a peer that leaves no room to write into is probed, as TCP probes a
 *    closed window, so that its death is a write unanswered; alive, it
 *    is waited for, unless TCP_USER_TIMEOUT is set and a sender has
 *    waited that long: as TCP, that is ETIMEDOUT too.
 * The timer holds a reference on the socket while it is pending.
 */
u32 rstream_conn_keepidle(const struct rstream_sock *rs)
{
	return READ_ONCE(rs->keepidle) ?:
	       READ_ONCE(sock_net(&rs->sk)->ipv4.sysctl_tcp_keepalive_time);
}

u32 rstream_conn_keepintvl(const struct rstream_sock *rs)
{
	return READ_ONCE(rs->keepintvl) ?:
	       READ_ONCE(sock_net(&rs->sk)->ipv4.sysctl_tcp_keepalive_intvl);
}

u8 rstream_conn_keepcnt(const struct rstream_sock *rs)
{
	return READ_ONCE(rs->keepcnt) ?:
	       READ_ONCE(sock_net(&rs->sk)->ipv4.sysctl_tcp_keepalive_probes);
}

/* How long writes may go unanswered, in jiffies: as tcp_model_timeout(). */
static unsigned long rstream_write_limit(const struct rstream_sock *rs)
{
	u32 user = READ_ONCE(rs->user_timeout);
	unsigned int thresh = ilog2(TCP_RTO_MAX / TCP_RTO_MIN);
	unsigned int retries;

	/* Never under TCP's first retransmission: 4 looks, none in vain. */
	if (user)
		return max_t(unsigned long, msecs_to_jiffies(user),
			     TCP_RTO_MIN);
	retries = READ_ONCE(sock_net(&rs->sk)->ipv4.sysctl_tcp_retries2);
	if (retries <= thresh)
		return ((2 << retries) - 1) * TCP_RTO_MIN;
	return ((2 << thresh) - 1) * TCP_RTO_MIN +
	       (retries - thresh) * TCP_RTO_MAX;
}

/*
 * rs->lock held: what the timer decides now.  Returns why the connection
 * is dead, or NULL and the time to look again in @next.
 */
static const char *rstream_live_check(struct rstream_sock *rs,
				      unsigned long now, unsigned long *next)
{
	unsigned long limit = rstream_write_limit(rs), since, idle, at;

	/* The probe's own completion answers it (a failure resets). */
	if (rs->probe_out && (s32)(rs->sq.done - rs->probe_seq) > 0) {
		rs->probe_out = false;
		rs->probes = 0;
	}
	/*
	 * As TCP's window probes: a peer that leaves us no room to write is
	 * probed, so that its death is a write unanswered like any other.
	 */
	if (!rs->probe_out && rstream_tx_shut_out_locked(rs) &&
	    !rstream_tx_probe_locked(rs, &rs->probe_seq))
		rs->probe_out = true;
	/*
	 * As TCP's window probes under TCP_USER_TIMEOUT: a sender the peer
	 * has left without room for that long gives up, answers or not.
	 */
	since = READ_ONCE(rs->stall_at);
	if (since && !rstream_tx_shut_out_locked(rs))
		WRITE_ONCE(rs->stall_at, 0);
	else if (since && READ_ONCE(rs->user_timeout) &&
		 time_after_eq(now, since + limit))
		return "TCP_USER_TIMEOUT: the peer left no room to write";
	/* Writes may start any time: look again within a quarter. */
	*next = now + limit / 4;
	/* Writes unanswered: from the later of their start and the last answer. */
	if (rstream_sq_inflight(&rs->sq)) {
		since = time_after(rs->alive_at, rs->busy_at) ? rs->alive_at :
								 rs->busy_at;
		if (time_after_eq(now, since + limit))
			return READ_ONCE(rs->user_timeout) ?
			       "TCP_USER_TIMEOUT: writes unanswered" :
			       "writes unanswered for TCP's retransmission time";
		if (time_before(since + limit, *next))
			*next = since + limit;
	}
	if (!READ_ONCE(rs->keepalive))
		return NULL;

	/* Anything else that completed after the last probe answers it. */
	if (rs->probes && time_after(rs->alive_at, rs->probe_at))
		rs->probes = 0;
	/* Idle since the last sign of life, or since SO_KEEPALIVE was set. */
	since = time_after(rs->alive_at, rs->keepalive_at) ? rs->alive_at :
							     rs->keepalive_at;
	idle = now - since;
	if (rstream_data_inflight(rs)) {
		/*
		 * As TCP's: no probe while data is in flight, but a look
		 * again a keepalive time on.  Nothing brings the timer back
		 * when the data completes, and the writes' own look may be
		 * minutes away: a connection that went idle just after
		 * would go unwatched that long.
		 */
		at = now + rstream_conn_keepidle(rs);
	} else if (idle < rstream_conn_keepidle(rs)) {
		at = since + rstream_conn_keepidle(rs);
	} else {
		if (READ_ONCE(rs->user_timeout) ? rs->probes && idle >= limit :
		    rs->probes >= rstream_conn_keepcnt(rs))
			return "keepalive: the peer did not answer";
		if (!rs->probe_out && !rstream_tx_probe_locked(rs,
							       &rs->probe_seq))
			rs->probe_out = true;
		rs->probes++;
		rs->probe_at = now;
		at = now + rstream_conn_keepintvl(rs);
	}
	if (time_before(at, *next))
		*next = at;
	return NULL;
}

/* Whether the timer has a connection to watch: rs->lock held. */
static bool rstream_live_watched(const struct rstream_sock *rs)
{
	return test_bit(RSTREAM_F_CONNECTED, &rs->flags) &&
	       !test_bit(RSTREAM_F_DEAD, &rs->flags) &&
	       !test_bit(RSTREAM_F_DISC_RECV, &rs->flags);
}

/* Timer (softirq). */
static void rstream_live_timer(struct timer_list *t)
{
	struct rstream_sock *rs = from_timer(rs, t, live_timer);
	struct sock *sk = &rs->sk;
	const char *why = NULL;
	unsigned long next = 0;
	bool polled;

	/*
	 * What completed meanwhile: the probe's answer, the peer's writes.
	 * If another poller has the CQ, its completions may not be counted
	 * yet: no verdict this time, look again in a tick.
	 */
	polled = rstream_cq_try_drain(rs);
	spin_lock(&rs->lock);
	if (rstream_live_watched(rs)) {
		why = rstream_live_check(rs, jiffies, &next);
		if (why && !polled) {
			why = NULL;
			next = jiffies + 1;
		}
		if (!why)
			sk_reset_timer(sk, &rs->live_timer, next);
	}
	spin_unlock(&rs->lock);
	if (why)
		rstream_conn_reset(rs, ETIMEDOUT, why);
	sock_put(sk);
}

/*
 * The settings changed, or the connection was made: have the timer look
 * now.  Never after the connection is gone (DEAD is set under rs->lock
 * before the timer is stopped).  Process context.
 */
void rstream_conn_live_update(struct rstream_sock *rs)
{
	spin_lock_bh(&rs->lock);
	if (rstream_live_watched(rs))
		sk_reset_timer(&rs->sk, &rs->live_timer, jiffies);
	spin_unlock_bh(&rs->lock);
}

/*
 * Data may move: send the grant of the second half of our ring, as
 * rsocket does the first time it looks at its completion queue, and
 * start the liveness timer.
 */
void rstream_conn_established(struct rstream_sock *rs)
{
	spin_lock_bh(&rs->lock);
	rs->alive_at = jiffies;
	rs->keepalive_at = rs->alive_at;
	rs->probes = 0;
	rs->probe_out = false;
	spin_unlock_bh(&rs->lock);
	set_bit(RSTREAM_F_CONNECTED, &rs->flags);
	rstream_conn_live_update(rs);
	rstream_tx_updates(rs);
	rstream_wake(&rs->sk, EPOLLOUT | EPOLLWRNORM);
}

/*
 * Free the QP, CQ, regions and PD, and let go of the device.  After this no
 * completion handler runs and the device holds nothing of ours; the pages
 * of the rings stay until the socket is destroyed.  Process context,
 * rs->cm_lock held or the connection not yet visible to anyone else.
 */
void rstream_conn_destroy(struct rstream_sock *rs)
{
	spin_lock_bh(&rs->lock);
	set_bit(RSTREAM_F_DEAD, &rs->flags);
	spin_unlock_bh(&rs->lock);
	/* DEAD first: nothing starts the timer again (see above). */
	sk_stop_timer_sync(&rs->sk, &rs->live_timer);

	if (rs->qp) {
		if (test_and_clear_bit(RSTREAM_F_QP_LIVE, &rs->flags)) {
			/* The drain waits for its marker's completion. */
			rstream_cq_poll(rs);
			ib_drain_qp(rs->qp);
		}
		ib_destroy_qp(rs->qp);
		rs->qp = NULL;
	}
	rstream_cq_destroy(rs);
	/* Nothing completes any more: unmap with the device still ours. */
	rstream_tx_zc_drop(rs);
	rstream_buf_unregister(&rs->ring);
	rstream_buf_unregister(&rs->sgl);
	rstream_buf_unregister(&rs->sbuf);
	if (rs->pd) {
		ib_dealloc_pd(rs->pd);
		rs->pd = NULL;
	}
	if (rs->ibdev) {
		ib_device_put(rs->ibdev);
		rs->ibdev = NULL;
	}
	clear_bit(RSTREAM_F_VERBS, &rs->flags);
	complete_all(&rs->disc_done);
	complete_all(&rs->dreq_done);
}

/*
 * Process context: move the QP to the error state so that everything in
 * flight is flushed, and tell the peer with a DREQ.
 */
static void rstream_reset_work(struct work_struct *work)
{
	struct rstream_sock *rs = container_of(work, struct rstream_sock,
					       reset_work);
	struct ib_qp_attr attr = { .qp_state = IB_QPS_ERR };

	mutex_lock(&rs->cm_lock);
	if (rs->qp)
		ib_modify_qp(rs->qp, &attr, IB_QP_STATE);
	if (rs->cm_id)
		rdma_disconnect(rs->cm_id);
	mutex_unlock(&rs->cm_lock);
	sock_put(&rs->sk);
}

/*
 * Stop the connection with @err (a positive errno) for @why.  Any
 * context, including the completion handlers; only the first call counts.
 */
void rstream_conn_reset(struct rstream_sock *rs, int err, const char *why)
{
	struct sock *sk = &rs->sk;

	if (test_bit(RSTREAM_F_DEAD, &rs->flags))
		return;
	/*
	 * The error first: a reader that sees the connection dead then
	 * finds why (test_and_set_bit() orders the two; see rx.c).
	 */
	if (!READ_ONCE(sk->sk_err))
		WRITE_ONCE(sk->sk_err, err);
	if (test_and_set_bit(RSTREAM_F_DEAD, &rs->flags))
		return;
	net_warn_ratelimited("connection %pISpc -> %pISpc reset: %s\n",
			     &rs->local_addr, &rs->peer_addr, why);
	sock_hold(sk);
	if (!queue_work(rstream_wq, &rs->reset_work))
		sock_put(sk);
	rstream_wake(sk, EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP);
}

/*
 * Softirq: a work request of the connection failed.  Flushes are expected
 * once we (a reset, the teardown) or the peer's DREQ moved the QP to the
 * error state.  A flush before either means the device put the QP there on
 * its own: soft-RoCE does when it cannot allocate a packet, and raises no
 * QP event.  Nothing will complete on that QP again, so the connection is
 * reset here, or both ends would wait for each other forever.
 */
void rstream_wc_failed(struct rstream_sock *rs, const struct ib_wc *wc)
{
	switch (wc->status) {
	case IB_WC_WR_FLUSH_ERR:
		if (test_bit(RSTREAM_F_DEAD, &rs->flags) ||
		    test_bit(RSTREAM_F_DISC_RECV, &rs->flags))
			return;
		rstream_conn_reset(rs, ECONNRESET,
				   "the device flushed the queue pair");
		return;
	case IB_WC_RETRY_EXC_ERR:
	case IB_WC_RNR_RETRY_EXC_ERR:
		rstream_conn_reset(rs, ETIMEDOUT, ib_wc_status_msg(wc->status));
		return;
	default:
		rstream_conn_reset(rs, ECONNRESET, ib_wc_status_msg(wc->status));
		return;
	}
}

/*
 * Stop the works of the last attempt, then destroy the CM id and the
 * connection's verbs resources, in the order that keeps rdma_cm's handler
 * and the QP's event handler off freed memory.  Used when the socket
 * closes and when it starts again after a failed attempt.  Process
 * context, no lock of the connection held (rdma_destroy_id() waits for the
 * handler, which takes cm_lock).
 */
void rstream_conn_stop(struct rstream_sock *rs)
{
	struct rdma_cm_id *id;

	/* A queued reset and a connect deadline hold references of their own. */
	if (cancel_work_sync(&rs->reset_work))
		sock_put(&rs->sk);
	if (cancel_delayed_work_sync(&rs->connect_work))
		sock_put(&rs->sk);

	/*
	 * Not connected: set-up may be running in the handler, so the id goes
	 * first, waiting for it.  The QP then outlives the id, and detaching
	 * the id keeps the QP's event handler from seeing it.
	 */
	if (!test_bit(RSTREAM_F_CONNECTED, &rs->flags))
		rstream_cm_drop_id(rs);
	mutex_lock(&rs->cm_lock);
	id = rstream_cm_id_detach(rs);
	rstream_conn_destroy(rs);
	mutex_unlock(&rs->cm_lock);
	/* Connected: the QP is gone first, so no QP event can use the id. */
	if (id)
		rdma_destroy_id(id);
}

/*
 * An abortive close (workqueue): the DREQ first, so that the peer finds
 * no DISCONNECT before it and reads a reset (cm.c).  A kernel peer
 * answers once it has decided, and that is all; a userspace rsocket
 * answers only when it closes, so after RSTREAM_DREP_WAIT it gets the
 * DISCONNECT all the same: its
 * completion is what wakes a userspace rsocket blocked in rsend() or
 * rrecv(), where librdmacm v44 watches no connection event.
 */
static void rstream_conn_abort(struct rstream_sock *rs)
{
	mutex_lock(&rs->cm_lock);
	if (rs->cm_id)
		rdma_disconnect(rs->cm_id);
	mutex_unlock(&rs->cm_lock);
	/* Answered: the peer has decided, and its QP may be gone already. */
	if (wait_for_completion_timeout(&rs->dreq_done, RSTREAM_DREP_WAIT))
		return;
	if (!rstream_send_ctrl(rs, RSTREAM_CTRL_DISCONNECT))
		wait_for_completion_timeout(&rs->disc_done,
					    RSTREAM_DISC_TIMEOUT);
}

/*
 * Send our DISCONNECT if the peer may still be listening, so that it sees
 * the end of the stream in band (a DREQ alone reads as a reset: cm.c),
 * then free everything.
 * Workqueue (process context), holding a reference on the socket.
 */
static void rstream_teardown_work(struct work_struct *work)
{
	struct rstream_sock *rs = container_of(work, struct rstream_sock,
					       teardown_work);

	if (test_bit(RSTREAM_F_CONNECTED, &rs->flags) &&
	    !test_bit(RSTREAM_F_DEAD, &rs->flags) &&
	    !test_bit(RSTREAM_F_DISC_RECV, &rs->flags)) {
		if (test_bit(RSTREAM_F_ABORT, &rs->flags))
			rstream_conn_abort(rs);
		else if (!rstream_send_ctrl(rs, RSTREAM_CTRL_DISCONNECT))
			wait_for_completion_timeout(&rs->disc_done,
						    RSTREAM_DISC_TIMEOUT);
	}
	rstream_conn_stop(rs);
	sock_put(&rs->sk);
}

/* Queue the teardown once; the caller's reference goes with it. */
void rstream_conn_teardown(struct rstream_sock *rs)
{
	if (test_and_set_bit(RSTREAM_F_TEARDOWN, &rs->flags)) {
		sock_put(&rs->sk);
		return;
	}
	queue_work(rstream_wq, &rs->teardown_work);
}

void rstream_conn_init(struct rstream_sock *rs)
{
	spin_lock_init(&rs->lock);
	spin_lock_init(&rs->zc_lock);
	mutex_init(&rs->cm_lock);
	spin_lock_init(&rs->qp_event_lock);
	init_completion(&rs->reg_done);
	init_completion(&rs->disc_done);
	init_completion(&rs->dreq_done);
	INIT_WORK(&rs->reset_work, rstream_reset_work);
	INIT_WORK(&rs->teardown_work, rstream_teardown_work);
	timer_setup(&rs->live_timer, rstream_live_timer, 0);
	INIT_LIST_HEAD(&rs->embryos);
	INIT_LIST_HEAD(&rs->accept_queue);
	INIT_LIST_HEAD(&rs->accept_node);
}

/*
 * The memory of a connection that is over (after rstream_conn_destroy()):
 * from the socket's destructor, when nothing else can reach it, or when
 * the socket starts again (sock lock).  The caller gives back the charge.
 */
void rstream_conn_free(struct rstream_sock *rs)
{
	rstream_buf_free(&rs->ring);
	rstream_buf_free(&rs->sgl);
	rstream_buf_free(&rs->sbuf);
	kvfree(rs->rmsg);
	rs->rmsg = NULL;
	kvfree(rs->sq.slots);
	rs->sq.slots = NULL;
}
