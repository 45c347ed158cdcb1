// SPDX-License-Identifier: GPL-2.0
/*
 * A TCP listener beside an AF_RSTREAM listener (RSTREAM_TCP_LISTEN), so
 * that one listening socket takes both kinds of client on its port: the
 * ones that connect over RDMA and plain TCP ones.
 *
 * The TCP listener is the caller's own: a TCP socket it made, bound and
 * set listening itself, so every check those calls make (LSM hooks on the
 * port, the memory cgroup) applied to it as to any TCP listener.  The
 * option's value is its file descriptor; the AF_RSTREAM socket keeps a
 * reference to its file, and the caller may close its descriptor.
 *
 * accept() hands a TCP client over as a TCP socket, as MPTCP hands over a
 * client that did not speak MPTCP: the new socket's ops become TCP's and
 * everything after the accept is the TCP stack's.  A wait entry of ours
 * on the TCP listener's queue passes its wake-ups on to the AF_RSTREAM
 * listener's, so poll, select, epoll (registered before listen() too),
 * aio and SIGIO hear of TCP clients as of RDMA ones.  No callback of the
 * TCP socket is replaced: its children, which would inherit it, are plain
 * TCP sockets from the start and never call into this module.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/file.h>
#include <linux/module.h>
#include <linux/net.h>
#include <net/inet_connection_sock.h>
#include <net/sock.h>
#include <net/tcp_states.h>

#include "rstream.h"

/*
 * The TCP listener's queue was woken (softirq, its queue's lock held): a
 * client is ready, or the listener changed.  Our own queue's lock has a
 * class of its own (af_rstream.c), so taking it here nests two classes.
 */
static int rstream_tcp_wake(struct wait_queue_entry *entry, unsigned int mode,
			    int sync, void *key)
{
	struct rstream_sock *rs = container_of(entry, struct rstream_sock,
					       tcp_wait);

	rstream_wake(&rs->sk, EPOLLIN | EPOLLRDNORM);
	return 0;
}

/*
 * Take the TCP listener the caller passed as @fd (a descriptor; -1: let
 * go of the one taken before).  Sock lock held, before listen().
 */
int rstream_tcp_attach(struct rstream_sock *rs, int fd)
{
	struct socket *tsock;
	struct sock *tsk;
	int err;

	rstream_tcp_close(rs);
	if (fd == -1)
		return 0;
	tsock = sockfd_lookup(fd, &err);
	if (!tsock)
		return err;
	tsk = tsock->sk;
	if (!tsk || (tsk->sk_family != AF_INET && tsk->sk_family != AF_INET6) ||
	    tsk->sk_type != SOCK_STREAM || tsk->sk_protocol != IPPROTO_TCP ||
	    READ_ONCE(tsk->sk_state) != TCP_LISTEN) {
		sockfd_put(tsock);
		return -EINVAL;
	}
	init_waitqueue_func_entry(&rs->tcp_wait, rstream_tcp_wake);
	add_wait_queue(&tsock->wq.wait, &rs->tcp_wait);
	WRITE_ONCE(rs->tcp, tsock);
	return 0;
}

/*
 * Let go of the TCP listener: when the caller has closed its descriptor,
 * TCP closes it and resets the clients nobody accepted.  Process context:
 * the option is set again, or the AF_RSTREAM socket is released.
 */
void rstream_tcp_close(struct rstream_sock *rs)
{
	struct socket *tsock = rs->tcp;

	if (!tsock)
		return;
	WRITE_ONCE(rs->tcp, NULL);
	remove_wait_queue(&tsock->wq.wait, &rs->tcp_wait);
	sockfd_put(tsock);
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
 * reference on this module for the ops it set and takes none for TCP's:
 * the new ops' owner is held and ours given back.  -EAGAIN if no client
 * is there after all.  Sock lock of the listener held, process context;
 * not for kernel_accept(), which sets the ops itself after the accept.
 */
int rstream_tcp_accept(struct rstream_sock *rs, struct socket *newsock)
{
	struct socket *tsock = rs->tcp;
	const struct proto_ops *ops;
	int err;

	if (!tsock)
		return -EAGAIN;
	ops = READ_ONCE(tsock->ops);
#ifdef RSTREAM_HAVE_PROTO_ACCEPT_ARG
	{
		struct proto_accept_arg arg = { .flags = O_NONBLOCK };

		err = ops->accept(tsock, newsock, &arg);
	}
#else
	err = ops->accept(tsock, newsock, O_NONBLOCK, false);
#endif
	if (err)
		return err;
	__module_get(ops->owner);
	WRITE_ONCE(newsock->ops, ops);
	module_put(THIS_MODULE);
	return 0;
}
