// SPDX-License-Identifier: GPL-2.0
/*
 * A connection's completion queue, polled from two places: irq_poll
 * (softirq) after the device signals a completion, as ib_alloc_cq()'s
 * IB_POLL_SOFTIRQ does, and directly by a process about to report "nothing
 * yet" from recvmsg(), sendmsg() or poll().
 *
 * Why the second: soft-RoCE on 6.12 posts completions from a work item, so
 * the softirq it raises runs in ksoftirqd, and a reader that polls a
 * nonblocking socket in a loop would wait for that thread to be scheduled
 * before it sees bytes that are already in its ring.  rsocket polls its
 * completion queue itself before it blocks; so does this, with the
 * kernel's own completion handlers.
 *
 * One poller at a time (RSTREAM_CQ_POLLING), so that completions are
 * handled in the order the device made them.  A process polls only after
 * an event (RSTREAM_CQ_EVENT): the CQ is armed whenever no poll is under
 * way or scheduled, so without one there is nothing new in it.  The CQ is
 * armed only by the softirq poller when it finds the queue empty; a
 * process poller that took completions leaves the arming alone.  A
 * softirq poller that finds the bit taken takes itself off irq_poll's list
 * first and only then leaves RSTREAM_CQ_MISSED; whichever side then clears that mark
 * schedules irq_poll again, and finds it off the list.  So a completion
 * never waits with the CQ unarmed and no poll scheduled: were it to, the
 * drain at close (ib_drain_qp(), which waits for a completion through
 * this CQ) would wait for ever.
 *
 * The bits live in rs->cq_state, a word of their own: rs->flags is
 * rewritten whole when a socket starts again (af_rstream.c).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <rdma/ib_verbs.h>

#include "rstream.h"

/* Completions per ib_poll_cq() call, and per irq_poll round. */
#define RSTREAM_CQ_BATCH	16
#define RSTREAM_CQ_BUDGET	64

/* RSTREAM_CQ_POLLING held, BHs off: handle up to @budget completions. */
static int rstream_cq_process(struct rstream_sock *rs, int budget)
{
	int done = 0;

	while (done < budget) {
		int i, n = ib_poll_cq(rs->cq, min(RSTREAM_CQ_BATCH,
						  budget - done), rs->wc);

		if (n <= 0)
			break;
		for (i = 0; i < n; i++)
			rs->wc[i].wr_cqe->done(rs->cq, &rs->wc[i]);
		done += n;
		if (n < RSTREAM_CQ_BATCH)
			break;
	}
	return done;
}

/*
 * Take the poller's bit; false if someone else polls or the CQ is not
 * there.  LIVE is read with acquire: rs->cq and rs->wc were set before it.
 * The taker reads the CQ next, so the event mark goes now: an event after
 * this sets it again.
 */
static bool rstream_cq_claim(struct rstream_sock *rs)
{
	if (test_and_set_bit_lock(RSTREAM_CQ_POLLING, &rs->cq_state))
		return false;
	if (!test_bit_acquire(RSTREAM_CQ_LIVE, &rs->cq_state)) {
		clear_bit_unlock(RSTREAM_CQ_POLLING, &rs->cq_state);
		return false;
	}
	clear_bit(RSTREAM_CQ_EVENT, &rs->cq_state);
	/* The mark gone before the CQ is read. */
	smp_mb__after_atomic();
	return true;
}

/* Let go of the poller's bit; run irq_poll if it found the bit taken. */
static void rstream_cq_release(struct rstream_sock *rs)
{
	clear_bit_unlock(RSTREAM_CQ_POLLING, &rs->cq_state);
	/* The bit clear before the mark is read; pairs with irqpoll's. */
	smp_mb__after_atomic();
	if (test_and_clear_bit(RSTREAM_CQ_MISSED, &rs->cq_state))
		irq_poll_sched(&rs->iop);
}

/* Softirq (irq_poll). */
static int rstream_cq_irqpoll(struct irq_poll *iop, int budget)
{
	struct rstream_sock *rs = container_of(iop, struct rstream_sock, iop);
	int done;

	if (!rstream_cq_claim(rs)) {
		/*
		 * A process polls (or the CQ is going).  Off the list first,
		 * so that whoever clears the mark can schedule us again.
		 */
		irq_poll_complete(iop);
		/* Off the list before the mark can be seen. */
		smp_mb__before_atomic();
		set_bit(RSTREAM_CQ_MISSED, &rs->cq_state);
		/* The mark set before POLLING is read; pairs with release. */
		smp_mb__after_atomic();
		if (!test_bit(RSTREAM_CQ_POLLING, &rs->cq_state) &&
		    test_bit(RSTREAM_CQ_LIVE, &rs->cq_state) &&
		    test_and_clear_bit(RSTREAM_CQ_MISSED, &rs->cq_state))
			irq_poll_sched(iop);
		return 0;
	}
	done = rstream_cq_process(rs, budget);
	clear_bit_unlock(RSTREAM_CQ_POLLING, &rs->cq_state);
	if (done < budget) {
		irq_poll_complete(iop);
		/* Completions that came before the arm: poll again. */
		if (ib_req_notify_cq(rs->cq, IB_CQ_NEXT_COMP |
				     IB_CQ_REPORT_MISSED_EVENTS) > 0)
			irq_poll_sched(iop);
	}
	return done;
}

/* The device's completion event: any context, hard IRQ on real HCAs. */
static void rstream_cq_event(struct ib_cq *cq, void *ctx)
{
	struct rstream_sock *rs = ctx;

	set_bit(RSTREAM_CQ_EVENT, &rs->cq_state);
	irq_poll_sched(&rs->iop);
}

/*
 * Handle what the completion queue holds now, if no one else is at it.
 * Process context, no spinlock held; the connection may be going away
 * (RSTREAM_CQ_LIVE says whether the CQ is still there).
 */
void rstream_cq_poll(struct rstream_sock *rs)
{
	/*
	 * No event since the last poll: the CQ was armed and has nothing
	 * new, or irq_poll is on it.  A reader polling in a loop then costs
	 * neither the device's CQ lock nor the poller's bit.
	 */
	if (!test_bit(RSTREAM_CQ_EVENT, &rs->cq_state) ||
	    !test_bit(RSTREAM_CQ_LIVE, &rs->cq_state))
		return;
	/* The handlers run as in softirq: rs->lock taken without _bh. */
	local_bh_disable();
	if (rstream_cq_claim(rs)) {
		rstream_cq_process(rs, RSTREAM_CQ_BUDGET);
		rstream_cq_release(rs);
	}
	local_bh_enable();
}

/*
 * CM handler (process context): a CQ of @entries, armed.  ib_drain_qp()
 * works with it as with one of ib_alloc_cq()'s IB_POLL_SOFTIRQ: it waits
 * for its marker's completion, which the pollers here hand to its
 * wr_cqe->done like any other.
 */
int rstream_cq_create(struct rstream_sock *rs, u32 entries)
{
	struct ib_cq_init_attr attr = { .cqe = entries };
	struct ib_cq *cq;

	rs->wc = kcalloc(RSTREAM_CQ_BATCH, sizeof(*rs->wc), GFP_KERNEL_ACCOUNT);
	if (!rs->wc)
		return -ENOMEM;
	/* Before the CQ exists: its first event schedules this. */
	irq_poll_init(&rs->iop, RSTREAM_CQ_BUDGET, rstream_cq_irqpoll);
	cq = ib_create_cq(rs->pd->device, rstream_cq_event, NULL, rs, &attr);
	if (IS_ERR(cq))
		return PTR_ERR(cq);
	rs->cq = cq;
	/* rs->cq and rs->wc before LIVE; pairs with the claim's acquire. */
	smp_mb__before_atomic();
	set_bit(RSTREAM_CQ_LIVE, &rs->cq_state);
	return ib_req_notify_cq(cq, IB_CQ_NEXT_COMP);
}

/*
 * After the QP is gone: wait out any poller, stop irq_poll, free the CQ.
 * Process context (it may sleep).
 */
void rstream_cq_destroy(struct rstream_sock *rs)
{
	if (rs->cq) {
		clear_bit(RSTREAM_CQ_LIVE, &rs->cq_state);
		/* No new claim past this: claims test LIVE after the bit. */
		smp_mb__after_atomic();
		/* A poller holds the bit for one budget of completions. */
		while (test_and_set_bit_lock(RSTREAM_CQ_POLLING, &rs->cq_state))
			usleep_range(10, 100);
		irq_poll_disable(&rs->iop);
		clear_bit_unlock(RSTREAM_CQ_POLLING, &rs->cq_state);
		ib_destroy_cq(rs->cq);
		rs->cq = NULL;
	}
	kfree(rs->wc);
	rs->wc = NULL;
}
