// SPDX-License-Identifier: GPL-2.0
/*
 * A TCP listener beside an AF_RSTREAM listener (RSTREAM_TCP_LISTEN), so
 * that one listening socket takes both kinds of client on its port: the
 * ones that connect over RDMA and plain TCP ones.  accept() hands a TCP
 * client over as a TCP socket, as MPTCP hands over a client that did not
 * speak MPTCP: the new socket's ops become TCP's and everything after the
 * accept is the TCP stack's.  poll, select, epoll and a blocking accept()
 * on the listener wait on the TCP listener's wait queue as well as on its
 * own, so the TCP stack's own wake-ups reach them.  No callback of the
 * TCP socket is replaced: its children, which would inherit it, stay
 * plain TCP sockets from the start.
 *
 * The TCP socket is made in the caller of listen(), not as a kernel
 * socket: the LSM checks and the memory cgroup are the caller's, as if it
 * had made the socket itself, and so are those of the connections
 * accepted from it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/net.h>
#include <net/inet_connection_sock.h>
#include <net/ipv6.h>
#include <net/sock.h>
#include <net/tcp_states.h>
#include <rdma/rdma_cm.h>

#include "rstream.h"

/*
 * Listen on TCP at the address and port the AF_RSTREAM listener is bound
 * to, with its SO_REUSEADDR and IPV6_V6ONLY.  Sock lock held, process
 * context, before the AF_RSTREAM side listens.  The port is in TCP's
 * space, which is not rdma_cm's: a TCP socket may hold it already
 * (EADDRINUSE, and listen() fails).
 */
int rstream_tcp_listen(struct rstream_sock *rs, int backlog)
{
	struct sock *sk = &rs->sk;
	struct sockaddr_storage addr;
	struct socket *tsock;
	int len, err;

	mutex_lock(&rs->cm_lock);
	if (!rs->cm_id) {
		mutex_unlock(&rs->cm_lock);
		return -EADDRNOTAVAIL;
	}
	memcpy(&addr, &rs->cm_id->route.addr.src_addr, sizeof(addr));
	mutex_unlock(&rs->cm_lock);
	if (addr.ss_family == AF_INET6)
		len = sizeof(struct sockaddr_in6);
	else if (addr.ss_family == AF_INET)
		len = sizeof(struct sockaddr_in);
	else
		return -EAFNOSUPPORT;

	err = __sock_create(sock_net(sk), addr.ss_family, SOCK_STREAM,
			    IPPROTO_TCP, &tsock, 0);
	if (err)
		return err;
	if (sk->sk_reuse)
		sock_set_reuseaddr(tsock->sk);
	if (addr.ss_family == AF_INET6 && sk->sk_ipv6only) {
		err = ip6_sock_set_v6only(tsock->sk);
		if (err)
			goto fail;
	}
	err = kernel_bind(tsock, (struct sockaddr *)&addr, len);
	if (err) {
		net_info_ratelimited("TCP beside the listener on %pISpc: bind failed (%d)\n",
				     &addr, err);
		goto fail;
	}
	err = kernel_listen(tsock, backlog);
	if (err)
		goto fail;
	WRITE_ONCE(rs->tcp, tsock);
	return 0;
fail:
	sock_release(tsock);
	return err;
}

/* listen() again on a listener: the new backlog for TCP too.  Sock lock. */
void rstream_tcp_backlog(struct rstream_sock *rs, int backlog)
{
	if (rs->tcp)
		kernel_listen(rs->tcp, backlog);
}

/*
 * Let go of the TCP listener and the connections no one accepted from
 * it.  Process context; the AF_RSTREAM listener is closing, or its
 * listen() failed.
 */
void rstream_tcp_close(struct rstream_sock *rs)
{
	struct socket *tsock = rs->tcp;

	if (!tsock)
		return;
	WRITE_ONCE(rs->tcp, NULL);
	sock_release(tsock);
}

/* poll(), select(), epoll on the listener: hear the TCP listener too. */
void rstream_tcp_poll_wait(struct rstream_sock *rs, struct file *file,
			   poll_table *wait)
{
	struct socket *tsock = READ_ONCE(rs->tcp);

	if (tsock)
		poll_wait(file, &tsock->wq.wait, wait);
}

/*
 * A blocking accept() waits on the listener's queue with @primary, as
 * sk_wait_event() does; a wake-up from the TCP listener's queue marks
 * @primary woken too, so that wait_woken() cannot miss it.
 */
static int rstream_tcp_wake(struct wait_queue_entry *entry, unsigned int mode,
			    int sync, void *key)
{
	struct rstream_tcp_wait *w = container_of(entry, struct rstream_tcp_wait,
						  entry);

	return woken_wake_function(w->primary, mode, sync, key);
}

/* Sock lock of the listener held: rs->tcp stays while it accepts. */
void rstream_tcp_wait_start(struct rstream_sock *rs, struct rstream_tcp_wait *w,
			    struct wait_queue_entry *primary)
{
	if (!rs->tcp)
		return;
	init_waitqueue_func_entry(&w->entry, rstream_tcp_wake);
	w->primary = primary;
	add_wait_queue(&rs->tcp->wq.wait, &w->entry);
}

void rstream_tcp_wait_end(struct rstream_sock *rs, struct rstream_tcp_wait *w)
{
	if (rs->tcp)
		remove_wait_queue(&rs->tcp->wq.wait, &w->entry);
}

/* A TCP client waits to be accepted.  Lockless, as inet_csk_listen_poll(). */
bool rstream_tcp_accept_ready(struct rstream_sock *rs)
{
	struct socket *tsock = READ_ONCE(rs->tcp);

	return tsock &&
	       !reqsk_queue_empty(&inet_csk(tsock->sk)->icsk_accept_queue);
}

/*
 * Hand a waiting TCP client over as @newsock: accepted from the TCP
 * listener without waiting, @newsock becomes a TCP socket (its ops are
 * TCP's from here on, as MPTCP's fallback does).  The accept path took a
 * reference on this module for the ops it set; TCP's need none, so it is
 * given back.  -EAGAIN if no client is there after all.  Sock lock of
 * the listener held, process context.
 */
int rstream_tcp_accept(struct rstream_sock *rs, struct socket *newsock)
{
	struct socket *tsock = rs->tcp;
	int err;

	if (!tsock)
		return -EAGAIN;
#ifdef RSTREAM_HAVE_PROTO_ACCEPT_ARG
	{
		struct proto_accept_arg arg = { .flags = O_NONBLOCK };

		err = tsock->ops->accept(tsock, newsock, &arg);
	}
#else
	err = tsock->ops->accept(tsock, newsock, O_NONBLOCK, false);
#endif
	if (err)
		return err;
	WRITE_ONCE(newsock->ops, tsock->ops);
	module_put(THIS_MODULE);
	return 0;
}
