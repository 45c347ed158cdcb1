// SPDX-License-Identifier: GPL-2.0
/*
 * A connection's completion queue, polled from two places: irq_poll
 * (softirq) after the device signals a completion, as ib_alloc_cq()'s
 * IB_POLL_SOFTIRQ does, and directly by a process in recvmsg(), sendmsg()
 * or poll().
 *
 * The CQ is armed only while someone needs to be told of a completion:
 * a process asleep on the socket or an epoll, poll or select on its wait
 * queue, a SIGIO owner, corked bytes that a send completion posts, and
 * everything outside an established connection (set-up waits for its
 * registrations, teardown for its DISCONNECT and the drain).  Otherwise
 * completions wait in the CQ for the next call on the socket, as they
 * wait in a userspace rsocket's CQ for its next rrecv(): a process that
 * polls a nonblocking socket in a loop then costs no event, softirq or
 * wake-up of ksoftirqd per message.  That is most of a small message's
 * time on 6.12's soft-RoCE, which signals from its work items (process
 * context), where raising the softirq wakes ksoftirqd.
 *
 * RSTREAM_CQ_ARMED says the CQ is armed and has signalled nothing since,
 * so that a poller may skip it; the event handler clears it.  Whoever arms
 * asks for missed completions and handles them, so nothing that came
 * before an arm is left behind it.  A CQ left unarmed has a backstop: a
 * timer that arms it once no process has polled it for a tick (like a
 * NAPI instance's deferred interrupts), for a waiter that registered
 * without calling into the socket (O_ASYNC set after the last call).
 *
 * One poller at a time (RSTREAM_CQ_POLLING), so that completions are
 * handled in the order the device made them.  A poller that finds the bit
 * taken and needs the CQ handled leaves RSTREAM_CQ_MISSED; whichever side
 * then clears that mark schedules irq_poll, so a waiter that registered
 * while another poller was deciding not to arm is seen by the next one.
 * irq_poll takes itself off its list before it leaves the mark, so that
 * the schedule finds it off the list.
 *
 * The bits live in rs->cq_state, a word of their own: rs->flags is
 * rewritten whole when a socket starts again (af_rstream.c).
 *
 * Busy polling (SO_BUSY_POLL, RSTREAM_POLLING_TIME, net.core.busy_read
 * and busy_poll) is the kernel's own: each CQ has a NAPI context, as a
 * NIC's receive queue has, whose id is the socket's sk_napi_id.  The
 * device never schedules it (irq_poll takes the CQ's events); it is there
 * for napi_busy_loop(), which poll(), select() and epoll_wait() run by the
 * core's rules.  A blocking recvmsg() or sendmsg() knows its one CQ and
 * spins on it itself (rstream_cq_busy_poll()), by the same settings and
 * counting in the same BusyPollRxPackets.  The contexts hang off one
 * dummy net_device, the kernel's way to have NAPI without an interface.
 *
 * A process that polls and finds nothing gives way to a task waiting for
 * its CPU (rstream_give_way(), and a busy poll before it spins on), as
 * KVM's halt polling looks at single_task_running().  On soft-RoCE that
 * runs its work from a workqueue (6.12's does; 6.1's from softirq), that
 * task is as a rule the device's own worker, which carries the very bytes
 * or completion the poller waits for: left to the scheduler, it waits for
 * the poller's time slice to end, and a nonblocking loop or a busy poll
 * holds the CPU from it.  With the CPU to itself, a poller gives nothing
 * away.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/netdevice.h>
#include <linux/sched/clock.h>
#include <linux/sched/signal.h>
#include <linux/sched/stat.h>
#include <linux/timer.h>
#include <net/busy_poll.h>
#include <net/ip.h>
#include <net/tcp_states.h>
#include <rdma/ib_verbs.h>

#include "rstream.h"

/* Completions per ib_poll_cq() call, and per irq_poll round. */
#define RSTREAM_CQ_BATCH	16
#define RSTREAM_CQ_BUDGET	64
/* How long an unarmed CQ may go unpolled before the backstop arms it. */
#define RSTREAM_CQ_IDLE		max(1, HZ / 500)

#ifdef CONFIG_NET_RX_BUSY_POLL
/*
 * A CQ's NAPI context.  It holds its socket until it is gone: taken out
 * of the NAPI hash, then waited out (a busy loop that found it by its id
 * lets go at its end, or when it yields the CPU and looks again), from a
 * work item, so that a long spin on it elsewhere holds up nobody's
 * teardown; freed a grace period later (RCU readers that found it).
 */
struct rstream_napi {
	struct napi_struct napi;
	struct rstream_sock *rs;
	struct work_struct del_work;
	struct rcu_head rcu;
};

/* The contexts' device; its NAPI list taken under rstream_napi_lock. */
static struct net_device *rstream_napi_dev;
static DEFINE_MUTEX(rstream_napi_lock);
#endif

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
 */
static bool rstream_cq_claim(struct rstream_sock *rs)
{
	if (test_and_set_bit_lock(RSTREAM_CQ_POLLING, &rs->cq_state))
		return false;
	if (!test_bit_acquire(RSTREAM_CQ_LIVE, &rs->cq_state)) {
		clear_bit_unlock(RSTREAM_CQ_POLLING, &rs->cq_state);
		return false;
	}
	return true;
}

/* Let go of the poller's bit; run irq_poll if someone found it taken. */
static void rstream_cq_release(struct rstream_sock *rs)
{
	clear_bit_unlock(RSTREAM_CQ_POLLING, &rs->cq_state);
	/* The bit clear before the mark is read; pairs with rstream_cq_missed(). */
	smp_mb__after_atomic();
	if (test_and_clear_bit(RSTREAM_CQ_MISSED, &rs->cq_state))
		irq_poll_sched(&rs->iop);
}

/*
 * The poller's bit was taken: leave the mark for its holder, or schedule
 * irq_poll ourselves if the holder let go meanwhile.
 */
static void rstream_cq_missed(struct rstream_sock *rs)
{
	set_bit(RSTREAM_CQ_MISSED, &rs->cq_state);
	/* The mark set before POLLING is read; pairs with release. */
	smp_mb__after_atomic();
	if (!test_bit(RSTREAM_CQ_POLLING, &rs->cq_state) &&
	    test_bit(RSTREAM_CQ_LIVE, &rs->cq_state) &&
	    test_and_clear_bit(RSTREAM_CQ_MISSED, &rs->cq_state))
		irq_poll_sched(&rs->iop);
}

/*
 * Whether completions must be handled as they come even with no process
 * to look at them: set-up, shutdown, teardown, resets, held updates, a
 * SIGIO owner and corked bytes.  Any context.
 */
static bool rstream_cq_needs_handler(struct rstream_sock *rs)
{
	struct sock *sk = &rs->sk;

	/*
	 * Set-up, shutdown, teardown and resets wait on completions, and so
	 * do grants and credit updates that found no control slot free.
	 */
	if (rstream_state(sk) != TCP_ESTABLISHED || READ_ONCE(sk->sk_shutdown) ||
	    (READ_ONCE(rs->flags) & (BIT(RSTREAM_F_DEAD) |
				     BIT(RSTREAM_F_TEARDOWN) |
				     BIT(RSTREAM_F_DISC_SENT) |
				     BIT(RSTREAM_F_SHUT_SENT) |
				     BIT(RSTREAM_F_UPDATES_HELD))) ||
	    !test_bit(RSTREAM_F_CONNECTED, &rs->flags) ||
	    sock_flag(sk, SOCK_DEAD) || sock_flag(sk, SOCK_FASYNC))
		return true;
	/* Corked bytes go out when the write ahead of them completes. */
	return READ_ONCE(rs->sbuf_head) != READ_ONCE(rs->sbuf_sent);
}

/*
 * Whether anyone must hear of the next completion as it comes, rather
 * than at the next call on the socket.  Any context.
 */
static bool rstream_cq_wants_events(struct rstream_sock *rs)
{
	return rstream_cq_needs_handler(rs) || rstream_has_waiter(rs);
}

/*
 * RSTREAM_CQ_POLLING held: arm the CQ; true if completions came before
 * the arm, which the caller handles (the device signals only new ones).
 */
static bool rstream_cq_arm_now(struct rstream_sock *rs)
{
	int ret;

	set_bit(RSTREAM_CQ_ARMED, &rs->cq_state);
	/* ARMED before the arm: an event right after it clears the bit. */
	smp_mb__after_atomic();
	ret = ib_req_notify_cq(rs->cq, IB_CQ_NEXT_COMP |
			       IB_CQ_REPORT_MISSED_EVENTS);
	if (ret < 0) {
		/* Not armed after all: pollers must not skip it. */
		clear_bit(RSTREAM_CQ_ARMED, &rs->cq_state);
		mod_timer(&rs->cq_timer, jiffies + RSTREAM_CQ_IDLE);
		return true;
	}
	return ret > 0;
}

/*
 * RSTREAM_CQ_POLLING held, BHs off: arm the CQ if someone needs its
 * events, handling what came before the arm; else make sure the backstop
 * runs.
 */
static void rstream_cq_settle(struct rstream_sock *rs)
{
	if (test_bit(RSTREAM_CQ_ARMED, &rs->cq_state))
		return;
	if (!rstream_cq_wants_events(rs)) {
		if (!timer_pending(&rs->cq_timer))
			mod_timer(&rs->cq_timer, jiffies + RSTREAM_CQ_IDLE);
		return;
	}
	if (rstream_cq_arm_now(rs) &&
	    rstream_cq_process(rs, RSTREAM_CQ_BUDGET) == RSTREAM_CQ_BUDGET)
		irq_poll_sched(&rs->iop);	/* more: in softirq, bounded */
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
		rstream_cq_missed(rs);
		return 0;
	}
	done = rstream_cq_process(rs, budget);
	if (done < budget) {
		irq_poll_complete(iop);
		/*
		 * Off the list before ARMED and the waiters are read: an
		 * event that found us still on it (and so scheduled nothing)
		 * cleared ARMED before it looked; pairs with the event's.
		 */
		smp_mb();
		rstream_cq_settle(rs);
	}
	rstream_cq_release(rs);
	return done;
}

/*
 * If everyone on the socket's wait queue is one of our own blocking loops
 * (recvmsg, sendmsg, connect's wait for the first grant: sk_wait_event()'s
 * woken_wake_function), which handle the CQ themselves once woken, wake
 * them and say so.  poll, select and epoll would report a readiness twice
 * (once for this wake-up, once for the handler's), and io_uring and AIO
 * polls take a wake-up's key as what happened: those hear from irq_poll.
 * The queue's lock is held across the look and the wake-up, so a waiter
 * of another kind cannot join in between.
 */
static bool rstream_cq_wake_loops(struct rstream_sock *rs)
{
	struct wait_queue_entry *entry;
	struct socket_wq *wq;
	unsigned long flags;
	bool ours = false;

	rcu_read_lock();
	wq = rcu_dereference(rs->sk.sk_wq);
	if (!skwq_has_sleeper(wq))
		goto out;
	spin_lock_irqsave(&wq->wait.lock, flags);
	ours = !list_empty(&wq->wait.head);
	list_for_each_entry(entry, &wq->wait.head, entry) {
		if (entry->func != woken_wake_function) {
			ours = false;
			break;
		}
	}
	if (ours)
		wake_up_locked(&wq->wait);
	spin_unlock_irqrestore(&wq->wait.lock, flags);
out:
	rcu_read_unlock();
	return ours;
}

/*
 * The device's completion event: any context, hard IRQ on real HCAs.
 *
 * 6.12's soft-RoCE signals from its work items: process context, IRQs
 * off (its CQ lock), where raising irq_poll's softirq wakes ksoftirqd,
 * a switch there and back before a sleeping reader even hears of its
 * data.  There, when the only ones to tell are blocked calls on the
 * socket, they are woken directly and each handles the CQ itself, as a
 * userspace rsocket's completion channel wakes its process.  The
 * backstop timer covers one that leaves without a look (a signal, its
 * time up); rstream_cq_destroy() stops it once the CQ is gone, after
 * the last event.
 */
static void rstream_cq_event(struct ib_cq *cq, void *ctx)
{
	struct rstream_sock *rs = ctx;

	clear_bit(RSTREAM_CQ_ARMED, &rs->cq_state);
	/* ARMED clear before irq_poll's state is read; pairs with irqpoll. */
	smp_mb__after_atomic();
	if (!in_interrupt() && test_bit(RSTREAM_CQ_LIVE, &rs->cq_state) &&
	    !rstream_cq_needs_handler(rs) && rstream_cq_wake_loops(rs)) {
		if (!timer_pending(&rs->cq_timer))
			mod_timer(&rs->cq_timer, jiffies + RSTREAM_CQ_IDLE);
		return;
	}
	irq_poll_sched(&rs->iop);
}

/*
 * The backstop (timer softirq): a CQ left unarmed that no process has
 * polled for a tick is armed, and the completions it holds are handled.
 */
static void rstream_cq_idle(struct timer_list *t)
{
	struct rstream_sock *rs = from_timer(rs, t, cq_timer);

	if (!rstream_cq_claim(rs)) {
		/*
		 * Someone polls, and may have seen us pending before we ran:
		 * look again in a tick.  Not once the CQ is going (destroy
		 * clears LIVE before its del_timer_sync()).
		 */
		if (test_bit(RSTREAM_CQ_LIVE, &rs->cq_state))
			mod_timer(&rs->cq_timer, jiffies + RSTREAM_CQ_IDLE);
		return;
	}
	if (!test_bit(RSTREAM_CQ_ARMED, &rs->cq_state)) {
		if (rs->cq_polls != rs->cq_polls_seen) {
			rs->cq_polls_seen = rs->cq_polls;
			mod_timer(&rs->cq_timer, jiffies + RSTREAM_CQ_IDLE);
		} else if (rstream_cq_arm_now(rs)) {
			/* Armed now whatever it wants: nobody is polling. */
			irq_poll_sched(&rs->iop);
		}
	}
	rstream_cq_release(rs);
}

/*
 * The cork's time is up (softirq): post what is corked, and have irq_poll
 * handle the completions left in the CQ meanwhile (a sendmsg that found
 * the timer queued left them to us).  Bytes that MSG_MORE or TCP_CORK
 * hold wait for the end of their hold: the timer starts again for it,
 * under rs->lock as every start is, so never on a connection being torn
 * down (rstream_tx_held() is false once it can post no more).
 */
static enum hrtimer_restart rstream_cq_cork_end(struct hrtimer *t)
{
	struct rstream_sock *rs = container_of(t, struct rstream_sock,
					       cork_timer);
	u64 left;
	int err = 0;

	spin_lock(&rs->lock);
	if (rstream_tx_held(rs, &left)) {
		rstream_tx_cork_timer(rs, left);
		spin_unlock(&rs->lock);
		return HRTIMER_NORESTART;
	}
	err = rstream_tx_push_locked(rs);
	spin_unlock(&rs->lock);
	if (err)
		rstream_conn_reset(rs, ECONNRESET, "cannot post a write");
	irq_poll_sched(&rs->iop);
	return HRTIMER_NORESTART;
}

/*
 * Handle what the completion queue holds now, then arm it if anyone
 * needs its events: a waiter calls this after joining the wait queue, and
 * a sender of a control message or a teardown after setting the state
 * that wants them, so that what they wait for comes without a poll.
 * Process context, no spinlock held; the connection may be going away
 * (RSTREAM_CQ_LIVE says whether the CQ is still there).
 */
void rstream_cq_poll(struct rstream_sock *rs)
{
	/*
	 * A waiter's queue entry (or the state that wants events) before
	 * ARMED is read: either a poller that cleared ARMED and then looked
	 * for waiters finds it, or we find ARMED clear and arm the CQ
	 * ourselves.  Pairs with the barrier in rstream_cq_wants_events().
	 */
	smp_mb();
	/* Armed and silent since: nothing new, and the event will come. */
	if (test_bit(RSTREAM_CQ_ARMED, &rs->cq_state) ||
	    !test_bit(RSTREAM_CQ_LIVE, &rs->cq_state))
		return;
	/* The handlers run as in softirq: rs->lock taken without _bh. */
	local_bh_disable();
	if (rstream_cq_claim(rs)) {
		rs->cq_polls++;
		rstream_cq_process(rs, RSTREAM_CQ_BUDGET);
		rstream_cq_settle(rs);
		rstream_cq_release(rs);
	} else if (rstream_cq_wants_events(rs)) {
		/* The holder may have decided before we came: it looks again. */
		rstream_cq_missed(rs);
	}
	local_bh_enable();
}

#ifdef CONFIG_NET_RX_BUSY_POLL
/*
 * One turn of a busy poll, BHs off: up to @budget completions handled,
 * and the CQ settled unless the budget ran out (more are waiting).
 * Return: the completions handled.
 */
static int rstream_cq_busy_turn(struct rstream_sock *rs, int budget)
{
	int done = 0;

	if (rstream_cq_claim(rs)) {
		rs->cq_polls++;
		done = rstream_cq_process(rs, budget);
		if (done < budget)
			rstream_cq_settle(rs);
		rstream_cq_release(rs);
	}
	return done;
}

/*
 * The NAPI context's poll: a busy loop (BHs off, the process spinning),
 * or net_rx_action() (softirq) for what a busy loop left at its end.
 * An armed CQ is polled too: a poll(), select() or epoll_wait() that
 * spins is also on the wait queue, so the CQ is armed for it, and the
 * spinner takes a completion as soon as it is there rather than after
 * the event's softirq (which then finds it handled).  Once the CQ is
 * gone (LIVE clear) the claim fails and the poll does nothing.
 */
static int rstream_cq_napi_poll(struct napi_struct *napi, int budget)
{
	struct rstream_sock *rs = container_of(napi, struct rstream_napi,
					       napi)->rs;
	int done;

	if (!budget)
		return 0;
	done = rstream_cq_busy_turn(rs, budget);
	if (done < budget)
		napi_complete_done(napi, done);
	return done;
}

#endif

/*
 * A nonblocking call found nothing: let a task that waits for this CPU
 * run first (see the top of this file).  Still runnable, we are the
 * scheduler's to pick again at once if it finds us more deserving; what
 * it does not do by itself is look before our time slice ends.  Process
 * context, no locks held.
 */
void rstream_give_way(void)
{
	if (!single_task_running())
		schedule();
}

/**
 * rstream_cq_busy_poll() - spin on the CQ before a blocking call sleeps
 * @rs: the socket
 * @done: true once the caller need not sleep (data, room, an error)
 * @timeo: the caller's time left, which the spin counts against
 *
 * Up to the socket's busy-poll time (SO_BUSY_POLL), within *@timeo, until
 * @done, a signal or the CQ's end; another task waiting for the CPU
 * (need_resched(), or a task on its run queue) runs first, after which the
 * spin goes on, as in the kernel's busy loop.  Each turn handles up to the
 * socket's SO_BUSY_POLL_BUDGET completions, counted in BusyPollRxPackets
 * as the NAPI loop counts what it polls.
 *
 * Not through napi_busy_loop(), which poll() and epoll_wait() use: this
 * caller knows its CQ, and the NAPI loop puts its own work between a
 * completion and the caller, a turn longer by its per-turn bookkeeping and
 * a second poll of the CQ (busy_poll_stop()) once the data is found.  On
 * 6.1 the spin of its own cut the busy 64-byte round trip by 3 to 9 % at
 * each quartile (24 runs of each, alternating, in one guest); on 6.12 the
 * difference was within the spread.
 *
 * Process context, sock lock held: released while we spin, so that
 * another thread's call on the socket goes on meanwhile.
 * Return: whether it spun (the caller looks again before it sleeps).
 */
bool rstream_cq_busy_poll(struct rstream_sock *rs,
			  bool (*done)(struct rstream_sock *rs), long *timeo)
{
#ifdef CONFIG_NET_RX_BUSY_POLL
	struct sock *sk = &rs->sk;
	unsigned long start = jiffies, deadline = 0, spin_start;
	int budget, n;

	if (!*timeo || !sk_can_busy_loop(sk) ||
	    !test_bit(RSTREAM_CQ_LIVE, &rs->cq_state))
		return false;
	if (*timeo != MAX_SCHEDULE_TIMEOUT)
		deadline = (start + *timeo) ?: 1;
	budget = READ_ONCE(sk->sk_busy_poll_budget) ?: BUSY_POLL_BUDGET;
	spin_start = busy_loop_current_time();
	release_sock(sk);
	for (;;) {
		/* The handlers run as in softirq: rs->lock without _bh. */
		local_bh_disable();
		n = rstream_cq_busy_turn(rs, budget);
		if (n > 0)
			__NET_ADD_STATS(sock_net(sk),
					LINUX_MIB_BUSYPOLLRXPACKETS, n);
		local_bh_enable();
		/*
		 * A last turn that used the whole budget ends unsettled, the
		 * CQ as it was when the turn began: what it left waits for the
		 * caller's next call or the backstop, which an unarmed CQ has
		 * pending, as after any poll that leaves it unarmed.
		 */
		if (done(rs) || signal_pending(current) ||
		    !test_bit(RSTREAM_CQ_LIVE, &rs->cq_state) ||
		    sk_busy_loop_timeout(sk, spin_start) ||
		    (deadline && time_after_eq(jiffies, deadline)))
			break;
		/*
		 * Another task waits for this CPU: it runs first, and the spin
		 * goes on, as napi_busy_loop() goes on after its cond_resched().
		 * Ending the spin here instead would put the caller to sleep
		 * each time 6.12's soft-RoCE wakes its worker on this CPU.
		 */
		if (need_resched() || !single_task_running())
			schedule();
		cpu_relax();
	}
	lock_sock(sk);
	if (*timeo != MAX_SCHEDULE_TIMEOUT)
		*timeo = max_t(long, *timeo - (long)(jiffies - start), 0);
	return true;
#else
	return false;
#endif
}

#ifdef CONFIG_NET_RX_BUSY_POLL
/* The CQ's NAPI context, enabled; its id is the socket's.  Process context. */
static int rstream_cq_napi_add(struct rstream_sock *rs)
{
	struct rstream_napi *rn;

	rn = kzalloc(sizeof(*rn), GFP_KERNEL_ACCOUNT);
	if (!rn)
		return -ENOMEM;
	rn->rs = rs;
	sock_hold(&rs->sk);
	mutex_lock(&rstream_napi_lock);
	netif_napi_add(rstream_napi_dev, &rn->napi, rstream_cq_napi_poll);
	mutex_unlock(&rstream_napi_lock);
	napi_enable(&rn->napi);
	rs->napi = rn;
	WRITE_ONCE(rs->sk.sk_napi_id, rn->napi.napi_id);
	return 0;
}

/*
 * Work item: no new busy loop finds the context once it is off the hash;
 * napi_disable() then waits for one that holds it.  The socket goes last.
 */
static void rstream_cq_napi_del_work(struct work_struct *work)
{
	struct rstream_napi *rn = container_of(work, struct rstream_napi,
					       del_work);
	struct sock *sk = &rn->rs->sk;

	mutex_lock(&rstream_napi_lock);
	__netif_napi_del(&rn->napi);
	mutex_unlock(&rstream_napi_lock);
	napi_disable(&rn->napi);
	kfree_rcu(rn, rcu);
	sock_put(sk);
}

/*
 * After RSTREAM_CQ_LIVE is cleared, which ends our own busy loops and
 * makes every later poll a no-op: let go of the context.  Any context.
 */
static void rstream_cq_napi_del(struct rstream_sock *rs)
{
	struct rstream_napi *rn = rs->napi;

	if (!rn)
		return;
	rs->napi = NULL;
	WRITE_ONCE(rs->sk.sk_napi_id, 0);
	INIT_WORK(&rn->del_work, rstream_cq_napi_del_work);
	queue_work(rstream_wq, &rn->del_work);
}

/* Module load and unload: the contexts' dummy device. */
int rstream_cq_init(void)
{
	rstream_napi_dev = kzalloc(sizeof(*rstream_napi_dev), GFP_KERNEL);
	if (!rstream_napi_dev)
		return -ENOMEM;
	init_dummy_netdev(rstream_napi_dev);
	strscpy(rstream_napi_dev->name, KBUILD_MODNAME, IFNAMSIZ);
	return 0;
}

/*
 * No socket is left, so every context was taken off the device (each
 * holds its socket until then).  Readers that found one by its id may
 * still look at its device: a grace period first.
 */
void rstream_cq_exit(void)
{
	synchronize_rcu();
	kfree(rstream_napi_dev);
}
#else
static int rstream_cq_napi_add(struct rstream_sock *rs)
{
	return 0;
}

static void rstream_cq_napi_del(struct rstream_sock *rs)
{
}

int rstream_cq_init(void)
{
	return 0;
}

void rstream_cq_exit(void)
{
}
#endif

/*
 * RSTREAM_CQ_POLLING held, BHs off: handle what the CQ holds, up to its
 * size (a peer that goes on writing does not keep us here), and arm it
 * if someone needs its events.
 */
static void rstream_cq_empty(struct rstream_sock *rs)
{
	int left = rs->cq->cqe;

	while (left > 0 &&
	       rstream_cq_process(rs, RSTREAM_CQ_BUDGET) == RSTREAM_CQ_BUDGET)
		left -= RSTREAM_CQ_BUDGET;
	rstream_cq_settle(rs);
}

/*
 * Handle every completion the CQ holds now, armed or not (an event may be
 * on its way), waiting out another poller rather than leaving them to it:
 * the CM handler decides from what came before a DREQ (cm.c).  Process
 * context.
 */
void rstream_cq_drain(struct rstream_sock *rs)
{
	local_bh_disable();
	while (!rstream_cq_claim(rs)) {
		local_bh_enable();
		if (!test_bit(RSTREAM_CQ_LIVE, &rs->cq_state))
			return;
		usleep_range(10, 100);
		local_bh_disable();
	}
	rstream_cq_empty(rs);
	rstream_cq_release(rs);
	local_bh_enable();
}

/*
 * The same from a timer (softirq), which cannot wait: false if another
 * poller has the CQ, whose completions may then not be counted yet.
 */
bool rstream_cq_try_drain(struct rstream_sock *rs)
{
	bool ours;

	local_bh_disable();
	ours = rstream_cq_claim(rs);
	if (ours) {
		rstream_cq_empty(rs);
		rstream_cq_release(rs);
	}
	local_bh_enable();
	return ours;
}

/*
 * CM handler (process context): a CQ of @entries, armed.  ib_drain_qp()
 * works with it as with one of ib_alloc_cq()'s IB_POLL_SOFTIRQ: it waits
 * for its marker's completion, which the pollers here hand to its
 * wr_cqe->done like any other (the CQ is armed once the connection is no
 * longer established).
 */
int rstream_cq_create(struct rstream_sock *rs, u32 entries)
{
	struct ib_cq_init_attr attr = { .cqe = entries };
	struct ib_cq *cq;
	int ret;

	rs->wc = kcalloc(RSTREAM_CQ_BATCH, sizeof(*rs->wc), GFP_KERNEL_ACCOUNT);
	if (!rs->wc)
		return -ENOMEM;
	/* Before the CQ exists: its first event schedules this. */
	irq_poll_init(&rs->iop, RSTREAM_CQ_BUDGET, rstream_cq_irqpoll);
	timer_setup(&rs->cq_timer, rstream_cq_idle, 0);
	hrtimer_init(&rs->cork_timer, CLOCK_MONOTONIC, HRTIMER_MODE_REL_SOFT);
	rs->cork_timer.function = rstream_cq_cork_end;
	cq = ib_create_cq(rs->pd->device, rstream_cq_event, NULL, rs, &attr);
	if (IS_ERR(cq))
		return PTR_ERR(cq);
	rs->cq = cq;
	set_bit(RSTREAM_CQ_ARMED, &rs->cq_state);
	/* rs->cq and rs->wc before LIVE; pairs with the claim's acquire. */
	smp_mb__before_atomic();
	set_bit(RSTREAM_CQ_LIVE, &rs->cq_state);
	ret = rstream_cq_napi_add(rs);
	if (ret)
		return ret;
	return ib_req_notify_cq(cq, IB_CQ_NEXT_COMP);
}

/*
 * After the QP is gone: wait out any poller, stop irq_poll and the
 * backstop, free the CQ.  Process context (it may sleep).
 */
void rstream_cq_destroy(struct rstream_sock *rs)
{
	if (rs->cq) {
		clear_bit(RSTREAM_CQ_LIVE, &rs->cq_state);
		/* No new claim past this: claims test LIVE after the bit. */
		smp_mb__after_atomic();
		/* A busy loop on it ends, and none starts again. */
		rstream_cq_napi_del(rs);
		/* A poller holds the bit for one budget of completions. */
		while (test_and_set_bit_lock(RSTREAM_CQ_POLLING, &rs->cq_state))
			usleep_range(10, 100);
		irq_poll_disable(&rs->iop);
		/*
		 * No claim can succeed now, so only a late event can start
		 * the backstop again: stopped once more after the CQ, whose
		 * destruction ends its events.  The cork timer starts only
		 * under rs->lock on a connection that can post, and
		 * RSTREAM_F_DEAD was set before (conn.c).
		 */
		del_timer_sync(&rs->cq_timer);
		hrtimer_cancel(&rs->cork_timer);
		clear_bit(RSTREAM_CQ_ARMED, &rs->cq_state);
		clear_bit_unlock(RSTREAM_CQ_POLLING, &rs->cq_state);
		ib_destroy_cq(rs->cq);
		rs->cq = NULL;
		del_timer_sync(&rs->cq_timer);
	}
	kfree(rs->wc);
	rs->wc = NULL;
}
