// SPDX-License-Identifier: GPL-2.0
/*
 * AF_RSTREAM sockets behave as TCP sockets do: bind, listen and accept,
 * connect, send and receive, shutdown, poll, select and epoll, socket
 * options and ioctls, rsocket's SOL_RDMA options, and sockets shared by
 * threads and processes (fork, dup, exec, SCM_RIGHTS).  Client and server
 * run in one guest over its RDMA device, at RSTREAM_ADDR4 and
 * RSTREAM_ADDR6 (default 192.0.2.1 and 2001:db8::1).
 *
 * Every blocking step is bounded, by a poll timeout or by an alarm that
 * interrupts the call and fails it (ETIME), so that a hang fails the case
 * it is in.
 *
 * Built with -DRSTREAM_TEST_OVER_TCP the sockets are TCP sockets, which
 * checks the cases against TCP; those on MSG_TRUNC, MSG_OOB and SOL_RDMA,
 * where rstream differs on purpose, then fail.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <sched.h>
#include <linux/aio_abi.h>
#include <linux/capability.h>
#include <linux/errqueue.h>
#include <linux/rstream.h>
#include <linux/sockios.h>

#include "kselftest_harness.h"
#include "rstream_util.h"

/*
 * The harness's TEST_F() wrapper keeps a local across setjmp(); GCC warns
 * about it once a test is inlined into the wrapper.  Not this file's.
 */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wclobbered"
#endif

#define GUARD_S		10	/* longest a blocking call may take */
#define PROMPT_MS	5000	/* for what must come promptly */
#define SIN6_LEN_RFC2133	24	/* a sockaddr_in6 without its scope id */
#define QUIET_MS	300	/* to see that nothing comes */

static int rs_socket(int family, int flags)
{
#ifdef RSTREAM_TEST_OVER_TCP
	return socket(family, SOCK_STREAM | flags, 0);
#else
	return socket(AF_RSTREAM, SOCK_STREAM | flags, 0);
#endif
}

static void sleep_ms(int ms)
{
	usleep(ms * 1000);
}

/* Helper threads take no signals: the alarm interrupts the test's call. */
static int start_thread(pthread_t *tid, void *(*fn)(void *), void *arg)
{
	sigset_t all, old;
	int ret;

	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ret = pthread_create(tid, NULL, fn, arg);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return ret;
}

/* Addresses */

struct ep {
	struct sockaddr_storage ss;
	socklen_t len;
};

#define SA(ep)	((struct sockaddr *)&(ep)->ss)

static void ep_parse(struct __test_metadata *_metadata, struct ep *ep,
		     int family, const char *str, unsigned short port)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)&ep->ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ep->ss;

	memset(ep, 0, sizeof(*ep));
	if (family == AF_INET) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		ep->len = sizeof(*sin);
		ASSERT_EQ(1, inet_pton(AF_INET, str, &sin->sin_addr))
			TH_LOG("bad IPv4 address '%s'", str);
	} else {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		ep->len = sizeof(*sin6);
		ASSERT_EQ(1, inet_pton(AF_INET6, str, &sin6->sin6_addr))
			TH_LOG("bad IPv6 address '%s'", str);
	}
}

/* This host's address on the RDMA device, port 0. */
static void ep_host(struct __test_metadata *_metadata, struct ep *ep,
		    int family)
{
	const char *str = getenv(family == AF_INET ? "RSTREAM_ADDR4" :
						     "RSTREAM_ADDR6");

	if (!str || !*str)
		str = family == AF_INET ? "192.0.2.1" : "2001:db8::1";
	ep_parse(_metadata, ep, family, str, 0);
}

static int ep_family(const struct ep *ep)
{
	return ep->ss.ss_family;
}

static unsigned short ep_port(const struct ep *ep)
{
	if (ep->ss.ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)&ep->ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)&ep->ss)->sin6_port);
}

static void ep_set_port(struct ep *ep, unsigned short port)
{
	if (ep->ss.ss_family == AF_INET)
		((struct sockaddr_in *)&ep->ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)&ep->ss)->sin6_port = htons(port);
}

static bool ep_same_addr(const struct ep *a, const struct ep *b)
{
	const struct sockaddr_in *a4 = (const struct sockaddr_in *)&a->ss;
	const struct sockaddr_in *b4 = (const struct sockaddr_in *)&b->ss;
	const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)&a->ss;
	const struct sockaddr_in6 *b6 = (const struct sockaddr_in6 *)&b->ss;

	if (a->ss.ss_family != b->ss.ss_family || a->len != b->len)
		return false;
	if (a->ss.ss_family == AF_INET)
		return a4->sin_addr.s_addr == b4->sin_addr.s_addr;
	return !memcmp(&a6->sin6_addr, &b6->sin6_addr, sizeof(a6->sin6_addr));
}

static bool ep_same(const struct ep *a, const struct ep *b)
{
	return ep_same_addr(a, b) && ep_port(a) == ep_port(b);
}

static const char *ep_str(const struct ep *ep)
{
	static char buf[4][INET6_ADDRSTRLEN + 16];
	static int next;
	char *s = buf[next++ % 4], a[INET6_ADDRSTRLEN] = "?";

	if (ep->ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ep->ss)->sin_addr,
			  a, sizeof(a));
	else if (ep->ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6,
			  &((struct sockaddr_in6 *)&ep->ss)->sin6_addr,
			  a, sizeof(a));
	snprintf(s, sizeof(buf[0]), "family %d [%s]:%u len %u",
		 ep->ss.ss_family, a, ep_port(ep), ep->len);
	return s;
}

static void name_of(struct __test_metadata *_metadata, int fd, bool peer,
		    struct ep *ep)
{
	memset(ep, 0, sizeof(*ep));
	ep->len = sizeof(ep->ss);
	if (peer) {
		ASSERT_EQ(0, getpeername(fd, SA(ep), &ep->len))
			TH_LOG("getpeername: %s", strerror(errno));
	} else {
		ASSERT_EQ(0, getsockname(fd, SA(ep), &ep->len))
			TH_LOG("getsockname: %s", strerror(errno));
	}
}

/* Sockets and connections */

static int int_opt(int fd, int level, int name)
{
	socklen_t len = sizeof(int);
	int v = -1;

	if (getsockopt(fd, level, name, &v, &len))
		return -errno;
	return v;
}

static int set_int(int fd, int level, int name, int v)
{
	return setsockopt(fd, level, name, &v, sizeof(v));
}

static int sock_error(int fd)
{
	return int_opt(fd, SOL_SOCKET, SO_ERROR);
}

static void set_bufs(struct __test_metadata *_metadata, int fd, int size)
{
	ASSERT_EQ(0, set_int(fd, SOL_SOCKET, SO_SNDBUF, size));
	ASSERT_EQ(0, set_int(fd, SOL_SOCKET, SO_RCVBUF, size));
}

static void set_timeo(struct __test_metadata *_metadata, int fd, int name,
		      int ms)
{
	struct timeval tv = { .tv_sec = ms / 1000,
			      .tv_usec = (ms % 1000) * 1000 };

	ASSERT_EQ(0, setsockopt(fd, SOL_SOCKET, name, &tv, sizeof(tv)))
		TH_LOG("setsockopt timeout: %s", strerror(errno));
}

static int fl_flags(int fd)
{
	return fcntl(fd, F_GETFL);
}

static int fd_flags(int fd)
{
	return fcntl(fd, F_GETFD);
}

/* A socket bound to @at, with SO_REUSEADDR if @reuse; its name in @got. */
static int bound_socket(struct __test_metadata *_metadata,
			const struct ep *at, bool reuse, struct ep *got)
{
	int fd = rs_socket(ep_family(at), 0);

	ASSERT_LE(0, fd) TH_LOG("socket: %s", strerror(errno));
	ASSERT_EQ(0, reuse ? set_int(fd, SOL_SOCKET, SO_REUSEADDR, 1) : 0);
	ASSERT_EQ(0, bind(fd, SA(at), at->len))
		TH_LOG("bind %s: %s", ep_str(at), strerror(errno));
	name_of(_metadata, fd, false, got);
	return fd;
}

/* A listener on this host's address and an ephemeral port, in @bound. */
static int make_listener(struct __test_metadata *_metadata, int family,
			 int buf, int backlog, struct ep *bound)
{
	struct ep host;
	int fd;

	ep_host(_metadata, &host, family);
	fd = rs_socket(family, 0);
	ASSERT_LE(0, fd) TH_LOG("socket: %s", strerror(errno));
	if (buf)
		set_bufs(_metadata, fd, buf);
	ASSERT_EQ(0, bind(fd, SA(&host), host.len))
		TH_LOG("bind %s: %s", ep_str(&host), strerror(errno));
	ASSERT_EQ(0, listen(fd, backlog)) TH_LOG("listen: %s",
						 strerror(errno));
	name_of(_metadata, fd, false, bound);
	return fd;
}

/* A blocking connect to @dst. */
static int make_client(struct __test_metadata *_metadata,
		       const struct ep *dst, int buf)
{
	int fd = rs_socket(ep_family(dst), 0);

	ASSERT_LE(0, fd) TH_LOG("socket: %s", strerror(errno));
	if (buf)
		set_bufs(_metadata, fd, buf);
	ASSERT_EQ(0, GUARDED(connect(fd, SA(dst), dst->len)))
		TH_LOG("connect %s: %s", ep_str(dst), strerror(errno));
	return fd;
}

static int accept_one(struct __test_metadata *_metadata, int l)
{
	int fd = GUARDED(accept(l, NULL, NULL));

	ASSERT_LE(0, fd) TH_LOG("accept: %s", strerror(errno));
	return fd;
}

/* A listener and a connection: client @c, accepted @s. */
static void make_pair(struct __test_metadata *_metadata, int family, int buf,
		      int *l, int *c, int *s)
{
	struct ep bound;

	*l = make_listener(_metadata, family, buf, 8, &bound);
	*c = make_client(_metadata, &bound, buf);
	*s = accept_one(_metadata, *l);
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Data */

static unsigned char pat(size_t off, unsigned int seed)
{
	unsigned int x = (unsigned int)off * 2654435761u + seed * 0x9e3779b9u;

	return (x ^ (x >> 13) ^ (off >> 11)) & 0xff;
}

static void fill(char *buf, size_t len, size_t off, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = pat(off + i, seed);
}

/* The index of the first byte that is not the pattern, or -1. */
static long check(const char *buf, size_t len, size_t off, unsigned int seed)
{
	size_t i;

	for (i = 0; i < len; i++)
		if ((unsigned char)buf[i] != pat(off + i, seed))
			return i;
	return -1;
}

/*
 * Sends, or receives and checks, @len bytes of the pattern for @seed;
 * by default with poll() and MSG_DONTWAIT, with @block by blocking calls
 * (the socket then needs SO_SNDTIMEO/SO_RCVTIMEO to be bounded).  Fails
 * into @err; runs in a thread, or in a child process.
 */
struct job {
	int fd;
	bool send;
	bool block;
	bool close_after;
	size_t len;
	size_t chunk;
	unsigned int seed;
	pthread_t tid;
	char err[200];
};

static void *job_run(void *arg)
{
	struct job *j = arg;
	size_t chunk = j->chunk ? j->chunk : 65536, off = 0;
	const char *what = j->send ? "send" : "recv";
	long long last = now_ms();
	char *buf = malloc(chunk);

	j->err[0] = '\0';
	if (!buf) {
		snprintf(j->err, sizeof(j->err), "out of memory");
		return NULL;
	}
	while (off < j->len) {
		size_t n = j->len - off < chunk ? j->len - off : chunk;
		struct pollfd p = { .fd = j->fd,
				    .events = j->send ? POLLOUT : POLLIN };
		ssize_t r;
		long bad;

		if (now_ms() - last > 2 * PROMPT_MS) {
			snprintf(j->err, sizeof(j->err),
				 "%s stalled at byte %zu of %zu", what, off,
				 j->len);
			break;
		}
		if (!j->block && poll(&p, 1, 100) <= 0)
			continue;
		if (j->send) {
			fill(buf, n, off, j->seed);
			r = send(j->fd, buf, n, MSG_NOSIGNAL |
				 (j->block ? 0 : MSG_DONTWAIT));
		} else {
			r = recv(j->fd, buf, n, j->block ? 0 : MSG_DONTWAIT);
		}
		if (r < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (r < 0) {
			snprintf(j->err, sizeof(j->err), "%s at byte %zu: %s",
				 what, off, strerror(errno));
			break;
		}
		if (r == 0 && !j->send) {
			snprintf(j->err, sizeof(j->err),
				 "EOF at byte %zu of %zu", off, j->len);
			break;
		}
		if (!j->send) {
			bad = check(buf, r, off, j->seed);
			if (bad >= 0) {
				snprintf(j->err, sizeof(j->err),
					 "byte %zu is %#x, expected %#x",
					 off + bad, (unsigned char)buf[bad],
					 pat(off + bad, j->seed));
				break;
			}
		}
		off += r;
		last = now_ms();
	}
	free(buf);
	if (j->close_after)
		close(j->fd);
	return NULL;
}

static void job_start(struct __test_metadata *_metadata, struct job *j)
{
	ASSERT_EQ(0, start_thread(&j->tid, job_run, j));
}

static void job_finish(struct __test_metadata *_metadata, struct job *j)
{
	pthread_join(j->tid, NULL);
	EXPECT_STREQ("", j->err);
}

static void send_pat(struct __test_metadata *_metadata, int fd, size_t len,
		     unsigned int seed)
{
	struct job j = { .fd = fd, .send = true, .len = len, .seed = seed };

	job_run(&j);
	ASSERT_STREQ("", j.err);
}

static void recv_pat(struct __test_metadata *_metadata, int fd, size_t len,
		     unsigned int seed)
{
	struct job j = { .fd = fd, .len = len, .seed = seed };

	job_run(&j);
	ASSERT_STREQ("", j.err);
}

/* @len bytes from @a to @b and from @b to @a, all at once. */
static void exchange(struct __test_metadata *_metadata, int a, int b,
		     size_t len)
{
	struct job j[4] = {
		{ .fd = a, .send = true, .len = len, .seed = 1 },
		{ .fd = b, .len = len, .seed = 1 },
		{ .fd = b, .send = true, .len = len, .seed = 2 },
		{ .fd = a, .len = len, .seed = 2 },
	};
	int i;

	for (i = 0; i < 4; i++)
		job_start(_metadata, &j[i]);
	for (i = 0; i < 4; i++)
		job_finish(_metadata, &j[i]);
}

static void put(struct __test_metadata *_metadata, int fd, const char *s)
{
	ASSERT_EQ((long)strlen(s),
		  GUARDED(send(fd, s, strlen(s), MSG_NOSIGNAL)))
		TH_LOG("send '%s': %s", s, strerror(errno));
}

/* Receive exactly @s, waiting for it with poll(). */
static void expect(struct __test_metadata *_metadata, int fd, const char *s)
{
	size_t len = strlen(s), got = 0;
	char buf[256];

	while (got < len) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		ssize_t r;

		ASSERT_EQ(1, poll(&p, 1, PROMPT_MS))
			TH_LOG("'%s': %zu of %zu bytes after %d ms", s, got,
			       len, PROMPT_MS);
		r = recv(fd, buf + got, len - got, MSG_DONTWAIT);
		ASSERT_LT(0, r) TH_LOG("'%s': recv after %zu bytes: %s", s,
				       got, r ? strerror(errno) : "EOF");
		got += r;
	}
	ASSERT_EQ(0, memcmp(buf, s, len)) TH_LOG("expected '%s'", s);
}

/* A blocking recv() gives end of stream, at once and again. */
static void expect_eof(struct __test_metadata *_metadata, int fd)
{
	char c;

	ASSERT_EQ(0, GUARDED(recv(fd, &c, 1, 0)))
		TH_LOG("recv: %s", strerror(errno));
	ASSERT_EQ(0, GUARDED(recv(fd, &c, 1, 0)))
		TH_LOG("second recv: %s", strerror(errno));
}

/* Blocking recv() calls until @len bytes came. */
static void recv_exact(struct __test_metadata *_metadata, int fd, char *buf,
		       size_t len, int flags)
{
	size_t got = 0;

	while (got < len) {
		long r = GUARDED(recv(fd, buf + got, len - got, flags));

		ASSERT_LT(0, r) TH_LOG("recv at byte %zu of %zu: %s", got,
				       len, r ? strerror(errno) : "EOF");
		got += r;
	}
}

/* Waits until an ioctl (FIONREAD, SIOCOUTQ) reads @want. */
static int wait_ioctl(int fd, unsigned long req, int want)
{
	long long end = now_ms() + PROMPT_MS;
	int v = -1;

	do {
		if (ioctl(fd, req, &v))
			return -errno;
		if (v == want)
			break;
		sleep_ms(10);
	} while (now_ms() < end);
	return v;
}

/* Nonblocking sends until the socket takes no more; the bytes sent. */
static size_t fill_up(struct __test_metadata *_metadata, int fd,
		      unsigned int seed)
{
	size_t total = 0;
	char *buf = malloc(65536);
	int round;

	ASSERT_NE(NULL, buf);
	/* Again after a pause, for the bytes that were in flight. */
	for (round = 0; round < 2; round++) {
		for (;;) {
			ssize_t r;

			fill(buf, 65536, total, seed);
			r = send(fd, buf, 65536, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (r < 0) {
				ASSERT_EQ(EAGAIN, errno)
					TH_LOG("send: %s", strerror(errno));
				break;
			}
			total += r;
			ASSERT_GT((size_t)16 << 20, total)
				TH_LOG("16 MiB sent to a peer that reads none");
		}
		sleep_ms(100);
	}
	free(buf);
	return total;
}

/* What a helper thread does to the peer after a delay. */
enum cause { BY_DATA, BY_SHUTDOWN, BY_CLOSE, BY_READ, BY_CONNECT,
	     BY_TCP_CONNECT };

struct later {
	int fd;
	enum cause cause;
	int delay_ms;
	const struct ep *dst;	/* BY_CONNECT, BY_TCP_CONNECT */
	long long at;		/* when it acted */
	int err;		/* errno of the action */
	int result;		/* BY_CONNECT: the connected socket */
	pthread_t tid;
};

static void *later_run(void *arg)
{
	struct later *l = arg;
	struct pollfd p;
	char buf[4096];
	ssize_t r;

	sleep_ms(l->delay_ms);
	l->at = now_ms();
	switch (l->cause) {
	case BY_DATA:
		l->err = errno_of(send(l->fd, "w", 1, MSG_NOSIGNAL));
		break;
	case BY_SHUTDOWN:
		l->err = errno_of(shutdown(l->fd, SHUT_WR));
		break;
	case BY_CLOSE:
		l->err = errno_of(close(l->fd));
		break;
	case BY_READ:
		/* Everything queued, and at least one byte. */
		l->err = ENODATA;
		while ((r = recv(l->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			l->err = 0;
		break;
	case BY_CONNECT:
	case BY_TCP_CONNECT:
		l->result = l->cause == BY_TCP_CONNECT ?
			    socket(ep_family(l->dst),
				   SOCK_STREAM | SOCK_NONBLOCK, 0) :
			    rs_socket(ep_family(l->dst), SOCK_NONBLOCK);
		if (l->result < 0) {
			l->err = errno;
			break;
		}
		if (connect(l->result, SA(l->dst), l->dst->len) &&
		    errno != EINPROGRESS) {
			l->err = errno;
			break;
		}
		p.fd = l->result;
		p.events = POLLOUT;
		if (poll(&p, 1, PROMPT_MS) != 1)
			l->err = ETIMEDOUT;
		else
			l->err = sock_error(l->result);
		break;
	}
	return NULL;
}

static void later_start(struct __test_metadata *_metadata, struct later *l)
{
	ASSERT_EQ(0, start_thread(&l->tid, later_run, l));
}

/* Sends @pieces pieces of @size bytes of the pattern, @gap_ms apart. */
struct drip {
	int fd;
	int pieces;
	size_t size;
	int gap_ms;
	unsigned int seed;
	int err;
	pthread_t tid;
};

static void *drip_run(void *arg)
{
	struct drip *d = arg;
	char buf[4096];
	int i;

	for (i = 0; i < d->pieces && !d->err; i++) {
		sleep_ms(d->gap_ms);
		fill(buf, d->size, i * d->size, d->seed);
		if (send(d->fd, buf, d->size, MSG_NOSIGNAL) != (ssize_t)d->size)
			d->err = errno ? errno : EIO;
	}
	return NULL;
}

/* Waits for a child; its exit code, 128 + signal, or -1 on timeout. */
static int wait_child(pid_t pid)
{
	int status;

	if (GUARDED(waitpid(pid, &status, 0)) != pid) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		return -1;
	}
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}

/*
 * For other processes (forked, exec'd): say @say on @fd, then hear
 * @hear; 0 or the step that failed.
 */
static int talk(int fd, const char *say, const char *hear)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	size_t len = strlen(hear), got = 0;
	char buf[64];
	ssize_t r;

	if (send(fd, say, strlen(say), MSG_NOSIGNAL) != (ssize_t)strlen(say))
		return 11;
	while (got < len) {
		if (poll(&p, 1, PROMPT_MS) != 1)
			return 12;
		r = recv(fd, buf + got, len - got, MSG_DONTWAIT);
		if (r <= 0)
			return 13;
		got += r;
	}
	return memcmp(buf, hear, len) ? 14 : 0;
}

/* Main's helper modes, in a process exec'd by the exec cases. */
static int exec_use_fd(int fd)
{
	if (fd_flags(fd) < 0)
		return 10;
	if (int_opt(fd, SOL_SOCKET, SO_TYPE) != SOCK_STREAM)
		return 15;
	return talk(fd, "exec", "back");
}

static int exec_fd_closed(int fd)
{
	return fd_flags(fd) == -1 && errno == EBADF ? 0 : 1;
}

/*
 * Binding, listening, accepting and connecting, over IPv4 and IPv6.
 */

FIXTURE(addr) {
	struct ep host;		/* this host, port 0 */
	struct ep any;		/* the wildcard address, port 0 */
	struct ep noroute;	/* an address no route leads to */
};

FIXTURE_VARIANT(addr) {
	int family;
	const char *any;
	const char *noroute;
	const char *not_unicast[2];	/* multicast, broadcast */
};

FIXTURE_VARIANT_ADD(addr, ipv4) {
	.family = AF_INET,
	.any = "0.0.0.0",
	.noroute = "198.18.0.1",
	.not_unicast = { "224.0.0.1", "255.255.255.255" },
};

FIXTURE_VARIANT_ADD(addr, ipv6) {
	.family = AF_INET6,
	.any = "::",
	.noroute = "2001:db8:ffff::1",
	.not_unicast = { "ff02::1", "ff05::2" },
};

FIXTURE_SETUP(addr)
{
	guard_init();
	ep_host(_metadata, &self->host, variant->family);
	ep_parse(_metadata, &self->any, variant->family, variant->any, 0);
	ep_parse(_metadata, &self->noroute, variant->family,
		 variant->noroute, 7471);
}

FIXTURE_TEARDOWN(addr)
{
}

/* Port 0 binds an ephemeral port, which getsockname() reports. */
TEST_F(addr, bind_port_zero_gets_ephemeral_port)
{
	struct ep got, want;
	int fd = bound_socket(_metadata, &self->host, false, &got);

	EXPECT_EQ(self->host.len, got.len);
	EXPECT_NE(0, ep_port(&got));
	want = self->host;
	ep_set_port(&want, ep_port(&got));
	EXPECT_TRUE(ep_same(&want, &got)) TH_LOG("bound to %s", ep_str(&got));
	EXPECT_EQ(0, close(fd));
}

/* A port named explicitly is bound, once the previous socket closed. */
TEST_F(addr, bind_explicit_port)
{
	struct ep got, want = self->host;
	int fd = bound_socket(_metadata, &self->host, false, &got);

	ep_set_port(&want, ep_port(&got));
	EXPECT_EQ(0, close(fd));
	fd = bound_socket(_metadata, &want, false, &got);
	EXPECT_TRUE(ep_same(&want, &got)) TH_LOG("bound to %s", ep_str(&got));
	EXPECT_EQ(0, close(fd));
}

/* A second bind to the same address and port, bound or listening. */
TEST_F(addr, bind_in_use_eaddrinuse)
{
	struct ep got;
	int a = bound_socket(_metadata, &self->host, false, &got);
	int b = rs_socket(variant->family, 0);

	ASSERT_LE(0, b);
	EXPECT_EQ(EADDRINUSE, errno_of(bind(b, SA(&got), got.len)));
	ASSERT_EQ(0, listen(a, 1));
	EXPECT_EQ(EADDRINUSE, errno_of(bind(b, SA(&got), got.len)));
	EXPECT_EQ(0, close(b));
	EXPECT_EQ(0, close(a));
}

/* The wildcard address and a specific one share no port, either way. */
TEST_F(addr, bind_wildcard_conflicts_with_address)
{
	struct ep got, other;
	int a = bound_socket(_metadata, &self->any, false, &got);
	int b = rs_socket(variant->family, 0);

	ASSERT_LE(0, b);
	ASSERT_EQ(0, listen(a, 1));
	other = self->host;
	ep_set_port(&other, ep_port(&got));
	EXPECT_EQ(EADDRINUSE, errno_of(bind(b, SA(&other), other.len)));
	EXPECT_EQ(0, close(a));
	EXPECT_EQ(0, close(b));

	a = bound_socket(_metadata, &self->host, false, &got);
	b = rs_socket(variant->family, 0);
	ASSERT_LE(0, b);
	ASSERT_EQ(0, listen(a, 1));
	other = self->any;
	ep_set_port(&other, ep_port(&got));
	EXPECT_EQ(EADDRINUSE, errno_of(bind(b, SA(&other), other.len)));
	EXPECT_EQ(0, close(a));
	EXPECT_EQ(0, close(b));
}

/* Once a listener that had no connection closed, its port is free. */
TEST_F(addr, rebind_after_listener_closed)
{
	struct ep got, again;
	int fd = bound_socket(_metadata, &self->host, false, &got);

	ASSERT_EQ(0, listen(fd, 1));
	EXPECT_EQ(0, close(fd));
	fd = bound_socket(_metadata, &got, false, &again);
	EXPECT_TRUE(ep_same(&got, &again));
	EXPECT_EQ(0, listen(fd, 1));
	EXPECT_EQ(0, close(fd));
}

/*
 * A server restarted with SO_REUSEADDR binds its port again at once,
 * although its last connection closed on its side first (TCP: TIME_WAIT).
 */
TEST_F(addr, reuseaddr_rebind_after_connection_closed)
{
	struct ep bound, again;
	int l = bound_socket(_metadata, &self->host, true, &bound);
	int c, s;

	ASSERT_EQ(0, listen(l, 1));
	c = make_client(_metadata, &bound, 0);
	s = accept_one(_metadata, l);
	put(_metadata, c, "x");
	expect(_metadata, s, "x");
	EXPECT_EQ(0, close(s));
	expect_eof(_metadata, c);
	EXPECT_EQ(0, close(c));
	EXPECT_EQ(0, close(l));

	l = bound_socket(_metadata, &bound, true, &again);
	ASSERT_EQ(0, listen(l, 1));
	c = make_client(_metadata, &bound, 0);
	s = accept_one(_metadata, l);
	put(_metadata, c, "y");
	expect(_metadata, s, "y");
	EXPECT_EQ(0, close(s));
	EXPECT_EQ(0, close(c));
	EXPECT_EQ(0, close(l));
}

/* SO_REUSEADDR on both does not share a port that is listening. */
TEST_F(addr, reuseaddr_listening_port_eaddrinuse)
{
	struct ep got;
	int a = bound_socket(_metadata, &self->host, true, &got);
	int b = rs_socket(variant->family, 0);

	ASSERT_LE(0, b);
	ASSERT_EQ(0, listen(a, 1));
	ASSERT_EQ(0, set_int(b, SOL_SOCKET, SO_REUSEADDR, 1));
	EXPECT_EQ(EADDRINUSE, errno_of(bind(b, SA(&got), got.len)));
	EXPECT_EQ(0, close(a));
	EXPECT_EQ(0, close(b));
}

/* Address lengths short of the family's sockaddr; the socket stays free. */
TEST_F(addr, bind_short_addrlen_einval)
{
	/* IPv6 takes the RFC 2133 sockaddr_in6, without sin6_scope_id */
	socklen_t min = variant->family == AF_INET ?
			sizeof(struct sockaddr_in) : 24;
	socklen_t lens[] = { 0, sizeof(sa_family_t), min - 1 };
	int fd = rs_socket(variant->family, 0);
	unsigned int i;

	ASSERT_LE(0, fd);
	for (i = 0; i < ARRAY_SIZE(lens); i++) {
		EXPECT_EQ(EINVAL, errno_of(bind(fd, SA(&self->host), lens[i])))
			TH_LOG("addrlen %u", lens[i]);
	}
	EXPECT_EQ(0, errno_of(bind(fd, SA(&self->host), self->host.len)));
	EXPECT_EQ(0, close(fd));
}

/* A bound socket cannot be bound again. */
TEST_F(addr, bind_twice_einval)
{
	struct ep got;
	int fd = bound_socket(_metadata, &self->host, false, &got);

	EXPECT_EQ(EINVAL, errno_of(bind(fd, SA(&self->host),
					self->host.len)));
	EXPECT_EQ(EINVAL, errno_of(bind(fd, SA(&got), got.len)));
	EXPECT_EQ(0, close(fd));
}

/* An address of another family; the socket stays free. */
TEST_F(addr, bind_wrong_family_eafnosupport)
{
	struct ep bad = self->host;
	int fd = rs_socket(variant->family, 0);

	ASSERT_LE(0, fd);
	bad.ss.ss_family = AF_UNIX;
	EXPECT_EQ(EAFNOSUPPORT, errno_of(bind(fd, SA(&bad), bad.len)));
	EXPECT_EQ(0, errno_of(bind(fd, SA(&self->host), self->host.len)));
	EXPECT_EQ(0, close(fd));
}

/* An address that is not this host's. */
TEST_F(addr, bind_foreign_address_eaddrnotavail)
{
	struct ep foreign = self->noroute;
	int fd = rs_socket(variant->family, 0);

	ASSERT_LE(0, fd);
	ep_set_port(&foreign, 0);
	EXPECT_EQ(EADDRNOTAVAIL, errno_of(bind(fd, SA(&foreign),
					       foreign.len)));
	EXPECT_EQ(0, close(fd));
}

/* Connections complete up to the backlog before any accept(). */
TEST_F(addr, listen_backlog_holds_pending_connections)
{
	enum { N = 4 };
	struct ep bound, names[N], peer;
	bool seen[N] = { false };
	int l, c[N], s, i, j;

	l = make_listener(_metadata, variant->family, 0, N, &bound);
	for (i = 0; i < N; i++) {
		c[i] = rs_socket(variant->family, SOCK_NONBLOCK);
		ASSERT_LE(0, c[i]);
		ASSERT_EQ(EINPROGRESS, errno_of(connect(c[i], SA(&bound),
							bound.len)));
	}
	for (i = 0; i < N; i++) {
		struct pollfd p = { .fd = c[i], .events = POLLOUT };

		ASSERT_EQ(1, poll(&p, 1, PROMPT_MS))
			TH_LOG("client %d not connected after %d ms", i,
			       PROMPT_MS);
		EXPECT_EQ(POLLOUT, p.revents);
		EXPECT_EQ(0, sock_error(c[i]));
		name_of(_metadata, c[i], false, &names[i]);
	}
	for (i = 0; i < N; i++) {
		peer.len = sizeof(peer.ss);
		s = GUARDED(accept(l, SA(&peer), &peer.len));
		ASSERT_LE(0, s) TH_LOG("accept %d: %s", i, strerror(errno));
		for (j = 0; j < N; j++)
			if (!seen[j] && ep_same(&peer, &names[j]))
				break;
		ASSERT_GT(N, j) TH_LOG("accepted %s: no such client",
				       ep_str(&peer));
		seen[j] = true;
		close(s);
	}
	for (i = 0; i < N; i++)
		close(c[i]);
	close(l);
}

/* listen() again on a listener changes the backlog and keeps it going. */
TEST_F(addr, listen_twice)
{
	struct ep bound;
	int l = make_listener(_metadata, variant->family, 0, 1, &bound);
	int c, s;

	EXPECT_EQ(0, errno_of(listen(l, 16)));
	c = make_client(_metadata, &bound, 0);
	s = accept_one(_metadata, l);
	put(_metadata, c, "x");
	expect(_metadata, s, "x");
	close(s);
	close(c);
	close(l);
}

/* accept() gives the client's address; both ends' names agree. */
TEST_F(addr, names_match_after_connect)
{
	struct ep bound, peer, cl, cp, sl, sp;
	int l = make_listener(_metadata, variant->family, 0, 1, &bound);
	int c = make_client(_metadata, &bound, 0);
	int s;

	peer.len = sizeof(peer.ss);
	s = GUARDED(accept(l, SA(&peer), &peer.len));
	ASSERT_LE(0, s) TH_LOG("accept: %s", strerror(errno));
	name_of(_metadata, c, false, &cl);
	name_of(_metadata, c, true, &cp);
	name_of(_metadata, s, false, &sl);
	name_of(_metadata, s, true, &sp);

	EXPECT_TRUE(ep_same_addr(&self->host, &bound)) TH_LOG("%s",
							      ep_str(&bound));
	EXPECT_TRUE(ep_same_addr(&self->host, &cl)) TH_LOG("%s", ep_str(&cl));
	EXPECT_NE(0, ep_port(&cl));
	EXPECT_TRUE(ep_same(&cl, &peer)) TH_LOG("client %s, accept() %s",
						ep_str(&cl), ep_str(&peer));
	EXPECT_TRUE(ep_same(&cl, &sp)) TH_LOG("client %s, server's peer %s",
					      ep_str(&cl), ep_str(&sp));
	EXPECT_TRUE(ep_same(&bound, &cp)) TH_LOG("listener %s, client's peer %s",
						 ep_str(&bound), ep_str(&cp));
	EXPECT_TRUE(ep_same(&bound, &sl)) TH_LOG("listener %s, server %s",
						 ep_str(&bound), ep_str(&sl));
	close(s);
	close(c);
	close(l);
}

/* accept4() flags; accept() does not pass on the listener's O_NONBLOCK. */
TEST_F(addr, accept4_flags)
{
	struct ep bound;
	int l = make_listener(_metadata, variant->family, 0, 4, &bound);
	int c[3], s[3], i;
	struct pollfd p = { .fd = l, .events = POLLIN };
	char buf;

	for (i = 0; i < 3; i++)
		c[i] = make_client(_metadata, &bound, 0);

	s[0] = GUARDED(accept4(l, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC));
	ASSERT_LE(0, s[0]) TH_LOG("accept4: %s", strerror(errno));
	EXPECT_TRUE(fl_flags(s[0]) & O_NONBLOCK);
	EXPECT_TRUE(fd_flags(s[0]) & FD_CLOEXEC);
	EXPECT_EQ(EAGAIN, errno_of(recv(s[0], &buf, 1, 0)));

	s[1] = GUARDED(accept4(l, NULL, NULL, 0));
	ASSERT_LE(0, s[1]) TH_LOG("accept4: %s", strerror(errno));
	EXPECT_FALSE(fl_flags(s[1]) & O_NONBLOCK);
	EXPECT_FALSE(fd_flags(s[1]) & FD_CLOEXEC);

	ASSERT_EQ(0, fcntl(l, F_SETFL, O_NONBLOCK));
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
	s[2] = accept(l, NULL, NULL);
	ASSERT_LE(0, s[2]) TH_LOG("accept: %s", strerror(errno));
	EXPECT_FALSE(fl_flags(s[2]) & O_NONBLOCK);
	EXPECT_FALSE(fd_flags(s[2]) & FD_CLOEXEC);

	for (i = 0; i < 3; i++) {
		close(s[i]);
		close(c[i]);
	}
	close(l);
}

/* Nonblocking accept() with nothing pending; POLLIN once a client came. */
TEST_F(addr, accept_nonblocking_eagain)
{
	struct ep bound;
	int l = make_listener(_metadata, variant->family, 0, 1, &bound);
	struct pollfd p = { .fd = l, .events = POLLIN };
	int c, s;

	ASSERT_EQ(0, fcntl(l, F_SETFL, O_NONBLOCK));
	EXPECT_EQ(EAGAIN, errno_of(accept(l, NULL, NULL)));
	EXPECT_EQ(0, poll(&p, 1, QUIET_MS)) TH_LOG("revents %#x", p.revents);

	c = make_client(_metadata, &bound, 0);
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
	EXPECT_EQ(POLLIN, p.revents);
	s = accept(l, NULL, NULL);
	ASSERT_LE(0, s) TH_LOG("accept: %s", strerror(errno));
	EXPECT_EQ(EAGAIN, errno_of(accept(l, NULL, NULL)));
	close(s);
	close(c);
	close(l);
}

/* A blocking accept() waits for a client, and returns once it came. */
TEST_F(addr, accept_blocking_waits_for_client)
{
	struct ep bound;
	int l = make_listener(_metadata, variant->family, 0, 1, &bound);
	struct later cl = { .cause = BY_CONNECT, .delay_ms = QUIET_MS,
			    .dst = &bound, .result = -1 };
	long long t0 = now_ms();
	int s;

	later_start(_metadata, &cl);
	s = GUARDED(accept(l, NULL, NULL));
	pthread_join(cl.tid, NULL);
	ASSERT_LE(0, s) TH_LOG("accept: %s", strerror(errno));
	EXPECT_EQ(0, cl.err) TH_LOG("client: %s", strerror(cl.err));
	EXPECT_LE(t0 + QUIET_MS, now_ms());
	put(_metadata, cl.result, "x");
	expect(_metadata, s, "x");
	close(s);
	close(cl.result);
	close(l);
}

/* accept() on sockets that do not listen. */
TEST_F(addr, accept_not_listening_einval)
{
	struct ep got, bound;
	int fd = rs_socket(variant->family, 0), b, l, c, s;

	ASSERT_LE(0, fd);
	EXPECT_EQ(EINVAL, errno_of(GUARDED(accept(fd, NULL, NULL))));
	b = bound_socket(_metadata, &self->host, false, &got);
	EXPECT_EQ(EINVAL, errno_of(GUARDED(accept(b, NULL, NULL))));
	l = make_listener(_metadata, variant->family, 0, 1, &bound);
	c = make_client(_metadata, &bound, 0);
	s = accept_one(_metadata, l);
	EXPECT_EQ(EINVAL, errno_of(GUARDED(accept(c, NULL, NULL))));
	EXPECT_EQ(EINVAL, errno_of(GUARDED(accept(s, NULL, NULL))));
	close(s);
	close(c);
	close(l);
	close(b);
	close(fd);
}

/* A blocking connect() succeeds; data goes both ways. */
TEST_F(addr, connect_blocking_and_transfer)
{
	struct ep bound;
	int l = make_listener(_metadata, variant->family, 0, 1, &bound);
	int c = rs_socket(variant->family, 0), s;

	ASSERT_LE(0, c);
	ASSERT_EQ(0, GUARDED(connect(c, SA(&bound), bound.len)))
		TH_LOG("connect: %s", strerror(errno));
	EXPECT_EQ(0, sock_error(c));
	s = accept_one(_metadata, l);
	exchange(_metadata, c, s, 256 << 10);
	close(s);
	close(c);
	close(l);
}

/* Nonblocking: EINPROGRESS, then POLLOUT alone and SO_ERROR 0. */
TEST_F(addr, connect_nonblocking_einprogress_then_pollout)
{
	struct ep bound;
	int l = make_listener(_metadata, variant->family, 0, 1, &bound);
	int c = rs_socket(variant->family, SOCK_NONBLOCK), s;
	struct pollfd p = { .fd = c, .events = POLLOUT };

	ASSERT_LE(0, c);
	ASSERT_EQ(EINPROGRESS, errno_of(connect(c, SA(&bound), bound.len)));
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS))
		TH_LOG("not connected after %d ms", PROMPT_MS);
	EXPECT_EQ(POLLOUT, p.revents);
	EXPECT_EQ(0, sock_error(c));
	s = accept_one(_metadata, l);
	put(_metadata, c, "x");
	expect(_metadata, s, "x");
	close(s);
	close(c);
	close(l);
}

/* connect() again while a nonblocking connect is in progress. */
TEST_F(addr, connect_in_progress_ealready)
{
	struct ep bound;
	int l = make_listener(_metadata, variant->family, 0, 4, &bound);
	bool checked = false;
	int attempt;

	/*
	 * Retried if the connection was made before the second call, which
	 * then returns 0 (or EISCONN), as TCP's does.  POLLOUT is no sign of
	 * that: it also needs room to write (rstream_tx_writable()), which
	 * may come later (a CI run at 7949ec4 on 6.1 got 0 from the second
	 * connect() while poll() reported nothing).
	 */
	for (attempt = 0; attempt < 3 && !checked; attempt++) {
		int c = rs_socket(variant->family, SOCK_NONBLOCK), s, err;
		struct pollfd p = { .fd = c, .events = POLLOUT };

		ASSERT_LE(0, c);
		ASSERT_EQ(EINPROGRESS, errno_of(connect(c, SA(&bound),
							bound.len)));
		err = errno_of(connect(c, SA(&bound), bound.len));
		if (err != 0 && err != EISCONN) {
			EXPECT_EQ(EALREADY, err);
			checked = true;
		}
		ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
		EXPECT_EQ(0, sock_error(c));
		s = accept_one(_metadata, l);
		close(s);
		close(c);
	}
	EXPECT_TRUE(checked) TH_LOG("connected before a second connect()");
	close(l);
}

/*
 * connect() again once a nonblocking connect was made: 0, as TCP says, and
 * EISCONN after that (hiredis takes both).  It once said EISCONN at once.
 */
TEST_F(addr, connect_again_once_made)
{
	struct ep bound;
	int l = make_listener(_metadata, variant->family, 0, 4, &bound);
	int c = rs_socket(variant->family, SOCK_NONBLOCK), s, err;
	struct pollfd p = { .fd = c, .events = POLLOUT };

	ASSERT_LE(0, c);
	err = errno_of(connect(c, SA(&bound), bound.len));
	ASSERT_TRUE(!err || err == EINPROGRESS) TH_LOG("%s", strerror(err));
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
	EXPECT_EQ(0, sock_error(c));
	if (err == EINPROGRESS)
		EXPECT_EQ(0, errno_of(connect(c, SA(&bound), bound.len)));
	EXPECT_EQ(EISCONN, errno_of(connect(c, SA(&bound), bound.len)));
	s = accept_one(_metadata, l);
	put(_metadata, c, "x");
	expect(_metadata, s, "x");
	close(s);
	close(c);
	close(l);
}

/* connect() on a connected or accepted socket. */
TEST_F(addr, connect_connected_eisconn)
{
	struct ep bound;
	int l = make_listener(_metadata, variant->family, 0, 1, &bound);
	int c = make_client(_metadata, &bound, 0);
	int s = accept_one(_metadata, l);

	EXPECT_EQ(EISCONN, errno_of(GUARDED(connect(c, SA(&bound),
						    bound.len))));
	EXPECT_EQ(EISCONN, errno_of(GUARDED(connect(s, SA(&bound),
						    bound.len))));
	put(_metadata, c, "x");
	expect(_metadata, s, "x");
	close(s);
	close(c);
	close(l);
}

/* A port with no listener (a bound socket holds it): refused. */
TEST_F(addr, connect_refused)
{
	struct ep target;
	int t = bound_socket(_metadata, &self->host, false, &target);
	int c = rs_socket(variant->family, 0);

	ASSERT_LE(0, c);
	EXPECT_EQ(ECONNREFUSED, errno_of(GUARDED(connect(c, SA(&target),
							 target.len))));
	close(c);
	close(t);
}

/* Nonblocking, refused: POLLOUT with POLLERR and POLLHUP, as TCP. */
TEST_F(addr, connect_refused_nonblocking)
{
	struct ep target;
	int t = bound_socket(_metadata, &self->host, false, &target);
	int c = rs_socket(variant->family, SOCK_NONBLOCK);
	struct pollfd p = { .fd = c, .events = POLLOUT };
	const int want = POLLOUT | POLLERR | POLLHUP;

	ASSERT_LE(0, c);
	ASSERT_EQ(EINPROGRESS, errno_of(connect(c, SA(&target), target.len)));
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS))
		TH_LOG("no answer after %d ms", PROMPT_MS);
	EXPECT_EQ(want, p.revents & want) TH_LOG("revents %#x", p.revents);
	EXPECT_EQ(ECONNREFUSED, sock_error(c));
	EXPECT_EQ(0, sock_error(c));	/* reading SO_ERROR clears it */
	close(c);
	close(t);
}

/*
 * rstream(1) and rdma-core's rstream poll with a zero timeout in a loop:
 * whatever poll() says first about a refused connect must carry the
 * error.  The module once let poll() see the connection dead while it
 * freed the verbs resources and only then set the error: SO_ERROR read 0,
 * the tool took the connection as made, and its first send() failed with
 * "Connection refused".
 */
TEST_F_TIMEOUT(addr, connect_refused_busy_poll_sees_the_error, 120)
{
	struct ep target;
	int t = bound_socket(_metadata, &self->host, false, &target);
	long long start = now_ms();
	int round;

	for (round = 0; round < 100; round++) {
		int c = rs_socket(variant->family, SOCK_NONBLOCK);
		struct pollfd p = { .fd = c, .events = POLLOUT };
		long long end = now_ms() + PROMPT_MS;
		int n;

		ASSERT_LE(0, c);
		ASSERT_EQ(EINPROGRESS,
			  errno_of(connect(c, SA(&target), target.len)));
		do {
			n = poll(&p, 1, 0);
		} while (n == 0 && now_ms() < end);
		ASSERT_EQ(1, n) TH_LOG("round %d: no answer after %d ms",
				       round, PROMPT_MS);
		ASSERT_EQ(POLLERR, p.revents & POLLERR)
			TH_LOG("round %d: revents %#x", round, p.revents);
		ASSERT_EQ(ECONNREFUSED, sock_error(c))
			TH_LOG("round %d: revents %#x", round, p.revents);
		close(c);
	}
	TH_LOG("100 refused connects in %lld ms", now_ms() - start);
	close(t);
}

/* An address no route leads to. */
TEST_F(addr, connect_no_route_enetunreach)
{
	int c = rs_socket(variant->family, 0);

	ASSERT_LE(0, c);
	EXPECT_EQ(ENETUNREACH, errno_of(GUARDED(connect(c, SA(&self->noroute),
							self->noroute.len))));
	close(c);
}

/*
 * As TCP: no stream to a multicast or broadcast address, at once.  The
 * module once sent the connection request there and waited out its 20 s
 * deadline.
 */
TEST_F(addr, connect_multicast_broadcast_enetunreach)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(variant->not_unicast); i++) {
		int c = rs_socket(variant->family, 0);
		long long t0 = now_ms();
		struct ep dst;

		ASSERT_LE(0, c);
		ep_parse(_metadata, &dst, variant->family,
			 variant->not_unicast[i], 7471);
		EXPECT_EQ(ENETUNREACH, errno_of(GUARDED(connect(c, SA(&dst),
								dst.len))))
			TH_LOG("%s", ep_str(&dst));
		EXPECT_GT(PROMPT_MS, now_ms() - t0) TH_LOG("%s", ep_str(&dst));
		close(c);
	}
}

/* Short address lengths and foreign families, as for bind(). */
TEST_F(addr, connect_bad_address)
{
	struct ep bound, bad;
	int l = make_listener(_metadata, variant->family, 0, 1, &bound);
	int c = rs_socket(variant->family, 0);

	ASSERT_LE(0, c);
	EXPECT_EQ(EINVAL, errno_of(connect(c, SA(&bound),
					   sizeof(struct sockaddr_in) - 1)));
	bad = bound;
	bad.ss.ss_family = AF_UNIX;
	EXPECT_EQ(EAFNOSUPPORT, errno_of(connect(c, SA(&bad), bad.len)));
	EXPECT_EQ(0, errno_of(GUARDED(connect(c, SA(&bound), bound.len))));
	close(c);
	close(l);
}

/* No peer before a connection. */
TEST_F(addr, getpeername_unconnected_enotconn)
{
	struct ep got, name;
	int fd = rs_socket(variant->family, 0), b, l;

	ASSERT_LE(0, fd);
	name.len = sizeof(name.ss);
	EXPECT_EQ(ENOTCONN, errno_of(getpeername(fd, SA(&name), &name.len)));
	b = bound_socket(_metadata, &self->host, false, &got);
	name.len = sizeof(name.ss);
	EXPECT_EQ(ENOTCONN, errno_of(getpeername(b, SA(&name), &name.len)));
	l = bound_socket(_metadata, &self->host, false, &got);
	ASSERT_EQ(0, listen(l, 1));
	name.len = sizeof(name.ss);
	EXPECT_EQ(ENOTCONN, errno_of(getpeername(l, SA(&name), &name.len)));
	close(l);
	close(b);
	close(fd);
}

TEST_F(addr, shutdown_unconnected_enotconn)
{
	struct ep got;
	int fd = rs_socket(variant->family, 0), b;

	ASSERT_LE(0, fd);
	EXPECT_EQ(ENOTCONN, errno_of(shutdown(fd, SHUT_RDWR)));
	EXPECT_EQ(ENOTCONN, errno_of(shutdown(fd, SHUT_WR)));
	b = bound_socket(_metadata, &self->host, false, &got);
	EXPECT_EQ(ENOTCONN, errno_of(shutdown(b, SHUT_RDWR)));
	close(b);
	close(fd);
}

/* Closing a listener ends the connections it had not handed out. */
TEST_F(addr, listener_close_ends_pending_connections)
{
	enum { N = 3 };
	struct ep bound;
	int l = make_listener(_metadata, variant->family, 0, N, &bound);
	int c[N], i;

	for (i = 0; i < N; i++)
		c[i] = make_client(_metadata, &bound, 0);
	EXPECT_EQ(0, close(l));
	for (i = 0; i < N; i++) {
		struct pollfd p = { .fd = c[i], .events = POLLIN };
		char buf;
		int err;

		ASSERT_EQ(1, poll(&p, 1, PROMPT_MS))
			TH_LOG("client %d: nothing %d ms after the close", i,
			       PROMPT_MS);
		err = errno_of(recv(c[i], &buf, 1, MSG_DONTWAIT));
		EXPECT_TRUE(err == 0 || err == ECONNRESET)
			TH_LOG("client %d: recv: %s", i, strerror(err));
		close(c[i]);
	}
}

#ifndef RSTREAM_TEST_OVER_TCP
/*
 * RSTREAM_TCP_LISTEN: one listening socket takes RDMA clients and the
 * clients of a TCP listener it was given, on the same port; accept()
 * returns the TCP ones as AF_RSTREAM sockets on TCP.
 */

FIXTURE(tcp_listen) {
	struct ep host;
};

FIXTURE_VARIANT(tcp_listen) {
	int family;
};

FIXTURE_VARIANT_ADD(tcp_listen, ipv4) {
	.family = AF_INET,
};

FIXTURE_VARIANT_ADD(tcp_listen, ipv6) {
	.family = AF_INET6,
};

FIXTURE_SETUP(tcp_listen)
{
	guard_init();
	ep_host(_metadata, &self->host, variant->family);
}

FIXTURE_TEARDOWN(tcp_listen)
{
}

/*
 * A TCP listener at @at (its port taken when 0), for RSTREAM_TCP_LISTEN;
 * its name in @bound.
 */
static int tcp_listening(struct __test_metadata *_metadata,
			 const struct ep *at, struct ep *bound)
{
	int t = socket(ep_family(at), SOCK_STREAM, 0);

	ASSERT_LE(0, t) TH_LOG("socket: %s", strerror(errno));
	ASSERT_EQ(0, bind(t, SA(at), at->len))
		TH_LOG("TCP bind %s: %s", ep_str(at), strerror(errno));
	ASSERT_EQ(0, listen(t, 8)) TH_LOG("listen: %s", strerror(errno));
	name_of(_metadata, t, false, bound);
	return t;
}

/*
 * An AF_RSTREAM socket bound on this host, given a TCP listener at the
 * same address and port (and left to hold it alone); not listening yet.
 */
static int tcp_beside(struct __test_metadata *_metadata,
		      const struct ep *host, struct ep *bound)
{
	int l = rs_socket(ep_family(host), 0);
	struct ep tcp;
	int t;

	ASSERT_LE(0, l) TH_LOG("socket: %s", strerror(errno));
	ASSERT_EQ(0, bind(l, SA(host), host->len))
		TH_LOG("bind %s: %s", ep_str(host), strerror(errno));
	name_of(_metadata, l, false, bound);
	t = tcp_listening(_metadata, bound, &tcp);
	ASSERT_EQ(0, set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, t))
		TH_LOG("RSTREAM_TCP_LISTEN: %s", strerror(errno));
	EXPECT_EQ(1, int_opt(l, SOL_RDMA, RSTREAM_TCP_LISTEN));
	close(t);
	return l;
}

/* A listener on this host that takes TCP clients too; its name in @bound. */
static int tcp_listener(struct __test_metadata *_metadata,
			const struct ep *host, struct ep *bound)
{
	int l = tcp_beside(_metadata, host, bound);

	ASSERT_EQ(0, listen(l, 8)) TH_LOG("listen: %s", strerror(errno));
	return l;
}

/* A blocking TCP connect to @dst. */
static int tcp_client(struct __test_metadata *_metadata, const struct ep *dst)
{
	int fd = socket(ep_family(dst), SOCK_STREAM, 0);

	ASSERT_LE(0, fd) TH_LOG("socket: %s", strerror(errno));
	ASSERT_EQ(0, GUARDED(connect(fd, SA(dst), dst->len)))
		TH_LOG("TCP connect %s: %s", ep_str(dst), strerror(errno));
	return fd;
}

/* Bytes both ways between a client and the socket accept() gave. */
static void both_ways(struct __test_metadata *_metadata, int c, int s)
{
	put(_metadata, c, "ping");
	expect(_metadata, s, "ping");
	put(_metadata, s, "pong");
	expect(_metadata, c, "pong");
}

/*
 * One epoll set on the listener hears of a TCP client and of an RDMA one;
 * accept() gives an AF_RSTREAM socket for each: on TCP for the first (its
 * names the TCP connection's), on RDMA for the second; both carry data
 * both ways.
 */
TEST_F(tcp_listen, both_kinds_through_one_epoll)
{
	struct ep bound, peer, cname;
	struct epoll_event ev = { .events = EPOLLIN };
	int l = tcp_listener(_metadata, &self->host, &bound);
	int ep = epoll_create1(0);
	int c, s, rc, rs;

	ASSERT_LE(0, ep);
	ASSERT_EQ(1, int_opt(l, SOL_RDMA, RSTREAM_TCP_LISTEN));
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev));
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 0)) TH_LOG("ready with no client");

	c = tcp_client(_metadata, &bound);
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, PROMPT_MS))
		TH_LOG("epoll did not hear of the TCP client");
	EXPECT_EQ(EPOLLIN, (int)ev.events);
	memset(&peer, 0, sizeof(peer));
	peer.len = sizeof(peer.ss);
	s = GUARDED(accept(l, SA(&peer), &peer.len));
	ASSERT_LE(0, s) TH_LOG("accept: %s", strerror(errno));
	EXPECT_EQ(rstream_family(), int_opt(s, SOL_SOCKET, SO_DOMAIN));
	EXPECT_EQ(0, int_opt(s, SOL_SOCKET, SO_PROTOCOL));
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(s, SOL_RDMA, RSTREAM_PATH));
	name_of(_metadata, c, false, &cname);
	EXPECT_TRUE(ep_same(&cname, &peer))
		TH_LOG("accept gave %s, the client is %s", ep_str(&peer),
		       ep_str(&cname));
	name_of(_metadata, s, true, &peer);
	EXPECT_TRUE(ep_same(&cname, &peer));
	both_ways(_metadata, c, s);
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 0)) TH_LOG("still ready");

	rc = make_client(_metadata, &bound, 0);
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, PROMPT_MS))
		TH_LOG("epoll did not hear of the RDMA client");
	rs = accept_one(_metadata, l);
	EXPECT_EQ(rstream_family(), int_opt(rs, SOL_SOCKET, SO_DOMAIN));
	EXPECT_EQ(RSTREAM_PATH_RDMA, int_opt(rs, SOL_RDMA, RSTREAM_PATH));
	both_ways(_metadata, rc, rs);

	close(rs);
	close(rc);
	close(s);
	close(c);
	close(ep);
	close(l);
}

/* A blocking accept() wakes for a TCP client. */
TEST_F(tcp_listen, blocking_accept_wakes_for_tcp_client)
{
	struct ep bound;
	int l = tcp_listener(_metadata, &self->host, &bound);
	struct later cl = { .cause = BY_TCP_CONNECT, .delay_ms = QUIET_MS,
			    .dst = &bound, .result = -1 };
	int s;

	later_start(_metadata, &cl);
	s = GUARDED(accept(l, NULL, NULL));
	pthread_join(cl.tid, NULL);
	ASSERT_LE(0, s) TH_LOG("accept: %s", strerror(errno));
	EXPECT_EQ(0, cl.err) TH_LOG("client: %s", strerror(cl.err));
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(s, SOL_RDMA, RSTREAM_PATH));
	put(_metadata, cl.result, "x");
	expect(_metadata, s, "x");
	close(s);
	close(cl.result);
	close(l);
}

/*
 * A socket accepted from the caller's TCP listener has what TCP's
 * accepted socket inherited from it (SO_KEEPALIVE, SO_MARK), and a call
 * on it does not take that away.
 */
TEST_F(tcp_listen, accepted_has_what_tcp_inherited)
{
	int l = rs_socket(ep_family(&self->host), 0);
	struct ep bound, tcp;
	char b;
	int t, c, s;

	ASSERT_LE(0, l);
	ASSERT_EQ(0, bind(l, SA(&self->host), self->host.len));
	name_of(_metadata, l, false, &bound);
	t = tcp_listening(_metadata, &bound, &tcp);
	ASSERT_EQ(0, set_int(t, SOL_SOCKET, SO_KEEPALIVE, 1));
	ASSERT_EQ(0, set_int(t, SOL_SOCKET, SO_MARK, 5));
	ASSERT_EQ(0, set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, t));
	close(t);
	ASSERT_EQ(0, listen(l, 8));
	c = tcp_client(_metadata, &bound);
	s = accept_one(_metadata, l);
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(s, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(EAGAIN, errno_of(recv(s, &b, 1, MSG_DONTWAIT)));
	EXPECT_EQ(1, int_opt(s, SOL_SOCKET, SO_KEEPALIVE));
	EXPECT_EQ(5, int_opt(s, SOL_SOCKET, SO_MARK));
	both_ways(_metadata, c, s);
	close(s);
	close(c);
	close(l);
}

/* The option is for a socket that has not listened yet. */
TEST_F(tcp_listen, option_before_listen_only)
{
	struct ep bound, tb;
	int l = make_listener(_metadata, variant->family, 0, 1, &bound);
	int t = tcp_listening(_metadata, &bound, &tb);

	EXPECT_EQ(0, int_opt(l, SOL_RDMA, RSTREAM_TCP_LISTEN));
	EXPECT_EQ(-1, set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, t));
	EXPECT_EQ(EINVAL, errno);
	close(t);
	EXPECT_EQ(0, int_opt(l, SOL_RDMA, RSTREAM_TCP_LISTEN));
	close(l);
}

/* Without it, nothing listens on TCP at the listener's port. */
TEST_F(tcp_listen, without_option_tcp_refused)
{
	struct ep bound;
	int l = make_listener(_metadata, variant->family, 0, 1, &bound);
	int c = socket(variant->family, SOCK_STREAM, 0);

	ASSERT_LE(0, c);
	EXPECT_EQ(ECONNREFUSED, errno_of(connect(c, SA(&bound), bound.len)));
	close(c);
	close(l);
}

/*
 * An epoll set that took the socket before listen() hears of TCP clients
 * too, and so does poll().
 */
TEST_F(tcp_listen, epoll_added_before_listen)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct ep bound;
	int l = tcp_beside(_metadata, &self->host, &bound);
	int ep = epoll_create1(0);
	struct pollfd p = { .fd = l, .events = POLLIN };
	int c, s;

	ASSERT_LE(0, ep);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev));
	ASSERT_EQ(0, listen(l, 8));
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 0)) TH_LOG("ready with no client");
	c = tcp_client(_metadata, &bound);
	EXPECT_EQ(1, epoll_wait(ep, &ev, 1, PROMPT_MS))
		TH_LOG("epoll did not hear of the TCP client");
	EXPECT_EQ(1, poll(&p, 1, PROMPT_MS));
	s = accept_one(_metadata, l);
	both_ways(_metadata, c, s);
	close(s);
	close(c);
	close(ep);
	close(l);
}

/*
 * The option takes a listening TCP socket, or -1 to let go of it.  What is
 * not one leaves the listener it holds alone: a failed attach once let go
 * of it first.
 */
TEST_F(tcp_listen, option_takes_a_tcp_listener)
{
	struct ep bound;
	int l = rs_socket(variant->family, 0);
	int udp = socket(variant->family, SOCK_DGRAM, 0);
	int idle = socket(variant->family, SOCK_STREAM, 0);
	int null = open("/dev/null", O_RDONLY);
	int other = make_listener(_metadata, variant->family, 0, 1, &bound);
	int t = tcp_listening(_metadata, &self->host, &bound);

	ASSERT_LE(0, l);
	ASSERT_LE(0, udp);
	ASSERT_LE(0, idle);
	ASSERT_LE(0, null);
	EXPECT_EQ(ENOTSOCK, errno_of(set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, null)));
	EXPECT_EQ(EBADF, errno_of(set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, 4000)));
	EXPECT_EQ(EINVAL, errno_of(set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, udp)));
	EXPECT_EQ(EINVAL, errno_of(set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, idle)));
	EXPECT_EQ(EINVAL, errno_of(set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, other)));
	EXPECT_EQ(EINVAL, errno_of(set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, l)));
	EXPECT_EQ(0, int_opt(l, SOL_RDMA, RSTREAM_TCP_LISTEN));
	EXPECT_EQ(0, set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, t));
	EXPECT_EQ(1, int_opt(l, SOL_RDMA, RSTREAM_TCP_LISTEN));
	EXPECT_EQ(EINVAL, errno_of(set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, udp)));
	EXPECT_EQ(EBADF, errno_of(set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, 4000)));
	EXPECT_EQ(1, int_opt(l, SOL_RDMA, RSTREAM_TCP_LISTEN))
		TH_LOG("a failed attach let go of the listener held");
	EXPECT_EQ(0, set_int(l, SOL_RDMA, RSTREAM_TCP_LISTEN, -1));
	EXPECT_EQ(0, int_opt(l, SOL_RDMA, RSTREAM_TCP_LISTEN));
	close(t);
	close(other);
	close(null);
	close(idle);
	close(udp);
	close(l);
}

/*
 * A TCP client the listener never accepted is reset when it closes, as
 * by a TCP listener; one it accepted lives on after it.
 */
TEST_F(tcp_listen, listener_close_resets_pending_tcp_clients)
{
	struct ep bound;
	int l = tcp_listener(_metadata, &self->host, &bound);
	int kept = tcp_client(_metadata, &bound);
	int s = accept_one(_metadata, l);
	int c = tcp_client(_metadata, &bound);
	char b;

	set_timeo(_metadata, c, SO_RCVTIMEO, PROMPT_MS);
	close(l);
	EXPECT_EQ(-1, recv(c, &b, 1, 0));
	EXPECT_EQ(ECONNRESET, errno) TH_LOG("recv: %s", strerror(errno));
	both_ways(_metadata, kept, s);
	close(c);
	close(s);
	close(kept);
}
#endif

/* Fixtures of one connected IPv4 pair: listener, client, server. */
static void pair_open(struct __test_metadata *_metadata, int buf, int *l,
		      int *c, int *s)
{
	guard_init();
	*l = -1;
	*c = -1;
	*s = -1;
	make_pair(_metadata, AF_INET, buf, l, c, s);
}

static void pair_close(int *l, int *c, int *s)
{
	close_fd(s);
	close_fd(c);
	close_fd(l);
}

/*
 * The connected pair: client c, accepted s, over IPv4.
 */

FIXTURE(conn) {
	int l, c, s;
};

FIXTURE_SETUP(conn)
{
	pair_open(_metadata, 0, &self->l, &self->c, &self->s);
}

FIXTURE_TEARDOWN(conn)
{
	pair_close(&self->l, &self->c, &self->s);
}

/* Both ways, in sequence, through the same data path as for TCP. */
static void read_exact(struct __test_metadata *_metadata, int fd, char *buf,
		       size_t len)
{
	size_t got = 0;

	while (got < len) {
		long r = GUARDED(read(fd, buf + got, len - got));

		ASSERT_LT(0, r) TH_LOG("read at byte %zu of %zu: %s", got,
				       len, r ? strerror(errno) : "EOF");
		got += r;
	}
}

TEST_F(conn, write_read_both_ways)
{
	char out[1000], in[1000];

	fill(out, sizeof(out), 0, 3);
	ASSERT_EQ(1000, GUARDED(write(self->c, out, sizeof(out))));
	read_exact(_metadata, self->s, in, sizeof(in));
	EXPECT_EQ(0, memcmp(in, out, sizeof(in)));
	fill(out, sizeof(out), 0, 4);
	ASSERT_EQ(1000, GUARDED(write(self->s, out, sizeof(out))));
	read_exact(_metadata, self->c, in, sizeof(in));
	EXPECT_EQ(0, memcmp(in, out, sizeof(in)));
}

TEST_F(conn, send_recv_both_ways)
{
	char out[1000], in[1000];

	fill(out, sizeof(out), 0, 5);
	ASSERT_EQ(1000, GUARDED(send(self->c, out, sizeof(out), 0)));
	recv_exact(_metadata, self->s, in, sizeof(in), 0);
	EXPECT_EQ(0, memcmp(in, out, sizeof(in)));
	fill(out, sizeof(out), 0, 6);
	ASSERT_EQ(1000, GUARDED(send(self->s, out, sizeof(out), 0)));
	recv_exact(_metadata, self->c, in, sizeof(in), 0);
	EXPECT_EQ(0, memcmp(in, out, sizeof(in)));
}

/* Three iovecs out, four of other sizes in; no address, no flags. */
TEST_F(conn, sendmsg_recvmsg_iovecs)
{
	enum { LEN = 5101 };
	static const size_t in_sizes[] = { 7, 3000, 2000, 94 };
	char out[LEN], in[LEN];
	struct iovec siov[3] = {
		{ out, 1 }, { out + 1, 100 }, { out + 101, LEN - 101 },
	};
	struct msghdr m = { .msg_iov = siov, .msg_iovlen = 3 };
	struct sockaddr_storage name;
	size_t got = 0;
	bool first = true;

	fill(out, LEN, 0, 7);
	ASSERT_EQ(LEN, GUARDED(sendmsg(self->c, &m, MSG_NOSIGNAL)));
	while (got < LEN) {
		struct iovec riov[4];
		size_t start = 0, k, n = 0;
		long r;

		for (k = 0; k < ARRAY_SIZE(in_sizes); k++) {
			size_t end = start + in_sizes[k];

			if (end > got) {
				size_t from = got > start ? got : start;

				riov[n].iov_base = in + from;
				riov[n].iov_len = end - from;
				n++;
			}
			start = end;
		}
		memset(&m, 0, sizeof(m));
		m.msg_iov = riov;
		m.msg_iovlen = n;
		m.msg_name = &name;
		m.msg_namelen = sizeof(name);
		r = GUARDED(recvmsg(self->s, &m, 0));
		ASSERT_LT(0, r) TH_LOG("recvmsg: %s",
				       r ? strerror(errno) : "EOF");
		if (first) {
			EXPECT_EQ(0U, m.msg_namelen);
			EXPECT_EQ(0, m.msg_flags);
			first = false;
		}
		got += r;
	}
	EXPECT_EQ(0, memcmp(in, out, LEN));
}

TEST_F(conn, writev_readv)
{
	enum { LEN = 9000 };
	char out[LEN], in[LEN];
	struct iovec wiov[3] = {
		{ out, 4096 }, { out + 4096, 1 }, { out + 4097, LEN - 4097 },
	};
	size_t got = 0;

	fill(out, LEN, 0, 8);
	ASSERT_EQ(LEN, GUARDED(writev(self->s, wiov, 3)));
	while (got < LEN) {
		size_t half = got < LEN / 2 ? LEN / 2 - got : 0;
		struct iovec riov[2] = {
			{ in + got, half },
			{ in + got + half, LEN - got - half },
		};
		long r = GUARDED(readv(self->c, riov, 2));

		ASSERT_LT(0, r) TH_LOG("readv: %s",
				       r ? strerror(errno) : "EOF");
		got += r;
	}
	EXPECT_EQ(0, memcmp(in, out, LEN));
}

/* MSG_PEEK shows the data and leaves it to the next recv(). */
TEST_F(conn, peek_does_not_consume)
{
	char out[100], in[100];
	long long end = now_ms() + PROMPT_MS;
	long r = 0;

	fill(out, sizeof(out), 0, 9);
	ASSERT_EQ(100, GUARDED(send(self->s, out, 100, MSG_NOSIGNAL)));
	while (r < 100 && now_ms() < end) {
		r = recv(self->c, in, 100, MSG_PEEK | MSG_DONTWAIT);
		ASSERT_EQ(0, r > 0 ? memcmp(in, out, r) : 0);
		if (r <= 0)
			sleep_ms(10);
	}
	ASSERT_EQ(100, r) TH_LOG("peeked %ld bytes of 100", r);
	memset(in, 0, sizeof(in));
	ASSERT_EQ(40, GUARDED(recv(self->c, in, 40, MSG_PEEK)));
	EXPECT_EQ(0, memcmp(in, out, 40));
	memset(in, 0, sizeof(in));
	ASSERT_EQ(100, GUARDED(recv(self->c, in, 100, 0)));
	EXPECT_EQ(0, memcmp(in, out, 100));
	EXPECT_EQ(EAGAIN, errno_of(recv(self->c, in, 1,
					MSG_PEEK | MSG_DONTWAIT)));
}

/* MSG_WAITALL collects pieces that come 100 ms apart. */
TEST_F(conn, waitall_waits_for_pieces)
{
	struct drip d = { .fd = self->s, .pieces = 3, .size = 1000,
			  .gap_ms = 100, .seed = 10 };
	char in[3000];
	long long t0 = now_ms();
	long r;

	ASSERT_EQ(0, start_thread(&d.tid, drip_run, &d));
	r = GUARDED(recv(self->c, in, sizeof(in), MSG_WAITALL));
	pthread_join(d.tid, NULL);
	ASSERT_EQ(0, d.err) TH_LOG("sender: %s", strerror(d.err));
	ASSERT_EQ(3000, r) TH_LOG("recv: %s", r < 0 ? strerror(errno) : "");
	EXPECT_EQ(-1, check(in, sizeof(in), 0, 10));
	EXPECT_LE(t0 + 300, now_ms());
	EXPECT_GT(t0 + 300 + PROMPT_MS, now_ms());
}

/*
 * A send the moment a blocking connect() returns finds room, as on TCP:
 * the listener offers its ring as a grant, once established (before, on
 * the debug kernel, conn.dontwait_empty_eagain's send failed with EAGAIN
 * after connect() and accept()).  And poll() says POLLOUT at once.
 */
TEST(send_at_once_after_connect)
{
	struct pollfd p = { .events = POLLOUT };
	int l, c, s, round;
	struct ep bound;

	for (round = 0; round < 8; round++) {
		l = make_listener(_metadata, AF_INET, 0, 8, &bound);
		c = make_client(_metadata, &bound, 0);
		p.fd = c;
		EXPECT_EQ(1, poll(&p, 1, 0)) TH_LOG("round %d: not writable",
						    round);
		EXPECT_EQ(1, send(c, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL))
			TH_LOG("round %d: %s", round, strerror(errno));
		s = accept_one(_metadata, l);
		close(s);
		close(c);
		close(l);
	}
}

TEST_F(conn, dontwait_empty_eagain)
{
	char c;

	EXPECT_EQ(EAGAIN, errno_of(recv(self->c, &c, 1, MSG_DONTWAIT)));
	EXPECT_EQ(EAGAIN, errno_of(recv(self->s, &c, 1, MSG_DONTWAIT)));
	EXPECT_EQ(1, send(self->c, "x", 1, MSG_DONTWAIT | MSG_NOSIGNAL));
	expect(_metadata, self->s, "x");
}

/*
 * recv(MSG_TRUNC) as tcp(7) has it since Linux 2.4: the bytes are consumed
 * and thrown away, and the count is returned; the buffer is not written.
 */
TEST_F(conn, recv_trunc_discards)
{
	struct pollfd p = { .fd = self->c, .events = POLLIN };
	char buf[10];

	put(_metadata, self->s, "0123456789");
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
	memset(buf, 'x', sizeof(buf));
	EXPECT_EQ(4, recv(self->c, buf, 4, MSG_TRUNC | MSG_DONTWAIT));
	EXPECT_EQ(0, memcmp(buf, "xxxx", 4));
	expect(_metadata, self->c, "456789");
}

/* No urgent data: MSG_OOB is refused both ways, and sends nothing. */
TEST_F(conn, oob_eopnotsupp)
{
	struct pollfd p = { .fd = self->s, .events = POLLIN | POLLPRI };
	char c;

	EXPECT_EQ(EOPNOTSUPP, errno_of(send(self->c, "x", 1,
					    MSG_OOB | MSG_NOSIGNAL)));
	EXPECT_EQ(EOPNOTSUPP, errno_of(recv(self->c, &c, 1,
					    MSG_OOB | MSG_DONTWAIT)));
	EXPECT_EQ(0, poll(&p, 1, QUIET_MS)) TH_LOG("revents %#x", p.revents);
}

/* Sending 0 bytes returns 0 and the peer sees nothing, not an EOF. */
TEST_F(conn, send_zero_bytes)
{
	struct pollfd p = { .fd = self->s, .events = POLLIN };
	char c = 0;

	EXPECT_EQ(0, send(self->c, &c, 0, MSG_NOSIGNAL));
	EXPECT_EQ(0, write(self->c, &c, 0));
	EXPECT_EQ(0, poll(&p, 1, QUIET_MS)) TH_LOG("revents %#x", p.revents);
	EXPECT_EQ(EAGAIN, errno_of(recv(self->s, &c, 1, MSG_DONTWAIT)));
}

/* Data, then end of stream after the peer's SHUT_WR; we can still send. */
TEST_F(conn, eof_after_peer_shutdown_wr)
{
	put(_metadata, self->s, "bye");
	ASSERT_EQ(0, shutdown(self->s, SHUT_WR));
	expect(_metadata, self->c, "bye");
	expect_eof(_metadata, self->c);
	put(_metadata, self->c, "ok");
	expect(_metadata, self->s, "ok");
}

/* The peer's last byte and its SHUT_WR, sent from a thread of their own. */
static void *last_byte_then_shutdown(void *arg)
{
	int fd = *(int *)arg;

	if (send(fd, "z", 1, MSG_NOSIGNAL) == 1)
		shutdown(fd, SHUT_WR);
	return NULL;
}

/* The bytes sent before close() all come, then end of stream. */
TEST_F(conn, eof_after_peer_close)
{
	enum { LEN = 100000 };
	char *buf = malloc(LEN);

	ASSERT_NE(NULL, buf);
	fill(buf, LEN, 0, 11);
	ASSERT_EQ(LEN, GUARDED(send(self->s, buf, LEN, MSG_NOSIGNAL)));
	close_fd(&self->s);
	recv_pat(_metadata, self->c, LEN, 11);
	expect_eof(_metadata, self->c);
	free(buf);
}

/* After our SHUT_WR: EPIPE and SIGPIPE, from send() and write(). */
TEST_F(conn, send_after_shutdown_wr_epipe_sigpipe)
{
	struct timespec zero = { 0 };
	sigset_t set, pending;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	ASSERT_EQ(0, sigprocmask(SIG_BLOCK, &set, NULL));
	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));

	EXPECT_EQ(EPIPE, errno_of(send(self->c, "x", 1, 0)));
	sigpending(&pending);
	EXPECT_TRUE(sigismember(&pending, SIGPIPE));
	EXPECT_EQ(SIGPIPE, sigtimedwait(&set, NULL, &zero));

	EXPECT_EQ(EPIPE, errno_of(write(self->c, "x", 1)));
	sigpending(&pending);
	EXPECT_TRUE(sigismember(&pending, SIGPIPE));
	EXPECT_EQ(SIGPIPE, sigtimedwait(&set, NULL, &zero));

	expect_eof(_metadata, self->s);
}

/* MSG_NOSIGNAL: EPIPE without the signal. */
TEST_F(conn, send_after_shutdown_wr_nosignal)
{
	sigset_t set, pending;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	ASSERT_EQ(0, sigprocmask(SIG_BLOCK, &set, NULL));
	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	EXPECT_EQ(EPIPE, errno_of(send(self->c, "x", 1, MSG_NOSIGNAL)));
	sigpending(&pending);
	EXPECT_FALSE(sigismember(&pending, SIGPIPE));
}

/* Sending to a peer that closed cleanly fails soon, with EPIPE (as TCP). */
TEST_F(conn, send_after_peer_close_fails)
{
	long long end = now_ms() + 2 * PROMPT_MS;
	char buf[1024] = { 0 };
	int err = 0, sends = 0;

	close_fd(&self->s);
	while (!err && now_ms() < end) {
		if (send(self->c, buf, sizeof(buf),
			 MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno != EAGAIN)
			err = errno;
		sends++;
		sleep_ms(20);
	}
	EXPECT_EQ(EPIPE, err)
		TH_LOG("after %d sends in %d ms: %s", sends, 2 * PROMPT_MS,
		       err ? strerror(err) : "no error");
}

/* Half-close: one side's SHUT_WR, the other still sends and is read. */
static void half_close(struct __test_metadata *_metadata, int a, int b)
{
	struct job rx = { .fd = a, .len = 256 << 10, .seed = 12 };

	ASSERT_EQ(0, shutdown(a, SHUT_WR));
	expect_eof(_metadata, b);
	job_start(_metadata, &rx);
	send_pat(_metadata, b, 256 << 10, 12);
	job_finish(_metadata, &rx);
	EXPECT_EQ(EPIPE, errno_of(send(a, "x", 1, MSG_NOSIGNAL)));
	ASSERT_EQ(0, shutdown(b, SHUT_WR));
	expect_eof(_metadata, a);
}

TEST_F(conn, half_close_client_side)
{
	half_close(_metadata, self->c, self->s);
}

TEST_F(conn, half_close_server_side)
{
	half_close(_metadata, self->s, self->c);
}

/* SHUT_RD: recv() gives 0 at once; sending still works. */
TEST_F(conn, shutdown_rd_recv_returns_zero)
{
	struct pollfd p = { .fd = self->c,
			    .events = POLLIN | POLLOUT | POLLRDHUP };

	ASSERT_EQ(0, shutdown(self->c, SHUT_RD));
	expect_eof(_metadata, self->c);
	ASSERT_EQ(1, poll(&p, 1, 0));
	EXPECT_EQ(POLLIN | POLLOUT | POLLRDHUP, p.revents);
	put(_metadata, self->c, "still");
	expect(_metadata, self->s, "still");
}

/* SHUT_RDWR: end of stream here and there, EPIPE, POLLHUP. */
TEST_F(conn, shutdown_rdwr)
{
	struct pollfd p = { .fd = self->c,
			    .events = POLLIN | POLLOUT | POLLRDHUP };

	ASSERT_EQ(0, shutdown(self->c, SHUT_RDWR));
	expect_eof(_metadata, self->c);
	EXPECT_EQ(EPIPE, errno_of(send(self->c, "x", 1, MSG_NOSIGNAL)));
	expect_eof(_metadata, self->s);
	ASSERT_EQ(1, poll(&p, 1, 0));
	EXPECT_TRUE(p.revents & POLLHUP) TH_LOG("revents %#x", p.revents);
}

TEST_F(conn, shutdown_invalid_how_einval)
{
	EXPECT_EQ(EINVAL, errno_of(shutdown(self->c, 3)));
	EXPECT_EQ(EINVAL, errno_of(shutdown(self->c, -1)));
	put(_metadata, self->c, "x");
	expect(_metadata, self->s, "x");
}

TEST_F(conn, listen_on_connected_einval)
{
	EXPECT_EQ(EINVAL, errno_of(listen(self->c, 1)));
	EXPECT_EQ(EINVAL, errno_of(listen(self->s, 1)));
	put(_metadata, self->c, "x");
	expect(_metadata, self->s, "x");
}

/* An idle connection is writable, and nothing else, on both ends. */
TEST_F(conn, poll_idle_pollout_only)
{
	int fds[2] = { self->c, self->s }, i;

	for (i = 0; i < 2; i++) {
		struct pollfd p = { .fd = fds[i], .events = POLLIN | POLLOUT |
							 POLLPRI | POLLRDHUP };

		ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
		EXPECT_EQ(POLLOUT, p.revents);
		p.events = POLLIN | POLLPRI | POLLRDHUP;
		EXPECT_EQ(0, poll(&p, 1, QUIET_MS))
			TH_LOG("revents %#x", p.revents);
	}
}

/* poll, select and epoll agree: readable with data, not once read. */
TEST_F(conn, poll_select_epoll_agree_on_data)
{
	struct pollfd p = { .fd = self->c, .events = POLLIN | POLLOUT };
	struct epoll_event ev = { .events = EPOLLIN | EPOLLOUT | EPOLLRDHUP };
	struct timeval tv = { 0 };
	fd_set r, w;
	int ep;
	char c;

	ep = epoll_create1(0);
	ASSERT_LE(0, ep);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, self->c, &ev));

	put(_metadata, self->s, "x");
	p.events = POLLIN;
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
	p.events = POLLIN | POLLOUT;
	ASSERT_EQ(1, poll(&p, 1, 0));
	EXPECT_EQ(POLLIN | POLLOUT, p.revents);
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_SET(self->c, &r);
	FD_SET(self->c, &w);
	EXPECT_EQ(2, select(self->c + 1, &r, &w, NULL, &tv));
	EXPECT_TRUE(FD_ISSET(self->c, &r));
	EXPECT_TRUE(FD_ISSET(self->c, &w));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 0));
	EXPECT_EQ(EPOLLIN | EPOLLOUT, (int)ev.events);

	ASSERT_EQ(1, recv(self->c, &c, 1, MSG_DONTWAIT));
	ASSERT_EQ(1, poll(&p, 1, 0));
	EXPECT_EQ(POLLOUT, p.revents);
	FD_ZERO(&r);
	FD_ZERO(&w);
	FD_SET(self->c, &r);
	FD_SET(self->c, &w);
	EXPECT_EQ(1, select(self->c + 1, &r, &w, NULL, &tv));
	EXPECT_FALSE(FD_ISSET(self->c, &r));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, 0));
	EXPECT_EQ(EPOLLOUT, (int)ev.events);
	close(ep);
}

/* The peer's SHUT_WR: EPOLLIN | EPOLLRDHUP, not EPOLLHUP. */
TEST_F(conn, epoll_rdhup_after_peer_shutdown_wr)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	int ep = epoll_create1(0);

	ASSERT_LE(0, ep);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, self->c, &ev));
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, 0));
	ASSERT_EQ(0, shutdown(self->s, SHUT_WR));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, PROMPT_MS));
	EXPECT_EQ(EPOLLIN | EPOLLRDHUP, (int)ev.events);
	expect_eof(_metadata, self->c);
	close(ep);
}

/*
 * The peer closed: at least POLLIN | POLLRDHUP; POLLHUP once our side
 * is shut too, with poll() and epoll alike.
 */
TEST_F(conn, poll_after_peer_close_rdhup_then_hup)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct pollfd p = { .fd = self->c, .events = POLLIN | POLLRDHUP };
	int ep = epoll_create1(0);

	ASSERT_LE(0, ep);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, self->c, &ev));
	close_fd(&self->s);
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
	EXPECT_EQ(POLLIN | POLLRDHUP, p.revents & (POLLIN | POLLRDHUP));
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, PROMPT_MS));
	EXPECT_EQ(EPOLLIN | EPOLLRDHUP,
		  (int)ev.events & (EPOLLIN | EPOLLRDHUP));

	EXPECT_EQ(0, errno_of(shutdown(self->c, SHUT_WR)));
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
	EXPECT_TRUE(p.revents & POLLHUP) TH_LOG("revents %#x", p.revents);
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, PROMPT_MS));
	EXPECT_TRUE((int)ev.events & EPOLLHUP) TH_LOG("events %#x", ev.events);
	close(ep);
}

/* EPOLLET: one event per arrival, none while nothing new comes. */
TEST_F(conn, epoll_et_one_event_per_arrival)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLET };
	int ep = epoll_create1(0);
	char buf[2];

	ASSERT_LE(0, ep);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, self->c, &ev));
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, QUIET_MS));
	put(_metadata, self->s, "a");
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, PROMPT_MS));
	EXPECT_EQ(EPOLLIN, (int)ev.events);
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, QUIET_MS))
		TH_LOG("a second event, for the same byte: %#x", ev.events);
	put(_metadata, self->s, "b");
	ASSERT_EQ(1, epoll_wait(ep, &ev, 1, PROMPT_MS));
	EXPECT_EQ(EPOLLIN, (int)ev.events);
	EXPECT_EQ(0, epoll_wait(ep, &ev, 1, QUIET_MS));
	recv_exact(_metadata, self->c, buf, 2, 0);
	EXPECT_EQ(0, memcmp(buf, "ab", 2));
	close(ep);
}

/*
 * A Linux AIO poll (IOCB_CMD_POLL) takes the wake-up's key as what
 * happened, without asking the socket again: a completion of our own
 * write must not be reported as data to read, and the data, when it
 * comes, is.
 */
TEST_F(conn, aio_poll_reports_what_happened)
{
	struct timespec quiet = { .tv_nsec = QUIET_MS * 1000000L };
	struct timespec prompt = { .tv_sec = PROMPT_MS / 1000 };
	struct iocb cb = { .aio_lio_opcode = IOCB_CMD_POLL,
			   .aio_fildes = self->c, .aio_buf = POLLIN };
	struct iocb *cbs[] = { &cb };
	struct io_event ev = {};
	aio_context_t ctx = 0;
	char buf[1];

	ASSERT_EQ(0, syscall(__NR_io_setup, 1, &ctx))
		TH_LOG("io_setup: %s", strerror(errno));
	ASSERT_EQ(1, syscall(__NR_io_submit, ctx, 1, cbs))
		TH_LOG("io_submit: %s", strerror(errno));
	/* Our write's completion wakes the socket; nothing came to read. */
	put(_metadata, self->c, "x");
	recv_exact(_metadata, self->s, buf, 1, 0);
	EXPECT_EQ(0, syscall(__NR_io_getevents, ctx, 1, 1, &ev, &quiet))
		TH_LOG("reported %#llx with nothing to read", ev.res);
	put(_metadata, self->s, "y");
	ASSERT_EQ(1, syscall(__NR_io_getevents, ctx, 1, 1, &ev, &prompt));
	/* What the wake-up said: POLLIN (and POLLRDNORM), no end, no error. */
	EXPECT_EQ(POLLIN, (int)ev.res & (POLLIN | POLLOUT | POLLERR | POLLHUP))
		TH_LOG("reported %#llx", ev.res);
	recv_exact(_metadata, self->c, buf, 1, 0);
	EXPECT_EQ('y', buf[0]);
	syscall(__NR_io_destroy, ctx);
}

/* One byte into a socket or pipe, and out of one. */
static void poke(struct __test_metadata *_metadata, int fd)
{
	ASSERT_EQ(1, write(fd, "!", 1)) TH_LOG("write: %s", strerror(errno));
}

static void take(struct __test_metadata *_metadata, int fd)
{
	char c;

	ASSERT_EQ(1, read(fd, &c, 1)) TH_LOG("read: %s", strerror(errno));
}

static void tcp_pair(struct __test_metadata *_metadata, int *a, int *b)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int l = socket(AF_INET, SOCK_STREAM, 0);

	ASSERT_LE(0, l);
	ASSERT_EQ(0, bind(l, (struct sockaddr *)&sin, len));
	ASSERT_EQ(0, listen(l, 1));
	ASSERT_EQ(0, getsockname(l, (struct sockaddr *)&sin, &len));
	*a = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT_LE(0, *a);
	ASSERT_EQ(0, GUARDED(connect(*a, (struct sockaddr *)&sin, len)));
	*b = GUARDED(accept(l, NULL, NULL));
	ASSERT_LE(0, *b);
	close(l);
}

/* One epoll set: this socket, a pipe and a TCP socket, each for itself. */
TEST_F(conn, epoll_mixed_with_pipe_and_tcp)
{
	int pipefd[2], tcp[2], ep, fds[3], i, n, k;
	unsigned int seen;

	ASSERT_EQ(0, pipe(pipefd));
	tcp_pair(_metadata, &tcp[0], &tcp[1]);
	fds[0] = self->c;
	fds[1] = pipefd[0];
	fds[2] = tcp[1];
	ep = epoll_create1(0);
	ASSERT_LE(0, ep);
	for (i = 0; i < 3; i++) {
		struct epoll_event ev = { .events = EPOLLIN, .data.u32 = i };

		ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &ev));
	}

	/* One at a time, then all three. */
	for (i = 0; i <= 3; i++) {
		struct epoll_event evs[4];
		long long end = now_ms() + PROMPT_MS;
		unsigned int want = i < 3 ? 1u << i : 7;

		if (i == 0 || i == 3)
			poke(_metadata, self->s);
		if (i == 1 || i == 3)
			poke(_metadata, pipefd[1]);
		if (i == 2 || i == 3)
			poke(_metadata, tcp[0]);
		seen = 0;
		while (seen != want && now_ms() < end) {
			n = epoll_wait(ep, evs, 4, 100);
			ASSERT_LE(0, n);
			for (k = 0; k < n; k++) {
				unsigned int bit = 1u << evs[k].data.u32;

				EXPECT_NE(0U, want & bit)
					TH_LOG("step %d: event for fd %u", i,
					       evs[k].data.u32);
				EXPECT_EQ(EPOLLIN, (int)evs[k].events);
				seen |= bit;
			}
		}
		EXPECT_EQ(want, seen) TH_LOG("step %d", i);
		for (k = 0; k < 3; k++)
			if (want & (1u << k))
				take(_metadata, fds[k]);
		EXPECT_EQ(0, epoll_wait(ep, evs, 4, 0));
	}
	close(ep);
	close(pipefd[0]);
	close(pipefd[1]);
	close(tcp[0]);
	close(tcp[1]);
}

TEST_F(conn, so_error_zero)
{
	EXPECT_EQ(0, sock_error(self->c));
	EXPECT_EQ(0, sock_error(self->s));
	EXPECT_EQ(0, sock_error(self->l));
}

/* SO_RCVTIMEO: EAGAIN after about the time set, which reads back. */
TEST_F(conn, rcvtimeo_expires)
{
	struct timeval tv;
	socklen_t len = sizeof(tv);
	long long t0, el;
	char c;

	set_timeo(_metadata, self->c, SO_RCVTIMEO, QUIET_MS);
	ASSERT_EQ(0, getsockopt(self->c, SOL_SOCKET, SO_RCVTIMEO, &tv, &len));
	EXPECT_EQ(0, tv.tv_sec);
	EXPECT_EQ(QUIET_MS * 1000, tv.tv_usec);
	t0 = now_ms();
	EXPECT_EQ(EAGAIN, errno_of(GUARDED(recv(self->c, &c, 1, 0))));
	el = now_ms() - t0;
	EXPECT_LE(QUIET_MS - 20, el);
	EXPECT_GT(3000, el);
}

/* SO_RCVLOWAT: not readable below it; a recv() waits to reach it. */
TEST_F(conn, rcvlowat_poll_and_recv)
{
	struct pollfd p = { .fd = self->c, .events = POLLIN };
	struct drip d = { .fd = self->s, .pieces = 2, .size = 500,
			  .gap_ms = QUIET_MS, .seed = 13 };
	char buf[2000];
	long long t0, el;
	long r;

	ASSERT_EQ(0, set_int(self->c, SOL_SOCKET, SO_RCVLOWAT, 1000));
	EXPECT_EQ(1000, int_opt(self->c, SOL_SOCKET, SO_RCVLOWAT));

	fill(buf, 500, 0, 13);
	ASSERT_EQ(500, send(self->s, buf, 500, MSG_NOSIGNAL));
	ASSERT_EQ(500, wait_ioctl(self->c, FIONREAD, 500));
	EXPECT_EQ(0, poll(&p, 1, QUIET_MS)) TH_LOG("readable with 500 bytes");
	fill(buf, 500, 500, 13);
	ASSERT_EQ(500, send(self->s, buf, 500, MSG_NOSIGNAL));
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
	EXPECT_EQ(POLLIN, p.revents);
	recv_exact(_metadata, self->c, buf, 1000, 0);
	EXPECT_EQ(-1, check(buf, 1000, 0, 13));

	/* Two pieces 300 ms apart: one recv() waits for both, and no more. */
	ASSERT_EQ(0, start_thread(&d.tid, drip_run, &d));
	t0 = now_ms();
	r = GUARDED(recv(self->c, buf, sizeof(buf), 0));
	el = now_ms() - t0;
	pthread_join(d.tid, NULL);
	ASSERT_EQ(0, d.err) TH_LOG("sender: %s", strerror(d.err));
	ASSERT_EQ(1000, r) TH_LOG("recv: %s", r < 0 ? strerror(errno) : "");
	EXPECT_EQ(-1, check(buf, 1000, 0, 13));
	EXPECT_LE(2 * QUIET_MS - 20, el) TH_LOG("did not wait for both");
	EXPECT_GT(2 * QUIET_MS + PROMPT_MS, el) TH_LOG("woken %lld ms late",
						       el - 2 * QUIET_MS);
}

/* FIONREAD and SIOCINQ count the unread bytes. */
TEST_F(conn, fionread_siocinq)
{
	char buf[1234];
	int v = -1;

	ASSERT_EQ(0, ioctl(self->c, FIONREAD, &v));
	EXPECT_EQ(0, v);
	fill(buf, sizeof(buf), 0, 14);
	ASSERT_EQ(1234, GUARDED(send(self->s, buf, sizeof(buf),
				     MSG_NOSIGNAL)));
	EXPECT_EQ(1234, wait_ioctl(self->c, FIONREAD, 1234));
	ASSERT_EQ(0, ioctl(self->c, SIOCINQ, &v));
	EXPECT_EQ(1234, v);
	recv_exact(_metadata, self->c, buf, 1000, 0);
	ASSERT_EQ(0, ioctl(self->c, FIONREAD, &v));
	EXPECT_EQ(234, v);
	recv_exact(_metadata, self->c, buf, 234, 0);
	ASSERT_EQ(0, ioctl(self->c, SIOCINQ, &v));
	EXPECT_EQ(0, v);
}

/* SIOCOUTQ falls to 0 once the peer has the bytes, read or not. */
TEST_F(conn, siocoutq_drains)
{
	char buf[10000];
	int v = -1;

	ASSERT_EQ(0, ioctl(self->c, SIOCOUTQ, &v));
	EXPECT_EQ(0, v);
	fill(buf, sizeof(buf), 0, 15);
	ASSERT_EQ(10000, GUARDED(send(self->c, buf, sizeof(buf),
				      MSG_NOSIGNAL)));
	EXPECT_EQ(0, wait_ioctl(self->c, SIOCOUTQ, 0));
	EXPECT_EQ(10000, wait_ioctl(self->s, FIONREAD, 10000));
	recv_pat(_metadata, self->s, sizeof(buf), 15);
}

/*
 * The kernel's struct tcp_info goes on past glibc's; the fields TCP_INFO
 * fills for an AF_RSTREAM connection, at the kernel's offsets.
 */
struct tcp_info_ext {
	struct tcp_info base;
	uint64_t pacing_rate, max_pacing_rate, bytes_acked, bytes_received;
	uint32_t segs_out, segs_in, notsent_bytes, min_rtt;
	uint32_t data_segs_in, data_segs_out;
	uint64_t delivery_rate, busy_time, rwnd_limited, sndbuf_limited;
	uint32_t delivered, delivered_ce;
	uint64_t bytes_sent;
};

static socklen_t tcp_info_of(struct __test_metadata *_metadata, int fd,
			     struct tcp_info_ext *ti)
{
	socklen_t len = sizeof(*ti);

	memset(ti, 0xa5, sizeof(*ti));
	EXPECT_EQ(0, getsockopt(fd, SOL_TCP, TCP_INFO, ti, &len))
		TH_LOG("TCP_INFO: %s", strerror(errno));
	return len;
}

/*
 * TCP_INFO, read by iperf3 and ss-like tools, says what the connection
 * has of TCP's: its state, the bytes sent and acknowledged, received;
 * what the RDMA device hides (retransmissions) reads 0, not garbage.
 */
TEST_F(conn, tcp_info_counts_bytes)
{
	struct tcp_info_ext ti;
	socklen_t short_len = 8;
	char buf[10000];
	int u;

	EXPECT_LE(sizeof(ti), tcp_info_of(_metadata, self->c, &ti));
	EXPECT_EQ(TCP_ESTABLISHED, ti.base.tcpi_state);
	EXPECT_EQ(0U, ti.base.tcpi_total_retrans);
	EXPECT_EQ(0U, ti.base.tcpi_retransmits);
	EXPECT_LT(0U, ti.base.tcpi_snd_mss);
	EXPECT_EQ(0U, ti.bytes_sent);

	fill(buf, sizeof(buf), 0, 16);
	ASSERT_EQ(10000, GUARDED(send(self->c, buf, sizeof(buf),
				      MSG_NOSIGNAL)));
	EXPECT_EQ(0, wait_ioctl(self->c, SIOCOUTQ, 0));
	recv_pat(_metadata, self->s, sizeof(buf), 16);
	tcp_info_of(_metadata, self->c, &ti);
	EXPECT_EQ(10000U, ti.bytes_sent);
	EXPECT_EQ(10000U, ti.bytes_acked);
	EXPECT_EQ(0U, ti.notsent_bytes);
	EXPECT_EQ(0U, ti.base.tcpi_unacked);
	EXPECT_LT(0U, ti.segs_out);
	tcp_info_of(_metadata, self->s, &ti);
	EXPECT_EQ(10000U, ti.bytes_received);
	EXPECT_EQ(0U, ti.bytes_sent);

	/* A short buffer gets a prefix; a listener and a new socket, state. */
	memset(buf, 0, sizeof(buf));
	ASSERT_EQ(0, getsockopt(self->c, SOL_TCP, TCP_INFO, buf, &short_len));
	EXPECT_EQ(8U, short_len);
	EXPECT_EQ(TCP_ESTABLISHED, buf[0]);
	tcp_info_of(_metadata, self->l, &ti);
	EXPECT_EQ(TCP_LISTEN, ti.base.tcpi_state);
	u = rs_socket(AF_INET, 0);
	ASSERT_LE(0, u);
	tcp_info_of(_metadata, u, &ti);
	EXPECT_EQ(TCP_CLOSE, ti.base.tcpi_state);
	EXPECT_EQ(0U, ti.bytes_sent);
	close(u);
}

/* RSTREAM_INFO: the connection's RDMA side, its two queue pairs matched. */
TEST_F(conn, rstream_info_names_the_queue_pairs)
{
	struct rstream_info ci, si;
	socklen_t len = sizeof(ci), short_len = 8;
	char buf[100] = { 0 };
	int u;

	ASSERT_EQ(0, getsockopt(self->c, SOL_RDMA, RSTREAM_INFO, &ci, &len));
	EXPECT_EQ(sizeof(ci), len);
	ASSERT_EQ(100, GUARDED(send(self->c, buf, sizeof(buf), 0)));
	EXPECT_EQ(100, wait_ioctl(self->s, SIOCINQ, 100));
	ASSERT_EQ(0, getsockopt(self->s, SOL_RDMA, RSTREAM_INFO, &si, &len));
	EXPECT_NE(0, ci.ri_device[0]);
	EXPECT_STREQ(ci.ri_device, si.ri_device);
	EXPECT_EQ(1U, ci.ri_port);
	EXPECT_NE(0U, ci.ri_qp_num);
	EXPECT_EQ(ci.ri_qp_num, si.ri_dest_qp_num);
	EXPECT_EQ(si.ri_qp_num, ci.ri_dest_qp_num);
	EXPECT_LT(0U, ci.ri_ring_size);
	EXPECT_LT(0U, ci.ri_sbuf_size);
	EXPECT_LT(0U, ci.ri_credits);
	EXPECT_EQ(100U, si.ri_unread);
	EXPECT_LT(0U, si.ri_granted);
	EXPECT_EQ(0U, ci.ri_probes);
	EXPECT_EQ(EINVAL, errno_of(setsockopt(self->c, SOL_RDMA, RSTREAM_INFO,
					      &ci, sizeof(ci))));
	/* A short buffer gets the start; a new socket has no queue pair. */
	ASSERT_EQ(0, getsockopt(self->c, SOL_RDMA, RSTREAM_INFO, buf,
				&short_len));
	EXPECT_EQ(8U, short_len);
	EXPECT_EQ(0, memcmp(buf, ci.ri_device, 8));
	u = rs_socket(AF_INET, 0);
	ASSERT_LE(0, u);
	ASSERT_EQ(0, getsockopt(u, SOL_RDMA, RSTREAM_INFO, &ci, &len));
	EXPECT_EQ(0, ci.ri_device[0]);
	EXPECT_EQ(0U, ci.ri_qp_num);
	EXPECT_EQ(0U, ci.ri_ring_size);
	EXPECT_LT(0U, ci.ri_sq_size);
	close(u);
}

/*
 * MSG_MORE and TCP_CORK hold a partial write for what follows, as TCP
 * holds a partial segment: the peer sees nothing until a send without
 * MSG_MORE, TCP_CORK cleared, TCP_NODELAY set, or 200 ms have passed
 * (TCP's ceiling).  Each variant holds "abc" one way and ends the hold
 * one way; the bytes must not arrive before the ceiling unless released,
 * and must arrive well before it when released.
 */
enum hold_by { HOLD_MSG_MORE, HOLD_TCP_CORK };
enum release_by { RELEASE_NONE, RELEASE_SEND, RELEASE_UNCORK,
		  RELEASE_NODELAY };

FIXTURE(hold) {
	int l, c, s;
};

FIXTURE_VARIANT(hold) {
	enum hold_by hold;
	enum release_by release;
	const char *expect;
};

FIXTURE_VARIANT_ADD(hold, msg_more_then_plain_send) {
	.hold = HOLD_MSG_MORE, .release = RELEASE_SEND, .expect = "abcdef",
};

FIXTURE_VARIANT_ADD(hold, msg_more_then_nodelay) {
	.hold = HOLD_MSG_MORE, .release = RELEASE_NODELAY, .expect = "abc",
};

FIXTURE_VARIANT_ADD(hold, msg_more_until_ceiling) {
	.hold = HOLD_MSG_MORE, .release = RELEASE_NONE, .expect = "abc",
};

FIXTURE_VARIANT_ADD(hold, tcp_cork_then_uncork) {
	.hold = HOLD_TCP_CORK, .release = RELEASE_UNCORK, .expect = "abcdef",
};

FIXTURE_VARIANT_ADD(hold, tcp_cork_then_nodelay) {
	.hold = HOLD_TCP_CORK, .release = RELEASE_NODELAY, .expect = "abcdef",
};

FIXTURE_VARIANT_ADD(hold, tcp_cork_until_ceiling) {
	.hold = HOLD_TCP_CORK, .release = RELEASE_NONE, .expect = "abcdef",
};

FIXTURE_SETUP(hold)
{
	pair_open(_metadata, 0, &self->l, &self->c, &self->s);
}

FIXTURE_TEARDOWN(hold)
{
	pair_close(&self->l, &self->c, &self->s);
}

#define HOLD_CEILING_MS	190	/* 200 ms, less the clocks' rounding */

TEST_F(hold, partial_write_waits)
{
	struct pollfd p = { .fd = self->s, .events = POLLIN };
	long long t0, t1;
	int r;

	EXPECT_EQ(0, int_opt(self->c, SOL_TCP, TCP_CORK));
	EXPECT_EQ(0, int_opt(self->c, SOL_TCP, TCP_NODELAY));
	t0 = now_ms();
	if (variant->hold == HOLD_MSG_MORE) {
		ASSERT_EQ(3, GUARDED(send(self->c, "abc", 3, MSG_MORE)));
	} else {
		ASSERT_EQ(0, set_int(self->c, SOL_TCP, TCP_CORK, 1));
		EXPECT_EQ(1, int_opt(self->c, SOL_TCP, TCP_CORK));
		put(_metadata, self->c, "abc");
		put(_metadata, self->c, "def");
	}

	r = GUARDED(poll(&p, 1, variant->release ? 60 : PROMPT_MS));
	t1 = now_ms();
	if (r == 1)
		ASSERT_LE(t0 + HOLD_CEILING_MS, t1)
			TH_LOG("held bytes arrived after %lld ms", t1 - t0);
	if (variant->release == RELEASE_NONE)
		ASSERT_EQ(1, r) TH_LOG("nothing after %lld ms", t1 - t0);

	switch (variant->release) {
	case RELEASE_SEND:
		put(_metadata, self->c, "def");
		break;
	case RELEASE_UNCORK:
		ASSERT_EQ(0, set_int(self->c, SOL_TCP, TCP_CORK, 0));
		break;
	case RELEASE_NODELAY:
		ASSERT_EQ(0, set_int(self->c, SOL_TCP, TCP_NODELAY, 1));
		EXPECT_EQ(1, int_opt(self->c, SOL_TCP, TCP_NODELAY));
		break;
	case RELEASE_NONE:
		break;
	}
	expect(_metadata, self->s, variant->expect);
	/* Released in time to tell a release from the ceiling. */
	if (variant->release && t1 < t0 + 120)
		EXPECT_GT(t0 + HOLD_CEILING_MS, now_ms())
			TH_LOG("released bytes waited for the ceiling");

	/* The hold is over: the next send goes out alone. */
	if (variant->hold == HOLD_TCP_CORK &&
	    variant->release != RELEASE_UNCORK)
		ASSERT_EQ(0, set_int(self->c, SOL_TCP, TCP_CORK, 0));
	t0 = now_ms();
	put(_metadata, self->c, "g");
	expect(_metadata, self->s, "g");
	EXPECT_GT(t0 + HOLD_CEILING_MS, now_ms());
}

/*
 * sendfile() with a count beyond the file's end: its last send says
 * MSG_MORE for bytes that never come, and the end of its input
 * (.splice_eof) must post them, as TCP does, not leave them to the 200 ms
 * ceiling.
 */
TEST_F(conn, sendfile_past_eof_not_held)
{
	char buf[1000];
	long long t0;
	off_t off = 0;
	int f;

	f = memfd_create("rstream_sendfile", 0);
	ASSERT_LE(0, f);
	fill(buf, sizeof(buf), 0, 21);
	ASSERT_EQ((ssize_t)sizeof(buf), write(f, buf, sizeof(buf)));
	t0 = now_ms();
	ASSERT_EQ((ssize_t)sizeof(buf),
		  GUARDED(sendfile(self->c, f, &off, 4 * sizeof(buf))));
	recv_pat(_metadata, self->s, sizeof(buf), 21);
	EXPECT_GT(t0 + HOLD_CEILING_MS, now_ms())
		TH_LOG("the end of the file waited for the ceiling");
	close(f);
}

/*
 * splice() from the socket into a pipe: the pipe must get copies of the
 * bytes, not the ring's own pages, which the peer writes again (6.1 hands
 * recvmsg a pipe iterator, where "copying" a page lends it to the pipe).
 * Pieces of odd sizes start at every offset within the ring's pages, and
 * the stream wraps the ring a few times.
 */
TEST_F(conn, splice_to_pipe_copies)
{
	struct job tx = { .fd = self->c, .send = true, .len = 600 << 10,
			  .seed = 23 };
	size_t done = 0;
	char *buf;
	int p[2];

	buf = malloc(16 << 10);
	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, pipe(p));
	job_start(_metadata, &tx);
	while (done < tx.len) {
		size_t want = tx.len - done < 10007 ? tx.len - done : 10007;
		long n = GUARDED(splice(self->s, NULL, p[1], NULL, want, 0));
		long bad;

		ASSERT_LT(0, n) TH_LOG("splice at byte %zu: %s", done,
				       n ? strerror(errno) : "EOF");
		read_exact(_metadata, p[0], buf, n);
		bad = check(buf, n, done, 23);
		ASSERT_EQ(-1, bad) TH_LOG("byte %zu out of the pipe is wrong",
					  done + bad);
		done += n;
	}
	job_finish(_metadata, &tx);
	close(p[0]);
	close(p[1]);
	free(buf);
}

/* FIONBIO switches O_NONBLOCK on and off. */
TEST_F(conn, fionbio)
{
	long long t0;
	int on = 1;
	char c;

	ASSERT_EQ(0, ioctl(self->c, FIONBIO, &on));
	EXPECT_TRUE(fl_flags(self->c) & O_NONBLOCK);
	EXPECT_EQ(EAGAIN, errno_of(GUARDED(recv(self->c, &c, 1, 0))));
	on = 0;
	ASSERT_EQ(0, ioctl(self->c, FIONBIO, &on));
	EXPECT_FALSE(fl_flags(self->c) & O_NONBLOCK);
	set_timeo(_metadata, self->c, SO_RCVTIMEO, 200);
	t0 = now_ms();
	EXPECT_EQ(EAGAIN, errno_of(GUARDED(recv(self->c, &c, 1, 0))));
	EXPECT_LE(t0 + 180, now_ms()) TH_LOG("did not block");
}

/* rsocket takes SOL_RDMA options only before connecting. */
TEST_F(conn, rdma_options_after_connect_einval)
{
	int opts[] = { RDMA_SQSIZE, RDMA_RQSIZE, RDMA_INLINE };
	unsigned int v = 64, i;

	for (i = 0; i < ARRAY_SIZE(opts); i++) {
		EXPECT_EQ(EINVAL, errno_of(setsockopt(self->c, SOL_RDMA,
						      opts[i], &v, sizeof(v))))
			TH_LOG("client, option %d", opts[i]);
		EXPECT_EQ(EINVAL, errno_of(setsockopt(self->s, SOL_RDMA,
						      opts[i], &v, sizeof(v))))
			TH_LOG("server, option %d", opts[i]);
	}
	put(_metadata, self->c, "x");
	expect(_metadata, self->s, "x");
}

/* A forked child uses the connection both ways; the parent keeps it. */
TEST_F(conn, fork_child_uses_socket)
{
	pid_t pid = fork();

	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct job tx = { .fd = self->c, .send = true,
				  .len = 64 << 10, .seed = 16 };
		struct job rx = { .fd = self->c, .len = 64 << 10, .seed = 17 };

		job_run(&tx);
		if (tx.err[0])
			_exit(1);
		job_run(&rx);
		_exit(rx.err[0] ? 2 : 0);
	}
	recv_pat(_metadata, self->s, 64 << 10, 16);
	send_pat(_metadata, self->s, 64 << 10, 17);
	EXPECT_EQ(0, wait_child(pid));
	put(_metadata, self->s, "after");
	expect(_metadata, self->c, "after");
	put(_metadata, self->c, "back");
	expect(_metadata, self->s, "back");
}

/* Either descriptor of a dup() carries the data; the last close ends it. */
TEST_F(conn, dup_shares_socket)
{
	struct pollfd p = { .fd = self->s, .events = POLLIN };
	int d = dup(self->c);

	ASSERT_LE(0, d);
	put(_metadata, d, "via dup");
	expect(_metadata, self->s, "via dup");
	put(_metadata, self->s, "to both");
	expect(_metadata, d, "to");
	expect(_metadata, self->c, " both");
	close_fd(&self->c);
	EXPECT_EQ(0, poll(&p, 1, QUIET_MS)) TH_LOG("revents %#x", p.revents);
	put(_metadata, d, "alive");
	expect(_metadata, self->s, "alive");
	EXPECT_EQ(0, close(d));
	expect_eof(_metadata, self->s);
}

/* An exec'd program uses the descriptor it inherited. */
TEST_F(conn, exec_keeps_fd_without_cloexec)
{
	char arg[16];
	pid_t pid;

	snprintf(arg, sizeof(arg), "%d", self->c);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		execl("/proc/self/exe", "rstream_stream", "--exec-use-fd", arg,
		      (char *)NULL);
		_exit(99);
	}
	expect(_metadata, self->s, "exec");
	put(_metadata, self->s, "back");
	EXPECT_EQ(0, wait_child(pid));
	put(_metadata, self->s, "still");
	expect(_metadata, self->c, "still");
}

/* FD_CLOEXEC: the exec'd program does not have it; we still do. */
TEST_F(conn, exec_cloexec_closes_fd)
{
	char arg[16];
	pid_t pid;

	ASSERT_EQ(0, fcntl(self->c, F_SETFD, FD_CLOEXEC));
	snprintf(arg, sizeof(arg), "%d", self->c);
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		execl("/proc/self/exe", "rstream_stream", "--exec-fd-closed",
		      arg, (char *)NULL);
		_exit(99);
	}
	EXPECT_EQ(0, wait_child(pid));
	put(_metadata, self->s, "still");
	expect(_metadata, self->c, "still");
}

static int scm_child(int usock)
{
	char cbuf[CMSG_SPACE(sizeof(int))], c;
	struct iovec iov = { &c, 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct pollfd p = { .fd = usock, .events = POLLIN };
	struct cmsghdr *cm;
	int fd;

	if (poll(&p, 1, PROMPT_MS) != 1 || recvmsg(usock, &m, 0) != 1)
		return 20;
	cm = CMSG_FIRSTHDR(&m);
	if (!cm || cm->cmsg_type != SCM_RIGHTS)
		return 21;
	memcpy(&fd, CMSG_DATA(cm), sizeof(fd));
	return talk(fd, "scm!", "ack!");
}

/* Passed over a unix socket, the connection works in the receiver. */
TEST_F(conn, scm_rights_pass)
{
	char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec iov = { "f", 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cbuf,
			    .msg_controllen = sizeof(cbuf) };
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	int sp[2];
	pid_t pid;

	ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sp));
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		/* Only what comes over the unix socket. */
		close(self->c);
		close(self->s);
		close(self->l);
		close(sp[0]);
		_exit(scm_child(sp[1]));
	}
	close(sp[1]);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cm), &self->c, sizeof(int));
	ASSERT_EQ(1, sendmsg(sp[0], &m, 0));
	close_fd(&self->c);
	expect(_metadata, self->s, "scm!");
	put(_metadata, self->s, "ack!");
	EXPECT_EQ(0, wait_child(pid));
	/* That process had the last reference. */
	expect_eof(_metadata, self->s);
	close(sp[0]);
}

/* Closing with unread data: the peer sees EOF or a reset, soon. */
TEST_F(conn, close_with_unread_data)
{
	struct pollfd p = { .fd = self->c, .events = POLLIN };
	char buf[10000];
	int err;

	fill(buf, sizeof(buf), 0, 18);
	ASSERT_EQ(10000, GUARDED(send(self->s, buf, sizeof(buf),
				      MSG_NOSIGNAL)));
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
	close_fd(&self->c);
	p.fd = self->s;
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS)) TH_LOG("no EOF or reset");
	err = errno_of(recv(self->s, buf, sizeof(buf), MSG_DONTWAIT));
	EXPECT_TRUE(err == 0 || err == ECONNRESET) TH_LOG("recv: %s",
							  strerror(err));
}

/* Blocking send and recv in their own threads, both ways at once. */
TEST_F(conn, threads_send_and_recv_concurrently)
{
	enum { LEN = 2 << 20 };
	struct job j[4] = {
		{ .fd = self->c, .send = true, .block = true, .len = LEN,
		  .seed = 19, .chunk = 100000 },
		{ .fd = self->s, .block = true, .len = LEN, .seed = 19,
		  .chunk = 4093 },
		{ .fd = self->s, .send = true, .block = true, .len = LEN,
		  .seed = 20, .chunk = 65536 },
		{ .fd = self->c, .block = true, .len = LEN, .seed = 20,
		  .chunk = 1 << 20 },
	};
	int i;

	/* A call blocked for good returns EAGAIN and the job says so. */
	set_timeo(_metadata, self->c, SO_SNDTIMEO, 2000);
	set_timeo(_metadata, self->c, SO_RCVTIMEO, 2000);
	set_timeo(_metadata, self->s, SO_SNDTIMEO, 2000);
	set_timeo(_metadata, self->s, SO_RCVTIMEO, 2000);
	for (i = 0; i < 4; i++)
		job_start(_metadata, &j[i]);
	for (i = 0; i < 4; i++)
		job_finish(_metadata, &j[i]);
}

/*
 * The connected pair with SO_SNDBUF and SO_RCVBUF of 4096 on both ends:
 * the smallest rings, that fill up soon.
 */

FIXTURE(small) {
	int l, c, s;
};

FIXTURE_SETUP(small)
{
	pair_open(_metadata, 4096, &self->l, &self->c, &self->s);
}

FIXTURE_TEARDOWN(small)
{
	pair_close(&self->l, &self->c, &self->s);
}

/* A peer that reads nothing: a partial send, then EAGAIN; nothing lost. */
TEST_F(small, send_nonblocking_partial_then_eagain)
{
	size_t total = 0;
	bool partial = false;
	int err = 0;
	char *buf = malloc(65536);

	ASSERT_NE(NULL, buf);
	while (!err && total < (4 << 20)) {
		ssize_t r;

		fill(buf, 65536, total, 21);
		r = send(self->c, buf, 65536, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (r < 0) {
			err = errno;
			break;
		}
		if (r < 65536)
			partial = true;
		total += r;
	}
	EXPECT_EQ(EAGAIN, err) TH_LOG("%zu bytes sent: %s", total,
				      strerror(err));
	EXPECT_TRUE(partial);
	EXPECT_LT(0U, total);
	recv_pat(_metadata, self->s, total, 21);
	free(buf);
}

/* SO_SNDTIMEO: a send that cannot go on fails with EAGAIN in time. */
TEST_F(small, sndtimeo_expires)
{
	size_t total = fill_up(_metadata, self->c, 22);
	char *buf = malloc(65536);
	bool timed_out = false;
	int i;

	ASSERT_NE(NULL, buf);
	set_timeo(_metadata, self->c, SO_SNDTIMEO, QUIET_MS);
	for (i = 0; i < 20 && !timed_out; i++) {
		long long t0 = now_ms(), el;
		long r;

		fill(buf, 65536, total, 22);
		r = GUARDED(send(self->c, buf, 65536, MSG_NOSIGNAL));
		el = now_ms() - t0;
		if (r < 0) {
			ASSERT_EQ(EAGAIN, errno) TH_LOG("send: %s",
							strerror(errno));
			EXPECT_LE(QUIET_MS - 20, el);
			EXPECT_GT(3000, el);
			timed_out = true;
		} else {
			total += r;	/* space freed up meanwhile */
		}
	}
	EXPECT_TRUE(timed_out);
	recv_pat(_metadata, self->s, total, 22);
	free(buf);
}

/* close() right after the last send: every byte still arrives, then EOF. */
TEST_F(small, close_delivers_queued_data)
{
	struct job tx = { .fd = self->s, .send = true, .block = true,
			  .close_after = true, .len = 256 << 10,
			  .seed = 23 };

	job_start(_metadata, &tx);
	recv_pat(_metadata, self->c, 256 << 10, 23);
	job_finish(_metadata, &tx);
	self->s = -1;
	expect_eof(_metadata, self->c);
}

/*
 * A call blocked in poll, epoll_wait, recv or send is woken within 5 s
 * of what the peer does: data, shutdown(SHUT_WR), close, or reading
 * (for send).
 */

enum wait_op { WAIT_POLL, WAIT_EPOLL, WAIT_RECV, WAIT_SEND };

FIXTURE(wake) {
	int l, c, s;
};

FIXTURE_VARIANT(wake) {
	enum wait_op op;
	enum cause cause;
};

FIXTURE_VARIANT_ADD(wake, poll_by_data) {
	.op = WAIT_POLL, .cause = BY_DATA,
};

FIXTURE_VARIANT_ADD(wake, poll_by_shutdown) {
	.op = WAIT_POLL, .cause = BY_SHUTDOWN,
};

FIXTURE_VARIANT_ADD(wake, poll_by_close) {
	.op = WAIT_POLL, .cause = BY_CLOSE,
};

FIXTURE_VARIANT_ADD(wake, epoll_by_data) {
	.op = WAIT_EPOLL, .cause = BY_DATA,
};

FIXTURE_VARIANT_ADD(wake, epoll_by_shutdown) {
	.op = WAIT_EPOLL, .cause = BY_SHUTDOWN,
};

FIXTURE_VARIANT_ADD(wake, epoll_by_close) {
	.op = WAIT_EPOLL, .cause = BY_CLOSE,
};

FIXTURE_VARIANT_ADD(wake, recv_by_data) {
	.op = WAIT_RECV, .cause = BY_DATA,
};

FIXTURE_VARIANT_ADD(wake, recv_by_shutdown) {
	.op = WAIT_RECV, .cause = BY_SHUTDOWN,
};

FIXTURE_VARIANT_ADD(wake, recv_by_close) {
	.op = WAIT_RECV, .cause = BY_CLOSE,
};

FIXTURE_VARIANT_ADD(wake, send_by_peer_read) {
	.op = WAIT_SEND, .cause = BY_READ,
};

FIXTURE_VARIANT_ADD(wake, send_by_close) {
	.op = WAIT_SEND, .cause = BY_CLOSE,
};

FIXTURE_SETUP(wake)
{
	guard_init();
	self->l = -1;
	self->c = -1;
	self->s = -1;
	make_pair(_metadata, AF_INET, 4096, &self->l, &self->c, &self->s);
	if (variant->op == WAIT_SEND)
		fill_up(_metadata, self->c, 24);
}

FIXTURE_TEARDOWN(wake)
{
	close_fd(&self->s);
	close_fd(&self->c);
	close_fd(&self->l);
}

TEST_F(wake, woken_within_5s)
{
	struct later act = { .fd = self->s, .cause = variant->cause,
			     .delay_ms = QUIET_MS };
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct pollfd p = { .fd = self->c, .events = POLLIN | POLLRDHUP };
	const int hup = POLLIN | POLLRDHUP;
	char *buf = calloc(1, 65536);
	bool ok = false;
	long long woken;
	long r = -1;
	int ep = -1, err;

	ASSERT_NE(NULL, buf);
	if (variant->op == WAIT_EPOLL) {
		ep = epoll_create1(0);
		ASSERT_LE(0, ep);
		ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, self->c, &ev));
	}
	later_start(_metadata, &act);
	switch (variant->op) {
	case WAIT_POLL:
		r = poll(&p, 1, 2 * PROMPT_MS);
		ok = r == 1 && (variant->cause == BY_DATA ?
				p.revents & POLLIN : (p.revents & hup) == hup);
		break;
	case WAIT_EPOLL:
		r = epoll_wait(ep, &ev, 1, 2 * PROMPT_MS);
		ok = r == 1 && (variant->cause == BY_DATA ?
				ev.events & EPOLLIN : (ev.events & hup) == hup);
		break;
	case WAIT_RECV:
		r = GUARDED(recv(self->c, buf, 16, 0));
		ok = r == (variant->cause == BY_DATA ? 1 : 0);
		break;
	case WAIT_SEND:
		/*
		 * What fits once the peer has read: a blocking send queues
		 * all.  A peer that closes with our bytes unread resets.
		 */
		r = GUARDED(send(self->c, buf, 4096, MSG_NOSIGNAL));
		ok = r > 0 || (variant->cause == BY_CLOSE &&
			       errno == ECONNRESET);
		break;
	}
	err = errno;
	woken = now_ms();
	pthread_join(act.tid, NULL);
	if (variant->cause == BY_CLOSE)
		self->s = -1;
	ASSERT_EQ(0, act.err) TH_LOG("the peer's action: %s",
				     strerror(act.err));
	EXPECT_TRUE(ok) TH_LOG("returned %ld (%s), revents %#x, events %#x",
			       r, r < 0 ? strerror(err) : "", p.revents,
			       ev.events);
	EXPECT_LE(act.at, woken) TH_LOG("returned before the peer acted");
	EXPECT_GT(act.at + 5000, woken) TH_LOG("woken %lld ms after",
					       woken - act.at);
	if (variant->op == WAIT_SEND && variant->cause == BY_CLOSE && r > 0) {
		/* Woken with what it had sent: the next send has the reset. */
		err = errno_of(GUARDED(send(self->c, buf, 65536,
					    MSG_NOSIGNAL)));
		EXPECT_EQ(ECONNRESET, err)
			TH_LOG("send after the peer closed: %s",
			       strerror(err));
	}
	if (ep >= 0)
		close(ep);
	free(buf);
}

/*
 * Cases of their own.
 */

/* SO_SNDBUF and SO_RCVBUF read back doubled; accepted sockets inherit. */
TEST(sndbuf_rcvbuf_read_back_doubled)
{
	struct ep bound;
	int c, l, s;

	guard_init();
	c = rs_socket(AF_INET, 0);
	ASSERT_LE(0, c);
	ASSERT_EQ(0, set_int(c, SOL_SOCKET, SO_SNDBUF, 65536));
	ASSERT_EQ(0, set_int(c, SOL_SOCKET, SO_RCVBUF, 4096));
	EXPECT_EQ(131072, int_opt(c, SOL_SOCKET, SO_SNDBUF));
	EXPECT_EQ(8192, int_opt(c, SOL_SOCKET, SO_RCVBUF));

	l = make_listener(_metadata, AF_INET, 32768, 1, &bound);
	ASSERT_EQ(0, GUARDED(connect(c, SA(&bound), bound.len)));
	s = accept_one(_metadata, l);
	EXPECT_EQ(131072, int_opt(c, SOL_SOCKET, SO_SNDBUF));
	EXPECT_EQ(8192, int_opt(c, SOL_SOCKET, SO_RCVBUF));
	EXPECT_EQ(65536, int_opt(s, SOL_SOCKET, SO_SNDBUF));
	EXPECT_EQ(65536, int_opt(s, SOL_SOCKET, SO_RCVBUF));
	exchange(_metadata, c, s, 256 << 10);
	close(s);
	close(c);
	close(l);
}

/* IPV6_V6ONLY reads the system default, then what was set. */
TEST(ipv6_v6only_option)
{
	struct ep any;
	int fd = rs_socket(AF_INET6, 0);
	int def = rstream_read_int("/proc/sys/net/ipv6/bindv6only");

	ASSERT_LE(0, fd);
	ASSERT_LE(0, def);
	EXPECT_EQ(def, int_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY));
	ASSERT_EQ(0, set_int(fd, IPPROTO_IPV6, IPV6_V6ONLY, 1));
	EXPECT_EQ(1, int_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY));
	ep_parse(_metadata, &any, AF_INET6, "::", 0);
	ASSERT_EQ(0, bind(fd, SA(&any), any.len))
		TH_LOG("bind: %s", strerror(errno));
	ASSERT_EQ(0, listen(fd, 1));
	EXPECT_EQ(1, int_opt(fd, IPPROTO_IPV6, IPV6_V6ONLY));
	close(fd);
}

/* SOL_RDMA queue sizes set before connecting read back, and work. */
TEST(rdma_options_read_back)
{
	static const struct { int opt; unsigned int val; } set[] = {
		{ RDMA_SQSIZE, 128 }, { RDMA_RQSIZE, 96 }, { RDMA_INLINE, 32 },
	};
	struct ep bound;
	int c, l, s;
	unsigned int i;

	guard_init();
	c = rs_socket(AF_INET, 0);
	ASSERT_LE(0, c);
	for (i = 0; i < ARRAY_SIZE(set); i++) {
		unsigned int v = 0;
		socklen_t len = sizeof(v);

		ASSERT_EQ(0, setsockopt(c, SOL_RDMA, set[i].opt, &set[i].val,
					sizeof(set[i].val)))
			TH_LOG("option %d: %s", set[i].opt, strerror(errno));
		ASSERT_EQ(0, getsockopt(c, SOL_RDMA, set[i].opt, &v, &len));
		EXPECT_EQ(sizeof(v), len);
		EXPECT_EQ(set[i].val, v) TH_LOG("option %d", set[i].opt);
	}
	l = make_listener(_metadata, AF_INET, 0, 1, &bound);
	ASSERT_EQ(0, GUARDED(connect(c, SA(&bound), bound.len)));
	s = accept_one(_metadata, l);
	exchange(_metadata, c, s, 256 << 10);
	close(s);
	close(c);
	close(l);
}

/* Until set, the SOL_RDMA queue sizes are the module's defaults. */
TEST(rdma_defaults_match_module_params)
{
	static const struct { int opt; const char *param; } opts[] = {
		{ RDMA_SQSIZE, "sqsize_default" },
		{ RDMA_RQSIZE, "rqsize_default" },
		{ RDMA_INLINE, "inline_default" },
	};
	int fd = rs_socket(AF_INET, 0);
	unsigned int i;

	ASSERT_LE(0, fd);
	for (i = 0; i < ARRAY_SIZE(opts); i++) {
		char path[128];
		int want;

		snprintf(path, sizeof(path), "/sys/module/rstream/parameters/%s",
			 opts[i].param);
		want = rstream_read_int(path);
		ASSERT_LT(0, want) TH_LOG("cannot read %s", path);
		EXPECT_EQ(want, int_opt(fd, SOL_RDMA, opts[i].opt))
			TH_LOG("%s", opts[i].param);
	}
	close(fd);
}

/* rstream has no iomap: RDMA_IOMAPSIZE takes 0 only. */
TEST(rdma_iomapsize_only_zero)
{
	int fd = rs_socket(AF_INET, 0);

	ASSERT_LE(0, fd);
	EXPECT_EQ(0, errno_of(set_int(fd, SOL_RDMA, RDMA_IOMAPSIZE, 0)));
	EXPECT_EQ(0, int_opt(fd, SOL_RDMA, RDMA_IOMAPSIZE));
	EXPECT_EQ(EINVAL, errno_of(set_int(fd, SOL_RDMA, RDMA_IOMAPSIZE, 1)));
	EXPECT_EQ(EINVAL, errno_of(set_int(fd, SOL_RDMA, RDMA_IOMAPSIZE, -1)));
	EXPECT_EQ(0, int_opt(fd, SOL_RDMA, RDMA_IOMAPSIZE));
	close(fd);
}

/* Path records from userspace are not taken. */
TEST(rdma_route_eopnotsupp)
{
	char route[64] = { 0 };
	int fd = rs_socket(AF_INET, 0);

	ASSERT_LE(0, fd);
	EXPECT_EQ(EOPNOTSUPP, errno_of(setsockopt(fd, SOL_RDMA, RDMA_ROUTE,
						  route, sizeof(route))));
	close(fd);
}

/* An option value shorter than its type. */
TEST(rdma_option_short_optlen_einval)
{
	unsigned int v = 64;
	int fd = rs_socket(AF_INET, 0);

	ASSERT_LE(0, fd);
	EXPECT_EQ(EINVAL, errno_of(setsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v,
					      2)));
	EXPECT_EQ(EINVAL, errno_of(setsockopt(fd, SOL_RDMA, RDMA_INLINE, &v,
					      0)));
	close(fd);
}

/*
 * An IPv6 address may be given without its scope id (SIN6_LEN_RFC2133,
 * 24 bytes), and then has none.  The module once handed rdma_cm the core's
 * whole sockaddr_in6, whose last 4 bytes nobody had written, and rdma_cm
 * made them the scope id of the connection's local address.  Debian's
 * kernels zero stack variables, so that this passes there either way; the
 * debug kernel fills them with a pattern (0xfefefefe), and shows it.
 */
TEST(connect_ipv6_without_scope_id)
{
	struct sockaddr_in6 *sin6;
	struct ep bound, got;
	int l, c, s;

	guard_init();
	l = make_listener(_metadata, AF_INET6, 0, 1, &bound);
	c = rs_socket(AF_INET6, 0);
	ASSERT_LE(0, c);
	ASSERT_EQ(0, GUARDED(connect(c, SA(&bound), SIN6_LEN_RFC2133)))
		TH_LOG("connect with 24 bytes: %s", strerror(errno));
	s = accept_one(_metadata, l);
	name_of(_metadata, c, false, &got);
	sin6 = (struct sockaddr_in6 *)&got.ss;
	EXPECT_EQ(0U, sin6->sin6_scope_id)
		TH_LOG("scope id %#x", sin6->sin6_scope_id);
	exchange(_metadata, c, s, 4096);
	close(s);
	close(c);
	close(l);
}

/*
 * Queue sizes beyond what the device takes (rsocket allows 65534 each;
 * soft-RoCE's completion queue holds 32767) are cut to fit, as the queue
 * size alone already was: the connection works.  The module once asked
 * for a completion queue the device refused, and connect() failed with
 * EHOSTUNREACH.
 */
TEST(rdma_queue_sizes_beyond_the_device)
{
	unsigned int big = 65534;
	struct ep bound;
	int c, l, s, opt;

	guard_init();
	c = rs_socket(AF_INET, 0);
	l = rs_socket(AF_INET, 0);
	ASSERT_LE(0, c);
	ASSERT_LE(0, l);
	for (opt = RDMA_SQSIZE; opt <= RDMA_RQSIZE; opt++) {
		ASSERT_EQ(0, setsockopt(c, SOL_RDMA, opt, &big, sizeof(big)));
		ASSERT_EQ(0, setsockopt(l, SOL_RDMA, opt, &big, sizeof(big)));
	}
	ep_host(_metadata, &bound, AF_INET);
	ASSERT_EQ(0, bind(l, SA(&bound), bound.len));
	ASSERT_EQ(0, listen(l, 1));
	name_of(_metadata, l, false, &bound);
	ASSERT_EQ(0, GUARDED(connect(c, SA(&bound), bound.len)))
		TH_LOG("connect: %s", strerror(errno));
	s = accept_one(_metadata, l);
	exchange(_metadata, c, s, 1 << 20);
	for (opt = RDMA_SQSIZE; opt <= RDMA_RQSIZE; opt++) {
		EXPECT_LE(16, int_opt(c, SOL_RDMA, opt));
		EXPECT_GE(65534, int_opt(c, SOL_RDMA, opt));
		TH_LOG("option %d: %d here, %d accepted", opt,
		       int_opt(c, SOL_RDMA, opt), int_opt(s, SOL_RDMA, opt));
	}
	close(s);
	close(c);
	close(l);
}

/*
 * SO_RCVBUF is capped by net.core.rmem_max for anyone, as for TCP, and
 * the receive ring is what it gives (TCP_MAXSEG reads half the ring);
 * SO_RCVBUFFORCE, beyond it, takes CAP_NET_ADMIN.
 */
TEST(rcvbuf_capped_by_rmem_max)
{
	const char *path = "/proc/sys/net/core/rmem_max";
	int before = rstream_read_int(path), c, l, s, status;
	struct ep bound;
	FILE *f;
	pid_t pid;

	guard_init();
	ASSERT_LT(0, before);
	f = fopen(path, "w");
	ASSERT_NE(NULL, f);
	fprintf(f, "65536\n");
	fclose(f);

	c = rs_socket(AF_INET, 0);
	ASSERT_LE(0, c);
	EXPECT_EQ(0, set_int(c, SOL_SOCKET, SO_RCVBUF, 16 << 20));
	EXPECT_EQ(131072, int_opt(c, SOL_SOCKET, SO_RCVBUF));
	l = make_listener(_metadata, AF_INET, 0, 1, &bound);
	ASSERT_EQ(0, GUARDED(connect(c, SA(&bound), bound.len)));
	s = accept_one(_metadata, l);
	EXPECT_EQ(65536, int_opt(c, SOL_TCP, TCP_MAXSEG));
	exchange(_metadata, c, s, 1 << 20);

	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		int u = rs_socket(AF_INET, 0);

		if (setresgid(65534, 65534, 65534) ||
		    setresuid(65534, 65534, 65534))
			_exit(2);
		_exit(errno_of(set_int(u, SOL_SOCKET, SO_RCVBUFFORCE,
				       16 << 20)) == EPERM ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_EQ(0, WEXITSTATUS(status))
		TH_LOG("SO_RCVBUFFORCE without privilege: not EPERM");

	f = fopen(path, "w");
	ASSERT_NE(NULL, f);
	fprintf(f, "%d\n", before);
	fclose(f);
	close(s);
	close(c);
	close(l);
}

/*
 * The long ones.
 */

FIXTURE(slow) {
	int unused;
};

FIXTURE_SETUP(slow)
{
	guard_init();
}

FIXTURE_TEARDOWN(slow)
{
}

/* An on-link address with no host behind it: fails within 30 s. */
TEST_F_TIMEOUT(slow, connect_on_link_no_host, 45)
{
	struct ep dst;
	struct sockaddr_in *sin = (struct sockaddr_in *)&dst.ss;
	struct pollfd p = { .events = POLLOUT };
	long long t0;
	int c, err;

	ep_host(_metadata, &dst, AF_INET);
	ep_set_port(&dst, 7471);
	if ((ntohl(sin->sin_addr.s_addr) & 0xff) == 99)
		sin->sin_addr.s_addr = htonl(ntohl(sin->sin_addr.s_addr) - 1);
	else
		sin->sin_addr.s_addr = htonl((ntohl(sin->sin_addr.s_addr) &
					      ~0xffu) | 99);
	c = rs_socket(AF_INET, SOCK_NONBLOCK);
	ASSERT_LE(0, c);
	p.fd = c;
	t0 = now_ms();
	err = errno_of(connect(c, SA(&dst), dst.len));
	if (err == EINPROGRESS) {
		ASSERT_EQ(1, poll(&p, 1, 30000))
			TH_LOG("%s: still connecting after 30 s",
			       ep_str(&dst));
		EXPECT_TRUE(p.revents & POLLERR) TH_LOG("revents %#x",
							p.revents);
		err = sock_error(c);
	}
	EXPECT_TRUE(err == EHOSTUNREACH || err == ETIMEDOUT)
		TH_LOG("%s: %s after %lld ms", ep_str(&dst), strerror(err),
		       now_ms() - t0);
	close(c);
}

/*
 * A socket bound to an address and port whose connect() ran into its 20 s
 * deadline can listen on them, as TCP can after a failed connect.  The
 * deadline destroys the connection's CM id, and listen() once went on to
 * rdma_listen() without one: a NULL pointer dereference, for any user.
 */
TEST_F_TIMEOUT(slow, listen_after_connect_deadline, 60)
{
	struct ep host, bound, dst, again;
	struct sockaddr_in *sin = (struct sockaddr_in *)&dst.ss;
	long long t0;
	int c, d, s;

	ep_host(_metadata, &host, AF_INET);
	c = bound_socket(_metadata, &host, false, &bound);
	dst = host;
	ep_set_port(&dst, 7471);
	/* On the link, and nobody there: .98, or .97 if that is us. */
	sin->sin_addr.s_addr = htonl((ntohl(sin->sin_addr.s_addr) & ~0xffu) |
				     ((ntohl(sin->sin_addr.s_addr) & 0xff) == 98 ?
				      97 : 98));
	/* Blocking, so that the socket is unconnected again when it fails. */
	t0 = now_ms();
	ASSERT_EQ(ETIMEDOUT, errno_of(connect(c, SA(&dst), dst.len)))
		TH_LOG("to %s, after %lld ms", ep_str(&dst), now_ms() - t0);

	ASSERT_EQ(0, listen(c, 1)) TH_LOG("listen: %s", strerror(errno));
	name_of(_metadata, c, false, &again);
	EXPECT_TRUE(ep_same(&bound, &again)) TH_LOG("bound %s, listening %s",
						    ep_str(&bound),
						    ep_str(&again));
	d = make_client(_metadata, &again, 0);
	s = accept_one(_metadata, c);
	exchange(_metadata, d, s, 65536);
	close(s);
	close(d);
	close(c);
}

/*
 * A byte followed at once by the peer's SHUTDOWN must be read before the
 * end of stream, however the reader's calls interleave with the two
 * arrivals: a reader spinning on MSG_DONTWAIT (half the rounds) or
 * blocked in recv() (the other half), a fresh connection each round.
 * The race showed in 2 of 5 runs of 500 rounds on the debug kernel; there
 * the 500 connections once needed more than the harness's default 30 s,
 * hence the long limit (the log line gives the time taken).
 */
TEST_F_TIMEOUT(slow, eof_never_overtakes_the_last_byte, 240)
{
	enum { ROUNDS = 500 };
	long long t0 = now_ms();
	struct ep bound;
	int l, i;

	l = make_listener(_metadata, AF_INET, 0, 8, &bound);
	for (i = 0; i < ROUNDS; i++) {
		long long give_up = now_ms() + 10000;
		bool spin = i % 2;
		pthread_t tid;
		char b[2];
		long r;
		int c, s;

		c = make_client(_metadata, &bound, 0);
		s = accept_one(_metadata, l);
		ASSERT_EQ(0, pthread_create(&tid, NULL,
					    last_byte_then_shutdown, &s));
		do
			r = spin ? recv(c, b, sizeof(b), MSG_DONTWAIT) :
				   GUARDED(recv(c, b, sizeof(b), 0));
		while (r < 0 && errno == EAGAIN && now_ms() < give_up);
		pthread_join(tid, NULL);
		ASSERT_EQ(1, r) TH_LOG("round %d (%s): recv returned %ld (%s)",
				       i, spin ? "spinning" : "blocking", r,
				       r < 0 ? strerror(errno) : "EOF first");
		ASSERT_EQ('z', b[0]);
		ASSERT_EQ(0, GUARDED(recv(c, b, sizeof(b), 0)));
		close(c);
		close(s);
	}
	close(l);
	TH_LOG("%d rounds in %lld ms", ROUNDS, now_ms() - t0);
}

/* 100 connections at once, each with its own 64 KiB both ways. */
TEST_F_TIMEOUT(slow, hundred_parallel_connections, 60)
{
	enum { N = 100, LEN = 64 << 10 };
	struct end {
		int fd;
		size_t sent, got;
		unsigned int tx_seed, rx_seed;
	} *e = calloc(2 * N, sizeof(*e));	/* clients, then servers */
	struct pollfd *p = calloc(2 * N, sizeof(*p));
	struct ep bound, names[N], peer;
	int acc[N], l, i, k, n, done = 0;
	char *buf = malloc(LEN);
	long long end;

	ASSERT_TRUE(e && p && buf);
	l = make_listener(_metadata, AF_INET, 0, 128, &bound);
	ASSERT_EQ(0, fcntl(l, F_SETFL, O_NONBLOCK));
	for (i = 0; i < N; i++) {
		e[i].fd = rs_socket(AF_INET, SOCK_NONBLOCK);
		ASSERT_LE(0, e[i].fd) TH_LOG("socket %d: %s", i,
					     strerror(errno));
		ASSERT_EQ(EINPROGRESS, errno_of(connect(e[i].fd, SA(&bound),
							bound.len)))
			TH_LOG("client %d", i);
	}
	end = now_ms() + 30000;
	for (n = 0; n < N; ) {
		struct pollfd lp = { .fd = l, .events = POLLIN };

		ASSERT_EQ(1, poll(&lp, 1, end - now_ms() > 0 ?
				  end - now_ms() : 0))
			TH_LOG("%d connections of %d after 30 s", n, N);
		acc[n] = accept4(l, NULL, NULL, SOCK_NONBLOCK);
		if (acc[n] < 0 && errno == EAGAIN)
			continue;
		ASSERT_LE(0, acc[n]) TH_LOG("accept: %s", strerror(errno));
		n++;
	}
	for (i = 0; i < N; i++) {
		struct pollfd cp = { .fd = e[i].fd, .events = POLLOUT };

		ASSERT_EQ(1, poll(&cp, 1, PROMPT_MS)) TH_LOG("client %d", i);
		ASSERT_EQ(0, sock_error(e[i].fd)) TH_LOG("client %d", i);
		name_of(_metadata, e[i].fd, false, &names[i]);
		e[i].tx_seed = 100 + 2 * i;
		e[i].rx_seed = 101 + 2 * i;
	}
	/* Each accepted socket to its client, by the client's port. */
	for (k = 0; k < N; k++) {
		name_of(_metadata, acc[k], true, &peer);
		for (i = 0; i < N; i++)
			if (ep_same(&peer, &names[i]))
				break;
		ASSERT_GT(N, i) TH_LOG("accepted %s: no such client",
				       ep_str(&peer));
		ASSERT_EQ(0, e[N + i].fd) TH_LOG("client %d accepted twice",
						 i);
		e[N + i].fd = acc[k];
		e[N + i].tx_seed = e[i].rx_seed;
		e[N + i].rx_seed = e[i].tx_seed;
	}

	end = now_ms() + 30000;
	while (done < 2 * N) {
		for (k = 0; k < 2 * N; k++) {
			p[k].fd = e[k].fd;
			p[k].events = e[k].got < LEN ? POLLIN : 0;
			if (e[k].sent < LEN)
				p[k].events |= POLLOUT;
		}
		ASSERT_LT(0, poll(p, 2 * N, PROMPT_MS))
			TH_LOG("stalled, %d streams of %d done", done, 2 * N);
		ASSERT_GT(end, now_ms()) TH_LOG("%d streams of %d in 30 s",
						done, 2 * N);
		for (k = 0; k < 2 * N; k++) {
			struct end *x = &e[k];
			ssize_t r;
			long bad;

			ASSERT_FALSE(p[k].revents & (POLLERR | POLLHUP))
				TH_LOG("%s %d: revents %#x",
				       k < N ? "client" : "server", k % N,
				       p[k].revents);
			if ((p[k].revents & POLLOUT) && x->sent < LEN) {
				size_t len = LEN - x->sent;

				len = len > 16384 ? 16384 : len;
				fill(buf, len, x->sent, x->tx_seed);
				r = send(x->fd, buf, len,
					 MSG_DONTWAIT | MSG_NOSIGNAL);
				ASSERT_TRUE(r > 0 || errno == EAGAIN)
					TH_LOG("send: %s", strerror(errno));
				if (r > 0)
					x->sent += r;
				if (x->sent == LEN && x->got == LEN)
					done++;
			}
			if (!(p[k].revents & POLLIN))
				continue;
			r = recv(x->fd, buf, LEN - x->got, MSG_DONTWAIT);
			if (r < 0 && errno == EAGAIN)
				continue;
			ASSERT_LT(0, r) TH_LOG("%s %d: recv at byte %zu: %s",
					       k < N ? "client" : "server",
					       k % N, x->got,
					       r ? strerror(errno) : "EOF");
			bad = check(buf, r, x->got, x->rx_seed);
			ASSERT_EQ(-1, bad) TH_LOG("%s %d: byte %zu is wrong",
						  k < N ? "client" : "server",
						  k % N, x->got + bad);
			x->got += r;
			if (x->sent == LEN && x->got == LEN)
				done++;
		}
	}
	/* Not a byte more, on any of them. */
	for (k = 0, n = 0; k < 2 * N; k++)
		n += errno_of(recv(e[k].fd, buf, 1, MSG_DONTWAIT)) != EAGAIN;
	EXPECT_EQ(0, n) TH_LOG("%d sockets not empty at the end", n);
	for (k = 0; k < 2 * N; k++)
		close(e[k].fd);
	close(l);
	free(buf);
	free(p);
	free(e);
}

/*
 * Busy polling: a blocking call spins on the connection's completion
 * queue, through the kernel's NAPI busy loop, before it sleeps.  What
 * shows it: the caller's voluntary context switches (a sleep each) and
 * TcpExt BusyPollRxPackets, which the busy loop counts (completions
 * handled while spinning).  The variants set the time with SO_BUSY_POLL,
 * with SOL_RDMA's RSTREAM_POLLING_TIME, or not at all, the control.
 */

#define BUSY_ROUNDS	60
#define BUSY_TRIES	4		/* ping-pongs, until one is busy-polled */
#define BUSY_LONG_US	1000000		/* longer than any reply takes */

/* TcpExt's BusyPollRxPackets in /proc/net/netstat, or -1. */
static long long busy_poll_packets(void)
{
	char names[4096], values[4096];
	long long v = -1;
	FILE *f = fopen("/proc/net/netstat", "r");

	if (!f)
		return -1;
	while (fgets(names, sizeof(names), f) &&
	       fgets(values, sizeof(values), f)) {
		char *n, *x, *sn, *sv;
		int i;

		if (strncmp(names, "TcpExt:", 7))
			continue;
		n = strtok_r(names, "\n ", &sn);
		x = strtok_r(values, "\n ", &sv);
		for (i = 0; n && x; i++) {
			if (!strcmp(n, "BusyPollRxPackets"))
				v = atoll(x);
			n = strtok_r(NULL, "\n ", &sn);
			x = strtok_r(NULL, "\n ", &sv);
		}
	}
	fclose(f);
	return v;
}

static long voluntary_switches(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_nvcsw;
}

static int write_text(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	int ret;

	if (!f)
		return -1;
	ret = fputs(text, f) < 0 ? -1 : 0;
	return fclose(f) || ret ? -1 : 0;
}

/*
 * An echo peer in a child process: @rounds times, a byte read from @fd
 * (blocking) and written back, each after @delay_ms; the parent reaps it.
 */
static pid_t echo_child(int fd, int rounds, int delay_ms, int cpu)
{
	pid_t pid = fork();
	char b;
	int i;

	if (pid)
		return pid;
	if (cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(cpu, &set);
		sched_setaffinity(0, sizeof(set), &set);
	}
	for (i = 0; i < rounds; i++) {
		if (GUARDED(read(fd, &b, 1)) != 1)
			_exit(1);
		if (delay_ms)
			usleep(delay_ms * 1000);
		if (write(fd, &b, 1) != 1)
			_exit(2);
	}
	_exit(0);
}

static int child_status(pid_t pid)
{
	int st = -1;

	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
}

FIXTURE(busy) {
	int l, c, s;
	char busy_poll[32];	/* net.core.busy_poll as it was */
};

FIXTURE_VARIANT(busy) {
	int level, name;	/* how the time is set; 0: it is not */
};

FIXTURE_VARIANT_ADD(busy, so_busy_poll) {
	.level = SOL_SOCKET, .name = SO_BUSY_POLL,
};

FIXTURE_VARIANT_ADD(busy, polling_time) {
	.level = SOL_RDMA, .name = RSTREAM_POLLING_TIME,
};

FIXTURE_VARIANT_ADD(busy, off) {
	.level = 0,
};

#define BUSY_SYSCTL	"/proc/sys/net/core/busy_poll"

FIXTURE_SETUP(busy)
{
	FILE *f = fopen(BUSY_SYSCTL, "r");

	ASSERT_NE(NULL, f);
	ASSERT_NE(NULL, fgets(self->busy_poll, sizeof(self->busy_poll), f));
	fclose(f);
	pair_open(_metadata, 0, &self->l, &self->c, &self->s);
	ASSERT_LE(0, busy_poll_packets()) TH_LOG("no BusyPollRxPackets");
}

FIXTURE_TEARDOWN(busy)
{
	write_text(BUSY_SYSCTL, self->busy_poll);
	pair_close(&self->l, &self->c, &self->s);
}

/* The busy-poll time on @fd, in microseconds, set by @level's @name. */
static void busy_set(struct __test_metadata *_metadata, int level, int name,
		     int fd, int us)
{
	if (!level)
		return;
	ASSERT_EQ(0, set_int(fd, level, name, us))
		TH_LOG("busy-poll time: %s", strerror(errno));
	ASSERT_EQ(us, int_opt(fd, SOL_SOCKET, SO_BUSY_POLL));
	ASSERT_EQ(us, int_opt(fd, SOL_RDMA, RSTREAM_POLLING_TIME));
}

/*
 * What BUSY_ROUNDS replies cost the waiter, by @how: 'r' blocking recv,
 * 'p' poll() then recv, 'e' epoll_wait() then recv.
 */
static void busy_ping(struct __test_metadata *_metadata, int c, int s,
		      char how, long *switches, long long *packets)
{
	struct epoll_event ev = { .events = EPOLLIN };
	long long p0;
	long sw0;
	pid_t pid;
	int ep = -1, i;
	char b = 'x';

	if (how == 'e') {
		ep = epoll_create1(0);
		ASSERT_LE(0, ep);
		ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	}
	pid = echo_child(s, BUSY_ROUNDS, 0, -1);
	ASSERT_LE(0, pid);
	p0 = busy_poll_packets();
	sw0 = voluntary_switches();
	for (i = 0; i < BUSY_ROUNDS; i++) {
		struct pollfd pf = { .fd = c, .events = POLLIN };

		ASSERT_EQ(1, write(c, &b, 1));
		if (how == 'p')
			ASSERT_EQ(1, GUARDED(poll(&pf, 1, -1)));
		if (how == 'e')
			ASSERT_EQ(1, GUARDED(epoll_wait(ep, &ev, 1, -1)));
		ASSERT_EQ(1, GUARDED(recv(c, &b, 1, 0)))
			TH_LOG("round %d: %s", i, strerror(errno));
	}
	*switches = voluntary_switches() - sw0;
	*packets = busy_poll_packets() - p0;
	EXPECT_EQ(0, child_status(pid));
	if (ep >= 0)
		close(ep);
	TH_LOG("%c: %d replies, %ld sleeps, %lld completions busy-polled",
	       how, BUSY_ROUNDS, *switches, *packets);
}

/*
 * With busy polling the waiter spins for some completions (irq_poll may
 * take the others first) and, in recv() and epoll_wait(), which yield the
 * CPU and spin on, sleeps for few replies.  poll() ends its spin and
 * sleeps whenever another task wants the CPU (the core's rule), which on
 * the debug kernel is for most replies: its sleeps are not counted.
 * Without busy polling, the waiter sleeps for most and spins for none.
 */
static void busy_expect(struct __test_metadata *_metadata, bool on,
			bool sleeps, long switches, long long packets)
{
	if (on) {
		EXPECT_LT(0, packets);
		if (sleeps)
			EXPECT_GT(BUSY_ROUNDS / 4, switches);
	} else {
		EXPECT_EQ(0, packets);
		EXPECT_LE(BUSY_ROUNDS / 2, switches);
	}
}

/*
 * A ping-pong waited for by @how (busy_ping()); poll() and epoll_wait()
 * spin by net.core.busy_poll, poll() only on sockets with a busy-poll
 * time, epoll_wait() on the sysctl alone (the control spins as well).
 */
static void busy_case(struct __test_metadata *_metadata, int level,
		      int name, int c, int s, char how)
{
	bool on = level || how == 'e';
	long long packets;
	int tries = 0;
	long switches;

	busy_set(_metadata, level, name, c, BUSY_LONG_US);
	if (how != 'r')
		ASSERT_EQ(0, write_text(BUSY_SYSCTL, "1000000"));
	/*
	 * Which of the spinner and irq_poll on the other CPU takes a
	 * completion is a race: a CI run on stock 6.12 at 2325b0b saw
	 * irq_poll take all 60 (0 sleeps, 0 busy-polled).  A spin that never
	 * finds one in BUSY_TRIES rounds of replies still fails.
	 */
	do
		busy_ping(_metadata, c, s, how, &switches, &packets);
	while (on && !packets && ++tries < BUSY_TRIES);
	busy_expect(_metadata, on, how != 'p', switches, packets);
}

TEST_F(busy, recv_spins_instead_of_sleeping)
{
	busy_case(_metadata, variant->level, variant->name, self->c, self->s,
		  'r');
}

TEST_F(busy, poll_spins_instead_of_sleeping)
{
	busy_case(_metadata, variant->level, variant->name, self->c, self->s,
		  'p');
}

TEST_F(busy, epoll_spins_instead_of_sleeping)
{
	busy_case(_metadata, variant->level, variant->name, self->c, self->s,
		  'e');
}

/* A writer waiting for room spins for the peer's grant. */
TEST_F(busy, send_spins_for_room)
{
	static char buf[1 << 20];
	long long p0, packets;
	ssize_t n, total = 0;
	pid_t pid;

	busy_set(_metadata, variant->level, variant->name, self->c, BUSY_LONG_US);
	while ((n = send(self->c, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		total += n;
	ASSERT_EQ(EAGAIN, errno);
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Reads it all after a moment, with the bytes to come. */
		ssize_t left = total + sizeof(buf), r;

		usleep(100 * 1000);
		while (left > 0) {
			r = GUARDED(recv(self->s, buf, sizeof(buf), 0));
			if (r <= 0)
				_exit(1);
			left -= r;
		}
		_exit(0);
	}
	p0 = busy_poll_packets();
	ASSERT_EQ((long)sizeof(buf),
		  GUARDED(send(self->c, buf, sizeof(buf), 0)));
	packets = busy_poll_packets() - p0;
	EXPECT_EQ(0, child_status(pid));
	TH_LOG("%zd bytes before the wait, %lld completions busy-polled",
	       total, packets);
	/* Some with busy polling, none without. */
	EXPECT_EQ(!!variant->level, packets > 0);
}

/* A signal ends the spin: the call returns EINTR, not after the spin. */
TEST_F(busy, signal_ends_the_spin)
{
	struct itimerval it = { .it_value = { .tv_usec = 200000 } };
	long long start = now_ms(), took;
	char b;

	busy_set(_metadata, variant->level, variant->name, self->c, 5 * BUSY_LONG_US);
	ASSERT_EQ(0, setitimer(ITIMER_REAL, &it, NULL));
	EXPECT_EQ(EINTR, errno_of(recv(self->c, &b, 1, 0)));
	took = now_ms() - start;
	TH_LOG("EINTR after %lld ms (signal at 200)", took);
	EXPECT_GT(1500, took);
}

/* SO_RCVTIMEO bounds the spin as it bounds the sleep. */
TEST_F(busy, rcvtimeo_bounds_the_spin)
{
	long long start = now_ms(), took;
	char b;

	busy_set(_metadata, variant->level, variant->name, self->c, 5 * BUSY_LONG_US);
	set_timeo(_metadata, self->c, SO_RCVTIMEO, 300);
	EXPECT_EQ(EAGAIN, errno_of(GUARDED(recv(self->c, &b, 1, 0))));
	took = now_ms() - start;
	TH_LOG("EAGAIN after %lld ms (SO_RCVTIMEO 300)", took);
	EXPECT_LE(290, took);
	EXPECT_GT(1500, took);
}

/*
 * A spinner lets others run (need_resched()): the echo peer, on the same
 * CPU, answers while the waiter spins for up to 5 s.
 */
TEST_F(busy, spinner_yields_the_cpu)
{
	long long start, took;
	cpu_set_t set, old;
	char b = 'y';
	pid_t pid;

	busy_set(_metadata, variant->level, variant->name, self->c, 5 * BUSY_LONG_US);
	ASSERT_EQ(0, sched_getaffinity(0, sizeof(old), &old));
	CPU_ZERO(&set);
	CPU_SET(0, &set);
	ASSERT_EQ(0, sched_setaffinity(0, sizeof(set), &set));
	pid = echo_child(self->s, 1, 50, 0);
	ASSERT_LE(0, pid);
	start = now_ms();
	ASSERT_EQ(1, write(self->c, &b, 1));
	EXPECT_EQ(1, GUARDED(recv(self->c, &b, 1, 0)));
	took = now_ms() - start;
	sched_setaffinity(0, sizeof(old), &old);
	EXPECT_EQ(0, child_status(pid));
	TH_LOG("the reply after %lld ms (the peer waits 50)", took);
	EXPECT_GT(2000, took);
}

/* Each connection has a NAPI id of its own (SO_INCOMING_NAPI_ID). */
TEST_F(busy, napi_id_per_connection)
{
	int c = int_opt(self->c, SOL_SOCKET, SO_INCOMING_NAPI_ID);
	int s = int_opt(self->s, SOL_SOCKET, SO_INCOMING_NAPI_ID);

	EXPECT_LT(0, c);
	EXPECT_LT(0, s);
	EXPECT_NE(c, s);
}

#define POLLING_PARAM	"/sys/module/rstream/parameters/polling_time"

/* Drop @cap from the effective set (this process: a child). */
static int drop_cap(int cap)
{
	struct __user_cap_header_struct h = {
		.version = _LINUX_CAPABILITY_VERSION_3,
	};
	struct __user_cap_data_struct d[2];

	if (syscall(SYS_capget, &h, d))
		return -1;
	d[cap / 32].effective &= ~(1u << (cap % 32));
	return syscall(SYS_capset, &h, d);
}

/*
 * RSTREAM_POLLING_TIME is SO_BUSY_POLL's time with SO_BUSY_POLL's rules,
 * privileged or not; the module parameter polling_time starts new
 * sockets with it; accepted sockets take their listener's.
 */
TEST(polling_time_rules)
{
	int fd = rs_socket(AF_INET, 0), l, c, s;
	struct ep bound;
	pid_t pid;

	guard_init();
	ASSERT_LE(0, fd);
	EXPECT_EQ(0, int_opt(fd, SOL_RDMA, RSTREAM_POLLING_TIME));
	EXPECT_EQ(EINVAL, errno_of(set_int(fd, SOL_RDMA,
					   RSTREAM_POLLING_TIME, -1)));
	EXPECT_EQ(0, set_int(fd, SOL_SOCKET, SO_BUSY_POLL, 70));
	EXPECT_EQ(70, int_opt(fd, SOL_RDMA, RSTREAM_POLLING_TIME));
	EXPECT_EQ(0, set_int(fd, SOL_RDMA, RSTREAM_POLLING_TIME, 80));
	EXPECT_EQ(80, int_opt(fd, SOL_SOCKET, SO_BUSY_POLL));
	close(fd);

	ASSERT_EQ(0, write_text(POLLING_PARAM, "50"));
	fd = rs_socket(AF_INET, 0);
	EXPECT_EQ(50, int_opt(fd, SOL_SOCKET, SO_BUSY_POLL));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		/* Without CAP_NET_ADMIN: whatever one allows, so does the other. */
		int a, b;

		if (drop_cap(CAP_NET_ADMIN))
			_exit(2);
		a = errno_of(set_int(fd, SOL_RDMA, RSTREAM_POLLING_TIME, 51));
		b = errno_of(set_int(fd, SOL_SOCKET, SO_BUSY_POLL, 52));
		_exit(a != b);
	}
	EXPECT_EQ(0, child_status(pid)) TH_LOG("unprivileged: the two differ");
	close(fd);
	EXPECT_EQ(0, write_text(POLLING_PARAM, "0"));

	l = make_listener(_metadata, AF_INET, 0, 1, &bound);
	ASSERT_EQ(0, set_int(l, SOL_RDMA, RSTREAM_POLLING_TIME, 123));
	c = make_client(_metadata, &bound, 0);
	s = accept_one(_metadata, l);
	EXPECT_EQ(123, int_opt(s, SOL_SOCKET, SO_BUSY_POLL));
	EXPECT_EQ(0, int_opt(c, SOL_SOCKET, SO_BUSY_POLL));
	close(s);
	close(c);
	close(l);
}

/*
 * Zero-copy sends: MSG_ZEROCOPY with SO_ZEROCOPY, and the notifications
 * on the error queue, side by side with TCP's over loopback in this
 * guest.  TCP over loopback copies every send (the receiver cannot keep
 * the sender's pages), and says so; AF_RSTREAM copies only the sends its
 * device takes inline.
 */
FIXTURE(zc) {
	int l, c, s;
};

FIXTURE_VARIANT(zc) {
	bool tcp;
};

FIXTURE_VARIANT_ADD(zc, rstream) {
	.tcp = false,
};

FIXTURE_VARIANT_ADD(zc, tcp) {
	.tcp = true,
};

FIXTURE_SETUP(zc)
{
	if (variant->tcp) {
		guard_init();
		self->l = -1;
		tcp_pair(_metadata, &self->c, &self->s);
	} else {
		pair_open(_metadata, 0, &self->l, &self->c, &self->s);
	}
}

FIXTURE_TEARDOWN(zc)
{
	pair_close(&self->l, &self->c, &self->s);
}

/* SO_ZEROCOPY, or where the core refuses it to the family, RSTREAM_ZEROCOPY. */
static int zc_enable(int fd, int on)
{
	if (!set_int(fd, SOL_SOCKET, SO_ZEROCOPY, on))
		return 0;
	if (errno != EOPNOTSUPP)
		return -1;
	return set_int(fd, SOL_RDMA, RSTREAM_ZEROCOPY, on);
}

/* Whether the running kernel is older than @major.@minor. */
static bool kernel_before(int major, int minor)
{
	struct utsname u;
	int a = 0, b = 0;

	if (uname(&u) || sscanf(u.release, "%d.%d", &a, &b) != 2)
		return false;
	return a < major || (a == major && b < minor);
}

struct zc_seen {
	unsigned int next;	/* the first send not notified yet */
	int copied;		/* notifications that say the bytes were copied */
	int zerocopy;		/* and that they were not */
};

/* Take every notification the error queue holds, checking each as TCP's. */
static void zc_drain(struct __test_metadata *_metadata, int fd,
		     struct zc_seen *seen)
{
	for (;;) {
		char control[128];
		struct msghdr msg = {
			.msg_control = control,
			.msg_controllen = sizeof(control),
		};
		struct sock_extended_err *ee;
		struct cmsghdr *cm;
		int r = recvmsg(fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT);

		if (r < 0) {
			ASSERT_EQ(EAGAIN, errno)
				TH_LOG("MSG_ERRQUEUE: %s", strerror(errno));
			return;
		}
		ASSERT_EQ(0, r);
		ASSERT_TRUE(msg.msg_flags & MSG_ERRQUEUE);
		cm = CMSG_FIRSTHDR(&msg);
		ASSERT_NE(NULL, cm);
		EXPECT_EQ(SOL_IP, cm->cmsg_level);
		EXPECT_EQ(IP_RECVERR, cm->cmsg_type);
		EXPECT_EQ(CMSG_LEN(sizeof(*ee) + sizeof(struct sockaddr_in)),
			  cm->cmsg_len);
		ee = (struct sock_extended_err *)CMSG_DATA(cm);
		ASSERT_EQ(SO_EE_ORIGIN_ZEROCOPY, ee->ee_origin);
		EXPECT_EQ(0u, ee->ee_errno);
		ASSERT_EQ(seen->next, ee->ee_info)
			TH_LOG("notified %u..%u, expected from %u", ee->ee_info,
			       ee->ee_data, seen->next);
		ASSERT_LE(ee->ee_info, ee->ee_data);
		seen->next = ee->ee_data + 1;
		if (ee->ee_code & SO_EE_CODE_ZEROCOPY_COPIED)
			seen->copied++;
		else
			seen->zerocopy++;
		EXPECT_EQ(NULL, CMSG_NXTHDR(&msg, cm));
	}
}

/* Until the sends before @count are notified: poll reports them as POLLERR. */
static void zc_wait(struct __test_metadata *_metadata, int fd,
		    struct zc_seen *seen, unsigned int count)
{
	long long end = now_ms() + PROMPT_MS;

	while (seen->next < count) {
		struct pollfd p = { .fd = fd };
		long long left = end - now_ms();

		ASSERT_LT(0, left) TH_LOG("sends %u..%u never notified",
					  seen->next, count - 1);
		if (poll(&p, 1, left) != 1)
			continue;
		ASSERT_EQ(POLLERR, p.revents);
		zc_drain(_metadata, fd, seen);
	}
}

/*
 * A child that reads @n sends of sizes[i] bytes, each the pattern of
 * seed @seed0 + i, and exits 0 if every byte is right.
 */
static pid_t zc_reader(int fd, const size_t *sizes, int n, unsigned int seed0)
{
	pid_t pid = fork();
	static char in[1 << 16];
	int i;

	if (pid)
		return pid;
	for (i = 0; i < n; i++) {
		size_t got = 0;

		while (got < sizes[i]) {
			size_t want = sizes[i] - got;
			long r = read(fd, in, want < sizeof(in) ? want :
					      sizeof(in));

			if (r <= 0)
				_exit(2);
			if (check(in, r, got, seed0 + i) >= 0)
				_exit(3);
			got += r;
		}
	}
	_exit(0);
}

static char *zc_buffer(struct __test_metadata *_metadata, size_t len)
{
	char *buf = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	EXPECT_NE(MAP_FAILED, buf);
	return buf == MAP_FAILED ? NULL : buf;
}

/*
 * Sends of every size, each from its own place: every one is notified
 * once, in order, and the peer reads every byte.
 */
TEST_F(zc, every_send_notified_once)
{
	static const size_t sizes[] = { 65536, 100000, 1 << 20, 4096 + 17,
					300, 40, 3 * 65536 + 5, 8192 };
	const int n = ARRAY_SIZE(sizes);
	size_t at = 0, len = 4 << 20;
	struct zc_seen seen = {};
	char *buf = zc_buffer(_metadata, len);
	pid_t pid;
	int i;

	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, zc_enable(self->c, 1)) TH_LOG("%s", strerror(errno));
	pid = zc_reader(self->s, sizes, n, 1);
	ASSERT_LE(0, pid);
	for (i = 0; i < n; i++) {
		char *p = buf + at + (i * 37) % 4096;

		fill(p, sizes[i], 0, 1 + i);
		ASSERT_EQ((long)sizes[i],
			  GUARDED(send(self->c, p, sizes[i], MSG_ZEROCOPY)))
			TH_LOG("send %d: %s", i, strerror(errno));
		at += sizes[i] + 8192;
	}
	zc_wait(_metadata, self->c, &seen, n);
	EXPECT_EQ(0, child_status(pid)) TH_LOG("the reader saw other bytes");
	/* Merged ranges keep one code: some, not all, say how it went. */
	EXPECT_LT(0, variant->tcp ? seen.copied : seen.zerocopy);
	munmap(buf, len);
}

/*
 * Each send notified before the next: a small one (inline on AF_RSTREAM)
 * says it was copied, a large one says so only on TCP over loopback.
 * Nobody reads meanwhile: the notification does not wait for a reader.
 */
TEST_F(zc, copied_says_how_it_went)
{
	static const size_t sizes[] = { 40, 65536 };
	struct zc_seen seen = {};
	char *buf = zc_buffer(_metadata, 1 << 17);
	struct tcp_info_ext ti;
	int i;

	ASSERT_NE(NULL, buf);
	ASSERT_EQ(0, zc_enable(self->c, 1)) TH_LOG("%s", strerror(errno));
	for (i = 0; i < 2; i++) {
		int copied = seen.copied;

		fill(buf, sizes[i], 0, i);
		ASSERT_EQ((long)sizes[i],
			  GUARDED(send(self->c, buf, sizes[i], MSG_ZEROCOPY)));
		zc_wait(_metadata, self->c, &seen, i + 1);
		EXPECT_EQ(variant->tcp || sizes[i] <= 64, seen.copied > copied)
			TH_LOG("send of %zu bytes", sizes[i]);
	}
	/* TCP_INFO counts zero-copy bytes as any others, as TCP does. */
	tcp_info_of(_metadata, self->c, &ti);
	EXPECT_EQ(40U + 65536, ti.bytes_sent);
	if (!variant->tcp)
		EXPECT_EQ(40U + 65536, ti.bytes_acked);
	munmap(buf, 1 << 17);
}

/*
 * Zero-copy sends mixed with copied ones (small) while the peer reads,
 * so that credit and grant updates go between them: every notification
 * comes in the order of the sends.
 */
TEST_F(zc, copied_sends_keep_their_place)
{
	enum { ROUNDS = 100, PER = 3 };
	size_t sizes[ROUNDS * PER], len = 2 << 20, at = 0;
	struct zc_seen seen = {};
	char *buf = zc_buffer(_metadata, len);
	pid_t pid;
	int i;

	ASSERT_NE(NULL, buf);
	for (i = 0; i < ROUNDS * PER; i++)
		sizes[i] = i % PER ? 40 : 8192;
	ASSERT_EQ(0, zc_enable(self->c, 1)) TH_LOG("%s", strerror(errno));
	pid = zc_reader(self->s, sizes, ROUNDS * PER, 300);
	ASSERT_LE(0, pid);
	for (i = 0; i < ROUNDS * PER; i++) {
		/* Each send from its own bytes: none is notified yet. */
		char *p = buf + at;

		at += sizes[i] + 64;
		fill(p, sizes[i], 0, 300 + i);
		ASSERT_EQ((long)sizes[i],
			  GUARDED(send(self->c, p, sizes[i], MSG_ZEROCOPY)))
			TH_LOG("send %d: %s", i, strerror(errno));
		zc_drain(_metadata, self->c, &seen);
	}
	zc_wait(_metadata, self->c, &seen, ROUNDS * PER);
	EXPECT_EQ(0, child_status(pid)) TH_LOG("the reader saw other bytes");
	munmap(buf, len);
}

/*
 * The buffer written again as soon as each send is notified, at other
 * offsets and sizes: the peer reads every send as it was when sent.
 */
TEST_F(zc, buffer_reused_after_notification)
{
	enum { ROUNDS = 40 };
	size_t sizes[ROUNDS], len = 256 << 10;
	struct zc_seen seen = {};
	char *buf = zc_buffer(_metadata, len);
	pid_t pid;
	int i;

	ASSERT_NE(NULL, buf);
	for (i = 0; i < ROUNDS; i++)
		sizes[i] = 1000 + (size_t)i * 7919 % (200 << 10);
	ASSERT_EQ(0, zc_enable(self->c, 1)) TH_LOG("%s", strerror(errno));
	pid = zc_reader(self->s, sizes, ROUNDS, 100);
	ASSERT_LE(0, pid);
	for (i = 0; i < ROUNDS; i++) {
		char *p = buf + (i * 131) % 4096;

		fill(p, sizes[i], 0, 100 + i);
		ASSERT_EQ((long)sizes[i],
			  GUARDED(send(self->c, p, sizes[i], MSG_ZEROCOPY)))
			TH_LOG("send %d: %s", i, strerror(errno));
		zc_wait(_metadata, self->c, &seen, i + 1);
		/* The pages are the program's again: anything may go there. */
		memset(buf, 0xa5, len);
	}
	EXPECT_EQ(0, child_status(pid)) TH_LOG("the reader saw other bytes");
	munmap(buf, len);
}

/*
 * The pages of a zero-copy send count against RLIMIT_MEMLOCK, for a
 * process without CAP_IPC_LOCK: beyond it the send fails with ENOBUFS.
 */
TEST_F(zc, rlimit_memlock_bounds_pinned_pages)
{
	struct rlimit lim = { 64 << 10, 64 << 10 };
	char *buf = zc_buffer(_metadata, 1 << 20);
	pid_t pid;

	ASSERT_NE(NULL, buf);
	memset(buf, 1, 1 << 20);
	ASSERT_EQ(0, zc_enable(self->c, 1)) TH_LOG("%s", strerror(errno));
	pid = fork();
	ASSERT_LE(0, pid);
	if (!pid) {
		if (drop_cap(CAP_IPC_LOCK) || setrlimit(RLIMIT_MEMLOCK, &lim))
			_exit(2);
		if (send(self->c, buf, 1 << 20, MSG_ZEROCOPY) != -1 ||
		    errno != ENOBUFS)
			_exit(3);
		if (send(self->c, buf, 16 << 10, MSG_ZEROCOPY) != 16 << 10)
			_exit(4);
		_exit(0);
	}
	EXPECT_EQ(0, child_status(pid))
		TH_LOG("2: set-up, 3: 1 MiB not refused, 4: 16 KiB refused");
	munmap(buf, 1 << 20);
}

/* MSG_ZEROCOPY without SO_ZEROCOPY is a plain send: nothing is notified. */
TEST_F(zc, without_so_zerocopy_nothing_notified)
{
	char buf[65536], in[65536];
	struct pollfd p = { .fd = self->c };

	fill(buf, sizeof(buf), 0, 7);
	ASSERT_EQ((long)sizeof(buf),
		  GUARDED(send(self->c, buf, sizeof(buf), MSG_ZEROCOPY)));
	read_exact(_metadata, self->s, in, sizeof(in));
	EXPECT_EQ(-1, check(in, sizeof(in), 0, 7));
	EXPECT_EQ(0, poll(&p, 1, QUIET_MS));
	EXPECT_EQ(-1, recv(self->c, in, sizeof(in),
			   MSG_ERRQUEUE | MSG_DONTWAIT));
	EXPECT_EQ(EAGAIN, errno);
}

/*
 * SO_ZEROCOPY takes 0 and 1, and an accepted socket has its listener's,
 * as on TCP; RSTREAM_ZEROCOPY is the same flag.  The socket core refuses
 * SO_ZEROCOPY to other families than its own before 6.2.
 */
TEST(zerocopy_option_rules)
{
	int fds[2] = { rs_socket(AF_INET, 0), socket(AF_INET, SOCK_STREAM, 0) };
	int l, c, s, i, a, t;
	struct ep bound;

	guard_init();
	for (i = 0; i < 2; i++) {
		ASSERT_LE(0, fds[i]);
		EXPECT_EQ(0, int_opt(fds[i], SOL_SOCKET, SO_ZEROCOPY));
		EXPECT_EQ(EINVAL, errno_of(zc_enable(fds[i], 2)));
		EXPECT_EQ(EINVAL, errno_of(zc_enable(fds[i], -1)));
		EXPECT_EQ(0, zc_enable(fds[i], 1));
		EXPECT_EQ(1, int_opt(fds[i], SOL_SOCKET, SO_ZEROCOPY));
	}
	a = errno_of(set_int(fds[0], SOL_SOCKET, SO_ZEROCOPY, 0));
	if (a) {
		EXPECT_TRUE(a == EOPNOTSUPP && kernel_before(6, 2))
			TH_LOG("SO_ZEROCOPY: %s", strerror(a));
	} else {
		EXPECT_EQ(0, int_opt(fds[0], SOL_RDMA, RSTREAM_ZEROCOPY));
	}
	EXPECT_EQ(0, set_int(fds[0], SOL_RDMA, RSTREAM_ZEROCOPY, 1));
	EXPECT_EQ(1, int_opt(fds[0], SOL_SOCKET, SO_ZEROCOPY));
	EXPECT_EQ(1, int_opt(fds[0], SOL_RDMA, RSTREAM_ZEROCOPY));
	close(fds[0]);
	close(fds[1]);

	/* Inherited, on both. */
	l = make_listener(_metadata, AF_INET, 0, 1, &bound);
	ASSERT_EQ(0, zc_enable(l, 1));
	c = make_client(_metadata, &bound, 0);
	s = accept_one(_metadata, l);
	EXPECT_EQ(1, int_opt(s, SOL_SOCKET, SO_ZEROCOPY));
	EXPECT_EQ(0, int_opt(c, SOL_SOCKET, SO_ZEROCOPY));
	close(s);
	close(c);
	close(l);
	t = socket(AF_INET, SOCK_STREAM, 0);
	{
		struct sockaddr_in sin = { .sin_family = AF_INET,
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t len = sizeof(sin);

		ASSERT_EQ(0, bind(t, (struct sockaddr *)&sin, len));
		ASSERT_EQ(0, set_int(t, SOL_SOCKET, SO_ZEROCOPY, 1));
		ASSERT_EQ(0, listen(t, 1));
		ASSERT_EQ(0, getsockname(t, (struct sockaddr *)&sin, &len));
		c = socket(AF_INET, SOCK_STREAM, 0);
		ASSERT_EQ(0, connect(c, (struct sockaddr *)&sin, len));
		s = accept(t, NULL, NULL);
		EXPECT_EQ(1, int_opt(s, SOL_SOCKET, SO_ZEROCOPY))
			TH_LOG("TCP's accepted socket: as ours");
		close(s);
		close(c);
		close(t);
	}
}

int main(int argc, char **argv)
{
	/* Helper modes for the exec cases */
	if (argc == 3 && !strcmp(argv[1], "--exec-use-fd"))
		return exec_use_fd(atoi(argv[2]));
	if (argc == 3 && !strcmp(argv[1], "--exec-fd-closed"))
		return exec_fd_closed(atoi(argv[2]));
	return test_harness_run(argc, argv);
}
