// SPDX-License-Identifier: GPL-2.0
/*
 * rstream_fuzz: random socket calls on AF_RSTREAM sockets, as any process
 * may make them, while real connections are made, used and closed
 * underneath.
 *
 *   rstream_fuzz [-s SEED] [-t SECONDS] [-w WORKERS] [-c CONNECTORS]
 *                [-p PORT] [-u UID] [-g GRACE]
 *
 * Two processes, each with a thread that sends SIGUSR1 (no SA_RESTART) to
 * its other threads every few milliseconds, so that blocked calls are
 * interrupted at random points:
 *
 *  - the fuzzers: WORKERS threads (default 4) pick sockets from a shared
 *    table and call socket, bind, listen, connect, accept4, send, recv,
 *    sendmsg, recvmsg (random sizes, iovecs, flags, bad pointers),
 *    read/write/readv/writev, sendfile and splice, shutdown with every
 *    how, setsockopt and getsockopt at every level (SOL_SOCKET, SOL_TCP,
 *    SOL_IP, SOL_IPV6, SOL_RDMA and random ones) with random lengths and
 *    values, ioctl, fcntl, poll, epoll, dup, dup2, fork and close, with
 *    well-formed, malformed and hostile addresses and lengths.  Sockets
 *    close under calls in other threads.
 *  - the users: an echo server on PORT (IPv4 and IPv6, plain and
 *    transparent listeners) and CONNECTORS threads (default 2) that
 *    connect, plain or transparent, send a checked pattern, read it back
 *    and close, over and over.  While the RDMA device is away, the
 *    transparent ones go on over TCP.  A byte that comes back wrong, or a
 *    connection that makes no progress for 30 s without an error, fails
 *    the run.  Their own process, so that a fuzzer's call on a stale
 *    descriptor number can never land on a connection that is checked.
 *
 * With -u the fuzzers run as that user (the default 65534, nobody): what
 * they find, any user can do.  The wrapper (rstream_fuzz.sh) removes and
 * re-adds the RDMA device meanwhile, as root.
 *
 * Each thread draws from its own generator, seeded from SEED and its
 * number, so a seed reproduces every thread's sequence of calls (their
 * interleaving, the scheduler's).  The seed is printed first.
 *
 * After SECONDS (default 60) the threads stop; a thread still in a call
 * GRACE seconds later (default 30) is reported with the call it is in, its
 * arguments and its kernel wait channel, and the run fails.  A call that
 * returns a kernel-internal errno (512 and up) or a length beyond what
 * was asked fails the run too.
 *
 * A quarter of the fuzzers' sockets are transparent (RSTREAM_PROTO_TCP4/6),
 * whose options reach a kernel TCP socket: the static keys TCP options
 * flip are pinned on first (rstream_pin_static_keys()).
 *
 * Exit status: 0 ok, 1 a check failed, 2 bad command line, 3 a hang.
 * With RSTREAM_FUZZ_TCP set in the environment, the sockets are TCP's
 * (to check this program).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <linux/sockios.h>
#include <linux/types.h>
#include <linux/rstream.h>

#include "rstream_util.h"

#define NSLOTS		48
#define MAX_THREADS	32
#define BUF_SIZE	(256 * 1024)
#define MAX_ERRNO	4096
#define STALL_S		30
#define ECHO_MAX	64

#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

/* Options (from the command line). */
static __u64 opt_seed;
static int opt_seconds = 60;
static int opt_workers = 4;
static int opt_connectors = 2;
static int opt_port = 21000;
static int opt_uid = 65534;
static int opt_grace = 30;

static int family;
static const char *addr4, *addr6;
static atomic_bool stopping;
static atomic_int failed;

static void fail(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	printf("FAIL: ");
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
	atomic_store(&failed, 1);
}

/* splitmix64: small, fast, and good enough to pick calls with. */
static __u64 rnd(__u64 *s)
{
	__u64 z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static unsigned int below(__u64 *s, unsigned int n)
{
	return n ? rnd(s) % n : 0;
}

static bool chance(__u64 *s, unsigned int percent)
{
	return below(s, 100) < percent;
}

/* Threads: what each is doing now, for a hang report. */

struct thread {
	pthread_t pt;
	pid_t tid;
	int index;
	const char *kind;
	__u64 rng;
	atomic_uintptr_t op;	/* the call's name, or 0 */
	atomic_int op_fd;
	atomic_llong op_since;
	atomic_bool done;
	unsigned long calls;
	char *buf;
};

static struct thread threads[MAX_THREADS];
static int nthreads;

static void op_begin(struct thread *t, const char *op, int fd)
{
	atomic_store(&t->op_fd, fd);
	atomic_store(&t->op_since, now_ms());
	atomic_store(&t->op, (uintptr_t)op);
	t->calls++;
}

static void op_end(struct thread *t)
{
	atomic_store(&t->op, 0);
}

/* Per-call statistics and the errno check. */

struct stat_entry {
	const char *name;
	atomic_ulong calls;
	atomic_ulong ok;
	atomic_ulong err[134];
};

#define NSTATS 48
static struct stat_entry stats[NSTATS];
static pthread_mutex_t stats_lock = PTHREAD_MUTEX_INITIALIZER;

static struct stat_entry *stat_of(const char *name)
{
	int i;

	for (i = 0; i < NSTATS && stats[i].name; i++)
		if (stats[i].name == name || !strcmp(stats[i].name, name))
			return &stats[i];
	pthread_mutex_lock(&stats_lock);
	for (i = 0; i < NSTATS && stats[i].name; i++)
		if (!strcmp(stats[i].name, name))
			break;
	if (i < NSTATS && !stats[i].name)
		stats[i].name = name;
	pthread_mutex_unlock(&stats_lock);
	return i < NSTATS ? &stats[i] : NULL;
}

/* Record a call's result; a kernel-internal errno fails the run. */
static long result(struct thread *t, const char *name, long ret, int err)
{
	struct stat_entry *st = stat_of(name);

	op_end(t);
	if (st) {
		atomic_fetch_add(&st->calls, 1);
		if (ret >= 0)
			atomic_fetch_add(&st->ok, 1);
		else if (err > 0 && err < 134)
			atomic_fetch_add(&st->err[err], 1);
	}
	if (ret < 0 && (err <= 0 || err >= 134))
		fail("%s returned errno %d, which no system call may return (thread %d, seed %llu)",
		     name, err, t->index, (unsigned long long)opt_seed);
	errno = err;
	return ret;
}

/* CALL(t, "name", fd, expression): the call, timed and checked. */
#define CALL(t, name, fd, expr) ({					\
	struct thread *__t = (t);					\
	const char *__name = (name);					\
	long __r;							\
									\
	op_begin(__t, __name, (fd));					\
	__r = (long)(expr);						\
	result(__t, __name, __r, __r < 0 ? errno : 0);			\
})

/* The socket table the fuzzers share. */

static atomic_int slots[NSLOTS];

/* A descriptor of the table, mostly one that is there; it may close. */
static int slot_peek(struct thread *t)
{
	int i, fd = -1;

	for (i = 0; i < 4 && fd < 0; i++)
		fd = atomic_load(&slots[below(&t->rng, NSLOTS)]);
	return fd;
}

/* Put @fd in a random slot; the descriptor it replaces is closed. */
static void slot_put(struct thread *t, int fd)
{
	int old = atomic_exchange(&slots[below(&t->rng, NSLOTS)], fd);

	if (old >= 0)
		CALL(t, "close", old, close(old));
}

/* Take a descriptor out of the table: the caller now owns it. */
static int slot_take(struct thread *t)
{
	return atomic_exchange(&slots[below(&t->rng, NSLOTS)], -1);
}

/* Memory for bad pointers: a page followed by a hole, and a read-only page. */
static char *edge;	/* the last bytes before an unmapped page */
static char *rdonly;

static void *bad_ptr(struct thread *t, size_t len)
{
	switch (below(&t->rng, 4)) {
	case 0:
		return NULL;
	case 1:
		return (void *)(uintptr_t)(1 + below(&t->rng, 4096));
	case 2:		/* runs into the hole */
		return edge + 4096 - (len > 4096 ? 4096 : len / 2 + 1);
	default:
		return (void *)(uintptr_t)0xffff800000000000ULL;
	}
}

/* A buffer for the kernel to read (send) or write (recv): mostly good. */
static void *some_ptr(struct thread *t, size_t len, bool kernel_writes)
{
	if (chance(&t->rng, 4))
		return bad_ptr(t, len);
	if (kernel_writes && chance(&t->rng, 2))
		return rdonly;
	if (len > BUF_SIZE)
		return t->buf;
	return t->buf + below(&t->rng, BUF_SIZE - len + 1);
}

static size_t some_len(struct thread *t)
{
	switch (below(&t->rng, 8)) {
	case 0:
		return 0;
	case 1:
		return 1 + below(&t->rng, 16);
	case 2:
		return 60 + below(&t->rng, 10);
	case 3:
		return 4096 + below(&t->rng, 3) - 1;
	case 4:
		return 65536 + below(&t->rng, 3) - 1;
	case 5:
		return BUF_SIZE;
	default:
		return below(&t->rng, 8192);
	}
}

/*
 * Addresses: ours, the echo server's, nobody's, and malformed ones.
 *
 * Ports from opt_port: 0 to 7 the fuzzers', ECHO_PORT the echo server's
 * IPv4 listener and the next its IPv6 one, NOBODY_PORT nobody's.
 */
#define ECHO_PORT	8
#define NOBODY_PORT	10
#define ECHO_T_PORT	11	/* the transparent listeners', IPv4 and IPv6 */

/*
 * Two listeners on one port of one device share an ib_cm listen, and
 * rdma_cm does not hold the listener it finds for a REQ: destroying one
 * while a REQ for it is handled is a use after free inside rdma_cm
 * (README, open problems; seen on the debug kernel, freed by
 * cma_process_remove, used in cma_ib_req_handler).  Such pairs are
 * possible with TCP's rules only across families (192.0.2.1 and
 * ::ffff:192.0.2.1 or 2001:db8::1, or two wildcards, one of them
 * IPV6_V6ONLY), so each kind of address binds its own ports: IPv4 0 to
 * 2, IPv4-mapped 3 and 4, IPv6 5 to 7.  The echo server's two listeners
 * are on two ports for the same reason.
 */
static void bind_port_by_family(struct sockaddr_storage *ss)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	int port, first, n;

	if (ss->ss_family == AF_INET) {
		port = ntohs(sin->sin_port);
		first = 0;
		n = 3;
	} else if (ss->ss_family == AF_INET6) {
		port = ntohs(sin6->sin6_port);
		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			first = 3;
			n = 2;
		} else {
			first = 5;
			n = 3;
		}
	} else {
		return;
	}
	if (port < opt_port || port >= opt_port + NOBODY_PORT + 1)
		return;
	/* sin_port and sin6_port are at the same offset */
	sin->sin_port = htons(opt_port + first + (port - opt_port) % n);
}

static socklen_t some_addr(struct thread *t, struct sockaddr_storage *ss,
			   bool for_bind)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	static const char *const v4[] = {
		NULL, "0.0.0.0", "127.0.0.1", "192.0.2.77", "203.0.113.1",
		"224.0.0.1", "255.255.255.255",
	};
	static const char *const v6[] = {
		NULL, "::", "::1", "fe80::1", "2001:db8::77", "::ffff:192.0.2.1",
		"ff02::1",
	};
	unsigned short port;
	socklen_t len;
	int i;

	memset(ss, 0, sizeof(*ss));
	switch (below(&t->rng, 10)) {
	case 0: case 1: case 2:
		port = opt_port + below(&t->rng, 8);	/* fuzzers' ports */
		break;
	case 3:
		/*
		 * The echo server's, to connect to, never to bind: a fuzzer
		 * that took the port while the echo listener was made again
		 * (after a device removal) would answer the connectors with
		 * its own bytes, which they report as data gone wrong.
		 */
		port = opt_port + (for_bind ? below(&t->rng, 8) :
				   ECHO_PORT + below(&t->rng, 2));
		break;
	case 4:
		port = 0;
		break;
	case 5:
		port = opt_port + NOBODY_PORT;
		break;
	default:
		port = for_bind ? 0 : opt_port + below(&t->rng, NOBODY_PORT);
	}
	if (chance(&t->rng, 50)) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		i = chance(&t->rng, 60) ? 0 : below(&t->rng, 7);
		inet_pton(AF_INET, i ? v4[i] : addr4, &sin->sin_addr);
		len = sizeof(*sin);
	} else {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		i = chance(&t->rng, 60) ? 0 : below(&t->rng, 7);
		inet_pton(AF_INET6, i ? v6[i] : addr6, &sin6->sin6_addr);
		if (chance(&t->rng, 20))
			sin6->sin6_scope_id = rnd(&t->rng);
		if (chance(&t->rng, 10))
			sin6->sin6_flowinfo = rnd(&t->rng);
		len = sizeof(*sin6);
	}
	switch (below(&t->rng, 12)) {
	case 0:
		ss->ss_family = below(&t->rng, 48);	/* any family */
		break;
	case 1:
		len = below(&t->rng, sizeof(*ss) + 16);	/* any length */
		break;
	case 2:
		len = 24;	/* SIN6_LEN_RFC2133 */
		break;
	case 3:
		memset((char *)ss + len, 0xa5, sizeof(*ss) - len);
		break;
	}
	if (for_bind)
		bind_port_by_family(ss);
	return len;
}

/* The fuzzers' calls, one function each. */

static void do_socket(struct thread *t)
{
	int type = SOCK_STREAM, proto = 0, fd;

	if (chance(&t->rng, 30))
		type |= SOCK_NONBLOCK;
	if (chance(&t->rng, 30))
		type |= SOCK_CLOEXEC;
	if (chance(&t->rng, 20))
		proto = IPPROTO_TCP;
	if (chance(&t->rng, 25))
		proto = chance(&t->rng, 50) ? RSTREAM_PROTO_TCP4 :
					      RSTREAM_PROTO_TCP6;
	if (chance(&t->rng, 5))
		type = below(&t->rng, 12);
	if (chance(&t->rng, 5))
		proto = rnd(&t->rng);
	fd = CALL(t, "socket", -1, socket(family, type, proto));
	if (fd >= 0)
		slot_put(t, fd);
}

static void do_bind(struct thread *t)
{
	struct sockaddr_storage ss;
	socklen_t len = some_addr(t, &ss, true);
	int fd = slot_peek(t);
	void *p = chance(&t->rng, 3) ? bad_ptr(t, len) : &ss;

	CALL(t, "bind", fd, bind(fd, p, len));
}

static void do_listen(struct thread *t)
{
	static const int backlogs[] = { -1, 0, 1, 2, 5, 16, 128, 4096, INT_MAX };
	int fd = slot_peek(t);

	CALL(t, "listen", fd, listen(fd, backlogs[below(&t->rng, 9)]));
}

static void do_connect(struct thread *t)
{
	struct sockaddr_storage ss;
	socklen_t len = some_addr(t, &ss, false);
	int fd = slot_peek(t);
	void *p = chance(&t->rng, 3) ? bad_ptr(t, len) : &ss;

	CALL(t, "connect", fd, connect(fd, p, len));
}

static void check_name(struct thread *t, const char *call, long ret,
		       socklen_t given, socklen_t got)
{
	if (ret >= 0 && (int)given >= 0 && got > sizeof(struct sockaddr_storage))
		fail("%s: address length %u, more than any address (thread %d)",
		     call, got, t->index);
}

static void do_accept(struct thread *t)
{
	struct sockaddr_storage ss;
	socklen_t len = below(&t->rng, sizeof(ss) + 8), given = len;
	int flags = 0, fd = slot_peek(t), nfd;
	void *p = &ss;
	void *lp = &len;

	if (chance(&t->rng, 40))
		flags |= SOCK_NONBLOCK;
	if (chance(&t->rng, 20))
		flags |= SOCK_CLOEXEC;
	if (chance(&t->rng, 5))
		flags = rnd(&t->rng);
	switch (below(&t->rng, 20)) {
	case 0: case 1: case 2: case 3:
		p = NULL;
		lp = NULL;
		break;
	case 4:
		p = bad_ptr(t, len);
		break;
	case 5:
		lp = bad_ptr(t, sizeof(len));
		break;
	case 6:
		len = -below(&t->rng, 4);
		break;
	}
	given = len;
	nfd = CALL(t, "accept4", fd, accept4(fd, p, lp, flags));
	if (nfd >= 0) {
		/* With no address buffer the kernel leaves the length alone. */
		if (lp == &len && p)
			check_name(t, "accept4", nfd, given, len);
		slot_put(t, nfd);
	}
}

static int some_send_flags(struct thread *t)
{
	static const int f[] = {
		0, MSG_DONTWAIT, MSG_NOSIGNAL, MSG_MORE, MSG_OOB, MSG_EOR,
		MSG_CONFIRM, MSG_DONTROUTE, MSG_FASTOPEN, MSG_ZEROCOPY,
	};
	int flags = MSG_NOSIGNAL;

	if (chance(&t->rng, 60))
		flags |= f[below(&t->rng, 10)] | f[below(&t->rng, 10)];
	if (chance(&t->rng, 3))
		flags = rnd(&t->rng);
	return flags;
}

static int some_recv_flags(struct thread *t)
{
	static const int f[] = {
		0, MSG_DONTWAIT, MSG_PEEK, MSG_TRUNC, MSG_WAITALL, MSG_OOB,
		MSG_ERRQUEUE, MSG_CMSG_CLOEXEC,
	};
	int flags = 0;

	if (chance(&t->rng, 70))
		flags |= f[below(&t->rng, 8)] | f[below(&t->rng, 8)];
	if (chance(&t->rng, 3))
		flags = rnd(&t->rng) & ~MSG_WAITFORONE;
	return flags;
}

static void check_len(struct thread *t, const char *call, long ret,
		      size_t asked)
{
	if (ret > 0 && (size_t)ret > asked)
		fail("%s returned %ld for %zu bytes asked (thread %d)", call,
		     ret, asked, t->index);
}

static void do_send(struct thread *t)
{
	size_t len = some_len(t);
	int fd = slot_peek(t);
	long r;

	/* MSG_ZEROCOPY does something only with the option set. */
	if (chance(&t->rng, 10)) {
		int on = chance(&t->rng, 80);

		CALL(t, "setsockopt", fd,
		     setsockopt(fd, SOL_RDMA, RSTREAM_ZEROCOPY, &on,
				sizeof(on)));
	}

	r = CALL(t, "send", fd,
		 send(fd, some_ptr(t, len, false), len, some_send_flags(t)));
	check_len(t, "send", r, len);
}

static void do_recv(struct thread *t)
{
	size_t len = some_len(t);
	int fd = slot_peek(t);
	int flags = some_recv_flags(t);
	long r;

	r = CALL(t, "recv", fd, recv(fd, some_ptr(t, len, true), len, flags));
	if (!(flags & MSG_TRUNC))
		check_len(t, "recv", r, len);
}

/* An iovec array: counts around IOV_MAX, zero and bad entries. */
static int some_iov(struct thread *t, struct iovec *iov, int max,
		    size_t *total, bool kernel_writes)
{
	int n, i;

	switch (below(&t->rng, 6)) {
	case 0:
		n = 0;
		break;
	case 1:
		n = max;	/* IOV_MAX + 1: EMSGSIZE */
		break;
	case 2:
		n = max - 1;
		break;
	default:
		n = 1 + below(&t->rng, 8);
	}
	*total = 0;
	for (i = 0; i < n; i++) {
		size_t len = below(&t->rng, 3) ? below(&t->rng, 4096) :
			     some_len(t);

		if (n > 64)
			len = below(&t->rng, 64);
		iov[i].iov_len = len;
		iov[i].iov_base = some_ptr(t, len, kernel_writes);
		if (chance(&t->rng, 2))
			iov[i].iov_len = SIZE_MAX - below(&t->rng, 8);
		*total += iov[i].iov_len;
	}
	return n;
}

/* Room for control messages, aligned as the kernel reads them. */
union control {
	char buf[256];
	struct cmsghdr align;
};

static void some_msghdr(struct thread *t, struct msghdr *m, struct iovec *iov,
			struct sockaddr_storage *ss, union control *ctl,
			size_t *total, bool kernel_writes)
{
	memset(m, 0, sizeof(*m));
	m->msg_iov = iov;
	m->msg_iovlen = some_iov(t, iov, IOV_MAX + 1, total, kernel_writes);
	if (chance(&t->rng, 5))
		m->msg_iov = bad_ptr(t, sizeof(*iov));
	if (chance(&t->rng, 20)) {
		m->msg_name = ss;
		m->msg_namelen = some_addr(t, ss, false);
	}
	if (chance(&t->rng, 15)) {
		size_t i, n = below(&t->rng, sizeof(ctl->buf));

		for (i = 0; i < n; i++)
			ctl->buf[i] = rnd(&t->rng);
		if (n >= sizeof(struct cmsghdr) && chance(&t->rng, 50)) {
			struct cmsghdr *c = &ctl->align;

			c->cmsg_len = below(&t->rng, n + 8);
			c->cmsg_level = chance(&t->rng, 50) ? SOL_SOCKET :
					(int)rnd(&t->rng);
			c->cmsg_type = below(&t->rng, 80);
		}
		m->msg_control = ctl->buf;
		m->msg_controllen = n;
		if (chance(&t->rng, 5))
			m->msg_controllen = rnd(&t->rng);
	}
}

static void do_sendmsg(struct thread *t)
{
	struct iovec iov[IOV_MAX + 1];
	struct sockaddr_storage ss;
	union control ctl;
	struct msghdr m;
	size_t total;
	int fd = slot_peek(t);
	long r;

	some_msghdr(t, &m, iov, &ss, &ctl, &total, false);
	r = CALL(t, "sendmsg", fd, sendmsg(fd, &m, some_send_flags(t)));
	check_len(t, "sendmsg", r, total);
}

static void do_recvmsg(struct thread *t)
{
	struct iovec iov[IOV_MAX + 1];
	struct sockaddr_storage ss;
	union control ctl;
	struct msghdr m;
	size_t total;
	int fd = slot_peek(t);
	int flags = some_recv_flags(t);
	long r;

	some_msghdr(t, &m, iov, &ss, &ctl, &total, true);
	r = CALL(t, "recvmsg", fd, recvmsg(fd, &m, flags));
	if (!(flags & MSG_TRUNC))
		check_len(t, "recvmsg", r, total);
}

static void do_rw(struct thread *t)
{
	struct iovec iov[IOV_MAX + 1];
	size_t len = some_len(t), total;
	int fd = slot_peek(t), n;
	long r;

	switch (below(&t->rng, 4)) {
	case 0:
		r = CALL(t, "write", fd, write(fd, some_ptr(t, len, false), len));
		check_len(t, "write", r, len);
		break;
	case 1:
		r = CALL(t, "read", fd, read(fd, some_ptr(t, len, true), len));
		check_len(t, "read", r, len);
		break;
	case 2:
		n = some_iov(t, iov, IOV_MAX + 1, &total, false);
		r = CALL(t, "writev", fd, writev(fd, iov, n));
		check_len(t, "writev", r, total);
		break;
	default:
		n = some_iov(t, iov, IOV_MAX + 1, &total, true);
		r = CALL(t, "readv", fd, readv(fd, iov, n));
		check_len(t, "readv", r, total);
	}
}

/* sendfile from a file and splice through a pipe (MSG_SPLICE_PAGES). */
static int files[MAX_THREADS];
static int pipes[MAX_THREADS][2];

static void do_splice(struct thread *t)
{
	size_t len = some_len(t);
	int fd = slot_peek(t);
	int *p = pipes[t->index];
	off_t off = below(&t->rng, BUF_SIZE);
	long r;

	switch (below(&t->rng, 3)) {
	case 0:
		r = CALL(t, "sendfile", fd,
			 sendfile(fd, files[t->index],
				  chance(&t->rng, 50) ? &off : NULL, len));
		check_len(t, "sendfile", r, len);
		break;
	case 1:		/* socket -> pipe */
		r = CALL(t, "splice-from", fd,
			 splice(fd, NULL, p[1], NULL, len,
				SPLICE_F_NONBLOCK * chance(&t->rng, 50)));
		check_len(t, "splice-from", r, len);
		/* Empty the pipe again. */
		while (read(p[0], t->buf, BUF_SIZE) > 0)
			;
		break;
	default:	/* pipe -> socket */
		if (write(p[1], t->buf, len < 65536 ? len : 65536) < 0)
			break;
		r = CALL(t, "splice-to", fd,
			 splice(p[0], NULL, fd, NULL, len,
				SPLICE_F_NONBLOCK * chance(&t->rng, 50)));
		check_len(t, "splice-to", r, len);
		while (read(p[0], t->buf, BUF_SIZE) > 0)
			;
	}
}

static void do_shutdown(struct thread *t)
{
	int fd = slot_peek(t);

	CALL(t, "shutdown", fd, shutdown(fd, (int)below(&t->rng, 6) - 1));
}

/* Options: every level the module handles, the options of each, and more. */

static const int sol_socket_opts[] = {
	SO_DEBUG, SO_REUSEADDR, SO_TYPE, SO_ERROR, SO_DONTROUTE, SO_BROADCAST,
	SO_SNDBUF, SO_RCVBUF, SO_SNDBUFFORCE, SO_RCVBUFFORCE, SO_KEEPALIVE,
	SO_OOBINLINE, SO_NO_CHECK, SO_PRIORITY, SO_LINGER, SO_REUSEPORT,
	SO_RCVLOWAT, SO_SNDLOWAT, SO_RCVTIMEO, SO_SNDTIMEO, SO_BINDTODEVICE,
	SO_TIMESTAMP, SO_ACCEPTCONN, SO_PEERCRED, SO_PASSCRED, SO_MARK,
	SO_RXQ_OVFL, SO_PEEK_OFF, SO_BUSY_POLL, SO_INCOMING_CPU, SO_ZEROCOPY,
	SO_TXTIME, SO_BINDTOIFINDEX, SO_DOMAIN, SO_PROTOCOL, SO_PEERNAME,
	SO_MAX_PACING_RATE, SO_PREFER_BUSY_POLL, SO_BUSY_POLL_BUDGET,
	SO_BUF_LOCK, 73 /* SO_RESERVE_MEM */, 74 /* SO_TXREHASH */,
	SO_SNDTIMEO + 100,
};

static const int sol_tcp_opts[] = {
	TCP_NODELAY, TCP_MAXSEG, TCP_CORK, TCP_KEEPIDLE, TCP_KEEPINTVL,
	TCP_KEEPCNT, TCP_SYNCNT, TCP_LINGER2, TCP_DEFER_ACCEPT,
	TCP_WINDOW_CLAMP, TCP_INFO, TCP_QUICKACK, TCP_CONGESTION,
	TCP_USER_TIMEOUT, TCP_NOTSENT_LOWAT, 40,
};

static const int sol_ip_opts[] = {
	IP_TOS, IP_TTL, IP_OPTIONS, IP_RECVERR, IP_MTU_DISCOVER, IP_FREEBIND,
	IP_TRANSPARENT, IP_BIND_ADDRESS_NO_PORT, 100,
};

static const int sol_ipv6_opts[] = {
	IPV6_V6ONLY, IPV6_UNICAST_HOPS, IPV6_TCLASS, IPV6_RECVERR,
	IPV6_MTU_DISCOVER, IPV6_FREEBIND, 100,
};

static void some_opt(struct thread *t, int *level, int *name)
{
	switch (below(&t->rng, 7)) {
	case 0: case 1:
		*level = SOL_SOCKET;
		*name = sol_socket_opts[below(&t->rng, ARRAY_SIZE(sol_socket_opts))];
		break;
	case 2:
		*level = SOL_RDMA;
		*name = chance(&t->rng, 40) ? RSTREAM_TCP_LISTEN + (int)below(&t->rng, 8) :
					      (int)below(&t->rng, 7) - 1;
		break;
	case 3:
		*level = SOL_TCP;
		*name = sol_tcp_opts[below(&t->rng, ARRAY_SIZE(sol_tcp_opts))];
		break;
	case 4:
		*level = SOL_IPV6;
		*name = sol_ipv6_opts[below(&t->rng, ARRAY_SIZE(sol_ipv6_opts))];
		break;
	case 5:
		*level = SOL_IP;
		*name = sol_ip_opts[below(&t->rng, ARRAY_SIZE(sol_ip_opts))];
		break;
	default:
		*level = chance(&t->rng, 50) ? (int)below(&t->rng, 300) :
			 (int)rnd(&t->rng);
		*name = chance(&t->rng, 50) ? (int)below(&t->rng, 100) :
			(int)rnd(&t->rng);
	}
}

static void do_setsockopt(struct thread *t)
{
	static const unsigned int lens[] = { 0, 1, 2, 3, 4, 7, 8, 16, 32, 64 };
	static const int vals[] = {
		0, 1, -1, 2, 15, 16, 17, 64, 384, 4096, 65534, 65535, 65536,
		INT_MAX, INT_MIN, 1 << 20, 1 << 28, 1 << 30,
	};
	int fd = slot_peek(t), level, name, i;
	unsigned int len;
	union {
		int i[16];
		struct timeval tv;
		struct linger lg;
		char c[64];
	} v;
	void *p = &v;

	some_opt(t, &level, &name);
	for (i = 0; i < 16; i++)
		v.i[i] = chance(&t->rng, 70) ? vals[below(&t->rng, 18)] :
			 (int)rnd(&t->rng);
	if (name == SO_RCVTIMEO || name == SO_SNDTIMEO) {
		/* Short enough that the threads still stop. */
		v.tv.tv_sec = below(&t->rng, 3);
		v.tv.tv_usec = below(&t->rng, 1000000);
	}
	if ((level == SOL_SOCKET && name == SO_BUSY_POLL) ||
	    (level == SOL_RDMA && name == RSTREAM_POLLING_TIME)) {
		/* Spins, as sleeps, short enough that the threads stop. */
		if (chance(&t->rng, 90))
			v.i[0] = below(&t->rng, 20000);
	}
	len = chance(&t->rng, 70) ? sizeof(int) : lens[below(&t->rng, 10)];
	if (chance(&t->rng, 3))
		len = rnd(&t->rng);
	if (chance(&t->rng, 4))
		p = bad_ptr(t, len);
	CALL(t, "setsockopt", fd, setsockopt(fd, level, name, p, len));
}

static void do_getsockopt(struct thread *t)
{
	int fd = slot_peek(t), level, name;
	char v[128];
	socklen_t len, given;
	void *p = v, *lp = &len;
	long r;

	some_opt(t, &level, &name);
	len = chance(&t->rng, 60) ? sizeof(int) : below(&t->rng, sizeof(v));
	if (chance(&t->rng, 5))
		len = -below(&t->rng, 8);
	given = len;
	if (chance(&t->rng, 4))
		p = bad_ptr(t, len);
	if (chance(&t->rng, 3))
		lp = bad_ptr(t, sizeof(len));
	r = CALL(t, "getsockopt", fd, getsockopt(fd, level, name, p, lp));
	if (r == 0 && lp == &len && (int)given >= 0 && len > given)
		fail("getsockopt(%d, %d) wrote back length %u for %u given (thread %d)",
		     level, name, len, given, t->index);
}

static void do_names(struct thread *t)
{
	struct sockaddr_storage ss;
	socklen_t len = chance(&t->rng, 70) ? sizeof(ss) :
			below(&t->rng, sizeof(ss) + 8);
	socklen_t given = len;
	int fd = slot_peek(t);
	void *p = &ss, *lp = &len;
	long r;

	if (chance(&t->rng, 5))
		p = bad_ptr(t, len);
	if (chance(&t->rng, 5))
		lp = bad_ptr(t, sizeof(len));
	if (chance(&t->rng, 50))
		r = CALL(t, "getsockname", fd, getsockname(fd, p, lp));
	else
		r = CALL(t, "getpeername", fd, getpeername(fd, p, lp));
	if (lp == &len)
		check_name(t, "getsockname/getpeername", r, given, len);
}

static void do_ioctl(struct thread *t)
{
	static const unsigned long cmds[] = {
		SIOCINQ, SIOCOUTQ, SIOCOUTQNSD, FIONBIO, FIOASYNC, SIOCATMARK,
		SIOCGSTAMP_OLD, SIOCGSTAMPNS_OLD, FIOGETOWN, SIOCGPGRP,
		SIOCGIFNAME, SIOCGIFINDEX, FIOCLEX, FIONCLEX, FIOQSIZE,
	};
	int fd = slot_peek(t);
	unsigned long cmd = cmds[below(&t->rng, 15)];
	int arg[64] = { 0 };
	void *p = arg;

	if (chance(&t->rng, 10))
		cmd = rnd(&t->rng) & 0xffffffff;
	if (chance(&t->rng, 5))
		p = bad_ptr(t, sizeof(int));
	arg[0] = below(&t->rng, 2);
	CALL(t, "ioctl", fd, ioctl(fd, cmd, p));
}

static void do_fcntl(struct thread *t)
{
	int fd = slot_peek(t);

	switch (below(&t->rng, 3)) {
	case 0:
		CALL(t, "fcntl", fd, fcntl(fd, F_SETFL,
					   chance(&t->rng, 50) ? O_NONBLOCK : 0));
		break;
	case 1:
		CALL(t, "fcntl", fd, fcntl(fd, F_GETFL));
		break;
	default:	/* SIGIO goes to us, and is ignored */
		CALL(t, "fcntl", fd, fcntl(fd, F_SETOWN, getpid()));
	}
}

static void do_poll(struct thread *t)
{
	struct pollfd p[8];
	int n = 1 + below(&t->rng, 8), i;

	for (i = 0; i < n; i++) {
		p[i].fd = slot_peek(t);
		p[i].events = chance(&t->rng, 20) ? rnd(&t->rng) :
			      (POLLIN | POLLOUT | POLLRDHUP) &
			      (short)rnd(&t->rng);
		p[i].revents = 0;
	}
	CALL(t, "poll", -1, poll(p, n, below(&t->rng, 50)));
}

static void do_epoll(struct thread *t)
{
	static __thread int ep = -1;
	struct epoll_event ev = { 0 }, out[8];
	int fd = slot_peek(t);

	if (ep < 0)
		ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0)
		return;
	ev.events = (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET |
		     EPOLLONESHOT | EPOLLPRI) & rnd(&t->rng);
	if (chance(&t->rng, 5))
		ev.events |= EPOLLEXCLUSIVE;
	ev.data.fd = fd;
	switch (below(&t->rng, 4)) {
	case 0:
		CALL(t, "epoll_ctl", fd, epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev));
		break;
	case 1:
		CALL(t, "epoll_ctl", fd, epoll_ctl(ep, EPOLL_CTL_MOD, fd, &ev));
		break;
	case 2:
		CALL(t, "epoll_ctl", fd, epoll_ctl(ep, EPOLL_CTL_DEL, fd, &ev));
		break;
	default:
		CALL(t, "epoll_wait", ep, epoll_wait(ep, out, 8,
						     below(&t->rng, 50)));
	}
}

static void do_dup(struct thread *t)
{
	int fd = slot_peek(t), nfd, target;

	if (chance(&t->rng, 50)) {
		nfd = CALL(t, "dup", fd, dup(fd));
		if (nfd >= 0)
			slot_put(t, nfd);
		return;
	}
	/* dup2 over a descriptor of the table, which this thread now owns. */
	target = slot_take(t);
	if (target < 0)
		return;
	nfd = CALL(t, "dup3", fd, dup3(fd, target,
				       chance(&t->rng, 50) ? O_CLOEXEC : 0));
	if (nfd < 0)
		close(target);
	else
		slot_put(t, nfd);
}

static void do_close(struct thread *t)
{
	int fd = slot_take(t);

	if (fd >= 0)
		CALL(t, "close", fd, close(fd));
}

/* A child shares the sockets, makes a few calls and exits. */
static void do_fork(struct thread *t)
{
	pid_t pid;
	int i;

	op_begin(t, "fork", -1);
	pid = fork();
	if (pid == 0) {
		for (i = 0; i < 4; i++) {
			int fd = slot_peek(t);
			char c;

			send(fd, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL);
			recv(fd, &c, 1, MSG_DONTWAIT);
			if (chance(&t->rng, 30))
				shutdown(fd, SHUT_RDWR);
		}
		_exit(0);
	}
	op_end(t);
	if (pid > 0) {
		op_begin(t, "waitpid", -1);
		while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
			;
		op_end(t);
	}
}

static const struct {
	void (*fn)(struct thread *t);
	int weight;
} ops[] = {
	{ do_socket, 8 }, { do_bind, 6 }, { do_listen, 5 }, { do_connect, 8 },
	{ do_accept, 5 }, { do_send, 8 }, { do_recv, 8 }, { do_sendmsg, 5 },
	{ do_recvmsg, 5 }, { do_rw, 4 }, { do_splice, 2 }, { do_shutdown, 3 },
	{ do_setsockopt, 10 }, { do_getsockopt, 6 }, { do_names, 3 },
	{ do_ioctl, 3 }, { do_fcntl, 2 }, { do_poll, 4 }, { do_epoll, 3 },
	{ do_dup, 2 }, { do_close, 5 }, { do_fork, 1 },
};

static void *fuzz_thread(void *arg)
{
	struct thread *t = arg;
	int total = 0, i, pick;

	t->tid = syscall(SYS_gettid);
	for (i = 0; i < (int)ARRAY_SIZE(ops); i++)
		total += ops[i].weight;
	while (!atomic_load(&stopping)) {
		pick = below(&t->rng, total);
		for (i = 0; pick >= ops[i].weight; i++)
			pick -= ops[i].weight;
		ops[i].fn(t);
	}
	atomic_store(&t->done, true);
	return NULL;
}

/* The users: an echo server and connectors that check what comes back. */

static atomic_ulong conn_ok, conn_err, echo_conns;
/* Transparent connections checked, by the path they took. */
static atomic_ulong conn_t_rdma, conn_t_tcp;

/* Byte @i of connection @c's pattern. */
static unsigned char pattern(__u64 c, __u64 i)
{
	__u64 s = c * 0x100000001b3ULL + i / 8;

	return rnd(&s) >> (8 * (i % 8));
}

/* A plain socket, or a transparent one for an address of family @v6's. */
static int rs_socket(bool transparent, bool v6)
{
	if (transparent && family != AF_INET)
		return socket(family, SOCK_STREAM, v6 ? RSTREAM_PROTO_TCP6 :
							RSTREAM_PROTO_TCP4);
	return socket(family, SOCK_STREAM, 0);
}

static socklen_t echo_addr(struct sockaddr_storage *ss, bool v6,
			   bool transparent)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
	int port = opt_port + (transparent ? ECHO_T_PORT : ECHO_PORT) + v6;

	memset(ss, 0, sizeof(*ss));
	if (v6) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		inet_pton(AF_INET6, addr6, &sin6->sin6_addr);
		return sizeof(*sin6);
	}
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	inet_pton(AF_INET, addr4, &sin->sin_addr);
	return sizeof(*sin);
}

static void set_timeouts(int fd, int seconds)
{
	struct timeval tv = { .tv_sec = seconds };

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

struct echo_conn {
	int fd;
};

static void *echo_one(void *arg)
{
	struct echo_conn *e = arg;
	char *buf = malloc(65536);
	long n, m, off;

	set_timeouts(e->fd, 10);
	while (buf && !atomic_load(&stopping)) {
		n = recv(e->fd, buf, 65536, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		for (off = 0; off < n; off += m) {
			m = send(e->fd, buf + off, n - off, MSG_NOSIGNAL);
			if (m < 0 && errno == EINTR)
				m = 0;
			else if (m < 0)
				goto out;
		}
	}
out:
	close(e->fd);
	free(buf);
	free(e);
	atomic_fetch_sub(&echo_conns, 1);
	return NULL;
}

static int echo_listen(bool v6, bool transparent)
{
	struct sockaddr_storage ss;
	socklen_t len = echo_addr(&ss, v6, transparent);
	int one = 1, fd = rs_socket(transparent, v6);

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (v6)
		setsockopt(fd, SOL_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&ss, len) || listen(fd, 64)) {
		close(fd);
		return -1;
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	return fd;
}

/*
 * A transparent listener that lost its RDMA side with the device listens on
 * TCP alone from then on: it is made again, to listen on both.
 */
static bool echo_lost_rdma(int fd)
{
	socklen_t len = sizeof(int);
	int paths = 0;

	if (getsockopt(fd, SOL_RDMA, RSTREAM_PATH, &paths, &len))
		return false;
	return paths == RSTREAM_PATH_TCP;
}

/*
 * Accept on both families, plain and transparent listeners; a listener
 * that fails is made again.
 */
static void *echo_server(void *arg)
{
	struct thread *t = arg;
	int lfd[4] = { -1, -1, -1, -1 }, i;
	long long remade = now_ms();

	t->tid = syscall(SYS_gettid);
	while (!atomic_load(&stopping)) {
		struct pollfd p[4];

		for (i = 0; i < 4; i++) {
			if (lfd[i] >= 0 && i >= 2 && now_ms() - remade > 1000 &&
			    echo_lost_rdma(lfd[i])) {
				close(lfd[i]);
				lfd[i] = -1;
				remade = now_ms();
			}
			if (lfd[i] < 0)
				lfd[i] = echo_listen(i % 2, i >= 2);
			p[i].fd = lfd[i];
			p[i].events = POLLIN;
		}
		op_begin(t, "echo poll", -1);
		poll(p, 4, 100);
		op_end(t);
		for (i = 0; i < 4; i++) {
			struct echo_conn *e;
			pthread_t pt;
			int fd;

			if (lfd[i] < 0 || !p[i].revents)
				continue;
			op_begin(t, "echo accept", lfd[i]);
			fd = accept4(lfd[i], NULL, NULL, 0);
			op_end(t);
			if (fd < 0) {
				if (errno != EAGAIN && errno != EINTR &&
				    errno != ECONNABORTED) {
					close(lfd[i]);
					lfd[i] = -1;
				}
				continue;
			}
			e = malloc(sizeof(*e));
			if (!e || atomic_load(&echo_conns) >= ECHO_MAX) {
				free(e);
				close(fd);
				continue;
			}
			e->fd = fd;
			atomic_fetch_add(&echo_conns, 1);
			if (pthread_create(&pt, NULL, echo_one, e)) {
				atomic_fetch_sub(&echo_conns, 1);
				free(e);
				close(fd);
				continue;
			}
			pthread_detach(pt);
		}
	}
	/*
	 * All four: a connection left in a listener's queue is reset by its
	 * close, where one left open would keep its client waiting.
	 */
	for (i = 0; i < 4; i++)
		if (lfd[i] >= 0)
			close(lfd[i]);
	atomic_store(&t->done, true);
	return NULL;
}

/*
 * A connection that stopped: what it is and what its socket says, for
 * the failure's message.
 */
static void report_stall(int fd, __u64 id, bool transparent, bool v6,
			 size_t sent, size_t len, size_t got, short revents)
{
	struct tcp_info ti = { 0 };
	socklen_t tl = sizeof(ti), il = sizeof(int);
	int path = 0, err = 0, inq = -1;
	char what[160];

	getsockopt(fd, SOL_RDMA, RSTREAM_PATH, &path, &il);
	il = sizeof(int);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &il);
	getsockopt(fd, SOL_TCP, TCP_INFO, &ti, &tl);
	ioctl(fd, SIOCINQ, &inq);
	snprintf(what, sizeof(what),
		 "%s IPv%d, path %d, SO_ERROR %d, state %u, unacked %u, inq %d",
		 transparent ? "transparent" : "plain", v6 ? 6 : 4, path, err,
		 ti.tcpi_state, ti.tcpi_unacked, inq);
	fail("connection %llu stalled %d s: %zu/%zu sent, %zu back, revents 0x%x; %s",
	     (unsigned long long)id, STALL_S, sent, len, got, revents, what);
}

/*
 * One connection: send @len pattern bytes and read them back, both as far
 * as poll allows.  0 if all came back right, -1 on an error (counted),
 * and the run fails on a wrong byte or a stall.
 */
static int connect_once(struct thread *t, __u64 id)
{
	struct sockaddr_storage ss;
	bool v6 = chance(&t->rng, 50), transparent = chance(&t->rng, 50);
	socklen_t slen = echo_addr(&ss, v6, transparent);
	size_t len = 1 + below(&t->rng, 128 * 1024), sent = 0, got = 0, i;
	long long last = now_ms();
	unsigned char *buf = (unsigned char *)t->buf;
	int fd, r, size;

	op_begin(t, "connector socket", -1);
	fd = rs_socket(transparent, v6);
	op_end(t);
	if (fd < 0)
		return -1;
	if (chance(&t->rng, 30)) {
		size = 2048 << below(&t->rng, 8);
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	}
	set_timeouts(fd, 5);
	op_begin(t, "connector connect", fd);
	r = connect(fd, (struct sockaddr *)&ss, slen);
	op_end(t);
	if (r)
		goto err;
	if (transparent) {
		socklen_t plen = sizeof(int);
		int path = 0;

		getsockopt(fd, SOL_RDMA, RSTREAM_PATH, &path, &plen);
		atomic_fetch_add(path == RSTREAM_PATH_TCP ? &conn_t_tcp :
				 &conn_t_rdma, 1);
	}
	fcntl(fd, F_SETFL, O_NONBLOCK);
	for (i = 0; i < len; i++)
		buf[i] = pattern(id, i);
	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long n;

		if (sent < len)
			p.events |= POLLOUT;
		op_begin(t, "connector poll", fd);
		r = poll(&p, 1, 1000);
		op_end(t);
		if (r < 0 && errno != EINTR)
			goto err;
		if (now_ms() - last > STALL_S * 1000) {
			report_stall(fd, id, transparent, v6, sent, len,
				     got, p.revents);
			goto err;
		}
		if (r <= 0)
			continue;
		if (p.revents & POLLOUT) {
			n = send(fd, buf + sent, len - sent, MSG_NOSIGNAL);
			if (n < 0 && errno != EAGAIN && errno != EINTR)
				goto err;
			if (n > 0) {
				sent += n;
				last = now_ms();
			}
		}
		if (p.revents & (POLLIN | POLLERR | POLLHUP)) {
			unsigned char in[16384];

			n = recv(fd, in, sizeof(in), 0);
			if (n == 0 || (n < 0 && errno != EAGAIN &&
				       errno != EINTR))
				goto err;
			for (i = 0; n > 0 && i < (size_t)n; i++) {
				if (in[i] != pattern(id, got + i)) {
					fail("connection %llu: byte %zu back 0x%02x, sent 0x%02x",
					     (unsigned long long)id, got + i,
					     in[i], pattern(id, got + i));
					goto err;
				}
			}
			if (n > 0) {
				got += n;
				last = now_ms();
			}
		}
	}
	if (chance(&t->rng, 30))
		shutdown(fd, SHUT_WR);
	close(fd);
	atomic_fetch_add(&conn_ok, 1);
	return 0;
err:
	close(fd);
	atomic_fetch_add(&conn_err, 1);
	return -1;
}

static void *connector_thread(void *arg)
{
	struct thread *t = arg;
	__u64 n = 0;

	t->tid = syscall(SYS_gettid);
	while (!atomic_load(&stopping)) {
		if (connect_once(t, ((__u64)t->index << 40) | n++)) {
			op_begin(t, "connector backoff", -1);
			usleep(20000 + below(&t->rng, 50000));
			op_end(t);
		}
	}
	atomic_store(&t->done, true);
	return NULL;
}

/* Signals: SIGUSR1 interrupts, SIGPIPE, SIGIO and SIGURG are ignored. */

static void on_usr1(int sig)
{
	(void)sig;
}

static void setup_signals(void)
{
	struct sigaction sa = { .sa_handler = on_usr1 };

	sigaction(SIGUSR1, &sa, NULL);	/* no SA_RESTART */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGIO, SIG_IGN);
	signal(SIGURG, SIG_IGN);
}

static void *signaller(void *arg)
{
	__u64 rng = (uintptr_t)arg;
	int i;

	while (!atomic_load(&stopping)) {
		usleep(1000 + below(&rng, 5000));
		i = below(&rng, nthreads);
		if (threads[i].pt && !atomic_load(&threads[i].done))
			pthread_kill(threads[i].pt, SIGUSR1);
	}
	return NULL;
}

static int start(struct thread *t, const char *kind, void *(*fn)(void *))
{
	t->index = t - threads;
	t->kind = kind;
	t->rng = opt_seed * 0x9e3779b97f4a7c15ULL + t->index + 1;
	atomic_store(&t->op_fd, -1);
	t->buf = malloc(BUF_SIZE);
	if (!t->buf)
		return -1;
	memset(t->buf, 0x5a, BUF_SIZE);
	return pthread_create(&t->pt, NULL, fn, t);
}

static void read_file(const char *path, char *out, size_t size)
{
	FILE *f = fopen(path, "r");
	size_t n = 0;

	if (f) {
		n = fread(out, 1, size - 1, f);
		fclose(f);
	}
	out[n] = 0;
	while (n && out[n - 1] == '\n')
		out[--n] = 0;
}

/*
 * Stop every thread: signal them until they finish.  Returns the number
 * of threads still in a call after the grace time, each reported.
 */
static int stop_all(const char *who)
{
	long long deadline = now_ms() + opt_grace * 1000LL;
	int i, hung = 0;

	atomic_store(&stopping, true);
	for (;;) {
		bool all = true;

		for (i = 0; i < nthreads; i++) {
			if (atomic_load(&threads[i].done))
				continue;
			all = false;
			pthread_kill(threads[i].pt, SIGUSR1);
		}
		if (all || now_ms() > deadline)
			break;
		usleep(50000);
	}
	for (i = 0; i < nthreads; i++) {
		struct thread *t = &threads[i];
		const char *op = (const char *)atomic_load(&t->op);
		char path[64], wchan[64], sys[128];

		if (atomic_load(&t->done))
			continue;
		hung++;
		snprintf(path, sizeof(path), "/proc/self/task/%d/wchan", t->tid);
		read_file(path, wchan, sizeof(wchan));
		snprintf(path, sizeof(path), "/proc/self/task/%d/syscall", t->tid);
		read_file(path, sys, sizeof(sys));
		printf("HANG: %s thread %d (tid %d) in %s (fd %d) for %lld ms: ",
		       who, i, t->tid, op ? op : "its loop",
		       atomic_load(&t->op_fd),
		       now_ms() - atomic_load(&t->op_since));
		printf("wchan %s, syscall %s\n", wchan, sys);
	}
	fflush(stdout);
	return hung;
}

static void report_stats(void)
{
	int i, e;

	for (i = 0; i < NSTATS && stats[i].name; i++) {
		char line[1024];
		int n;

		n = snprintf(line, sizeof(line), "  %-12s %8lu calls %8lu ok",
			     stats[i].name, atomic_load(&stats[i].calls),
			     atomic_load(&stats[i].ok));
		for (e = 1; e < 134 && n < (int)sizeof(line) - 32; e++) {
			unsigned long c = atomic_load(&stats[i].err[e]);

			if (c)
				n += snprintf(line + n, sizeof(line) - n,
					      " %s:%lu", strerrorname_np(e), c);
		}
		printf("%s\n", line);
	}
}

static unsigned long total_calls(void)
{
	unsigned long n = 0;
	int i;

	for (i = 0; i < NSTATS && stats[i].name; i++)
		n += atomic_load(&stats[i].calls);
	return n;
}

static int run_users(void)
{
	int i, hung;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	start(&threads[nthreads++], "echo server", echo_server);
	for (i = 0; i < opt_connectors; i++)
		start(&threads[nthreads++], "connector", connector_thread);
	pthread_create(&(pthread_t){ 0 }, NULL, signaller,
		       (void *)(uintptr_t)(opt_seed + 1000));
	sleep(opt_seconds);
	hung = stop_all("users");
	printf("users: %lu connections checked, %lu ended by an error; "
	       "transparent ones made over RDMA %lu, over TCP %lu\n",
	       atomic_load(&conn_ok), atomic_load(&conn_err),
	       atomic_load(&conn_t_rdma), atomic_load(&conn_t_tcp));
	if (!atomic_load(&conn_ok))
		fail("no connection of the users carried its data in %d s",
		     opt_seconds);
	fflush(stdout);
	_exit(hung ? 3 : atomic_load(&failed) ? 1 : 0);
}

static void print_usage(const char *prog)
{
	fprintf(stderr,
		"usage: %s [-s SEED] [-t SECONDS] [-w WORKERS] [-c CONNECTORS] [-p PORT] [-u UID] [-g GRACE]\n",
		prog);
	exit(2);
}

int main(int argc, char **argv)
{
	long long started;
	int opt, i, hung, status = 0;
	char path[64];
	pid_t users;

	opt_seed = (__u64)time(NULL) * 1000003 ^ getpid();
	while ((opt = getopt(argc, argv, "s:t:w:c:p:u:g:")) != -1) {
		switch (opt) {
		case 's':
			opt_seed = strtoull(optarg, NULL, 0);
			break;
		case 't':
			opt_seconds = atoi(optarg);
			break;
		case 'w':
			opt_workers = atoi(optarg);
			break;
		case 'c':
			opt_connectors = atoi(optarg);
			break;
		case 'p':
			opt_port = atoi(optarg);
			break;
		case 'u':
			opt_uid = atoi(optarg);
			break;
		case 'g':
			opt_grace = atoi(optarg);
			break;
		default:
			print_usage(argv[0]);
		}
	}
	if (optind != argc || opt_seconds < 1 || opt_workers < 1 ||
	    opt_connectors < 0 || opt_workers + opt_connectors + 1 > MAX_THREADS ||
	    opt_port < 1 || opt_port > 65535 - ECHO_T_PORT - 1 || opt_grace < 1)
		print_usage(argv[0]);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("seed %llu: %d workers, %d connectors, %d s, ports %d-%d, fuzzers as uid %d\n",
	       (unsigned long long)opt_seed, opt_workers, opt_connectors,
	       opt_seconds, opt_port, opt_port + ECHO_T_PORT + 1, opt_uid);

	/* RSTREAM_FUZZ_TCP: over TCP, to check this program itself. */
	family = getenv("RSTREAM_FUZZ_TCP") ? AF_INET : rstream_family();
	addr4 = getenv("RSTREAM_ADDR4") ?: "192.0.2.1";
	addr6 = getenv("RSTREAM_ADDR6") ?: "2001:db8::1";
	setup_signals();
	/*
	 * Options a fuzzer may set on a transparent socket's TCP side switch
	 * static keys: set them first, as root, for the whole run (an option
	 * the kernel lacks is skipped).
	 */
	rstream_pin_static_keys();

	users = fork();
	if (users < 0) {
		perror("fork");
		return 1;
	}
	if (users == 0)
		return run_users();

	/* The fuzzers' memory and files, before giving up privileges. */
	edge = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	rdonly = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (edge == MAP_FAILED || rdonly == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	munmap(edge + 4096, 4096);
	for (i = 0; i < NSLOTS; i++)
		atomic_store(&slots[i], -1);
	for (i = 0; i < opt_workers; i++) {
		snprintf(path, sizeof(path), "/tmp/rstream_fuzz.%d.%d", getpid(), i);
		files[i] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
		if (files[i] < 0 || ftruncate(files[i], BUF_SIZE) ||
		    pipe2(pipes[i], O_NONBLOCK)) {
			perror(path);
			return 1;
		}
		unlink(path);
	}
	if (opt_uid >= 0 && (setgroups(0, NULL) || setresgid(opt_uid, opt_uid, opt_uid) ||
			     setresuid(opt_uid, opt_uid, opt_uid))) {
		perror("dropping privileges");
		return 1;
	}
	prctl(PR_SET_DUMPABLE, 1);	/* our /proc/self/task files stay ours */

	started = now_ms();
	for (i = 0; i < opt_workers; i++)
		start(&threads[nthreads++], "fuzzer", fuzz_thread);
	pthread_create(&(pthread_t){ 0 }, NULL, signaller,
		       (void *)(uintptr_t)opt_seed);
	sleep(opt_seconds);
	hung = stop_all("fuzzers");
	for (i = 0; i < NSLOTS; i++) {
		int fd = atomic_exchange(&slots[i], -1);

		if (fd >= 0)
			close(fd);
	}
	printf("fuzzers: %lu calls in %.1f s\n", total_calls(),
	       (now_ms() - started) / 1000.0);
	report_stats();
	if (waitpid(users, &status, 0) != users || !WIFEXITED(status)) {
		fail("the users' process did not exit normally (status 0x%x)",
		     status);
	} else if (WEXITSTATUS(status) == 3) {
		hung++;
	} else if (WEXITSTATUS(status)) {
		atomic_store(&failed, 1);
	}
	if (hung)
		return 3;
	return atomic_load(&failed) ? 1 : 0;
}
