// SPDX-License-Identifier: GPL-2.0
/*
 * Failure semantics: what a program sees when the peer resets or closes
 * the connection, and the options and ioctls programs set to find out.
 * Every case runs twice in this guest, on TCP and on AF_RSTREAM (the
 * fixtures' variants), and expects the same of both: TCP is the
 * reference, so a case that fails only on AF_RSTREAM is a difference.
 *
 * Client and server talk over this guest's RDMA device (and its TCP
 * stack) at RSTREAM_ADDR4 (default 192.0.2.1).  Every blocking call is
 * bounded by an alarm, which fails it with ETIME and names the case.
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
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <linux/sockios.h>

#include "kselftest_harness.h"
#include "rstream_util.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wclobbered"
#endif

#define GUARD_S		10	/* longest a blocking call may take */
#define PROMPT_MS	5000	/* for what must come promptly */
#define QUIET_MS	300	/* a sleeper is asleep by then */
#define SMALL_BUF	4096	/* socket buffers, so that a sender fills them */

/* The domain of a variant: TCP's or ours. */
enum transport { TCP, RDMA };

static const char *const transport_name[] = { "TCP", "AF_RSTREAM" };

static int make_socket(enum transport t)
{
	return socket(t == TCP ? AF_INET : rstream_family(), SOCK_STREAM, 0);
}

static void guest_addr(struct __test_metadata *_metadata,
		       struct sockaddr_in *sin)
{
	const char *str = getenv("RSTREAM_ADDR4") ?: "192.0.2.1";

	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	ASSERT_EQ(1, inet_pton(AF_INET, str, &sin->sin_addr));
}

static void set_int(struct __test_metadata *_metadata, int fd, int level,
		    int name, int val)
{
	ASSERT_EQ(0, setsockopt(fd, level, name, &val, sizeof(val)))
		TH_LOG("setsockopt %d/%d: %s", level, name, strerror(errno));
}

static int get_int(struct __test_metadata *_metadata, int fd, int level,
		   int name)
{
	socklen_t len = sizeof(int);
	int val = -1;

	EXPECT_EQ(0, getsockopt(fd, level, name, &val, &len))
		TH_LOG("getsockopt %d/%d: %s", level, name, strerror(errno));
	return val;
}

static int so_error(struct __test_metadata *_metadata, int fd)
{
	return get_int(_metadata, fd, SOL_SOCKET, SO_ERROR);
}

/*
 * A listener (its port chosen by the system) and a connection to it:
 * client @c, and, unless @s is NULL, the accepted @s.  @buf, if not 0,
 * is every socket's SO_SNDBUF and SO_RCVBUF.
 */
static void make_pair(struct __test_metadata *_metadata, enum transport t,
		      int buf, int *l, int *c, int *s)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	guest_addr(_metadata, &sin);
	*l = make_socket(t);
	ASSERT_LE(0, *l) TH_LOG("socket: %s", strerror(errno));
	set_int(_metadata, *l, SOL_SOCKET, SO_REUSEADDR, 1);
	if (buf) {
		set_int(_metadata, *l, SOL_SOCKET, SO_SNDBUF, buf);
		set_int(_metadata, *l, SOL_SOCKET, SO_RCVBUF, buf);
	}
	ASSERT_EQ(0, bind(*l, (struct sockaddr *)&sin, sizeof(sin)))
		TH_LOG("bind: %s", strerror(errno));
	ASSERT_EQ(0, listen(*l, 8));
	ASSERT_EQ(0, getsockname(*l, (struct sockaddr *)&sin, &len));
	*c = make_socket(t);
	ASSERT_LE(0, *c);
	if (buf) {
		set_int(_metadata, *c, SOL_SOCKET, SO_SNDBUF, buf);
		set_int(_metadata, *c, SOL_SOCKET, SO_RCVBUF, buf);
	}
	ASSERT_EQ(0, GUARDED(connect(*c, (struct sockaddr *)&sin,
				     sizeof(sin))))
		TH_LOG("connect: %s", strerror(errno));
	if (s) {
		*s = GUARDED(accept(*l, NULL, NULL));
		ASSERT_LE(0, *s) TH_LOG("accept: %s", strerror(errno));
	}
}

static void close_fd(int *fd)
{
	if (*fd >= 0)
		close(*fd);
	*fd = -1;
}

/* Close @fd as SO_LINGER with a zero time makes it: abortively. */
static int close_abort(int fd)
{
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };

	if (setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)))
		return errno;
	return errno_of(close(fd));
}

/* Nonblocking sends until @fd takes no more, twice (bytes were in flight). */
static void fill_up(struct __test_metadata *_metadata, int fd)
{
	static char buf[65536];
	size_t total = 0;
	int round;

	for (round = 0; round < 2; round++) {
		while (send(fd, buf, sizeof(buf),
			    MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
			total += sizeof(buf);
			ASSERT_GT((size_t)16 << 20, total)
				TH_LOG("16 MiB sent to a peer that reads none");
		}
		ASSERT_EQ(EAGAIN, errno) TH_LOG("send: %s", strerror(errno));
		usleep(100 * 1000);
	}
}

/* Whether SIGPIPE (blocked by the case) is pending; takes it if so. */
static bool took_sigpipe(void)
{
	sigset_t pending, set;
	int sig;

	sigpending(&pending);
	if (!sigismember(&pending, SIGPIPE))
		return false;
	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	sigwait(&set, &sig);
	return true;
}

static void block_sigpipe(struct __test_metadata *_metadata)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGPIPE);
	ASSERT_EQ(0, sigprocmask(SIG_BLOCK, &set, NULL));
	took_sigpipe();
}

/*
 * What a connection reset leaves for the calls after the one that
 * reported it: no error, EPIPE with SIGPIPE for a send, the end of the
 * stream for a read.
 */
static void after_reset(struct __test_metadata *_metadata, int fd)
{
	char b;

	EXPECT_EQ(0, so_error(_metadata, fd));
	EXPECT_EQ(EPIPE, errno_of(send(fd, "x", 1, 0)));
	EXPECT_TRUE(took_sigpipe()) TH_LOG("no SIGPIPE with EPIPE");
	EXPECT_EQ(0, GUARDED(recv(fd, &b, 1, 0)))
		TH_LOG("recv after the reset: %s", strerror(errno));
	EXPECT_EQ(0, so_error(_metadata, fd));
}

/* The peer's action, from a thread, after the caller went to sleep. */
struct later {
	int fd;
	long long at;
	int err;
	pthread_t tid;
};

static void *later_run(void *arg)
{
	struct later *l = arg;

	usleep(QUIET_MS * 1000);
	l->at = now_ms();
	l->err = close_abort(l->fd);
	return NULL;
}

static void later_start(struct __test_metadata *_metadata, struct later *l)
{
	sigset_t all, old;

	/* The thread takes no signals: the alarm is for the case's call. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	ASSERT_EQ(0, pthread_create(&l->tid, NULL, later_run, l));
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/*
 * The peer resets the connection while a call sleeps in it: the call
 * returns ECONNRESET (poll and epoll say POLLERR and POLLHUP, and
 * SO_ERROR then reads ECONNRESET), once; what follows is after_reset().
 */
enum asleep { IN_RECV, IN_SEND, IN_SENDMSG, IN_SPLICE, IN_SENDFILE, IN_POLL,
	      IN_EPOLL };

FIXTURE(asleep) {
	int l, c, s;
};

FIXTURE_VARIANT(asleep) {
	enum transport t;
	enum asleep op;
};

FIXTURE_VARIANT_ADD(asleep, TCP_recv) {
	.t = TCP, .op = IN_RECV,
};

FIXTURE_VARIANT_ADD(asleep, RDMA_recv) {
	.t = RDMA, .op = IN_RECV,
};

FIXTURE_VARIANT_ADD(asleep, TCP_send) {
	.t = TCP, .op = IN_SEND,
};

FIXTURE_VARIANT_ADD(asleep, RDMA_send) {
	.t = RDMA, .op = IN_SEND,
};

FIXTURE_VARIANT_ADD(asleep, TCP_sendmsg) {
	.t = TCP, .op = IN_SENDMSG,
};

FIXTURE_VARIANT_ADD(asleep, RDMA_sendmsg) {
	.t = RDMA, .op = IN_SENDMSG,
};

FIXTURE_VARIANT_ADD(asleep, TCP_splice) {
	.t = TCP, .op = IN_SPLICE,
};

FIXTURE_VARIANT_ADD(asleep, RDMA_splice) {
	.t = RDMA, .op = IN_SPLICE,
};

FIXTURE_VARIANT_ADD(asleep, TCP_sendfile) {
	.t = TCP, .op = IN_SENDFILE,
};

FIXTURE_VARIANT_ADD(asleep, RDMA_sendfile) {
	.t = RDMA, .op = IN_SENDFILE,
};

FIXTURE_VARIANT_ADD(asleep, TCP_poll) {
	.t = TCP, .op = IN_POLL,
};

FIXTURE_VARIANT_ADD(asleep, RDMA_poll) {
	.t = RDMA, .op = IN_POLL,
};

FIXTURE_VARIANT_ADD(asleep, TCP_epoll) {
	.t = TCP, .op = IN_EPOLL,
};

FIXTURE_VARIANT_ADD(asleep, RDMA_epoll) {
	.t = RDMA, .op = IN_EPOLL,
};

FIXTURE_SETUP(asleep)
{
	bool sends = variant->op == IN_SEND || variant->op == IN_SENDMSG ||
		     variant->op == IN_SENDFILE;

	guard_init();
	block_sigpipe(_metadata);
	self->l = -1;
	self->c = -1;
	self->s = -1;
	make_pair(_metadata, variant->t, SMALL_BUF, &self->l, &self->c,
		  &self->s);
	if (sends)
		fill_up(_metadata, self->c);
}

FIXTURE_TEARDOWN(asleep)
{
	close_fd(&self->s);
	close_fd(&self->c);
	close_fd(&self->l);
}

TEST_F(asleep, reset_reported_once)
{
	const int hup = POLLIN | POLLRDHUP | POLLERR | POLLHUP;
	struct later act = { .fd = self->s };
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct pollfd p = { .fd = self->c, .events = POLLIN | POLLRDHUP };
	static char buf[65536];
	struct iovec iov[2] = { { buf, 32768 }, { buf + 32768, 32768 } };
	struct msghdr msg = { .msg_iov = iov, .msg_iovlen = 2 };
	int ep = -1, pipefd[2] = { -1, -1 }, file = -1, err;
	unsigned int revents = 0;
	off_t off = 0;
	long long woken;
	long r = -1;

	if (variant->op == IN_EPOLL) {
		ep = epoll_create1(0);
		ASSERT_LE(0, ep);
		ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, self->c, &ev));
	}
	if (variant->op == IN_SPLICE)
		ASSERT_EQ(0, pipe(pipefd));
	if (variant->op == IN_SENDFILE) {
		file = memfd_create("sendfile", 0);
		ASSERT_LE(0, file);
		ASSERT_EQ((ssize_t)sizeof(buf), write(file, buf, sizeof(buf)));
	}
	later_start(_metadata, &act);
	switch (variant->op) {
	case IN_RECV:
		r = GUARDED(recv(self->c, buf, 16, 0));
		break;
	case IN_SEND:
		r = GUARDED(send(self->c, buf, sizeof(buf), 0));
		break;
	case IN_SENDMSG:
		r = GUARDED(sendmsg(self->c, &msg, 0));
		break;
	case IN_SPLICE:
		r = GUARDED(splice(self->c, NULL, pipefd[1], NULL, 4096, 0));
		break;
	case IN_SENDFILE:
		r = GUARDED(sendfile(self->c, file, &off, sizeof(buf)));
		break;
	case IN_POLL:
		r = GUARDED(poll(&p, 1, PROMPT_MS));
		revents = p.revents;
		break;
	case IN_EPOLL:
		r = GUARDED(epoll_wait(ep, &ev, 1, PROMPT_MS));
		revents = ev.events;
		break;
	}
	err = errno;
	woken = now_ms();
	pthread_join(act.tid, NULL);
	self->s = -1;
	ASSERT_EQ(0, act.err) TH_LOG("the peer's close: %s",
				     strerror(act.err));
	EXPECT_LE(act.at, woken) TH_LOG("returned before the peer acted");
	EXPECT_GT(act.at + PROMPT_MS, woken)
		TH_LOG("woken %lld ms after the reset", woken - act.at);
	if (variant->op == IN_POLL || variant->op == IN_EPOLL) {
		EXPECT_EQ(1, r) TH_LOG("%s: %s", transport_name[variant->t],
				       r < 0 ? strerror(err) : "nothing");
		EXPECT_EQ(hup, revents) TH_LOG("%s: revents %#x",
					       transport_name[variant->t],
					       revents);
		EXPECT_EQ(ECONNRESET, so_error(_metadata, self->c));
	} else {
		EXPECT_EQ(-1, r) TH_LOG("%s: returned %ld",
					transport_name[variant->t], r);
		EXPECT_EQ(ECONNRESET, err) TH_LOG("%s: %s",
						  transport_name[variant->t],
						  strerror(err));
		EXPECT_FALSE(took_sigpipe()) TH_LOG("SIGPIPE with ECONNRESET");
	}
	after_reset(_metadata, self->c);
	if (ep >= 0)
		close(ep);
	if (file >= 0)
		close(file);
	if (pipefd[0] >= 0) {
		close(pipefd[0]);
		close(pipefd[1]);
	}
}

/* How the peer's close reaches a connection, on TCP and on AF_RSTREAM. */
FIXTURE(closes) {
	int l, c, s;
};

FIXTURE_VARIANT(closes) {
	enum transport t;
};

FIXTURE_VARIANT_ADD(closes, TCP) {
	.t = TCP,
};

FIXTURE_VARIANT_ADD(closes, RDMA) {
	.t = RDMA,
};

FIXTURE_SETUP(closes)
{
	guard_init();
	block_sigpipe(_metadata);
	self->l = -1;
	self->c = -1;
	self->s = -1;
}

FIXTURE_TEARDOWN(closes)
{
	close_fd(&self->s);
	close_fd(&self->c);
	close_fd(&self->l);
}

/* @fd reads ECONNRESET (after any bytes that came before the reset). */
static void expect_reset(struct __test_metadata *_metadata, int fd)
{
	char buf[64];
	long r;

	while ((r = GUARDED(recv(fd, buf, sizeof(buf), 0))) > 0)
		;
	EXPECT_EQ(-1, r) TH_LOG("recv: %s", r ? "" : "end of stream");
	EXPECT_EQ(ECONNRESET, errno) TH_LOG("recv: %s", strerror(errno));
	after_reset(_metadata, fd);
}

/* @fd reads @want, then the end of the stream, and no error. */
static void expect_end(struct __test_metadata *_metadata, int fd,
		       const char *want)
{
	size_t len = strlen(want), got = 0;
	char buf[64];
	long r;

	while (got < sizeof(buf) &&
	       (r = GUARDED(recv(fd, buf + got, sizeof(buf) - got, 0))) > 0)
		got += r;
	EXPECT_EQ(0, r) TH_LOG("recv: %s", strerror(errno));
	EXPECT_EQ(len, got);
	EXPECT_EQ(0, memcmp(buf, want, len < got ? len : got));
	EXPECT_EQ(0, so_error(_metadata, fd));
}

TEST_F(closes, linger_zero_resets)
{
	make_pair(_metadata, variant->t, 0, &self->l, &self->c, &self->s);
	ASSERT_EQ(5, send(self->s, "data!", 5, 0));
	ASSERT_EQ(0, close_abort(self->s));
	self->s = -1;
	expect_reset(_metadata, self->c);
}

TEST_F(closes, close_with_unread_data_resets)
{
	struct pollfd p;

	make_pair(_metadata, variant->t, 0, &self->l, &self->c, &self->s);
	ASSERT_EQ(5, send(self->c, "data!", 5, 0));
	p.fd = self->s;
	p.events = POLLIN;
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS));
	close_fd(&self->s);
	expect_reset(_metadata, self->c);
}

/*
 * The same with the bytes acknowledged to the sender and not yet seen by
 * the closing side: on AF_RSTREAM their completion may still wait in the
 * CQ, which nobody asked to be told of (it is armed only for a waiter),
 * and close() must look there (before, it did not, and the peer read a
 * clean end).  The closing side looked at the socket just before, so the
 * CQ's backstop (one tick) has not armed it yet.
 */
TEST_F(closes, close_with_unseen_data_resets)
{
	int i, v, round, resets = 0;
	char b;

	for (round = 0; round < 8; round++) {
		make_pair(_metadata, variant->t, 0, &self->l, &self->c,
			  &self->s);
		ASSERT_EQ(-1, recv(self->s, &b, 1, MSG_DONTWAIT));
		ASSERT_EQ(5, send(self->c, "data!", 5, 0));
		for (i = 0; i < 10 * PROMPT_MS; i++) {
			ASSERT_EQ(0, ioctl(self->c, SIOCOUTQ, &v));
			if (!v)
				break;
			usleep(100);
		}
		ASSERT_EQ(0, v) TH_LOG("%d bytes never acknowledged", v);
		close_fd(&self->s);
		while ((v = GUARDED(recv(self->c, &b, 1, 0))) > 0)
			;
		if (v < 0 && errno == ECONNRESET)
			resets++;
		close_fd(&self->c);
		close_fd(&self->l);
	}
	EXPECT_EQ(8, resets) TH_LOG("%s: %d of 8 closes reset",
				    transport_name[variant->t], resets);
}

TEST_F(closes, listener_close_resets_unaccepted)
{
	struct pollfd p;

	make_pair(_metadata, variant->t, 0, &self->l, &self->c, NULL);
	p.fd = self->l;
	p.events = POLLIN;
	ASSERT_EQ(1, poll(&p, 1, PROMPT_MS)) TH_LOG("nothing to accept");
	close_fd(&self->l);
	expect_reset(_metadata, self->c);
}

TEST_F(closes, graceful_close_ends_stream)
{
	long long end;
	int err = 0;

	make_pair(_metadata, variant->t, 0, &self->l, &self->c, &self->s);
	ASSERT_EQ(4, send(self->s, "bye!", 4, 0));
	close_fd(&self->s);
	expect_end(_metadata, self->c, "bye!");
	/* TCP takes one more send, which the peer answers with a reset. */
	for (end = now_ms() + PROMPT_MS; !err && now_ms() < end;
	     usleep(20 * 1000))
		err = errno_of(send(self->c, "x", 1, MSG_NOSIGNAL));
	EXPECT_EQ(EPIPE, err) TH_LOG("send: %s", strerror(err));
}

TEST_F(closes, shutdown_then_peer_close_ends_stream)
{
	make_pair(_metadata, variant->t, 0, &self->l, &self->c, &self->s);
	ASSERT_EQ(0, shutdown(self->c, SHUT_RDWR));
	expect_end(_metadata, self->s, "");
	close_fd(&self->s);
	usleep(QUIET_MS * 1000);
	expect_end(_metadata, self->c, "");
}

TEST_F(closes, both_shut_then_close_ends_stream)
{
	make_pair(_metadata, variant->t, 0, &self->l, &self->c, &self->s);
	ASSERT_EQ(0, shutdown(self->c, SHUT_WR));
	expect_end(_metadata, self->s, "");
	ASSERT_EQ(0, shutdown(self->s, SHUT_WR));
	expect_end(_metadata, self->c, "");
	close_fd(&self->c);
	usleep(QUIET_MS * 1000);
	expect_end(_metadata, self->s, "");
}

TEST_F(closes, peer_shutdown_then_close_ends_stream)
{
	make_pair(_metadata, variant->t, 0, &self->l, &self->c, &self->s);
	ASSERT_EQ(4, send(self->s, "bye!", 4, 0));
	ASSERT_EQ(0, shutdown(self->s, SHUT_WR));
	usleep(QUIET_MS * 1000);
	close_fd(&self->s);
	expect_end(_metadata, self->c, "bye!");
}

/* TCP's liveness options, as TCP takes them. */
FIXTURE(live) {
	int l, c, s;
};

FIXTURE_VARIANT(live) {
	enum transport t;
};

FIXTURE_VARIANT_ADD(live, TCP) {
	.t = TCP,
};

FIXTURE_VARIANT_ADD(live, RDMA) {
	.t = RDMA,
};

FIXTURE_SETUP(live)
{
	guard_init();
	block_sigpipe(_metadata);
	self->l = -1;
	self->c = -1;
	self->s = -1;
}

FIXTURE_TEARDOWN(live)
{
	close_fd(&self->s);
	close_fd(&self->c);
	close_fd(&self->l);
}

static int sysctl_int(const char *name)
{
	char path[128];

	snprintf(path, sizeof(path), "/proc/sys/net/ipv4/%s", name);
	return rstream_read_int(path);
}

/* Unset, they read the namespace's sysctls, as TCP's do. */
TEST_F(live, defaults_are_the_sysctls)
{
	self->c = make_socket(variant->t);
	ASSERT_LE(0, self->c);
	EXPECT_EQ(0, get_int(_metadata, self->c, SOL_SOCKET, SO_KEEPALIVE));
	EXPECT_EQ(sysctl_int("tcp_keepalive_time"),
		  get_int(_metadata, self->c, SOL_TCP, TCP_KEEPIDLE));
	EXPECT_EQ(sysctl_int("tcp_keepalive_intvl"),
		  get_int(_metadata, self->c, SOL_TCP, TCP_KEEPINTVL));
	EXPECT_EQ(sysctl_int("tcp_keepalive_probes"),
		  get_int(_metadata, self->c, SOL_TCP, TCP_KEEPCNT));
	EXPECT_EQ(0, get_int(_metadata, self->c, SOL_TCP, TCP_USER_TIMEOUT));
}

/* TCP's limits, and what was set reads back. */
TEST_F(live, limits_as_tcp)
{
	static const struct { int name, val, err; } cases[] = {
		{ TCP_KEEPIDLE, 0, EINVAL }, { TCP_KEEPIDLE, 32768, EINVAL },
		{ TCP_KEEPIDLE, 32767, 0 }, { TCP_KEEPIDLE, 1, 0 },
		{ TCP_KEEPINTVL, 0, EINVAL }, { TCP_KEEPINTVL, 32768, EINVAL },
		{ TCP_KEEPINTVL, 32767, 0 }, { TCP_KEEPINTVL, 1, 0 },
		{ TCP_KEEPCNT, 0, EINVAL }, { TCP_KEEPCNT, 128, EINVAL },
		{ TCP_KEEPCNT, 127, 0 }, { TCP_KEEPCNT, 1, 0 },
		{ TCP_USER_TIMEOUT, -1, EINVAL },
		{ TCP_USER_TIMEOUT, 0x7fffffff, 0 }, { TCP_USER_TIMEOUT, 0, 0 },
		{ TCP_QUICKACK, 1, 0 }, { TCP_QUICKACK, 0, 0 },
	};
	unsigned int i;

	self->c = make_socket(variant->t);
	ASSERT_LE(0, self->c);
	for (i = 0; i < ARRAY_SIZE(cases); i++) {
		int v = cases[i].val;

		EXPECT_EQ(cases[i].err,
			  errno_of(setsockopt(self->c, SOL_TCP, cases[i].name,
					      &v, sizeof(v))))
			TH_LOG("option %d = %d", cases[i].name, v);
		if (!cases[i].err && cases[i].name != TCP_QUICKACK)
			EXPECT_EQ(v, get_int(_metadata, self->c, SOL_TCP,
					     cases[i].name))
				TH_LOG("option %d", cases[i].name);
	}
}

/* An accepted connection has its listener's settings. */
TEST_F(live, accepted_inherit)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);

	guest_addr(_metadata, &sin);
	self->l = make_socket(variant->t);
	ASSERT_LE(0, self->l);
	set_int(_metadata, self->l, SOL_SOCKET, SO_KEEPALIVE, 1);
	set_int(_metadata, self->l, SOL_TCP, TCP_KEEPIDLE, 77);
	set_int(_metadata, self->l, SOL_TCP, TCP_KEEPINTVL, 7);
	set_int(_metadata, self->l, SOL_TCP, TCP_KEEPCNT, 5);
	set_int(_metadata, self->l, SOL_TCP, TCP_USER_TIMEOUT, 4321);
	ASSERT_EQ(0, bind(self->l, (struct sockaddr *)&sin, sizeof(sin)));
	ASSERT_EQ(0, listen(self->l, 4));
	ASSERT_EQ(0, getsockname(self->l, (struct sockaddr *)&sin, &len));
	self->c = make_socket(variant->t);
	ASSERT_LE(0, self->c);
	ASSERT_EQ(0, GUARDED(connect(self->c, (struct sockaddr *)&sin,
				     sizeof(sin))));
	self->s = GUARDED(accept(self->l, NULL, NULL));
	ASSERT_LE(0, self->s);
	EXPECT_EQ(1, get_int(_metadata, self->s, SOL_SOCKET, SO_KEEPALIVE));
	EXPECT_EQ(77, get_int(_metadata, self->s, SOL_TCP, TCP_KEEPIDLE));
	EXPECT_EQ(7, get_int(_metadata, self->s, SOL_TCP, TCP_KEEPINTVL));
	EXPECT_EQ(5, get_int(_metadata, self->s, SOL_TCP, TCP_KEEPCNT));
	EXPECT_EQ(4321, get_int(_metadata, self->s, SOL_TCP,
				TCP_USER_TIMEOUT));
}

/*
 * A live peer answers the probes: an idle connection probed every second
 * for four, with one probe allowed to go unanswered, stays up.
 */
TEST_F(live, live_peer_answers_probes)
{
	char b;

	make_pair(_metadata, variant->t, 0, &self->l, &self->c, &self->s);
	set_int(_metadata, self->c, SOL_SOCKET, SO_KEEPALIVE, 1);
	set_int(_metadata, self->c, SOL_TCP, TCP_KEEPIDLE, 1);
	set_int(_metadata, self->c, SOL_TCP, TCP_KEEPINTVL, 1);
	set_int(_metadata, self->c, SOL_TCP, TCP_KEEPCNT, 1);
	sleep(4);
	EXPECT_EQ(0, so_error(_metadata, self->c));
	EXPECT_EQ(0, so_error(_metadata, self->s));
	ASSERT_EQ(1, send(self->s, "x", 1, MSG_NOSIGNAL));
	EXPECT_EQ(1, GUARDED(recv(self->c, &b, 1, 0)))
		TH_LOG("recv: %s", strerror(errno));
	EXPECT_EQ(1, send(self->c, "x", 1, MSG_NOSIGNAL))
		TH_LOG("send: %s", strerror(errno));
}

/*
 * TCP_USER_TIMEOUT bounds how long a sender waits for a peer that reads
 * nothing, even one that answers: the sender gets ETIMEDOUT, the peer
 * reads what came, then ECONNRESET.  Without it the sender waits on.
 */
TEST_F(live, user_timeout_bounds_a_closed_window)
{
	int quiet = -1, l2 = -1, s2 = -1;
	char b;

	make_pair(_metadata, variant->t, SMALL_BUF, &self->l, &self->c,
		  &self->s);
	make_pair(_metadata, variant->t, SMALL_BUF, &l2, &quiet, &s2);
	set_int(_metadata, self->s, SOL_TCP, TCP_USER_TIMEOUT, 1000);
	fill_up(_metadata, self->s);
	fill_up(_metadata, s2);
	sleep(3);
	EXPECT_EQ(ETIMEDOUT, so_error(_metadata, self->s));
	expect_reset(_metadata, self->c);
	EXPECT_EQ(0, so_error(_metadata, s2));
	EXPECT_EQ(1, GUARDED(recv(quiet, &b, 1, 0)));
	close(s2);
	close(quiet);
	close(l2);
}

/*
 * TCP_INFO's times: a round trip measured, the data's last moves; on
 * AF_RSTREAM the round trip is a write's, from its post to its completion.
 */
TEST_F(live, tcp_info_times)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	char b;

	make_pair(_metadata, variant->t, 0, &self->l, &self->c, &self->s);
	ASSERT_EQ(1, send(self->c, "x", 1, 0));
	ASSERT_EQ(1, GUARDED(recv(self->s, &b, 1, 0)));
	ASSERT_EQ(1, send(self->s, "y", 1, 0));
	ASSERT_EQ(1, GUARDED(recv(self->c, &b, 1, 0)));
	ASSERT_EQ(0, getsockopt(self->c, SOL_TCP, TCP_INFO, &ti, &len));
	EXPECT_LT(0U, ti.tcpi_rtt);
	EXPECT_GT(1000000U, ti.tcpi_rtt);
	EXPECT_GT(500U, ti.tcpi_last_data_sent);
	EXPECT_GT(500U, ti.tcpi_last_data_recv);
	usleep(700 * 1000);
	ASSERT_EQ(0, getsockopt(self->c, SOL_TCP, TCP_INFO, &ti, &len));
	EXPECT_LE(600U, ti.tcpi_last_data_sent);
	EXPECT_LE(600U, ti.tcpi_last_data_recv);
	EXPECT_LE(600U, ti.tcpi_last_ack_recv);
	EXPECT_GT(5000U, ti.tcpi_last_data_sent);
}

TEST_HARNESS_MAIN
