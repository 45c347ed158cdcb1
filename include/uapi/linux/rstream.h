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
 * rstream's own SOL_RDMA option, not rsocket's.  Set before listen(), its
 * value (an int) is the file descriptor of a listening TCP socket, which
 * the caller may then close: accept() on the AF_RSTREAM listener also
 * takes that socket's clients, returned as TCP sockets, beside the
 * connections that come over RDMA, and poll/epoll on it see both.  -1
 * lets go of it; reading the option says whether one is held.
 */
#define RSTREAM_TCP_LISTEN	0x1000

#endif /* _UAPI_LINUX_RSTREAM_H */
