// SPDX-License-Identifier: GPL-2.0
/*
 * TCP beside RDMA: transparent sockets, and a TCP listener beside an
 * AF_RSTREAM one (RSTREAM_TCP_LISTEN).
 *
 * A transparent socket (RSTREAM_PROTO_TCP4/6) holds a kernel TCP socket of
 * its own from socket() on.  It is made with the caller's credentials, so
 * the LSM checks it as the TCP socket it is and its memory is charged as
 * TCP's.  Its wait queue is the AF_RSTREAM socket's: every wake-up TCP
 * makes (data, room, state, errors, a listener's new clients) reaches the
 * AF_RSTREAM socket's sleepers, poll, select, epoll and SIGIO directly,
 * whenever they registered, with nothing in between.
 *
 * Until the socket connects, its settings go to both sides; listen()
 * listens on both, at the port TCP has.  connect() tries RDMA; when RDMA
 * cannot be used there, the TCP socket connects instead, at once or, for
 * an attempt that failed later, from a work item that the CM starts
 * through the callback the socket layer handed it
 * (rstream_fallback_begin()).  From then on (rstream_on_tcp()) every call
 * of the socket goes to the TCP socket's own ops.
 *
 * SOL_SOCKET options are set by the core on the AF_RSTREAM socket (6.1
 * gives a protocol no say in them): what TCP reads of them is copied over
 * before TCP binds, listens or connects, and on each call that reads them
 * as it goes (timeouts, low-water mark, priority, mark).  SO_KEEPALIVE
 * arrives through the proto's keepalive hook; SO_ERROR reads the
 * AF_RSTREAM socket, where TCP's errors are copied as TCP reports them.
 *
 * Accepted TCP clients come out of accept() as AF_RSTREAM sockets on TCP:
 * the connection is accepted into a kernel socket (kernel_accept()), so
 * the LSM labels it as TCP labels any accepted connection, and the new
 * AF_RSTREAM socket adopts it as a fallen-back one.
 *
 * Only the socket layer (af_rstream.c, options.c) calls in here; the CM,
 * the connection and the data path never learn that TCP exists.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/file.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/net.h>
#include <linux/tcp.h>
#include <net/inet_connection_sock.h>
#include <net/sock.h>
#include <net/tcp_states.h>

#include "rstream.h"

static void rstream_fallback_work(struct work_struct *work);

/*
 * What TCP reads of the SOL_SOCKET settings as it goes: copied when they
 * differ.  Any context that may read them; no lock needed.
 */
static void rstream_fallback_sync_fields(struct sock *sk, struct sock *tsk)
{
	if (unlikely(READ_ONCE(tsk->sk_rcvtimeo) != READ_ONCE(sk->sk_rcvtimeo)))
		WRITE_ONCE(tsk->sk_rcvtimeo, READ_ONCE(sk->sk_rcvtimeo));
	if (unlikely(READ_ONCE(tsk->sk_sndtimeo) != READ_ONCE(sk->sk_sndtimeo)))
		WRITE_ONCE(tsk->sk_sndtimeo, READ_ONCE(sk->sk_sndtimeo));
	if (unlikely(READ_ONCE(tsk->sk_rcvlowat) != READ_ONCE(sk->sk_rcvlowat)))
		WRITE_ONCE(tsk->sk_rcvlowat, READ_ONCE(sk->sk_rcvlowat));
	if (unlikely(READ_ONCE(tsk->sk_priority) != READ_ONCE(sk->sk_priority)))
		WRITE_ONCE(tsk->sk_priority, READ_ONCE(sk->sk_priority));
	if (unlikely(READ_ONCE(tsk->sk_mark) != READ_ONCE(sk->sk_mark))) {
		WRITE_ONCE(tsk->sk_mark, READ_ONCE(sk->sk_mark));
		sk_dst_reset(tsk);
	}
#ifdef CONFIG_NET_RX_BUSY_POLL
	/* SO_BUSY_POLL and its companions: TCP busy-polls its NIC queue. */
	if (unlikely(READ_ONCE(tsk->sk_ll_usec) != READ_ONCE(sk->sk_ll_usec)))
		WRITE_ONCE(tsk->sk_ll_usec, READ_ONCE(sk->sk_ll_usec));
	if (unlikely(READ_ONCE(tsk->sk_prefer_busy_poll) !=
		     READ_ONCE(sk->sk_prefer_busy_poll)))
		WRITE_ONCE(tsk->sk_prefer_busy_poll,
			   READ_ONCE(sk->sk_prefer_busy_poll));
	if (unlikely(READ_ONCE(tsk->sk_busy_poll_budget) !=
		     READ_ONCE(sk->sk_busy_poll_budget)))
		WRITE_ONCE(tsk->sk_busy_poll_budget,
			   READ_ONCE(sk->sk_busy_poll_budget));
#endif
}

/*
 * Whether a buffer size the program set (@lock: SOCK_SNDBUF_LOCK or
 * SOCK_RCVBUF_LOCK) is not TCP's yet: TCP sizes its buffers itself until
 * one is set, and never moves one that was.
 */
static bool rstream_fallback_buf_differs(struct sock *sk, struct sock *tsk,
					 u8 lock)
{
	/* A bit-field on 6.1: no READ_ONCE(); a stale read syncs next call. */
	if (!(sk->sk_userlocks & lock))
		return false;
	if (!(tsk->sk_userlocks & lock))
		return true;
	return lock == SOCK_SNDBUF_LOCK ?
	       READ_ONCE(tsk->sk_sndbuf) != READ_ONCE(sk->sk_sndbuf) :
	       READ_ONCE(tsk->sk_rcvbuf) != READ_ONCE(sk->sk_rcvbuf);
}

/*
 * The flags copied to TCP.  SOCK_KEEPOPEN is not: on a connection TCP's
 * keepalive timer starts only through its keepalive hook, which
 * rstream_fallback_keepalive() calls when SO_KEEPALIVE is set.
 */
#define RSTREAM_TCP_SYNC_FLAGS	(RSTREAM_TCP_FLAGS & ~BIT(SOCK_KEEPOPEN))

/* SO_MAX_PACING_RATE as the core sets it on a socket. */
static void rstream_fallback_pacing(struct sock *sk, struct sock *tsk)
{
	unsigned long rate = READ_ONCE(sk->sk_max_pacing_rate);

	if (rate != ~0UL)
		cmpxchg(&tsk->sk_pacing_status, SK_PACING_NONE,
			SK_PACING_NEEDED);
	WRITE_ONCE(tsk->sk_max_pacing_rate, rate);
	if (rate < READ_ONCE(tsk->sk_pacing_rate))
		WRITE_ONCE(tsk->sk_pacing_rate, rate);
}

/*
 * Everything TCP takes from the SOL_SOCKET settings, before it binds,
 * listens or connects, before it closes (the linger time), and on a call
 * after the program changed one of them.  Process context; takes the TCP
 * socket's sock lock, the caller may hold the AF_RSTREAM socket's.
 */
static void rstream_fallback_sync(struct rstream_sock *rs)
{
	struct sock *sk = &rs->sk, *tsk = rs->tcp->sk;
	unsigned long flags;

	lock_sock(tsk);
	flags = (tsk->sk_flags & ~RSTREAM_TCP_SYNC_FLAGS) |
		(READ_ONCE(sk->sk_flags) & RSTREAM_TCP_SYNC_FLAGS);
	/* As SO_DONTROUTE: the route cached may be the one it rules out. */
	if ((flags ^ tsk->sk_flags) & BIT(SOCK_LOCALROUTE))
		sk_dst_reset(tsk);
	tsk->sk_flags = flags;
	if (rstream_fallback_buf_differs(sk, tsk, SOCK_SNDBUF_LOCK)) {
		tsk->sk_userlocks |= SOCK_SNDBUF_LOCK;
		WRITE_ONCE(tsk->sk_sndbuf, READ_ONCE(sk->sk_sndbuf));
		/* As SO_SNDBUF on TCP: a writer may have room now. */
		tsk->sk_write_space(tsk);
	}
	if (rstream_fallback_buf_differs(sk, tsk, SOCK_RCVBUF_LOCK)) {
		tsk->sk_userlocks |= SOCK_RCVBUF_LOCK;
		WRITE_ONCE(tsk->sk_rcvbuf, READ_ONCE(sk->sk_rcvbuf));
	}
	tsk->sk_lingertime = READ_ONCE(sk->sk_lingertime);
	tsk->sk_reuse = sk->sk_reuse;
	tsk->sk_reuseport = rs->reuseport;
	if (READ_ONCE(tsk->sk_max_pacing_rate) !=
	    READ_ONCE(sk->sk_max_pacing_rate))
		rstream_fallback_pacing(sk, tsk);
	if (READ_ONCE(tsk->sk_bound_dev_if) != READ_ONCE(sk->sk_bound_dev_if)) {
		WRITE_ONCE(tsk->sk_bound_dev_if, READ_ONCE(sk->sk_bound_dev_if));
		sk_dst_reset(tsk);
	}
	rstream_fallback_sync_fields(sk, tsk);
	release_sock(tsk);
}

/*
 * Before a call goes to TCP: the settings TCP reads as it goes, and the
 * rest when a SOL_SOCKET option changed one since (the core sets them on
 * the AF_RSTREAM socket, after the connection too: rstream(1) and
 * rdma-core's rstream size an accepted socket's buffers after accept()).
 * TCP's sk_reuseport is a bit-field, read without READ_ONCE(): only we
 * write it, and a stale read syncs on the next call.  Process context, no
 * sock lock held.
 */
static void rstream_fallback_sync_fast(struct rstream_sock *rs)
{
	struct sock *sk = &rs->sk, *tsk = rs->tcp->sk;

	rstream_fallback_sync_fields(sk, tsk);
	if (unlikely(((READ_ONCE(sk->sk_flags) ^ READ_ONCE(tsk->sk_flags)) &
		      RSTREAM_TCP_SYNC_FLAGS) ||
		     READ_ONCE(tsk->sk_lingertime) !=
		     READ_ONCE(sk->sk_lingertime) ||
		     READ_ONCE(tsk->sk_bound_dev_if) !=
		     READ_ONCE(sk->sk_bound_dev_if) ||
		     READ_ONCE(tsk->sk_max_pacing_rate) !=
		     READ_ONCE(sk->sk_max_pacing_rate) ||
		     tsk->sk_reuseport != READ_ONCE(rs->reuseport) ||
		     rstream_fallback_buf_differs(sk, tsk, SOCK_SNDBUF_LOCK) ||
		     rstream_fallback_buf_differs(sk, tsk, SOCK_RCVBUF_LOCK)))
		rstream_fallback_sync(rs);
}

/*
 * An accepted socket starts with what TCP's accepted socket inherited
 * from its listener (ours, or the caller's RSTREAM_TCP_LISTEN one): the
 * SOL_SOCKET settings read back, and the copy before each call keeps
 * them.  @sk is not visible to anyone yet.
 */
static void rstream_fallback_inherit(struct sock *sk, struct sock *tsk)
{
	u8 locks = SOCK_SNDBUF_LOCK | SOCK_RCVBUF_LOCK;

	sk->sk_flags = (sk->sk_flags & ~RSTREAM_TCP_FLAGS) |
		       (READ_ONCE(tsk->sk_flags) & RSTREAM_TCP_FLAGS);
	sk->sk_userlocks = (sk->sk_userlocks & ~locks) |
			   (tsk->sk_userlocks & locks);
	sk->sk_sndbuf = READ_ONCE(tsk->sk_sndbuf);
	sk->sk_rcvbuf = READ_ONCE(tsk->sk_rcvbuf);
	sk->sk_lingertime = READ_ONCE(tsk->sk_lingertime);
	/*
	 * The copy before close gives them back to TCP, whose TIME_WAIT
	 * keeps them: without them a restarted server could not bind.
	 */
	sk->sk_reuse = tsk->sk_reuse;
	rstream_sk(sk)->reuseport = tsk->sk_reuseport;
	sk->sk_rcvtimeo = READ_ONCE(tsk->sk_rcvtimeo);
	sk->sk_sndtimeo = READ_ONCE(tsk->sk_sndtimeo);
	sk->sk_rcvlowat = READ_ONCE(tsk->sk_rcvlowat);
	sk->sk_priority = READ_ONCE(tsk->sk_priority);
	sk->sk_mark = READ_ONCE(tsk->sk_mark);
	sk->sk_bound_dev_if = READ_ONCE(tsk->sk_bound_dev_if);
	sk->sk_max_pacing_rate = READ_ONCE(tsk->sk_max_pacing_rate);
}

/*
 * Point the TCP socket's wait queue at @sock's, the AF_RSTREAM socket's:
 * its wake-ups then reach every waiter of the AF_RSTREAM socket.
 * SOCK_FASYNC lets it signal the AF_RSTREAM socket's SIGIO owners (there
 * is nobody to signal while their list is empty).  @sock outlives the TCP
 * socket's use of it: its release releases the TCP socket first.
 */
static void rstream_fallback_share_wq(struct socket *sock, struct socket *tcp)
{
	struct sock *tsk = tcp->sk;

	write_lock_bh(&tsk->sk_callback_lock);
	rcu_assign_pointer(tsk->sk_wq, &sock->wq);
	sock_set_flag(tsk, SOCK_FASYNC);
	write_unlock_bh(&tsk->sk_callback_lock);
}

/*
 * SO_ERROR reads the AF_RSTREAM socket: TCP's pending error is copied there
 * once, as TCP reports it (or poll finds it first).  TCP keeps its own
 * copy for the call that meets it, and until that call no copy is made
 * again, so a SO_ERROR that read it does not read it twice.  Any context.
 */
static void rstream_fallback_copy_err(struct rstream_sock *rs, struct sock *tsk)
{
	int err = READ_ONCE(tsk->sk_err);

	if (!err) {
		WRITE_ONCE(rs->tcp_err_copied, false);
		return;
	}
	if (!READ_ONCE(rs->tcp_err_copied)) {
		WRITE_ONCE(rs->tcp_err_copied, true);
		WRITE_ONCE(rs->sk.sk_err, err);
	}
}

/*
 * TCP reports an error of the connection (softirq, or process context with
 * its sock lock held): SO_ERROR reads the AF_RSTREAM socket, so the error
 * is copied there first, then reported as TCP reports it, waking our
 * waiters.
 */
static void rstream_fallback_error_report(struct sock *tsk)
{
	void (*report)(struct sock *sk);
	struct rstream_sock *rs;

	read_lock_bh(&tsk->sk_callback_lock);
	rs = __locked_read_sk_user_data_with_flags(tsk, 0);
	if (rs) {
		rstream_fallback_copy_err(rs, tsk);
		report = rs->tcp_error_report;
	} else {
		/* Let go of meanwhile: TCP's own is back. */
		report = tsk->sk_error_report;
	}
	read_unlock_bh(&tsk->sk_callback_lock);
	if (report != rstream_fallback_error_report)
		report(tsk);
}

/* Copy the connection's errors as TCP reports them.  Sock lock held. */
static void rstream_fallback_watch(struct rstream_sock *rs)
{
	struct sock *tsk = rs->tcp->sk;

	write_lock_bh(&tsk->sk_callback_lock);
	if (!rs->tcp_error_report) {
		rs->tcp_error_report = tsk->sk_error_report;
		__rcu_assign_sk_user_data_with_flags(tsk, rs,
						     SK_USER_DATA_NOCOPY);
		tsk->sk_error_report = rstream_fallback_error_report;
	}
	write_unlock_bh(&tsk->sk_callback_lock);
}

/*
 * A call that went to TCP returned @ret: an error TCP gave the caller
 * directly is no longer pending on the AF_RSTREAM socket.
 */
static int rstream_fallback_ret(struct rstream_sock *rs, int ret)
{
	if (unlikely(ret < 0)) {
		if (READ_ONCE(rs->sk.sk_err) == -ret)
			cmpxchg(&rs->sk.sk_err, -ret, 0);
		if (!READ_ONCE(rs->tcp->sk->sk_err))
			WRITE_ONCE(rs->tcp_err_copied, false);
	}
	return ret;
}

/* Every socket of the family, at its creation.  Process context. */
void rstream_fallback_sock_init(struct rstream_sock *rs)
{
	INIT_WORK(&rs->fallback_work, rstream_fallback_work);
}

/*
 * A file for a TCP socket of ours, opened with the caller's credentials:
 * what looks at a socket's owner through its file (iptables' and
 * nftables' owner matches, SIGURG) sees the caller's, as for its own TCP
 * socket.  On failure the socket is released.  Process context.
 */
static int rstream_fallback_file(struct socket *tcp)
{
	struct file *file = sock_alloc_file(tcp, 0, NULL);

	return PTR_ERR_OR_ZERO(file);
}

/*
 * socket(AF_RSTREAM, SOCK_STREAM, RSTREAM_PROTO_TCP4/6), for @rs to be
 * grafted on @sock: the TCP socket, of the IP version the protocol names,
 * made as the caller would make it (an LSM may refuse it), its wake-ups
 * @sock's.  Process context, a user's socket() (the TCP socket holds its
 * network namespace as the caller's own would).
 */
int rstream_fallback_create(struct rstream_sock *rs, struct socket *sock)
{
	struct sock *sk = &rs->sk;
	int family = sk->sk_protocol == RSTREAM_PROTO_TCP6 ? AF_INET6 : AF_INET;
	struct socket *tcp;
	int err;

	err = __sock_create(sock_net(sk), family, SOCK_STREAM, IPPROTO_TCP,
			    &tcp, 0);
	if (!err)
		err = rstream_fallback_file(tcp);
	if (err)
		return err;
	rstream_fallback_share_wq(sock, tcp);
	rs->tcp = tcp;
	rs->paths = RSTREAM_PATH_RDMA | RSTREAM_PATH_TCP;
	return 0;
}

/* Let go of the caller's TCP listener, if one is held.  Sock lock held. */
static void rstream_fallback_drop_borrowed(struct rstream_sock *rs)
{
	struct socket *tcp = rs->tcp;

	if (!tcp || !rs->tcp_borrowed)
		return;
	WRITE_ONCE(rs->tcp, NULL);
	rs->tcp_borrowed = false;
	remove_wait_queue(&tcp->wq.wait, &rs->tcp_wait);
	sockfd_put(tcp);
}

/*
 * The socket is closing and no other call runs on it: from here on no
 * work of ours touches the TCP side (the fallback work checks SOCK_DEAD
 * under the sock lock).  Our own TCP socket closes as TCP closes, after
 * the linger time SO_LINGER set; the caller's listener is let go of.
 * Process context, no lock held.
 */
void rstream_fallback_release(struct rstream_sock *rs)
{
	struct sock *sk = &rs->sk;
	struct socket *tcp;

	if (cancel_work_sync(&rs->fallback_work))
		sock_put(sk);
	lock_sock(sk);
	rstream_fallback_drop_borrowed(rs);
	tcp = rs->tcp;
	if (tcp)
		rstream_fallback_sync(rs);
	WRITE_ONCE(rs->tcp, NULL);
	release_sock(sk);
	if (!tcp)
		return;
	/*
	 * Its file's release may come after our socket is freed (fput()
	 * defers it): its wake-ups and errors are its own again first.
	 */
	write_lock_bh(&tcp->sk->sk_callback_lock);
	if (rs->tcp_error_report) {
		tcp->sk->sk_error_report = rs->tcp_error_report;
		rcu_assign_sk_user_data(tcp->sk, NULL);
	}
	rcu_assign_pointer(tcp->sk->sk_wq, &tcp->wq);
	write_unlock_bh(&tcp->sk->sk_callback_lock);
	fput(tcp->file);
}

/*
 * Whether a failed RDMA attempt (@err, positive) may go on over TCP: the
 * socket has a TCP side of its own that it may use, and the error says
 * that RDMA cannot be used to reach that address, where TCP may.
 */
bool rstream_fallback_usable(struct rstream_sock *rs, int err)
{
	if (!rs->tcp || rs->tcp_borrowed || !(rs->paths & RSTREAM_PATH_TCP))
		return false;
	switch (err) {
	case ECONNREFUSED:	/* nobody listens over RDMA there */
	case ENETUNREACH:	/* no RDMA route */
	case EHOSTUNREACH:
	case EADDRNOTAVAIL:	/* no RDMA device has the address */
	case EADDRINUSE:	/* the bound port is taken in rdma_cm's space */
	case ENODEV:		/* the device went away meanwhile */
	case ETIMEDOUT:		/* no answer in RSTREAM_CONNECT_TIMEOUT */
	case ENOBUFS:		/* rstream's memory limits */
	case ENOMEM:
	case EOPNOTSUPP:	/* a transport rstream does not take (iWARP) */
	case EPROTO:		/* an RDMA peer that does not speak rsockets */
		return true;
	default:
		return false;
	}
}

/*
 * Connect the TCP socket to @addr without waiting and make the socket
 * TCP's for good: every call goes to TCP from here on.  The connection is
 * under way (or made, or failed) before anyone can see the switch, so
 * poll never reports an unconnected TCP socket in between.  @why: the
 * errno of the RDMA attempt given up, 0 if none was made.  Returns TCP's
 * connect().  Sock lock held.
 */
static int rstream_fallback_switch(struct rstream_sock *rs, int why,
				   struct sockaddr *addr, int addrlen,
				   bool report)
{
	struct sock *sk = &rs->sk;
	int err;

	WRITE_ONCE(rs->fallback_err, why);
	/* RDMA is done with: its id, what it holds and was charged for. */
	rstream_conn_stop(rs);
	rstream_conn_free(rs);
	rstream_mem_uncharge(rs, false);
	rstream_fallback_sync(rs);
	rstream_fallback_watch(rs);
	err = kernel_connect(rs->tcp, addr, addrlen, O_NONBLOCK);
	/* Failed at once, with nobody to tell: SO_ERROR and poll say so. */
	if (report && err && err != -EINPROGRESS)
		WRITE_ONCE(sk->sk_err, -err);
	rs->paths = RSTREAM_PATH_TCP;
	/* Pairs with rstream_on_tcp(); poll reads the state after it. */
	smp_store_release(&rs->on_tcp, true);
	rstream_set_state(sk, TCP_CLOSE);
	return err;
}

/*
 * The CM's callback for a transparent socket whose RDMA attempt failed
 * with @err: if TCP may go on, the work that connects it is queued and
 * the CM publishes nothing of the failure (no error, no state, no wake).
 * CM handler or workqueue, no lock held; the socket lives through the
 * handler's run (who frees it destroys the id first, waiting for that).
 */
bool rstream_fallback_begin(struct rstream_sock *rs, int err)
{
	struct sock *sk = &rs->sk;

	if (sock_flag(sk, SOCK_DEAD) || !rstream_fallback_usable(rs, err))
		return false;
	WRITE_ONCE(rs->fallback_err, err);
	/* Before the CM marks the attempt dead: see rstream_poll(). */
	smp_wmb();
	sock_hold(sk);
	if (!queue_work(rstream_wq, &rs->fallback_work))
		sock_put(sk);
	return true;
}

/*
 * Workqueue: connect over TCP after the RDMA attempt failed (the CM
 * called rstream_fallback_begin()), and wake whoever waits: a blocking
 * connect() goes on waiting for TCP, poll reports what TCP reports.
 */
static void rstream_fallback_work(struct work_struct *work)
{
	struct rstream_sock *rs = container_of(work, struct rstream_sock,
					       fallback_work);
	struct sock *sk = &rs->sk;

	lock_sock(sk);
	if (!sock_flag(sk, SOCK_DEAD) && rs->tcp && !rs->on_tcp) {
		rstream_fallback_switch(rs, rs->fallback_err,
					(struct sockaddr *)&rs->peer_addr,
					sizeof(rs->peer_addr), true);
		sk->sk_state_change(sk);
	}
	release_sock(sk);
	sock_put(sk);
}

/*
 * connect() of a transparent socket over TCP: with @why set (the errno of
 * an RDMA attempt that cannot succeed) or with RDMA not allowed, TCP's
 * connect starts now; on a socket that is TCP's already, the call is
 * TCP's.  Process context, no lock held.
 */
int rstream_fallback_connect(struct rstream_sock *rs, struct sockaddr *addr,
			     int addrlen, int flags, int why)
{
	struct sock *sk = &rs->sk;
	struct socket *tcp = rs->tcp;
	int err;

	if (!rstream_on_tcp(rs)) {
		lock_sock(sk);
		if (!rs->on_tcp) {
			err = sk->sk_state != TCP_CLOSE ? -EISCONN :
			      rstream_fallback_switch(rs, why, addr, addrlen,
						      false);
			release_sock(sk);
			/* Blocking and under way: wait for it as TCP does. */
			if (err != -EINPROGRESS || (flags & O_NONBLOCK))
				return err;
		} else {
			release_sock(sk);	/* the fallback work was first */
		}
	} else if (READ_ONCE(tcp->state) == SS_UNCONNECTED &&
		   READ_ONCE(sk->sk_err)) {
		/* The fallback's TCP connect failed at once: that is the answer. */
		return sock_error(sk);
	}
	rstream_fallback_sync_fast(rs);
	return rstream_fallback_ret(rs, tcp->ops->connect(tcp, addr, addrlen,
							  flags));
}

/*
 * bind() of a transparent socket: TCP binds, with TCP's checks and errors;
 * the RDMA side binds to the address and port TCP got when it listens or
 * connects (rstream_sock_renew()).  Sock lock held.
 */
int rstream_fallback_bind(struct rstream_sock *rs, struct sockaddr *addr,
			  int addrlen)
{
	struct socket *tcp = rs->tcp;
	int err;

	rstream_fallback_sync(rs);
	err = tcp->ops->bind(tcp, addr, addrlen);
	if (err)
		return err;
	err = kernel_getsockname(tcp, (struct sockaddr *)&rs->local_addr);
	if (err < 0)
		return err;
	rs->bound = true;
	return 0;
}

/*
 * TCP's side of listen() on a transparent socket: TCP listens as asked
 * (binding an ephemeral port if unbound), and the RDMA side is to bind
 * to its address and port.  Sock lock held.
 */
int rstream_fallback_listen(struct rstream_sock *rs, int backlog)
{
	struct socket *tcp = rs->tcp;
	int err;

	rstream_fallback_sync(rs);
	err = tcp->ops->listen(tcp, backlog);
	if (err)
		return err;
	err = kernel_getsockname(tcp, (struct sockaddr *)&rs->local_addr);
	if (err < 0)
		return err;
	rs->bound = true;
	return 0;
}

/* The calls of a socket on TCP: TCP's own, with its settings up to date. */

int rstream_fallback_getname(struct rstream_sock *rs, struct sockaddr *addr,
			     int peer)
{
	return rs->tcp->ops->getname(rs->tcp, addr, peer);
}

/*
 * The caller registered on the AF_RSTREAM socket's queue, which is TCP's
 * too; TCP says what is ready.  An error TCP has not reported yet, or one
 * of the fallback's own, is SO_ERROR's from now on.
 */
__poll_t rstream_fallback_poll(struct file *file, struct rstream_sock *rs)
{
	struct socket *tcp = rs->tcp;
	struct sock *sk = &rs->sk;
	__poll_t mask;

	rstream_fallback_sync_fast(rs);
	mask = tcp->ops->poll(file, tcp, NULL);
	rstream_fallback_copy_err(rs, tcp->sk);
	if (READ_ONCE(sk->sk_err))
		mask |= EPOLLERR;
	return mask;
}

int rstream_fallback_ioctl(struct rstream_sock *rs, unsigned int cmd,
			   unsigned long arg)
{
	return rs->tcp->ops->ioctl(rs->tcp, cmd, arg);
}

int rstream_fallback_shutdown(struct rstream_sock *rs, int how)
{
	return rs->tcp->ops->shutdown(rs->tcp, how);
}

int rstream_fallback_setsockopt(struct rstream_sock *rs, int level,
				int optname, sockptr_t optval,
				unsigned int optlen)
{
	return rs->tcp->ops->setsockopt(rs->tcp, level, optname, optval,
					optlen);
}

int rstream_fallback_getsockopt(struct rstream_sock *rs, int level,
				int optname, char __user *optval,
				int __user *optlen)
{
	return rs->tcp->ops->getsockopt(rs->tcp, level, optname, optval,
					optlen);
}

int rstream_fallback_sendmsg(struct rstream_sock *rs, struct msghdr *msg,
			     size_t len)
{
	rstream_fallback_sync_fast(rs);
	return rstream_fallback_ret(rs, rs->tcp->ops->sendmsg(rs->tcp, msg,
							      len));
}

int rstream_fallback_recvmsg(struct rstream_sock *rs, struct msghdr *msg,
			     size_t len, int flags)
{
	rstream_fallback_sync_fast(rs);
	return rstream_fallback_ret(rs, rs->tcp->ops->recvmsg(rs->tcp, msg,
							      len, flags));
}

#ifdef RSTREAM_HAVE_SPLICE_EOF
void rstream_fallback_splice_eof(struct rstream_sock *rs)
{
	if (rs->tcp->ops->splice_eof)
		rs->tcp->ops->splice_eof(rs->tcp);
}
#endif

/*
 * RSTREAM_REUSEPORT: SO_REUSEPORT for a transparent socket, which the
 * socket core refuses to any family but TCP's.  It is TCP's option: the
 * flag is kept in rs->reuseport (not our sk_reuseport: see rstream.h),
 * from where rstream_fallback_sync() gives it to TCP before TCP binds,
 * listens or connects; it is given now too, so that it counts at once,
 * as on a TCP socket, whatever the socket's state.  A reuseport BPF
 * program cannot follow it (the core would attach it to our socket):
 * SO_ATTACH_REUSEPORT_CBPF and _EBPF stay refused, with EINVAL.  Nothing of
 * RDMA's changes: rdma_cm gives a port to one listener only, so of the
 * listeners that share a TCP port the first to listen also listens on
 * RDMA and the others, whose rdma_listen() fails, on TCP alone
 * (rstream_listen()).  Sock lock held, process context.
 */
int rstream_fallback_reuseport(struct rstream_sock *rs, bool on)
{
	if (!rstream_transparent(rs))
		return -EOPNOTSUPP;
	WRITE_ONCE(rs->reuseport, on);
	/* A child accepted over RDMA has no TCP socket to tell. */
	if (rs->tcp)
		rstream_fallback_sync(rs);
	return 0;
}

/*
 * SO_KEEPALIVE was set on the AF_RSTREAM socket (its sock lock held, by
 * sock_setsockopt()): TCP's keepalive timer follows it.
 */
void rstream_fallback_keepalive(struct rstream_sock *rs, int val)
{
	struct sock *tsk;

	if (!rs->tcp || rs->tcp_borrowed)
		return;
	tsk = rs->tcp->sk;
	lock_sock(tsk);
	if (tsk->sk_prot->keepalive)
		tsk->sk_prot->keepalive(tsk, val);
	sock_valbool_flag(tsk, SOCK_KEEPOPEN, val);
	release_sock(tsk);
}

/*
 * RSTREAM_TCP_LISTEN: the caller's listening TCP socket wakes us (softirq,
 * its queue's lock held): a client is ready, or the listener changed.
 * Our own queue's lock has a class of its own (af_rstream.c), so taking
 * it here nests two classes.
 */
static int rstream_fallback_borrowed_wake(struct wait_queue_entry *entry,
					  unsigned int mode, int sync,
					  void *key)
{
	struct rstream_sock *rs = container_of(entry, struct rstream_sock,
					       tcp_wait);

	rstream_wake(&rs->sk, EPOLLIN | EPOLLRDNORM);
	return 0;
}

/*
 * RSTREAM_TCP_LISTEN: take the caller's listening TCP socket @fd (-1: let
 * go of the one held), keeping a reference to its file; its own bind and
 * listen passed the checks TCP makes.  A descriptor that is not one
 * changes nothing.  Sock lock held, before listen().
 */
int rstream_fallback_attach(struct rstream_sock *rs, int fd)
{
	struct socket *tcp = NULL;
	struct sock *tsk;
	int err;

	if (rstream_transparent(rs))
		return -EINVAL;		/* it listens on TCP itself */
	if (fd != -1) {
		tcp = sockfd_lookup(fd, &err);
		if (!tcp)
			return err;
		tsk = tcp->sk;
		if (!tsk || (tsk->sk_family != AF_INET &&
			     tsk->sk_family != AF_INET6) ||
		    tsk->sk_type != SOCK_STREAM ||
		    tsk->sk_protocol != IPPROTO_TCP ||
		    READ_ONCE(tsk->sk_state) != TCP_LISTEN) {
			sockfd_put(tcp);
			return -EINVAL;
		}
	}
	rstream_fallback_drop_borrowed(rs);
	if (!tcp)
		return 0;
	init_waitqueue_func_entry(&rs->tcp_wait, rstream_fallback_borrowed_wake);
	add_wait_queue(&tcp->wq.wait, &rs->tcp_wait);
	rs->tcp_borrowed = true;
	WRITE_ONCE(rs->tcp, tcp);
	return 0;
}

/*
 * A TCP client waits to be accepted.  Lockless, as inet_csk_listen_poll();
 * @tcp changes only before listen() and at close.
 */
bool rstream_fallback_accept_ready(struct rstream_sock *rs)
{
	struct socket *tcp = READ_ONCE(rs->tcp);

	return tcp && !rstream_on_tcp(rs) &&
	       !reqsk_queue_empty(&inet_csk(tcp->sk)->icsk_accept_queue);
}

/*
 * Accept a waiting TCP client, without waiting, into a kernel socket of
 * its own with a file of the caller's; ERR_PTR(-EAGAIN) if none is there
 * after all.  Sock lock held, process context.
 */
struct socket *rstream_fallback_accept(struct rstream_sock *rs)
{
	struct socket *child;
	int err;

	if (!rs->tcp)
		return ERR_PTR(-EAGAIN);
	err = kernel_accept(rs->tcp, &child, O_NONBLOCK);
	if (!err)
		err = rstream_fallback_file(child);
	return err ? ERR_PTR(err) : child;
}

/* Close an accepted TCP connection nobody adopted.  Process context. */
void rstream_fallback_put(struct socket *tcp)
{
	fput(tcp->file);
}

/*
 * @rs, a new socket accept() is about to hand out (grafted, not yet
 * anyone else's), adopts the accepted TCP connection @tcp: a connection
 * on TCP from the start.  An error TCP had before is SO_ERROR's.
 */
void rstream_fallback_adopt(struct rstream_sock *rs, struct socket *tcp)
{
	rstream_fallback_inherit(&rs->sk, tcp->sk);
	rs->tcp = tcp;
	rstream_fallback_share_wq(rs->sk.sk_socket, tcp);
	rstream_fallback_watch(rs);
	rstream_fallback_copy_err(rs, tcp->sk);
	rs->paths = RSTREAM_PATH_TCP;
	/* Pairs with rstream_on_tcp(). */
	smp_store_release(&rs->on_tcp, true);
	rstream_set_state(&rs->sk, TCP_ESTABLISHED);
}
