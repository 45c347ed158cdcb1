// SPDX-License-Identifier: GPL-2.0
/*
 * AF_RSTREAM: reliable byte-stream sockets over RDMA, speaking the rsockets
 * v1 wire protocol of librdmacm so that a kernel socket and a userspace
 * rsocket talk to each other.
 *
 * This file owns the socket family: module load and unload, socket creation
 * and release, and the proto_ops table: the socket calls, which hand over to
 * cm.c (connection management), tx.c and rx.c (the data path) and
 * options.c.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/in.h>
#include <asm/ioctls.h>
#include <linux/cgroup.h>
#include <linux/in6.h>
#include <linux/memcontrol.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/socket.h>
#include <net/net_namespace.h>
#include <linux/sched/signal.h>
#include <net/ipv6.h>
#include <net/sock.h>
#include <net/tcp_states.h>
#include <rdma/rdma_cm.h>
#include <linux/rstream.h>

#include "rstream.h"

/*
 * SO_KEEPALIVE (sock_setsockopt(), sock lock held, before it sets
 * SOCK_KEEPOPEN): the connection's probes start or stop (conn.c), and a
 * transparent socket's TCP side follows it.
 */
static void rstream_keepalive(struct sock *sk, int val)
{
	struct rstream_sock *rs = rstream_sk(sk);

	/* As tcp_set_keepalive(): the idle time counts from now at most. */
	if (val && !rs->keepalive) {
		spin_lock_bh(&rs->lock);
		rs->keepalive_at = jiffies;
		spin_unlock_bh(&rs->lock);
	}
	WRITE_ONCE(rs->keepalive, !!val);
	rstream_conn_live_update(rs);
	rstream_fallback_keepalive(rs, val);
}

/* The memory fields: what connections pin is socket memory (mem.c). */
static struct proto rstream_proto = {
	.name			= "RSTREAM",
	.owner			= THIS_MODULE,
	.obj_size		= sizeof(struct rstream_sock),
	.keepalive		= rstream_keepalive,
	.memory_allocated	= &rstream_memory_allocated,
	.per_cpu_fw_alloc	= &rstream_memory_per_cpu_fw_alloc,
	.sysctl_mem		= rstream_sysctl_mem,
	.sysctl_rmem		= rstream_sysctl_rmem,
	.sysctl_wmem		= rstream_sysctl_wmem,
};

/*
 * The socket lock gets classes of its own, so that lockdep reports name
 * AF_RSTREAM rather than the slot's old name; kernel sockets get separate
 * ones, as sock_lock_init() gives every family.
 */
static struct lock_class_key rstream_slock_keys[2];
static struct lock_class_key rstream_wq_lock_key;
static struct lock_class_key rstream_sk_lock_keys[2];
static const char *const rstream_slock_names[2] = {
	"slock-AF_RSTREAM", "slock-AF_RSTREAM-kern"
};

static const char *const rstream_sk_lock_names[2] = {
	"sk_lock-AF_RSTREAM", "sk_lock-AF_RSTREAM-kern"
};

/* Every socket, accepted or not, ends here: the in-use count with it. */
static void rstream_destruct(struct sock *sk)
{
	struct rstream_sock *rs = rstream_sk(sk);

	/* Zero-copy notifications nobody read (zc.c). */
	skb_queue_purge(&sk->sk_error_queue);
	rstream_conn_free(rs);
	rstream_mem_uncharge(rs, true);
	mutex_destroy(&rs->cm_lock);
	sock_prot_inuse_add(sock_net(sk), &rstream_proto, -1);
}

static struct rstream_sock *rstream_child_alloc(struct rstream_sock *lrs);

/*
 * Where the kernel lets a family have SOL_SOCKET's options
 * (SOCK_CUSTOM_SOCKOPT, from 6.2; vsock does the same), they come to
 * rstream_setsockopt(): SO_ZEROCOPY, which the core refuses to families
 * other than TCP's, UDP's and RDS's, is set there (options.c).
 */
static void rstream_sock_graft(struct sock *sk, struct socket *sock)
{
	sock_graft(sk, sock);
#ifdef SOCK_CUSTOM_SOCKOPT
	set_bit(SOCK_CUSTOM_SOCKOPT, &sock->flags);
#endif
}

/*
 * A new socket of this family: for socket(), or a connection arriving on
 * listener @parent, whose sizes and options it inherits as TCP's children
 * do.  Process context.
 */
static struct rstream_sock *rstream_sock_alloc(struct net *net,
					       struct sock *parent, int kern)
{
	struct rstream_sock *rs;
	struct sock *sk;

	/* The family parameter is read-only: this is the registered number. */
	sk = sk_alloc(net, rstream_param(RSTREAM_PARAM_FAMILY), GFP_KERNEL,
		      &rstream_proto, kern);
	if (!sk)
		return NULL;
	sock_init_data(NULL, sk);
	sock_lock_init_class_and_name(sk, rstream_slock_names[!!kern],
				      &rstream_slock_keys[!!kern],
				      rstream_sk_lock_names[!!kern],
				      &rstream_sk_lock_keys[!!kern]);
	sk->sk_type = SOCK_STREAM;
	/*
	 * Never IPPROTO_TCP, whichever was asked for: BPF helpers
	 * (bpf_tcp_sock(), bpf_setsockopt(SOL_TCP)) take any full socket
	 * with that protocol for a tcp_sock and would run off the end of
	 * this one.
	 */
	sk->sk_protocol = 0;
	sk->sk_destruct = rstream_destruct;
	sk->sk_state = TCP_CLOSE;

	rs = rstream_sk(sk);
	rstream_conn_init(rs);
	rstream_cm_init(rs);
	rstream_fallback_sock_init(rs);
	rs->new_child = rstream_child_alloc;
	rs->paths = RSTREAM_PATH_RDMA;
	rs->connect_timeout = msecs_to_jiffies(RSTREAM_CONNECT_TIMEOUT_MS);
	rs->rtt_at = jiffies - 1;
	if (parent) {
		struct rstream_sock *lrs = rstream_sk(parent);

		rs->ring_size = lrs->ring_size;
		rs->sbuf_size = lrs->sbuf_size;
		rs->sq_size = lrs->sq_size;
		rs->rq_size = lrs->rq_size;
		rs->inline_size = lrs->inline_size;
		rs->sizes_fixed = true;
		/* A transparent listener's children say so too (SO_PROTOCOL). */
		sk->sk_protocol = parent->sk_protocol;
		sk->sk_rcvbuf = parent->sk_rcvbuf;
		sk->sk_sndbuf = parent->sk_sndbuf;
		sk->sk_userlocks = parent->sk_userlocks;
		sk->sk_rcvlowat = parent->sk_rcvlowat;
		sk->sk_rcvtimeo = parent->sk_rcvtimeo;
		sk->sk_sndtimeo = parent->sk_sndtimeo;
		/* As TCP's children: the listener's liveness settings. */
		rs->keepalive = lrs->keepalive;
		rs->keepidle = lrs->keepidle;
		rs->keepintvl = lrs->keepintvl;
		rs->keepcnt = lrs->keepcnt;
		rs->user_timeout = lrs->user_timeout;
		/* As sk_clone_lock(): a timestamp flag holds the key. */
		sk->sk_flags = parent->sk_flags &
			       (RSTREAM_TCP_FLAGS | SK_FLAGS_TIMESTAMP);
		if (sk->sk_flags & SK_FLAGS_TIMESTAMP)
			net_enable_timestamp();
		sk->sk_lingertime = parent->sk_lingertime;
		sk->sk_reuse = parent->sk_reuse;
		rs->reuseport = lrs->reuseport;
#ifdef CONFIG_NET_RX_BUSY_POLL
		/* As sk_clone_lock(): the listener's busy polling. */
		sk->sk_ll_usec = READ_ONCE(parent->sk_ll_usec);
		sk->sk_prefer_busy_poll = READ_ONCE(parent->sk_prefer_busy_poll);
		sk->sk_busy_poll_budget = READ_ONCE(parent->sk_busy_poll_budget);
#endif
#ifdef CONFIG_MEMCG
		/*
		 * Charged where the listener is: its owner asked for the
		 * connections, which pin memory before anyone accepts them.
		 * The socket's destructor drops the reference.
		 */
		if (!sk->sk_memcg && rstream_memcg(parent)) {
			css_get(&parent->sk_memcg->css);
			sk->sk_memcg = parent->sk_memcg;
		}
#endif
	} else {
		/* rsocket's defaults; SO_SNDBUF/SO_RCVBUF may change them. */
		sk->sk_rcvbuf = rstream_param(RSTREAM_PARAM_MEM);
		sk->sk_sndbuf = rstream_param(RSTREAM_PARAM_WMEM);
		rs->sq_size = rstream_param(RSTREAM_PARAM_SQSIZE);
		rs->rq_size = rstream_param(RSTREAM_PARAM_RQSIZE);
		rs->inline_size = rstream_param(RSTREAM_PARAM_INLINE);
#ifdef CONFIG_NET_RX_BUSY_POLL
		/* net.core.busy_read, or the module's polling time if longer. */
		sk->sk_ll_usec = max_t(unsigned int, sk->sk_ll_usec,
				       rstream_param(RSTREAM_PARAM_POLLING_TIME));
#endif
	}
	sock_prot_inuse_add(net, &rstream_proto, 1);
	return rs;
}

/* The CM's callback for a connection arriving on listener @lrs. */
static struct rstream_sock *rstream_child_alloc(struct rstream_sock *lrs)
{
	return rstream_sock_alloc(sock_net(&lrs->sk), &lrs->sk,
				  lrs->sk.sk_kern_sock);
}

/*
 * The ring sizes, as rsocket takes them: SO_RCVBUF/SO_SNDBUF (which the
 * core has already doubled) or the module's defaults, in whole pages and
 * at least two, so each half of the ring is a page or more.  The staging
 * region's last RSTREAM_CTRL_BYTES hold the credit grants we send (tx.c):
 * its data ring is that much smaller, rather than the region a page (and
 * soft-RoCE's page list a table entry) larger for 64 bytes.  Sock lock.
 */
static void rstream_fix_sizes(struct rstream_sock *rs)
{
	struct sock *sk = &rs->sk;

	if (rs->sizes_fixed)
		return;
	/*
	 * SO_RCVBUFFORCE can ask for up to 2 GiB: keep to the range the
	 * module parameters allow, so a half ring fits an immediate.
	 */
	rs->ring_size = clamp_t(u32, PAGE_ALIGN(READ_ONCE(sk->sk_rcvbuf)),
				2 * PAGE_SIZE,
				rstream_params[RSTREAM_PARAM_MEM].max);
	rs->sbuf_size = clamp_t(u32, PAGE_ALIGN(READ_ONCE(sk->sk_sndbuf)),
				2 * PAGE_SIZE,
				rstream_params[RSTREAM_PARAM_WMEM].max) -
			RSTREAM_CTRL_BYTES;
	rs->sizes_fixed = true;
}

/*
 * Check a caller's address and copy it into @ss, zeroed first: an IPv6
 * address may come without its scope id (SIN6_LEN_RFC2133, 24 bytes), and
 * rdma_cm reads the whole sockaddr_in6.  The core has already copied it in
 * and capped @addrlen at the size of @ss.
 */
static int rstream_copy_addr(struct sockaddr_storage *ss,
			     const struct sockaddr *addr, int addrlen)
{
	if (addrlen < (int)sizeof(addr->sa_family))
		return -EINVAL;
	switch (addr->sa_family) {
	case AF_INET:
		if (addrlen < (int)sizeof(struct sockaddr_in))
			return -EINVAL;
		break;
	case AF_INET6:
		if (addrlen < SIN6_LEN_RFC2133)
			return -EINVAL;
		break;
	default:
		return -EAFNOSUPPORT;
	}
	memset(ss, 0, sizeof(*ss));
	memcpy(ss, addr, min_t(int, addrlen, sizeof(*ss)));
	return 0;
}

/* As TCP: a stream cannot go to a multicast or broadcast address. */
static bool rstream_unicast(const struct sockaddr_storage *ss)
{
	const struct sockaddr_in *sin = (const struct sockaddr_in *)ss;
	const struct sockaddr_in6 *sin6 = (const struct sockaddr_in6 *)ss;

	if (ss->ss_family == AF_INET)
		return !ipv4_is_multicast(sin->sin_addr.s_addr) &&
		       !ipv4_is_lbcast(sin->sin_addr.s_addr);
	return !ipv6_addr_is_multicast(&sin6->sin6_addr);
}

static int rstream_rdma_bind(struct socket *sock, struct sockaddr *addr,
			     int addrlen)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	struct sockaddr_storage ss;
	int err;

	err = rstream_copy_addr(&ss, addr, addrlen);
	if (err)
		return err;
	lock_sock(sk);
	if (rs->bound || sk->sk_state != TCP_CLOSE)
		err = -EINVAL;
	else
		err = rstream_cm_bind(rs, (struct sockaddr *)&ss);
	release_sock(sk);
	return err;
}

/*
 * Whether the socket must start again before it connects or listens: an
 * attempt was made, or its CM id went away with its RDMA device (bound
 * and no id).  Sock lock held.
 */
static bool rstream_needs_renew(struct rstream_sock *rs)
{
	return rs->flags || rs->sk.sk_shutdown ||
	       (rs->bound && !READ_ONCE(rs->cm_id));
}

/*
 * Start from scratch, as TCP does after a failed attempt: free what the
 * last attempt left and bind again to the address (and port) it had.
 * Returns that bind's error: the address may be gone with its device, or
 * the port taken meanwhile.  Sock lock held.
 */
static int rstream_sock_renew(struct rstream_sock *rs)
{
	struct sock *sk = &rs->sk;
	int err;

	/* Nothing of the last attempt may touch this one. */
	rstream_conn_stop(rs);
	rstream_conn_free(rs);
	rstream_mem_uncharge(rs, false);
	rs->flags = 0;
	/* The last attempt's liveness and TCP_INFO state goes with it. */
	rs->stall_at = 0;
	rs->rtt_timing = false;
	rs->rtt_at = jiffies - 1;	/* the first write is timed */
	rs->srtt_us = 0;
	rs->mdev_us = 0;
	rs->data_sent_at = 0;
	rs->data_recv_at = 0;
	reinit_completion(&rs->disc_done);
	reinit_completion(&rs->dreq_done);
	spin_lock_bh(&rs->lock);
	memset(&rs->rx, 0, sizeof(rs->rx));
	memset(&rs->tx, 0, sizeof(rs->tx));
	memset(&rs->sq, 0, sizeof(rs->sq));
	rs->rmsg_head = 0;
	rs->rmsg_tail = 0;
	rs->sq_ctrl = 0;
	rs->sbuf_head = 0;
	rs->sbuf_sent = 0;
	rs->sbuf_tail = 0;
	rs->zc_sent = 0;
	rs->tx_last_send = 0;
	rs->tx_rx_mark = 0;
	rs->tx_hold_until = 0;
	spin_unlock_bh(&rs->lock);
	WRITE_ONCE(sk->sk_err, 0);
	WRITE_ONCE(sk->sk_shutdown, 0);
	if (!rs->bound)
		return 0;
	rs->bound = false;
	err = rstream_cm_bind(rs, (struct sockaddr *)&rs->local_addr);
	if (err) {
		/* Still bound in the caller's eyes: the next call tries again. */
		rstream_cm_drop_id(rs);
		rs->bound = true;
	}
	return err;
}

/* listen() over RDMA.  Sock lock held. */
static int rstream_rdma_listen_locked(struct socket *sock, int backlog)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	int err;

	if (sock->state != SS_UNCONNECTED)
		return -EINVAL;
	if (sk->sk_state == TCP_LISTEN) {
		WRITE_ONCE(sk->sk_max_ack_backlog, backlog);
		return 0;
	}
	if (sk->sk_state != TCP_CLOSE)
		return -EINVAL;
	if (rstream_needs_renew(rs)) {
		err = rstream_sock_renew(rs);
		if (err)
			return err;
	}
	if (!rs->bound) {
		/* As TCP: an unbound listener gets an ephemeral port on any. */
		struct sockaddr_in any = { .sin_family = AF_INET };

		err = rstream_cm_bind(rs, (struct sockaddr *)&any);
		if (err)
			return err;
	}
	rstream_fix_sizes(rs);
	return rstream_cm_listen(rs, backlog);
}

static int rstream_rdma_listen(struct socket *sock, int backlog)
{
	int err;

	lock_sock(sock->sk);
	err = rstream_rdma_listen_locked(sock, backlog);
	release_sock(sock->sk);
	return err;
}

static int rstream_wait_connect(struct sock *sk, long *timeo)
{
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	int err = 0;

	add_wait_queue(sk_sleep(sk), &wait);
	while (rstream_state(sk) == TCP_SYN_SENT) {
		err = rstream_may_wait(*timeo);
		if (err)
			break;
		sk_wait_event(sk, timeo, rstream_state(sk) != TCP_SYN_SENT,
			      &wait);
	}
	remove_wait_queue(sk_sleep(sk), &wait);
	if (rstream_state(sk) != TCP_SYN_SENT)
		return 0;
	/* As TCP: out of time, the connection goes on in the background. */
	return err == -EAGAIN ? -EINPROGRESS : err;
}

/*
 * A passive rstream side offers its ring only as a grant, once a message
 * of ours has reached it (conn.c), not in its REP: a blocking connect()
 * returns once that grant is in, so that a first send finds room, as
 * after TCP's handshake (a nonblocking one reports POLLOUT only then).
 * Up to connect()'s own time, and no longer than connect() waits for an
 * answer; a peer that grants nothing then leaves a connection whose
 * sends wait for room.  Sock lock held.
 */
static bool rstream_connect_writable(struct rstream_sock *rs)
{
	return rstream_tx_writable(rs) || READ_ONCE(rs->sk.sk_err) ||
	       rstream_state(&rs->sk) != TCP_ESTABLISHED;
}

static void rstream_wait_first_grant(struct rstream_sock *rs, long timeo)
{
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	struct sock *sk = &rs->sk;

	if (rs->peer.buf_length)
		return;
	timeo = min_t(long, timeo, rs->connect_timeout);
	add_wait_queue(sk_sleep(sk), &wait);
	/* Polled after joining the queue: the CQ is armed for us (cq.c). */
	while (timeo && !signal_pending(current)) {
		rstream_cq_poll(rs);
		if (rstream_connect_writable(rs))
			break;
		sk_wait_event(sk, &timeo, rstream_connect_writable(rs), &wait);
	}
	remove_wait_queue(sk_sleep(sk), &wait);
}

static int rstream_rdma_connect(struct socket *sock, struct sockaddr *addr,
				int addrlen, int flags)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	struct sockaddr_storage ss;
	long timeo;
	int err;

	err = rstream_copy_addr(&ss, addr, addrlen);
	if (err)
		return err;

	lock_sock(sk);
	/* Gone over to TCP since the caller looked: TCP's call (af_rstream.c). */
	if (rs->on_tcp) {
		err = -EALREADY;
		goto out;
	}
	switch (sock->state) {
	case SS_CONNECTED:
		err = -EISCONN;
		goto out;
	case SS_CONNECTING:
		if (sk->sk_state == TCP_SYN_SENT) {
			err = -EALREADY;
			if (flags & O_NONBLOCK)
				goto out;
			break;
		}
		/*
		 * Finished since: as TCP, the first call after a nonblocking
		 * connect that was made returns 0 (hiredis asks so), later
		 * ones EISCONN.
		 */
		if (sk->sk_state == TCP_ESTABLISHED) {
			sock->state = SS_CONNECTED;
			err = 0;
			goto out;
		}
		err = sock_error(sk) ?: -ECONNABORTED;
		sock->state = SS_UNCONNECTED;
		goto out;
	case SS_UNCONNECTED:
		if (sk->sk_state != TCP_CLOSE) {
			err = -EISCONN;
			goto out;
		}
		if (!rstream_unicast(&ss)) {
			err = -ENETUNREACH;
			goto out;
		}
		if (rstream_needs_renew(rs)) {
			err = rstream_sock_renew(rs);
			if (err)
				goto out;
		}
		rstream_fix_sizes(rs);
		err = rstream_mem_charge(rs, true);
		if (err) {
			net_warn_ratelimited("connection to %pISpc refused: %s\n",
					     &ss, rstream_mem_limit_text(rs));
			goto out;
		}
		err = rstream_cm_connect(rs, &ss);
		if (err)
			goto out;
		sock->state = SS_CONNECTING;
		break;
	default:
		err = -EINVAL;
		goto out;
	}

	timeo = sock_sndtimeo(sk, flags & O_NONBLOCK);
	err = rstream_wait_connect(sk, &timeo);
	if (err)
		goto out;
	if (sk->sk_state == TCP_ESTABLISHED) {
		sock->state = SS_CONNECTED;
		err = 0;
		if (timeo)
			rstream_wait_first_grant(rs, timeo);
	} else {
		sock->state = SS_UNCONNECTED;
		err = sock_error(sk) ?: -ECONNREFUSED;
	}
out:
	release_sock(sk);
	return err;
}

/*
 * A TCP client accepted into @tcp becomes an AF_RSTREAM socket on TCP,
 * @newsock's (fallback.c).  Process context, no lock held.
 */
static int rstream_accept_tcp(struct sock *sk, struct socket *tcp,
			      struct socket *newsock, bool kern)
{
	struct rstream_sock *child;

	child = rstream_sock_alloc(sock_net(sk), sk, kern);
	if (!child) {
		rstream_fallback_put(tcp);
		return -ENOMEM;
	}
	lock_sock(&child->sk);
	rstream_sock_graft(&child->sk, newsock);
	newsock->state = SS_CONNECTED;
	rstream_fallback_adopt(child, tcp);
	release_sock(&child->sk);
	return 0;
}

static int rstream_accept_common(struct socket *sock, struct socket *newsock,
				 int flags, bool kern)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk), *child;
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	struct socket *tcp = NULL;
	long timeo;
	int err = 0;

	lock_sock(sk);
	timeo = sock_rcvtimeo(sk, flags & O_NONBLOCK);
	for (;;) {
		if (sk->sk_state != TCP_LISTEN) {
			err = -EINVAL;
			break;
		}
		child = rstream_cm_dequeue(rs);
		if (child)
			break;
		/* A client of the listener's TCP side (fallback.c). */
		if (rstream_fallback_accept_ready(rs)) {
			tcp = rstream_fallback_accept(rs);
			if (!IS_ERR(tcp))
				break;
			err = PTR_ERR(tcp);
			tcp = NULL;
			if (err != -EAGAIN)
				break;
			err = 0;
		}
		if (sk->sk_err) {
			err = sock_error(sk);
			break;
		}
		/*
		 * Its device went away: no connection will come again, but
		 * over TCP if it listens there too.
		 */
		if (!READ_ONCE(rs->cm_id) && !rs->tcp) {
			err = -ENODEV;
			break;
		}
		err = rstream_may_wait(timeo);
		if (err)
			break;
		add_wait_queue(sk_sleep(sk), &wait);
		sk_wait_event(sk, &timeo, rstream_cm_accept_ready(rs) ||
			      rstream_fallback_accept_ready(rs) ||
			      sk->sk_state != TCP_LISTEN, &wait);
		remove_wait_queue(sk_sleep(sk), &wait);
	}
	release_sock(sk);
	if (err)
		return err;
	if (tcp)
		return rstream_accept_tcp(sk, tcp, newsock, kern);

	lock_sock(&child->sk);
	rstream_sock_graft(&child->sk, newsock);
	newsock->state = SS_CONNECTED;
	release_sock(&child->sk);
	return 0;
}

#ifdef RSTREAM_HAVE_PROTO_ACCEPT_ARG
static int rstream_accept(struct socket *sock, struct socket *newsock,
			  struct proto_accept_arg *arg)
{
	return rstream_accept_common(sock, newsock, arg->flags, arg->kern);
}
#else
static int rstream_accept(struct socket *sock, struct socket *newsock,
			  int flags, bool kern)
{
	return rstream_accept_common(sock, newsock, flags, kern);
}
#endif

static int rstream_rdma_getname(struct socket *sock, struct sockaddr *addr,
				int peer)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	struct sockaddr_storage *ss;
	int len;

	lock_sock(sk);
	if (peer) {
		if (sock->state != SS_CONNECTED &&
		    !test_bit(RSTREAM_F_CONNECTED, &rs->flags)) {
			release_sock(sk);
			return -ENOTCONN;
		}
		ss = &rs->peer_addr;
	} else {
		mutex_lock(&rs->cm_lock);
		if (rs->cm_id && !test_bit(RSTREAM_F_CONNECTED, &rs->flags))
			memcpy(&rs->local_addr, &rs->cm_id->route.addr.src_addr,
			       sizeof(rs->local_addr));
		mutex_unlock(&rs->cm_lock);
		ss = &rs->local_addr;
	}
	if (ss->ss_family == AF_INET6) {
		len = sizeof(struct sockaddr_in6);
	} else {
		len = sizeof(struct sockaddr_in);
		if (ss->ss_family != AF_INET) {
			memset(ss, 0, len);
			ss->ss_family = AF_INET;
		}
	}
	memcpy(addr, ss, len);
	release_sock(sk);
	return len;
}

/* As tcp_poll(): lockless reads of state the handlers publish. */
static __poll_t rstream_poll_mask(struct rstream_sock *rs)
{
	struct sock *sk = &rs->sk;
	int state = rstream_state(sk);
	u8 shutdown = READ_ONCE(sk->sk_shutdown);
	bool rcv_shut, snd_shut;
	__poll_t mask = 0;

	if (state == TCP_LISTEN) {
		if (rstream_cm_accept_ready(rs) ||
		    rstream_fallback_accept_ready(rs))
			mask |= EPOLLIN | EPOLLRDNORM;
		/* Its device went away: accept() says so, unless TCP goes on. */
		if (READ_ONCE(sk->sk_err) ||
		    (!READ_ONCE(rs->cm_id) && !READ_ONCE(rs->tcp)))
			mask |= EPOLLERR;
		return mask;
	}

	rcv_shut = (shutdown & RCV_SHUTDOWN) ||
		   test_bit(RSTREAM_F_SHUT_RECV, &rs->flags) ||
		   test_bit(RSTREAM_F_DISC_RECV, &rs->flags) ||
		   test_bit(RSTREAM_F_DEAD, &rs->flags);
	snd_shut = (shutdown & SEND_SHUTDOWN) ||
		   test_bit(RSTREAM_F_DISC_RECV, &rs->flags) ||
		   test_bit(RSTREAM_F_DEAD, &rs->flags);

	if ((rcv_shut && snd_shut) || state == TCP_CLOSE)
		mask |= EPOLLHUP;
	if (rcv_shut)
		mask |= EPOLLIN | EPOLLRDNORM | EPOLLRDHUP;
	/* A caller about to wait for the peer: nothing stays corked. */
	if (state == TCP_ESTABLISHED) {
		rstream_tx_push(rs, false);
		rstream_cq_poll(rs);
	}
	if (state == TCP_ESTABLISHED || (state == TCP_CLOSE && shutdown)) {
		if (rstream_rx_ready(rs) >= max(READ_ONCE(sk->sk_rcvlowat), 1))
			mask |= EPOLLIN | EPOLLRDNORM;
		if (snd_shut || rstream_tx_writable(rs))
			mask |= EPOLLOUT | EPOLLWRNORM;
	}
	/* After the flags: a dead connection's error is set before it dies. */
	smp_rmb();
	/* As tcp_poll(): zero-copy notifications are errors to poll. */
	if (READ_ONCE(sk->sk_err) ||
	    !skb_queue_empty_lockless(&sk->sk_error_queue))
		mask |= EPOLLERR;
	return mask;
}

static int rstream_rdma_ioctl(struct socket *sock, unsigned int cmd,
			      unsigned long arg)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	int answ;

	switch (cmd) {
	case SIOCINQ:
		if (sk->sk_state == TCP_LISTEN)
			return -EINVAL;
		/* What the device placed and no poller has seen yet counts. */
		rstream_cq_poll(rs);
		answ = rstream_rx_ready(rs);
		break;
	case SIOCOUTQ:
		if (sk->sk_state == TCP_LISTEN)
			return -EINVAL;
		rstream_cq_poll(rs);
		answ = test_bit(RSTREAM_F_VERBS, &rs->flags) ?
		       rstream_tx_unacked(rs) : 0;
		break;
	default:
		return -ENOIOCTLCMD;
	}
	return put_user(answ, (int __user *)arg);
}

static int rstream_rdma_shutdown(struct socket *sock, int how)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	int err = 0;

	/* SHUT_RD, SHUT_WR, SHUT_RDWR are 0, 1, 2; the masks are 1, 2, 3. */
	how++;
	if ((how & ~SHUTDOWN_MASK) || !how)
		return -EINVAL;

	lock_sock(sk);
	if (sk->sk_state != TCP_ESTABLISHED && sk->sk_state != TCP_SYN_SENT &&
	    !(sk->sk_state == TCP_CLOSE && test_bit(RSTREAM_F_CONNECTED,
						    &rs->flags))) {
		err = -ENOTCONN;
		goto out;
	}
	WRITE_ONCE(sk->sk_shutdown, sk->sk_shutdown | how);
	/*
	 * rsocket's rshutdown(): SHUTDOWN while we may still read, else
	 * DISCONNECT (also once the peer's SHUTDOWN came: a SHUTDOWN then
	 * would leave the peer to end the stream with a DREQ alone, which
	 * reads as a reset); reading alone stops without a message.
	 */
	if (test_bit(RSTREAM_F_CONNECTED, &rs->flags) &&
	    !test_bit(RSTREAM_F_DISC_SENT, &rs->flags)) {
		if ((sk->sk_shutdown & SHUTDOWN_MASK) == SHUTDOWN_MASK ||
		    ((how & SEND_SHUTDOWN) &&
		     test_bit(RSTREAM_F_SHUT_RECV, &rs->flags)))
			rstream_send_ctrl(rs, RSTREAM_CTRL_DISCONNECT);
		else if ((how & SEND_SHUTDOWN) &&
			 !test_bit(RSTREAM_F_SHUT_SENT, &rs->flags))
			rstream_send_ctrl(rs, RSTREAM_CTRL_SHUTDOWN);
	}
	rstream_wake(sk, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLHUP);
out:
	release_sock(sk);
	return err;
}

/* Process context; the socket is going away and no other caller holds it. */
static int rstream_release(struct socket *sock)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs;
	bool listener;

	if (!sk)
		return 0;
	rs = rstream_sk(sk);

	lock_sock(sk);
	listener = sk->sk_state == TCP_LISTEN;
	/*
	 * As tcp_close(): with bytes left unread, or SO_LINGER's zero time,
	 * the close throws data away and the peer reads ECONNRESET.  Bytes
	 * whose completion waits in an unarmed CQ (cq.c) count: the peer's
	 * device has acknowledged them, as TCP's had been.
	 */
	if (!listener && test_bit(RSTREAM_F_CONNECTED, &rs->flags))
		rstream_cq_drain(rs);
	if (!listener && test_bit(RSTREAM_F_CONNECTED, &rs->flags) &&
	    ((sock_flag(sk, SOCK_LINGER) && !sk->sk_lingertime) ||
	     rstream_rx_ready(rs)))
		set_bit(RSTREAM_F_ABORT, &rs->flags);
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	sock_orphan(sk);
	release_sock(sk);

	rstream_fallback_release(rs);
	if (listener) {
		rstream_cm_close_listener(rs);
	} else if (!test_bit(RSTREAM_F_VERBS, &rs->flags) &&
		   rstream_state(sk) != TCP_SYN_SENT) {
		/* Bound only, or a failed connect: free the port at once. */
		rstream_cm_drop_id(rs);
	} else {
		/* Disconnecting may wait on the peer: not in close(). */
		sock_hold(sk);
		rstream_conn_teardown(rs);
	}
	sock->sk = NULL;
	sock_put(sk);
	return 0;
}

#ifdef RSTREAM_HAVE_SPLICE_EOF
/*
 * sendfile()/splice() ran out of input before the count it was given: its
 * last send said MSG_MORE, for bytes that will not come.  Post what that
 * held, as tcp_splice_eof() does, unless TCP_CORK holds it on purpose.
 * Process context.
 */
static void rstream_rdma_splice_eof(struct socket *sock)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);

	lock_sock(sk);
	if (!rs->cork)
		rstream_tx_push(rs, true);
	release_sock(sk);
}
#endif

/*
 * The socket calls.  A connection on TCP (a transparent socket that fell
 * back, a TCP client accept() handed out) has every call go to its TCP
 * socket, through fallback.c.  A transparent socket (RSTREAM_PROTO_TCP4/6)
 * that may still use TCP keeps its TCP side in step: bind and listen are
 * TCP's first, settings go to both, and a connection attempt that RDMA
 * cannot make goes on over TCP.  Every other socket, a connection over
 * RDMA included, takes the RDMA calls above: one test of a flag apart,
 * nothing of TCP's is on their way.
 */

static bool rstream_has_tcp(struct rstream_sock *rs)
{
	return rs->tcp && (rstream_paths(rs) & RSTREAM_PATH_TCP);
}

static int rstream_bind(struct socket *sock, struct sockaddr *addr,
			int addrlen)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	int err;

	if (!rstream_has_tcp(rs))
		return rstream_rdma_bind(sock, addr, addrlen);
	lock_sock(sk);
	if (sk->sk_state != TCP_CLOSE && !rs->on_tcp)
		err = -EINVAL;
	else
		err = rstream_fallback_bind(rs, addr, addrlen);
	release_sock(sk);
	return err;
}

/*
 * TCP listens first, as asked; then RDMA at TCP's address and port.  If
 * RDMA cannot listen there (an address no RDMA device has, a port taken
 * in rdma_cm's space), the listener is TCP's alone.
 */
static int rstream_listen(struct socket *sock, int backlog)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	int err = -EINVAL;

	if (!rstream_has_tcp(rs))
		return rstream_rdma_listen(sock, backlog);
	lock_sock(sk);
	if (rs->on_tcp || sock->state != SS_UNCONNECTED ||
	    (sk->sk_state != TCP_CLOSE && sk->sk_state != TCP_LISTEN))
		goto out;
	err = rstream_fallback_listen(rs, backlog);
	if (err)
		goto out;
	if (sk->sk_state == TCP_CLOSE && (rs->paths & RSTREAM_PATH_RDMA)) {
		int rdma_err = rstream_rdma_listen_locked(sock, backlog);

		/* RSTREAM_FALLBACK says why RDMA does not listen. */
		if (rdma_err) {
			rs->paths &= ~RSTREAM_PATH_RDMA;
			WRITE_ONCE(rs->fallback_err, -rdma_err);
			rstream_cm_drop_id(rs);
		}
	}
	WRITE_ONCE(sk->sk_max_ack_backlog, backlog);
	rstream_set_state(sk, TCP_LISTEN);
out:
	release_sock(sk);
	return err;
}

static int rstream_connect(struct socket *sock, struct sockaddr *addr,
			   int addrlen, int flags)
{
	struct rstream_sock *rs = rstream_sk(sock->sk);
	int err;

	if (!rs->tcp)
		return rstream_rdma_connect(sock, addr, addrlen, flags);
	if (rstream_on_tcp(rs) || !(READ_ONCE(rs->paths) & RSTREAM_PATH_RDMA))
		return rstream_fallback_connect(rs, addr, addrlen, flags, 0);
	/* As TCP: an address of the other IP version is refused at once. */
	if (addrlen >= (int)sizeof(addr->sa_family) &&
	    addr->sa_family != rs->tcp->sk->sk_family)
		return -EAFNOSUPPORT;
	err = rstream_rdma_connect(sock, addr, addrlen, flags);
	if (!err)
		return 0;
	if (rstream_on_tcp(rs)) {
		/*
		 * The attempt went over to TCP while we waited: wait for TCP,
		 * unless its connect failed at once, which was the answer
		 * (EALREADY: we came after the switch, TCP answers).
		 */
		if (err != -EALREADY &&
		    READ_ONCE(rs->tcp->state) == SS_UNCONNECTED)
			return err;
		return rstream_fallback_connect(rs, addr, addrlen, flags, 0);
	}
	if (!rstream_fallback_usable(rs, -err))
		return err;
	return rstream_fallback_connect(rs, addr, addrlen, flags, -err);
}

static int rstream_getname(struct socket *sock, struct sockaddr *addr,
			   int peer)
{
	struct rstream_sock *rs = rstream_sk(sock->sk);

	/* Unconnected or listening: the name is TCP's, RDMA has the same. */
	if (rstream_on_tcp(rs) ||
	    (!peer && rstream_has_tcp(rs) &&
	     rstream_state(&rs->sk) != TCP_SYN_SENT))
		return rstream_fallback_getname(rs, addr, peer);
	return rstream_rdma_getname(sock, addr, peer);
}

/*
 * Once an RDMA attempt is given up for TCP (rstream_fallback_begin(),
 * before the CM marks it dead), the socket is still connecting until the
 * switch to TCP: what the dying attempt shows is not its state.
 */
static __poll_t rstream_poll(struct file *file, struct socket *sock,
			     poll_table *wait)
{
	struct rstream_sock *rs = rstream_sk(sock->sk);
	__poll_t mask;

	sock_poll_wait(file, sock, wait);
	if (rstream_on_tcp(rs))
		return rstream_fallback_poll(file, rs);
	mask = rstream_poll_mask(rs);
	/* Pairs with the barrier in rstream_fallback_begin(). */
	smp_rmb();
	if (!READ_ONCE(rs->fallback_err) ||
	    rstream_state(&rs->sk) == TCP_LISTEN)
		return mask;
	return rstream_on_tcp(rs) ? rstream_fallback_poll(file, rs) : 0;
}

static int rstream_ioctl(struct socket *sock, unsigned int cmd,
			 unsigned long arg)
{
	struct rstream_sock *rs = rstream_sk(sock->sk);

	if (rstream_on_tcp(rs))
		return rstream_fallback_ioctl(rs, cmd, arg);
	return rstream_rdma_ioctl(sock, cmd, arg);
}

static int rstream_shutdown(struct socket *sock, int how)
{
	struct rstream_sock *rs = rstream_sk(sock->sk);

	if (rstream_on_tcp(rs))
		return rstream_fallback_shutdown(rs, how);
	return rstream_rdma_shutdown(sock, how);
}

/*
 * Until the path is chosen, an option goes to TCP, whose answer is the
 * caller's, then to the RDMA side, which keeps what it has of it: TCP's
 * options keep their meaning after a fallback.  TCP_ULP would replace the
 * TCP socket's ops under us: refused, as SMC does.
 */
static int rstream_setsockopt(struct socket *sock, int level, int optname,
			      sockptr_t optval, unsigned int optlen)
{
	struct rstream_sock *rs = rstream_sk(sock->sk);
	u8 paths = rstream_paths(rs);
	int err;

	/* Only with SOCK_CUSTOM_SOCKOPT (rstream_sock_graft()). */
	if (level == SOL_SOCKET)
		return rstream_sol_socket_setsockopt(sock, optname, optval,
						     optlen);
	if (level == SOL_RDMA || !rs->tcp || !(paths & RSTREAM_PATH_TCP))
		return rstream_rdma_setsockopt(sock, level, optname, optval,
					       optlen);
	if (level == SOL_TCP && optname == TCP_ULP)
		return -EOPNOTSUPP;
	err = rstream_fallback_setsockopt(rs, level, optname, optval, optlen);
	if (!err && (paths & RSTREAM_PATH_RDMA))
		rstream_rdma_setsockopt(sock, level, optname, optval, optlen);
	return err;
}

static int rstream_getsockopt(struct socket *sock, int level, int optname,
			      char __user *optval, int __user *optlen)
{
	struct rstream_sock *rs = rstream_sk(sock->sk);

	if (level != SOL_RDMA && rstream_has_tcp(rs))
		return rstream_fallback_getsockopt(rs, level, optname, optval,
						   optlen);
	return rstream_rdma_getsockopt(sock, level, optname, optval,
				       optlen);
}

/*
 * A transparent socket whose RDMA connection is under way, or being given
 * up for TCP, does not know yet which path a send or a receive takes: as
 * TCP does before its connection is made, wait for it, or say EAGAIN.
 * The RDMA path's own wait would wake to the attempt's end, not to TCP's
 * connection.  Process context.
 */
static int rstream_wait_path(struct rstream_sock *rs, long timeo)
{
	DEFINE_WAIT_FUNC(wait, woken_wake_function);
	struct sock *sk = &rs->sk;
	int err = 0;

	if (!rs->tcp || rstream_state(sk) != TCP_SYN_SENT)
		return 0;
	lock_sock(sk);
	add_wait_queue(sk_sleep(sk), &wait);
	while (rstream_state(sk) == TCP_SYN_SENT && !rs->on_tcp) {
		err = rstream_may_wait(timeo);
		if (err)
			break;
		sk_wait_event(sk, &timeo, rstream_state(sk) != TCP_SYN_SENT ||
			      rs->on_tcp, &wait);
	}
	remove_wait_queue(sk_sleep(sk), &wait);
	release_sock(sk);
	return err;
}

static int rstream_sendmsg(struct socket *sock, struct msghdr *msg,
			   size_t len)
{
	struct rstream_sock *rs = rstream_sk(sock->sk);
	int err;

	if (rstream_on_tcp(rs))
		return rstream_fallback_sendmsg(rs, msg, len);
	err = rstream_wait_path(rs, sock_sndtimeo(sock->sk, msg->msg_flags &
						  MSG_DONTWAIT));
	if (err)
		return err;
	if (rstream_on_tcp(rs))
		return rstream_fallback_sendmsg(rs, msg, len);
	return rstream_rdma_sendmsg(sock, msg, len);
}

static int rstream_recvmsg(struct socket *sock, struct msghdr *msg,
			   size_t len, int flags)
{
	struct rstream_sock *rs = rstream_sk(sock->sk);
	int err;

	if (rstream_on_tcp(rs))
		return rstream_fallback_recvmsg(rs, msg, len, flags);
	/* The error queue is read at once, as TCP's, whatever the path. */
	if (flags & MSG_ERRQUEUE)
		return rstream_rdma_recvmsg(sock, msg, len, flags);
	err = rstream_wait_path(rs, sock_rcvtimeo(sock->sk,
						  flags & MSG_DONTWAIT));
	if (err)
		return err;
	if (rstream_on_tcp(rs))
		return rstream_fallback_recvmsg(rs, msg, len, flags);
	return rstream_rdma_recvmsg(sock, msg, len, flags);
}

#ifdef RSTREAM_HAVE_SPLICE_EOF
static void rstream_splice_eof(struct socket *sock)
{
	struct rstream_sock *rs = rstream_sk(sock->sk);

	if (rstream_on_tcp(rs))
		rstream_fallback_splice_eof(rs);
	else
		rstream_rdma_splice_eof(sock);
}
#endif

/*
 * No .family: the number is chosen at load time, and the core takes a
 * socket's family from rstream_family_ops and sk->sk_family, not from here.
 */
static const struct proto_ops rstream_stream_ops = {
	.owner		= THIS_MODULE,
	.release	= rstream_release,
	.bind		= rstream_bind,
	.connect	= rstream_connect,
	.socketpair	= sock_no_socketpair,
	.accept		= rstream_accept,
	.getname	= rstream_getname,
	.poll		= rstream_poll,
	.ioctl		= rstream_ioctl,
	.listen		= rstream_listen,
	.shutdown	= rstream_shutdown,
	.setsockopt	= rstream_setsockopt,
	.getsockopt	= rstream_getsockopt,
	.sendmsg	= rstream_sendmsg,
	.recvmsg	= rstream_recvmsg,
	.mmap		= sock_no_mmap,
#ifdef RSTREAM_HAVE_SPLICE_EOF
	.splice_eof	= rstream_splice_eof,
#endif
};

/*
 * socket(AF_RSTREAM, SOCK_STREAM, 0 or IPPROTO_TCP), as rsocket() accepts,
 * or RSTREAM_PROTO_TCP4/6 for a transparent socket.  Process context.
 */
static int rstream_create(struct net *net, struct socket *sock, int protocol,
			  int kern)
{
	bool transparent = protocol == RSTREAM_PROTO_TCP4 ||
			   protocol == RSTREAM_PROTO_TCP6;
	struct rstream_sock *rs;
	int err;

	if (sock->type != SOCK_STREAM)
		return -ESOCKTNOSUPPORT;
	/* Not for the kernel's own users: they have no use for a fallback. */
	if ((protocol && protocol != IPPROTO_TCP && !transparent) ||
	    (transparent && kern))
		return -EPROTONOSUPPORT;

	rs = rstream_sock_alloc(net, NULL, kern);
	if (!rs)
		return -ENOMEM;
	if (transparent) {
		rs->sk.sk_protocol = protocol;
		err = rstream_fallback_create(rs, sock);
		if (err) {
			sock_put(&rs->sk);
			return err;
		}
		/* The CM hands a failed attempt over (fallback.c). */
		rs->fallback = rstream_fallback_begin;
		rs->connect_timeout =
			msecs_to_jiffies(RSTREAM_FALLBACK_TIMEOUT_MS);
	}
	/*
	 * The wait queue's lock gets a class of its own: a TCP listener's
	 * wake-up (RSTREAM_TCP_LISTEN) wakes this queue with that socket's
	 * queue lock, of the class every socket's has, held (fallback.c).
	 */
	lockdep_set_class(&sock->wq.wait.lock, &rstream_wq_lock_key);
	sock->state = SS_UNCONNECTED;
	sock->ops = &rstream_stream_ops;
	rstream_sock_graft(&rs->sk, sock);
	return 0;
}

/* Not const: .family is the number chosen at load time. */
static struct net_proto_family rstream_family_ops __ro_after_init = {
	.create	= rstream_create,
	.owner	= THIS_MODULE,
};

static int __init rstream_init(void)
{
	int family = rstream_param(RSTREAM_PARAM_FAMILY);
	int err;

	rstream_family_ops.family = family;

	rstream_wq = alloc_workqueue("rstream", WQ_MEM_RECLAIM, 0);
	if (!rstream_wq)
		return -ENOMEM;
	err = proto_register(&rstream_proto, 1);
	if (err)
		goto err_wq;
	err = rstream_proc_init();
	if (err)
		goto err_proto;
	err = rstream_cq_init();
	if (err)
		goto err_proc;
	err = rstream_device_init();
	if (err)
		goto err_cq;

	/* Last: once registered, sockets can be created. */
	err = sock_register(&rstream_family_ops);
	if (err == -EEXIST) {
		pr_err("address family %d is already registered by another protocol; load rstream with family= one of %s\n",
		       family, rstream_params[RSTREAM_PARAM_FAMILY].only_text);
		/* modprobe takes -EEXIST from init for "already loaded". */
		err = -EBUSY;
		goto err_device;
	}
	if (err) {
		pr_err("cannot register address family %d: %d\n", family, err);
		goto err_device;
	}

	pr_info("AF_RSTREAM registered as address family %d (rsockets v1)\n",
		family);
	return 0;

err_device:
	rstream_device_exit();
err_cq:
	rstream_cq_exit();
err_proc:
	rstream_proc_exit();
err_proto:
	proto_unregister(&rstream_proto);
err_wq:
	destroy_workqueue(rstream_wq);
	return err;
}

static void __exit rstream_exit(void)
{
	/* No sockets remain: each holds a reference on this module. */
	sock_unregister(rstream_family_ops.family);
	rstream_device_exit();
	rstream_cq_exit();
	rstream_proc_exit();
	proto_unregister(&rstream_proto);
	/* Teardowns hold a socket, hence the module: none is left running. */
	destroy_workqueue(rstream_wq);
}

module_init(rstream_init);
module_exit(rstream_exit);

MODULE_DESCRIPTION("AF_RSTREAM: reliable byte streams over RDMA (rsockets v1)");
/*
 * socket(AF_RSTREAM, ...) loads the module (the core asks for net-pf-N).
 * For the default number only: loaded with another family=, the module
 * is listed in modules-load.d instead.
 */
MODULE_ALIAS_NETPROTO(AF_RSTREAM);
MODULE_LICENSE("GPL");
MODULE_VERSION(RSTREAM_VERSION);
