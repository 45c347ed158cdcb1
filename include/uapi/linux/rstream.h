/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * AF_RSTREAM: reliable byte-stream sockets over RDMA that speak the
 * rsockets v1 wire protocol of librdmacm.
 *
 * The family number is not assigned by Linux.  The module takes
 * AF_RSTREAM by default and can be loaded with another number
 * (module parameter "family"); the number in use is published in
 * /sys/module/rstream/parameters/family.  Define AF_RSTREAM before
 * including this header to build against another number.
 *
 * The SOL_RDMA option names and values are those of rdma-core's
 * <rdma/rsocket.h>, so that rsocket programs port by renaming calls.
 * If <rdma/rsocket.h> is included first, its definitions are used.
 */
#ifndef _UAPI_LINUX_RSTREAM_H
#define _UAPI_LINUX_RSTREAM_H

#include <linux/types.h>

#ifndef AF_RSTREAM
#define AF_RSTREAM	22
#endif
#ifndef PF_RSTREAM
#define PF_RSTREAM	AF_RSTREAM
#endif

/* Where the module publishes the family number it registered. */
#define RSTREAM_FAMILY_SYSFS	"/sys/module/rstream/parameters/family"

#ifndef SOL_RDMA
#define SOL_RDMA	0x10000

#define RDMA_SQSIZE	0	/* send queue entries (unsigned int) */
#define RDMA_RQSIZE	1	/* receive queue entries (unsigned int) */
#define RDMA_INLINE	2	/* inline send threshold in bytes (unsigned int) */
#define RDMA_IOMAPSIZE	3	/* iomap entries (int); rstream supports 0 */
#define RDMA_ROUTE	4	/* path record (struct ibv_path_data) */
#endif

/*
 * Transparent sockets: socket(AF_RSTREAM, SOCK_STREAM, RSTREAM_PROTO_TCP4)
 * (or RSTREAM_PROTO_TCP6) is a stream socket that is TCP until RDMA is
 * proven.  It holds a TCP socket of the given IP version from the start:
 * bind() binds it, options RDMA lacks are set on it, listen() listens on
 * RDMA and TCP at the same port, and connect() tries RDMA first and
 * connects over TCP when RDMA cannot be used there (no RDMA device or
 * route, nobody listening over RDMA, no answer within
 * RSTREAM_CONNECT_TIMEOUT, rstream's memory limit).  Once on TCP, every
 * call goes to the TCP socket.  Protocol 0 and IPPROTO_TCP make sockets
 * that only ever use RDMA, as rsocket() does.
 */
#define RSTREAM_PROTO_TCP4	256
#define RSTREAM_PROTO_TCP6	257

/*
 * rstream's own SOL_RDMA options, not rsocket's.
 *
 * RSTREAM_TCP_LISTEN: set before listen(), its value (an int) is the file
 * descriptor of a listening TCP socket, which the caller may then close:
 * accept() on the AF_RSTREAM listener also takes that socket's clients,
 * beside the connections that come over RDMA, and poll/epoll on it see
 * both.  -1 lets go of it; reading the option says whether one is held.
 * Not for transparent sockets, which listen on TCP themselves.
 *
 * RSTREAM_PATH (int): the paths a socket may use, RSTREAM_PATH_RDMA and
 * RSTREAM_PATH_TCP together by default on a transparent socket.  Set on a
 * transparent socket before connect() or listen(): RSTREAM_PATH_RDMA
 * alone never falls back, RSTREAM_PATH_TCP alone never tries RDMA.  Read
 * back: before connect(), what is allowed; on a listener, what it listens
 * on; on a connection, the one it uses.
 *
 * RSTREAM_FALLBACK (int, read only): the errno of the RDMA attempt that
 * made a transparent socket connect over TCP instead, 0 if none did.
 *
 * RSTREAM_CONNECT_TIMEOUT (int, milliseconds, 1..60000): how long
 * connect() waits for the RDMA connection: then a transparent socket
 * falls back to TCP, any other fails with ETIMEDOUT.  3000 on transparent
 * sockets, 20000 on others, by default.
 */
#define RSTREAM_TCP_LISTEN	0x1000
#define RSTREAM_PATH		0x1001
#define RSTREAM_FALLBACK	0x1002
#define RSTREAM_CONNECT_TIMEOUT	0x1003

#define RSTREAM_PATH_RDMA	1
#define RSTREAM_PATH_TCP	2

/*
 * RSTREAM_INFO (struct rstream_info, read only): the RDMA side of a
 * connection, as TCP_INFO is its TCP side.  Before the connection has its
 * queue pair, and on a socket on TCP, the device, queue pairs, ring sizes
 * and counters read 0, the queue sizes those it would ask for.  A shorter
 * buffer gets the start of it.
 */
#define RSTREAM_INFO		0x1004

/*
 * RSTREAM_REUSEPORT (int): SO_REUSEPORT for a transparent socket, whose
 * family the socket core refuses it to.  It sets SO_REUSEPORT on the TCP
 * socket, with TCP's meaning and rules: several listeners of one user
 * bound to one port share its TCP clients.  They cannot share it over
 * RDMA (rdma_cm gives a port to one listener): the first of them to
 * listen also listens on RDMA and takes every RDMA client, the others
 * listen on TCP alone (RSTREAM_FALLBACK reads EADDRINUSE).  SOL_SOCKET's
 * SO_REUSEPORT of the AF_RSTREAM socket stays 0, so reuseport BPF
 * programs, which could not reach TCP, are refused (EINVAL).  EOPNOTSUPP
 * on a socket that is not transparent.
 */
#define RSTREAM_REUSEPORT	0x1005

/*
 * RSTREAM_POLLING_TIME (int, microseconds): how long a blocking recv or
 * send busy-polls the connection's completion queue before it sleeps, as
 * rsocket's polling_time.  It is the socket's SO_BUSY_POLL time, read
 * and set either way, with SO_BUSY_POLL's rules.  New sockets start with
 * the module parameter polling_time, or net.core.busy_read if longer;
 * accepted ones with their listener's.  poll(), select() and
 * epoll_wait() busy-poll by net.core.busy_poll.
 */
#define RSTREAM_POLLING_TIME	0x1006

/*
 * RSTREAM_ZEROCOPY (int, 0 or 1): the socket's SO_ZEROCOPY, set and read
 * either way.  With it, a send with MSG_ZEROCOPY goes to the peer from
 * the caller's own pages, and the caller's error queue says when they
 * are free again, as on TCP (Documentation/networking/msg_zerocopy.rst).
 * For kernels whose socket core refuses SO_ZEROCOPY to this family
 * (before 6.2).
 */
#define RSTREAM_ZEROCOPY	0x1007

struct rstream_info {
	char	ri_device[64];		/* the RDMA device, as ibv_devices names it */
	__u32	ri_port;		/* its port */
	__u32	ri_qp_num;		/* our queue pair */
	__u32	ri_dest_qp_num;		/* the peer's */
	__u32	ri_sq_size;		/* send queue entries */
	__u32	ri_rq_size;		/* receive queue entries */
	__u32	ri_inline_size;		/* bytes a write carries inline */
	__u32	ri_ring_size;		/* our receive ring, bytes */
	__u32	ri_sbuf_size;		/* our send staging ring, bytes (less 64) */
	__u32	ri_credits;		/* messages the peer lets us send */
	__u32	ri_grant_left;		/* bytes left of the peer's grant */
	__u32	ri_granted;		/* bytes of our ring the peer may fill */
	__u32	ri_unread;		/* bytes in our ring not yet read */
	__u32	ri_writes_inflight;	/* our writes not yet completed */
	__u32	ri_probes;		/* keepalive probes unanswered */
};

#endif /* _UAPI_LINUX_RSTREAM_H */
