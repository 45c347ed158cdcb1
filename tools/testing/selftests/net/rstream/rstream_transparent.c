// SPDX-License-Identifier: GPL-2.0
/*
 * Transparent sockets: what a program sees of a TCP socket that rstream-run
 * converted, and the AF_RSTREAM sockets that are TCP until RDMA is proven
 * (RSTREAM_PROTO_TCP4/6) underneath.
 *
 * Run under librstream-preload.so (rstream_transparent.sh does), so that a
 * plain socket(AF_INET, SOCK_STREAM, 0) here is converted, as in any
 * program: the fixture "conv" uses only the sockets API a TCP program
 * uses.  A plain TCP socket the preload does not touch is made with the
 * system call itself (tcp_socket()).  The other fixtures use the
 * transparent sockets' own API.
 *
 * Client and server run in this guest over its RDMA device, at
 * RSTREAM_ADDR4 and RSTREAM_ADDR6 (default 192.0.2.1 and 2001:db8::1);
 * RSTREAM_NODEV names a netdev with no RDMA device and no address (the
 * wrapper makes it).  Every blocking step is bounded; a call an alarm
 * interrupts fails its case with ETIME.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <rdma/rdma_cma.h>
#include <linux/errqueue.h>
#include <linux/filter.h>
#include <linux/rstream.h>

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
#define AT_ONCE_MS	100	/* for a call that must not wait at all */
#define FALLBACK_MS	3000	/* a transparent socket's RDMA time limit */

/* How much slower than a stock kernel this one is (the debug kernel's). */
static int time_scale(void)
{
	const char *v = getenv("RSTREAM_TIME_SCALE");

	return v && atoi(v) > 0 ? atoi(v) : 1;
}

/* A socket address of this host, port @port, of @family. */
struct ep {
	struct sockaddr_storage ss;
	socklen_t len;
};

#define SA(ep)	((struct sockaddr *)&(ep)->ss)

static void ep_host(struct ep *ep, int family, int port)
{
	const char *a4 = getenv("RSTREAM_ADDR4") ?: "192.0.2.1";
	const char *a6 = getenv("RSTREAM_ADDR6") ?: "2001:db8::1";
	struct sockaddr_in *sin = (struct sockaddr_in *)&ep->ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ep->ss;

	memset(ep, 0, sizeof(*ep));
	if (family == AF_INET) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(port);
		inet_pton(AF_INET, a4, &sin->sin_addr);
		ep->len = sizeof(*sin);
	} else {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(port);
		inet_pton(AF_INET6, a6, &sin6->sin6_addr);
		ep->len = sizeof(*sin6);
	}
}

static int ep_port(const struct ep *ep)
{
	return ntohs(ep->ss.ss_family == AF_INET ?
		     ((struct sockaddr_in *)&ep->ss)->sin_port :
		     ((struct sockaddr_in6 *)&ep->ss)->sin6_port);
}

static void name_of(int fd, bool peer, struct ep *ep)
{
	memset(ep, 0, sizeof(*ep));
	ep->len = sizeof(ep->ss);
	if (peer)
		getpeername(fd, SA(ep), &ep->len);
	else
		getsockname(fd, SA(ep), &ep->len);
}

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

/* A TCP socket the preload does not convert: the system call itself. */
static int tcp_socket(int family)
{
	return syscall(SYS_socket, family, SOCK_STREAM, 0);
}

static int transparent_socket(int family, int flags)
{
	return socket(rstream_family(), SOCK_STREAM | flags,
		      family == AF_INET6 ? RSTREAM_PROTO_TCP6 :
					   RSTREAM_PROTO_TCP4);
}

/* @fd, a new socket, listening on this host. */
static int listener_on(struct __test_metadata *_metadata, int fd,
		       int family, struct ep *bound)
{
	struct ep at;

	ep_host(&at, family, 0);
	ASSERT_LE(0, fd) TH_LOG("socket: %s", strerror(errno));
	ASSERT_EQ(0, bind(fd, SA(&at), at.len))
		TH_LOG("bind: %s", strerror(errno));
	ASSERT_EQ(0, listen(fd, 16)) TH_LOG("listen: %s", strerror(errno));
	name_of(fd, false, bound);
	return fd;
}

/* A blocking client of @dst, made by @fd. */
static int client_on(struct __test_metadata *_metadata, int fd,
		     const struct ep *dst)
{
	ASSERT_LE(0, fd) TH_LOG("socket: %s", strerror(errno));
	ASSERT_EQ(0, GUARDED(connect(fd, SA(dst), dst->len)))
		TH_LOG("connect: %s", strerror(errno));
	return fd;
}

static int accept_one(struct __test_metadata *_metadata, int l)
{
	int s = GUARDED(accept(l, NULL, NULL));

	ASSERT_LE(0, s) TH_LOG("accept: %s", strerror(errno));
	return s;
}

/* Wait for @events on @fd; the events seen, 0 if none in @ms. */
static int wait_for(int fd, short events, int ms)
{
	struct pollfd p = { .fd = fd, .events = events };

	return poll(&p, 1, ms) == 1 ? p.revents : 0;
}

/* @msg from @from, received in full at @to, blocking or not. */
static void carry(struct __test_metadata *_metadata, int from, int to,
		  const char *msg)
{
	size_t n = strlen(msg), got = 0;
	char buf[64];
	ssize_t r;

	ASSERT_EQ((ssize_t)n, send(from, msg, n, MSG_NOSIGNAL))
		TH_LOG("send: %s", strerror(errno));
	while (got < n) {
		ASSERT_TRUE(wait_for(to, POLLIN, PROMPT_MS) & POLLIN)
			TH_LOG("%zu of %zu bytes came", got, n);
		r = recv(to, buf + got, n - got, MSG_DONTWAIT);
		ASSERT_LT(0, r) TH_LOG("recv: %s", r ? strerror(errno) : "EOF");
		got += r;
	}
	ASSERT_EQ(0, memcmp(buf, msg, n));
}

static void both_ways(struct __test_metadata *_metadata, int c, int s)
{
	carry(_metadata, c, s, "ping");
	carry(_metadata, s, c, "pong");
}

/* A nonblocking connect's end: 0 once made, else its errno (ETIME: none). */
static int connect_end(int fd, int ms)
{
	int err = ETIME;

	if (wait_for(fd, POLLOUT, ms))
		err = int_opt(fd, SOL_SOCKET, SO_ERROR);
	return err;
}

static atomic_int sigio_count;

static void on_sigio(int sig)
{
	sigio_count++;
}

/* SIGIO to this process for @fd, O_ASYNC on. */
static void want_sigio(struct __test_metadata *_metadata, int fd)
{
	struct sigaction sa = { .sa_handler = on_sigio };

	sigaction(SIGIO, &sa, NULL);
	ASSERT_EQ(0, fcntl(fd, F_SETOWN, getpid()));
	ASSERT_EQ(0, fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC));
	sigio_count = 0;
}

/* Up to 5 s for a SIGIO. */
static bool got_sigio(void)
{
	for (int i = 0; i < 50 && !sigio_count; i++)
		usleep(100 * 1000);
	return sigio_count > 0;
}

/*
 * The program's view: TCP sockets rstream-run converted.
 */

enum nonblock_how { BY_FCNTL, BY_FIONBIO };

static void set_nonblocking(struct __test_metadata *_metadata, int fd,
			    enum nonblock_how how)
{
	int on = 1, ret;

	ret = how == BY_FCNTL ?
	      fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) :
	      ioctl(fd, FIONBIO, &on);
	ASSERT_EQ(0, ret) TH_LOG("%s", strerror(errno));
}

FIXTURE(conv) {
	int unused;
};

FIXTURE_VARIANT(conv) {
	int family;
	enum nonblock_how how;
};

FIXTURE_VARIANT_ADD(conv, ipv4_fcntl) {
	.family = AF_INET, .how = BY_FCNTL,
};

FIXTURE_VARIANT_ADD(conv, ipv4_fionbio) {
	.family = AF_INET, .how = BY_FIONBIO,
};

FIXTURE_VARIANT_ADD(conv, ipv6_fcntl) {
	.family = AF_INET6, .how = BY_FCNTL,
};

FIXTURE_VARIANT_ADD(conv, ipv6_fionbio) {
	.family = AF_INET6, .how = BY_FIONBIO,
};

FIXTURE_SETUP(conv)
{
	struct sigaction sa = { .sa_handler = rstream_on_alarm };

	sigaction(SIGALRM, &sa, NULL);
}

FIXTURE_TEARDOWN(conv)
{
}

/*
 * Made nonblocking after socket(), before connect(): once connected, a
 * read with nothing to read returns EAGAIN at once.  The preload once put
 * a blocking socket in the descriptor's place, and the read blocked.
 */
TEST_F(conv, nonblocking_before_connect_stays)
{
	struct ep bound;
	int l = listener_on(_metadata, socket(variant->family, SOCK_STREAM, 0),
			    variant->family, &bound);
	int c = socket(variant->family, SOCK_STREAM, 0);
	long long t0;
	char b;
	int s, err;

	ASSERT_LE(0, c);
	set_nonblocking(_metadata, c, variant->how);
	err = errno_of(connect(c, SA(&bound), bound.len));
	ASSERT_TRUE(!err || err == EINPROGRESS) TH_LOG("connect: %s", strerror(err));
	ASSERT_EQ(0, connect_end(c, PROMPT_MS));
	s = accept_one(_metadata, l);
	EXPECT_TRUE(fcntl(c, F_GETFL) & O_NONBLOCK);
	t0 = now_ms();
	EXPECT_EQ(EAGAIN, errno_of(GUARDED_S(2, read(c, &b, 1))))
		TH_LOG("read: %s after %lld ms", strerror(errno), now_ms() - t0);
	EXPECT_GT(AT_ONCE_MS * time_scale(), now_ms() - t0);
	both_ways(_metadata, c, s);
	close(s);
	close(c);
	close(l);
}

/* Made nonblocking before listen(): accept() with nobody there: EAGAIN. */
TEST_F(conv, nonblocking_before_listen_stays)
{
	int l = socket(variant->family, SOCK_STREAM, 0);
	struct ep bound, at;
	long long t0;

	ASSERT_LE(0, l);
	set_nonblocking(_metadata, l, variant->how);
	ep_host(&at, variant->family, 0);
	ASSERT_EQ(0, bind(l, SA(&at), at.len));
	ASSERT_EQ(0, listen(l, 4));
	name_of(l, false, &bound);
	t0 = now_ms();
	EXPECT_EQ(EAGAIN, errno_of(GUARDED_S(2, accept(l, NULL, NULL))))
		TH_LOG("accept: %s after %lld ms", strerror(errno),
		       now_ms() - t0);
	EXPECT_GT(AT_ONCE_MS * time_scale(), now_ms() - t0);
	EXPECT_TRUE(fcntl(l, F_GETFL) & O_NONBLOCK);
	close(l);
}

/*
 * An epoll set that took the socket before connect() hears that it
 * connected; one that took it before listen() hears of a client.
 */
TEST_F(conv, epoll_before_connect_and_listen)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int ep = epoll_create1(0);
	int l = socket(variant->family, SOCK_STREAM, 0);
	struct ep bound, at;
	int c, s, err;

	ASSERT_LE(0, ep);
	ASSERT_LE(0, l);
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev));
	ep_host(&at, variant->family, 0);
	ASSERT_EQ(0, bind(l, SA(&at), at.len));
	ASSERT_EQ(0, listen(l, 4));
	name_of(l, false, &bound);

	c = socket(variant->family, SOCK_STREAM, 0);
	ASSERT_LE(0, c);
	set_nonblocking(_metadata, c, variant->how);
	ev.events = EPOLLOUT | EPOLLET;
	ev.data.fd = c;
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, c, &ev));
	err = errno_of(connect(c, SA(&bound), bound.len));
	ASSERT_TRUE(!err || err == EINPROGRESS) TH_LOG("connect: %s", strerror(err));

	/* Both: the listener's client and the client's connection. */
	for (int seen = 0; seen != 3;) {
		ASSERT_EQ(1, epoll_wait(ep, &ev, 1, PROMPT_MS))
			TH_LOG("epoll heard %s of the two", seen ? "one" : "none");
		EXPECT_EQ(0, (int)(ev.events & (EPOLLERR | EPOLLHUP)));
		seen |= ev.data.fd == c ? 1 : 2;
		if (ev.data.fd != c) {
			ev.events = EPOLLIN;
			ev.data.fd = l;
			epoll_ctl(ep, EPOLL_CTL_DEL, l, NULL);
		}
	}
	EXPECT_EQ(0, int_opt(c, SOL_SOCKET, SO_ERROR));
	s = accept_one(_metadata, l);
	both_ways(_metadata, c, s);
	close(s);
	close(c);
	close(l);
	close(ep);
}

/*
 * O_ASYNC and F_SETOWN set before connect(): the connection's data raises
 * SIGIO.  The preload once left them on the socket it put aside.
 */
TEST_F(conv, sigio_owner_before_connect)
{
	struct ep bound;
	int l = listener_on(_metadata, socket(variant->family, SOCK_STREAM, 0),
			    variant->family, &bound);
	int c = socket(variant->family, SOCK_STREAM, 0), s;

	ASSERT_LE(0, c);
	want_sigio(_metadata, c);
	client_on(_metadata, c, &bound);
	s = accept_one(_metadata, l);
	sigio_count = 0;
	ASSERT_EQ(1, send(s, "x", 1, 0));
	EXPECT_TRUE(got_sigio()) TH_LOG("no SIGIO for the data");
	EXPECT_TRUE(fcntl(c, F_GETFL) & O_ASYNC);
	close(s);
	close(c);
	close(l);
}

/*
 * TCP's options work on the listener after listen(): TCP_DEFER_ACCEPT
 * holds a TCP client that has sent nothing back from accept(), and lets
 * it through with its first bytes.
 */
TEST_F(conv, defer_accept_after_listen)
{
	struct ep bound;
	int l = listener_on(_metadata, socket(variant->family, SOCK_STREAM, 0),
			    variant->family, &bound);
	int c, s;
	char b;

	ASSERT_EQ(0, set_int(l, SOL_TCP, TCP_DEFER_ACCEPT, 1))
		TH_LOG("TCP_DEFER_ACCEPT: %s", strerror(errno));
	EXPECT_LT(0, int_opt(l, SOL_TCP, TCP_DEFER_ACCEPT));
	set_nonblocking(_metadata, l, variant->how);
	c = client_on(_metadata, tcp_socket(variant->family), &bound);
	EXPECT_EQ(0, wait_for(l, POLLIN, 500))
		TH_LOG("a client that sent nothing was ready to accept");
	EXPECT_EQ(EAGAIN, errno_of(accept(l, NULL, NULL)));
	ASSERT_EQ(1, send(c, "x", 1, 0));
	ASSERT_EQ(POLLIN, wait_for(l, POLLIN, PROMPT_MS))
		TH_LOG("the client's first byte did not let it through");
	s = accept(l, NULL, NULL);
	ASSERT_LE(0, s) TH_LOG("accept: %s", strerror(errno));
	ASSERT_EQ(1, GUARDED(recv(s, &b, 1, 0)));
	close(s);
	close(c);
	close(l);
}

FIXTURE(prog) {
	int unused;
};

FIXTURE_SETUP(prog)
{
	struct sigaction sa = { .sa_handler = rstream_on_alarm };

	sigaction(SIGALRM, &sa, NULL);
}

FIXTURE_TEARDOWN(prog)
{
}

/* Threads that make and close sockets until told to stop. */
struct churn {
	atomic_bool stop;
	atomic_long made;
	int nthreads;
	pthread_t tid[2];
};

static void *churn_thread(void *arg)
{
	struct churn *ch = arg;

	while (!ch->stop) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);

		if (fd >= 0)
			close(fd);
		ch->made++;
	}
	return NULL;
}

static void churn_start(struct churn *ch)
{
	for (ch->nthreads = 0; ch->nthreads < 2; ch->nthreads++)
		pthread_create(&ch->tid[ch->nthreads], NULL, churn_thread, ch);
}

/* Stop them: true if every one ended within @ms. */
static bool churn_stop(struct churn *ch, int ms)
{
	struct timespec until;
	bool all = true;

	ch->stop = true;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ms / 1000;
	for (int i = 0; i < ch->nthreads; i++)
		if (pthread_timedjoin_np(ch->tid[i], NULL, &until))
			all = false;
	return all;
}

static void on_usr1(int sig)
{
	int err = errno;

	close(-1);
	errno = err;
}

/*
 * close() in a signal handler that interrupts socket(): the preload's
 * wrappers once took a mutex there and deadlocked the thread on itself.
 */
TEST_F_TIMEOUT(prog, close_in_signal_handler_during_socket, 60)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	struct churn ch = {};
	long long end = now_ms() + 2000;
	long signals = 0;

	sigaction(SIGUSR1, &sa, NULL);
	churn_start(&ch);
	while (now_ms() < end) {
		for (int i = 0; i < ch.nthreads; i++)
			pthread_kill(ch.tid[i], SIGUSR1);
		signals++;
		usleep(50);
	}
	ASSERT_TRUE(churn_stop(&ch, 5000))
		TH_LOG("a thread making sockets hung after %ld signals, %ld sockets",
		       signals, (long)ch.made);
	TH_LOG("%ld sockets made and closed under %ld signals", (long)ch.made,
	       signals);
}

/*
 * fork() while other threads make sockets: the child makes a socket of its
 * own at once.  A lock held by a thread that does not exist in the child
 * once left it hanging.
 */
TEST_F_TIMEOUT(prog, fork_while_threads_make_sockets, 120)
{
	struct churn ch = {};
	int hung = 0;

	churn_start(&ch);
	for (int i = 0; i < 200 && !hung; i++) {
		long long give_up = now_ms() + 5000 * time_scale();
		pid_t pid = fork();
		int status;

		ASSERT_LE(0, pid);
		if (!pid) {
			int fd = socket(AF_INET, SOCK_STREAM, 0);

			_exit(fd < 0 || close(fd) ? 1 : 0);
		}
		while (!waitpid(pid, &status, WNOHANG)) {
			if (now_ms() > give_up) {
				hung = i + 1;
				kill(pid, SIGKILL);
				waitpid(pid, &status, 0);
				break;
			}
			usleep(1000);
		}
		if (!hung)
			EXPECT_EQ(0, status);
	}
	EXPECT_TRUE(churn_stop(&ch, 5000));
	EXPECT_EQ(0, hung) TH_LOG("child %d hung in socket()", hung);
}

/*
 * A descriptor closed behind the preload's back (close_range()) and taken
 * again by a socket it never saw: the new socket connects as itself,
 * without the old one's address or options.
 */
TEST_F(prog, close_range_leaves_nothing_behind)
{
	struct ep bound, at, name;
	int l = listener_on(_metadata, socket(AF_INET, SOCK_STREAM, 0),
			    AF_INET, &bound);
	int s = socket(AF_INET, SOCK_STREAM, 0), t, a;

	ASSERT_LE(0, s);
	/* A port of its own, which the preload kept and replayed. */
	ep_host(&at, AF_INET, 20650);
	ASSERT_EQ(0, set_int(s, SOL_SOCKET, SO_REUSEADDR, 1));
	ASSERT_EQ(0, bind(s, SA(&at), at.len)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, syscall(SYS_close_range, s, s, 0));
	t = tcp_socket(AF_INET);
	ASSERT_EQ(s, t) TH_LOG("the new socket is %d, not %d", t, s);
	client_on(_metadata, t, &bound);
	name_of(t, false, &name);
	EXPECT_NE(ep_port(&at), ep_port(&name))
		TH_LOG("connected from port %d, the closed socket's", ep_port(&name));
	a = accept_one(_metadata, l);
	both_ways(_metadata, t, a);
	close(a);
	close(t);
	close(l);
}

/* The interface that has this host's address: the RDMA device's netdev. */
static void rdma_netdev(struct __test_metadata *_metadata, char *name)
{
	struct ifaddrs *ifa, *i;
	struct ep host;

	ep_host(&host, AF_INET, 0);
	ASSERT_EQ(0, getifaddrs(&ifa));
	name[0] = 0;
	for (i = ifa; i; i = i->ifa_next)
		if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET &&
		    ((struct sockaddr_in *)i->ifa_addr)->sin_addr.s_addr ==
		    ((struct sockaddr_in *)&host.ss)->sin_addr.s_addr)
			snprintf(name, IFNAMSIZ, "%s", i->ifa_name);
	freeifaddrs(ifa);
	ASSERT_NE(0, name[0]) TH_LOG("no interface has this host's address");
}

/*
 * SO_BINDTODEVICE: through the RDMA device's netdev, a connection is made
 * over RDMA; through a netdev with no route to the address, over neither
 * RDMA nor TCP: the device is honoured on both paths.
 */
TEST_F_TIMEOUT(prog, bindtodevice_both_paths, 60)
{
	const char *nodev = getenv("RSTREAM_NODEV") ?: "rsnodev0";
	char dev[IFNAMSIZ];
	struct ep bound;
	int l = listener_on(_metadata, socket(AF_INET, SOCK_STREAM, 0),
			    AF_INET, &bound);
	int c, s, err, paths[] = { RSTREAM_PATH_RDMA, RSTREAM_PATH_TCP };

	rdma_netdev(_metadata, dev);
	c = socket(AF_INET, SOCK_STREAM, 0);
	ASSERT_EQ(0, setsockopt(c, SOL_SOCKET, SO_BINDTODEVICE, dev, strlen(dev)));
	client_on(_metadata, c, &bound);
	s = accept_one(_metadata, l);
	both_ways(_metadata, c, s);
	EXPECT_EQ(RSTREAM_PATH_RDMA, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	close(s);
	close(c);

	/* Nowhere to go through nodev: neither path may connect. */
	for (int i = 0; i < 3; i++) {
		c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
		ASSERT_LE(0, c);
		ASSERT_EQ(0, setsockopt(c, SOL_SOCKET, SO_BINDTODEVICE, nodev,
					strlen(nodev)))
			TH_LOG("SO_BINDTODEVICE %s: %s", nodev, strerror(errno));
		/* Both, then each path alone. */
		if (i)
			ASSERT_EQ(0, set_int(c, SOL_RDMA, RSTREAM_PATH,
					     paths[i - 1]));
		err = errno_of(connect(c, SA(&bound), bound.len));
		if (err == EINPROGRESS)
			err = connect_end(c, FALLBACK_MS + 1500);
		EXPECT_NE(0, err)
			TH_LOG("bound to %s, connected (paths %d)", nodev,
			       int_opt(c, SOL_RDMA, RSTREAM_PATH));
		close(c);
	}
	EXPECT_EQ(0, wait_for(l, POLLIN, 0)) TH_LOG("a client got through");
	close(l);
}

/*
 * SO_MARK reaches the TCP side: a mark that policy routing sends nowhere
 * (RSTREAM_UNREACHABLE_MARK, the wrapper's rule) keeps a connection over
 * TCP from being made, where without it the same connection is.
 */
TEST_F(prog, mark_reaches_tcp)
{
	int mark = atoi(getenv("RSTREAM_UNREACHABLE_MARK") ?: "0");
	struct ep tb;
	int tl = listener_on(_metadata, tcp_socket(AF_INET), AF_INET, &tb);
	int c, s, err;

	ASSERT_NE(0, mark) TH_LOG("RSTREAM_UNREACHABLE_MARK is not set");
	c = transparent_socket(AF_INET, 0);
	ASSERT_EQ(0, set_int(c, SOL_SOCKET, SO_MARK, mark));
	err = errno_of(GUARDED(connect(c, SA(&tb), tb.len)));
	EXPECT_TRUE(err == ENETUNREACH || err == EHOSTUNREACH)
		TH_LOG("with the mark: %s", err ? strerror(err) : "connected");
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	close(c);
	EXPECT_EQ(0, wait_for(tl, POLLIN, 0)) TH_LOG("a client got through");

	c = client_on(_metadata, transparent_socket(AF_INET, 0), &tb);
	s = accept_one(_metadata, tl);
	both_ways(_metadata, c, s);
	close(s);
	close(c);
	close(tl);
}

/*
 * A host that answers over TCP but never over RDMA: a nonblocking connect
 * returns at once, and the connection is made over TCP within the RDMA
 * time limit.  The preload once made the RDMA attempt inside connect().
 */
FIXTURE(silent) {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *id;
	struct ep at;
	int tcp;
};

FIXTURE_SETUP(silent)
{
	struct sigaction sa = { .sa_handler = rstream_on_alarm };

	sigaction(SIGALRM, &sa, NULL);
	/* An rdma_cm listener whose requests nobody ever answers. */
	self->ch = rdma_create_event_channel();
	ASSERT_NE(NULL, self->ch);
	ASSERT_EQ(0, rdma_create_id(self->ch, &self->id, NULL, RDMA_PS_TCP));
	self->tcp = listener_on(_metadata, tcp_socket(AF_INET), AF_INET,
				&self->at);
	ASSERT_EQ(0, rdma_bind_addr(self->id, SA(&self->at)))
		TH_LOG("rdma_bind_addr: %s", strerror(errno));
	ASSERT_EQ(0, rdma_listen(self->id, 4));
}

FIXTURE_TEARDOWN(silent)
{
	close(self->tcp);
	rdma_destroy_id(self->id);
	rdma_destroy_event_channel(self->ch);
}

TEST_F_TIMEOUT(silent, nonblocking_connect_falls_back_in_time, 60)
{
	int c = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	long long t0, took;
	int s, err;

	ASSERT_LE(0, c);
	t0 = now_ms();
	err = errno_of(connect(c, SA(&self->at), self->at.len));
	took = now_ms() - t0;
	EXPECT_EQ(EINPROGRESS, err) TH_LOG("connect: %s", strerror(err));
	EXPECT_GT(10 * time_scale(), took) TH_LOG("connect took %lld ms", took);
	EXPECT_EQ(0, connect_end(c, FALLBACK_MS + PROMPT_MS))
		TH_LOG("not connected %lld ms after connect()", now_ms() - t0);
	TH_LOG("connected over TCP %lld ms after connect()", now_ms() - t0);
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(ETIMEDOUT, int_opt(c, SOL_RDMA, RSTREAM_FALLBACK));
	s = accept_one(_metadata, self->tcp);
	both_ways(_metadata, c, s);
	close(s);
	close(c);
}

struct accepter {
	int l;
	pthread_t tid;
};

/* Accept a client and send it a byte: the other end of a fallback. */
static void *accept_and_send(void *arg)
{
	struct accepter *a = arg;
	int s = accept(a->l, NULL, NULL);

	if (s >= 0) {
		send(s, "x", 1, MSG_NOSIGNAL);
		sleep(1);
		close(s);
	}
	return NULL;
}

/*
 * While a connection goes over to TCP, the socket is still connecting to
 * every call: a nonblocking receive says EAGAIN (not an end of stream),
 * a blocking one waits for TCP's connection and its bytes.  The dying
 * RDMA attempt once answered them.
 */
TEST_F_TIMEOUT(silent, calls_while_falling_back, 60)
{
	int c = transparent_socket(AF_INET, SOCK_NONBLOCK);
	struct accepter a = { .l = self->tcp };
	struct timeval tv = { .tv_sec = 10 };
	char b;
	int err;

	ASSERT_LE(0, c);
	ASSERT_EQ(0, set_int(c, SOL_RDMA, RSTREAM_CONNECT_TIMEOUT, 500));
	err = errno_of(connect(c, SA(&self->at), self->at.len));
	ASSERT_EQ(EINPROGRESS, err);
	EXPECT_EQ(EAGAIN, errno_of(recv(c, &b, 1, 0)));
	EXPECT_EQ(0, wait_for(c, POLLIN | POLLOUT, 0));
	pthread_create(&a.tid, NULL, accept_and_send, &a);
	ASSERT_EQ(0, fcntl(c, F_SETFL, 0));
	ASSERT_EQ(0, setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)));
	EXPECT_EQ(1, GUARDED(recv(c, &b, 1, 0)))
		TH_LOG("recv: %s", strerror(errno));
	EXPECT_EQ('x', b);
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	pthread_join(a.tid, NULL);
	close(c);
}

/* The same with RDMA's time limit set: the socket's own. */
TEST_F_TIMEOUT(silent, connect_timeout_is_the_sockets, 60)
{
	int c = transparent_socket(AF_INET, 0);
	long long t0;
	int s;

	ASSERT_LE(0, c);
	ASSERT_EQ(FALLBACK_MS, int_opt(c, SOL_RDMA, RSTREAM_CONNECT_TIMEOUT));
	ASSERT_EQ(0, set_int(c, SOL_RDMA, RSTREAM_CONNECT_TIMEOUT, 500));
	EXPECT_EQ(500, int_opt(c, SOL_RDMA, RSTREAM_CONNECT_TIMEOUT));
	EXPECT_EQ(EINVAL, errno_of(set_int(c, SOL_RDMA, RSTREAM_CONNECT_TIMEOUT, 0)));
	EXPECT_EQ(EINVAL, errno_of(set_int(c, SOL_RDMA, RSTREAM_CONNECT_TIMEOUT,
					   60001)));
	t0 = now_ms();
	client_on(_metadata, c, &self->at);
	EXPECT_GT(500 + 1000 * time_scale(), now_ms() - t0);
	EXPECT_EQ(ETIMEDOUT, int_opt(c, SOL_RDMA, RSTREAM_FALLBACK));
	s = accept_one(_metadata, self->tcp);
	both_ways(_metadata, c, s);
	close(s);
	close(c);
}

/*
 * Transparent sockets through their own API.
 */

FIXTURE(tsock) {
	int unused;
};

FIXTURE_VARIANT(tsock) {
	int family;
};

FIXTURE_VARIANT_ADD(tsock, ipv4) {
	.family = AF_INET,
};

FIXTURE_VARIANT_ADD(tsock, ipv6) {
	.family = AF_INET6,
};

FIXTURE_SETUP(tsock)
{
	struct sigaction sa = { .sa_handler = rstream_on_alarm };

	sigaction(SIGALRM, &sa, NULL);
}

FIXTURE_TEARDOWN(tsock)
{
}

/*
 * What a transparent socket says it is, and the path it takes: RDMA to a
 * transparent listener, TCP to a TCP one (refused over RDMA), TCP alone
 * when told so.
 */
TEST_F(tsock, paths_taken)
{
	int proto = variant->family == AF_INET6 ? RSTREAM_PROTO_TCP6 :
						  RSTREAM_PROTO_TCP4;
	struct ep tb, rb;
	int tl = listener_on(_metadata, tcp_socket(variant->family),
			     variant->family, &tb);
	int rl = listener_on(_metadata, transparent_socket(variant->family, 0),
			     variant->family, &rb);
	int c, s;

	EXPECT_EQ(RSTREAM_PATH_RDMA | RSTREAM_PATH_TCP,
		  int_opt(rl, SOL_RDMA, RSTREAM_PATH));

	c = transparent_socket(variant->family, 0);
	ASSERT_LE(0, c);
	EXPECT_EQ(rstream_family(), int_opt(c, SOL_SOCKET, SO_DOMAIN));
	EXPECT_EQ(proto, int_opt(c, SOL_SOCKET, SO_PROTOCOL));
	EXPECT_EQ(SOCK_STREAM, int_opt(c, SOL_SOCKET, SO_TYPE));
	EXPECT_EQ(RSTREAM_PATH_RDMA | RSTREAM_PATH_TCP,
		  int_opt(c, SOL_RDMA, RSTREAM_PATH));
	client_on(_metadata, c, &rb);
	s = accept_one(_metadata, rl);
	EXPECT_EQ(RSTREAM_PATH_RDMA, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(RSTREAM_PATH_RDMA, int_opt(s, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(proto, int_opt(s, SOL_SOCKET, SO_PROTOCOL));
	EXPECT_EQ(0, int_opt(c, SOL_RDMA, RSTREAM_FALLBACK));
	EXPECT_EQ(EINVAL, errno_of(set_int(c, SOL_RDMA, RSTREAM_PATH,
					   RSTREAM_PATH_TCP)));
	both_ways(_metadata, c, s);
	close(s);
	close(c);

	c = client_on(_metadata, transparent_socket(variant->family, 0), &tb);
	s = accept_one(_metadata, tl);
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(ECONNREFUSED, int_opt(c, SOL_RDMA, RSTREAM_FALLBACK));
	both_ways(_metadata, c, s);
	close(s);
	close(c);

	c = transparent_socket(variant->family, 0);
	ASSERT_EQ(0, set_int(c, SOL_RDMA, RSTREAM_PATH, RSTREAM_PATH_TCP));
	client_on(_metadata, c, &rb);
	s = accept_one(_metadata, rl);
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(s, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(0, int_opt(c, SOL_RDMA, RSTREAM_FALLBACK));
	both_ways(_metadata, c, s);
	close(s);
	close(c);

	/* RDMA alone: the TCP listener is not reached. */
	c = transparent_socket(variant->family, 0);
	ASSERT_EQ(0, set_int(c, SOL_RDMA, RSTREAM_PATH, RSTREAM_PATH_RDMA));
	EXPECT_EQ(ECONNREFUSED, errno_of(GUARDED(connect(c, SA(&tb), tb.len))));
	close(c);
	close(rl);
	close(tl);
}

/*
 * A TCP client of a transparent listener comes out of accept() as an
 * AF_RSTREAM socket on TCP: its names are the TCP connection's, TCP's
 * options are TCP's.
 */
TEST_F(tsock, tcp_client_accepted)
{
	int proto = variant->family == AF_INET6 ? RSTREAM_PROTO_TCP6 :
						  RSTREAM_PROTO_TCP4;
	struct ep rb, cname, peer, sname;
	int l = listener_on(_metadata, transparent_socket(variant->family, 0),
			    variant->family, &rb);
	int c = client_on(_metadata, tcp_socket(variant->family), &rb);
	struct tcp_info ti;
	socklen_t len = sizeof(ti);
	int s;

	memset(&peer, 0, sizeof(peer));
	peer.len = sizeof(peer.ss);
	s = GUARDED(accept(l, SA(&peer), &peer.len));
	ASSERT_LE(0, s) TH_LOG("accept: %s", strerror(errno));
	EXPECT_EQ(rstream_family(), int_opt(s, SOL_SOCKET, SO_DOMAIN));
	EXPECT_EQ(proto, int_opt(s, SOL_SOCKET, SO_PROTOCOL));
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(s, SOL_RDMA, RSTREAM_PATH));
	name_of(c, false, &cname);
	EXPECT_EQ(0, memcmp(&cname.ss, &peer.ss, cname.len));
	name_of(s, false, &sname);
	EXPECT_EQ(ep_port(&rb), ep_port(&sname));
	ASSERT_EQ(0, getsockopt(s, SOL_TCP, TCP_INFO, &ti, &len));
	EXPECT_EQ(TCP_ESTABLISHED, ti.tcpi_state);
	EXPECT_LT(0, (int)ti.tcpi_rcv_mss);
	EXPECT_EQ(0, set_int(s, SOL_TCP, TCP_KEEPIDLE, 77));
	EXPECT_EQ(77, int_opt(s, SOL_TCP, TCP_KEEPIDLE));
	EXPECT_EQ(EOPNOTSUPP, errno_of(setsockopt(s, SOL_TCP, TCP_ULP, "tls", 3)));
	both_ways(_metadata, c, s);
	close(s);
	close(c);
	close(l);
}

/*
 * The timer /proc/net/tcp shows for the TCP connection @fd is on (its "tr"
 * column: 0 none, 1 retransmission, 2 keepalive), -1 if it is not there.
 */
static int tcp_timer(int fd)
{
	static const char *const files[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	char line[512], local[64];
	struct ep name;
	int timer = -1;

	name_of(fd, false, &name);
	for (int i = 0; i < 2 && timer < 0; i++) {
		FILE *f = fopen(files[i], "r");
		unsigned int port, tr;

		if (!f)
			continue;
		while (timer < 0 && fgets(line, sizeof(line), f))
			if (sscanf(line, " %*d: %63s %*s %*x %*s %x:", local,
				   &tr) == 2 &&
			    sscanf(strchr(local, ':') + 1, "%x", &port) == 1 &&
			    (int)port == ep_port(&name))
				timer = tr;
		fclose(f);
	}
	return timer;
}

/*
 * Set before the path is chosen, an option the RDMA path lacks keeps its
 * TCP meaning after a fallback; SOL_SOCKET's reach TCP too.
 */
TEST_F(tsock, options_before_the_choice)
{
	struct ep tb;
	int tl = listener_on(_metadata, tcp_socket(variant->family),
			     variant->family, &tb);
	int c = transparent_socket(variant->family, 0);
	struct linger lg = { .l_onoff = 1, .l_linger = 3 };
	int s;

	ASSERT_LE(0, c);
	ASSERT_EQ(0, set_int(c, SOL_TCP, TCP_KEEPIDLE, 55));
	ASSERT_EQ(0, set_int(c, SOL_TCP, TCP_NODELAY, 1));
	ASSERT_EQ(0, set_int(c, SOL_SOCKET, SO_KEEPALIVE, 1));
	ASSERT_EQ(0, setsockopt(c, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)));
	EXPECT_EQ(55, int_opt(c, SOL_TCP, TCP_KEEPIDLE));
	client_on(_metadata, c, &tb);
	s = accept_one(_metadata, tl);
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(55, int_opt(c, SOL_TCP, TCP_KEEPIDLE));
	EXPECT_EQ(1, int_opt(c, SOL_TCP, TCP_NODELAY));
	EXPECT_EQ(1, int_opt(c, SOL_SOCKET, SO_KEEPALIVE));
	/* The TCP connection beneath has them: its keepalive timer runs. */
	EXPECT_EQ(2, tcp_timer(c)) TH_LOG("no keepalive timer");
	EXPECT_EQ(0, set_int(c, SOL_SOCKET, SO_KEEPALIVE, 0));
	EXPECT_EQ(0, tcp_timer(c)) TH_LOG("the keepalive timer stayed");
	both_ways(_metadata, c, s);
	close(s);
	close(c);
	close(tl);
}

/*
 * SO_ZEROCOPY set before the choice (RSTREAM_ZEROCOPY where the core
 * refuses SO_ZEROCOPY to the family, before 6.2) is TCP's once the
 * socket is on TCP: a send with MSG_ZEROCOPY is notified on the socket's
 * error queue, as TCP notifies it, and poll says so.
 */
TEST_F(tsock, zerocopy_on_tcp)
{
	struct ep tb;
	int tl = listener_on(_metadata, tcp_socket(variant->family),
			     variant->family, &tb);
	int c = transparent_socket(variant->family, 0), s, one = 1;
	static char b[64 << 10];
	char control[128];
	struct msghdr msg = {
		.msg_control = control,
		.msg_controllen = sizeof(control),
	};
	struct pollfd p = { .events = 0 };
	struct sock_extended_err *ee;
	struct cmsghdr *cm;

	ASSERT_LE(0, c);
	if (setsockopt(c, SOL_SOCKET, SO_ZEROCOPY, &one, sizeof(one))) {
		ASSERT_EQ(EOPNOTSUPP, errno);
		ASSERT_EQ(0, set_int(c, SOL_RDMA, RSTREAM_ZEROCOPY, 1));
	}
	client_on(_metadata, c, &tb);
	s = accept_one(_metadata, tl);
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(1, int_opt(c, SOL_SOCKET, SO_ZEROCOPY));
	ASSERT_EQ((long)sizeof(b), send(c, b, sizeof(b), MSG_ZEROCOPY));
	p.fd = c;
	ASSERT_EQ(1, poll(&p, 1, 5000)) TH_LOG("no notification");
	EXPECT_EQ(POLLERR, p.revents);
	ASSERT_EQ(0, recvmsg(c, &msg, MSG_ERRQUEUE));
	cm = CMSG_FIRSTHDR(&msg);
	ASSERT_NE(NULL, cm);
	EXPECT_EQ(variant->family == AF_INET6 ? SOL_IPV6 : SOL_IP,
		  cm->cmsg_level);
	ee = (struct sock_extended_err *)CMSG_DATA(cm);
	EXPECT_EQ(SO_EE_ORIGIN_ZEROCOPY, ee->ee_origin);
	EXPECT_EQ(0u, ee->ee_info);
	EXPECT_EQ(0u, ee->ee_data);
	close(s);
	close(c);
	close(tl);
}

/* What @fd takes without blocking while its peer reads nothing (16 MiB at most). */
static long fill(int fd)
{
	static char b[64 << 10];
	long taken = 0;
	ssize_t n;

	while (taken < 16L << 20 &&
	       (n = send(fd, b, sizeof(b), MSG_DONTWAIT)) > 0)
		taken += n;
	return taken;
}

/*
 * SO_SNDBUF set once the connection is made (rstream(1) and rdma-core's
 * rstream size an accepted socket's buffers after accept()) is TCP's
 * too: a socket that fell back, and one accepted over TCP, stop taking
 * data at what the peer's window and a small send buffer hold, where
 * TCP's own sizing takes megabytes.
 */
TEST_F(tsock, buffer_size_after_connect)
{
	const long mib = 1 << 20;
	struct ep tb, rb;
	int tl = listener_on(_metadata, tcp_socket(variant->family),
			     variant->family, &tb);
	int l = listener_on(_metadata, transparent_socket(variant->family, 0),
			    variant->family, &rb);
	int c = client_on(_metadata, transparent_socket(variant->family, 0),
			  &tb);
	int s = accept_one(_metadata, tl), c2, s2;
	long taken;

	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	ASSERT_EQ(0, set_int(c, SOL_SOCKET, SO_SNDBUF, 4096));
	taken = fill(c);
	EXPECT_GT(mib, taken) TH_LOG("fallen back: took %ld bytes", taken);
	/* TCP's own sizing, which the option must have replaced. */
	taken = fill(s);
	EXPECT_LT(mib, taken) TH_LOG("plain TCP: took %ld bytes", taken);

	c2 = client_on(_metadata, tcp_socket(variant->family), &rb);
	s2 = accept_one(_metadata, l);
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(s2, SOL_RDMA, RSTREAM_PATH));
	ASSERT_EQ(0, set_int(s2, SOL_SOCKET, SO_SNDBUF, 4096));
	taken = fill(s2);
	EXPECT_GT(mib, taken) TH_LOG("accepted: took %ld bytes", taken);
	close(s2);
	close(c2);
	close(s);
	close(c);
	close(l);
	close(tl);
}

/*
 * SO_TIMESTAMP set on a listener: its accepted TCP client's data comes
 * with a timestamp after the listener is closed too (the kernel stamps
 * packets only while some socket asks it to).
 */
TEST_F(tsock, timestamps_outlive_the_listener)
{
	int l = transparent_socket(variant->family, 0), c, s;
	char b, cb[CMSG_SPACE(sizeof(struct timeval))];
	struct iovec iov = { .iov_base = &b, .iov_len = 1 };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1,
			    .msg_control = cb, .msg_controllen = sizeof(cb) };
	struct cmsghdr *cm;
	struct timeval tv = { 0 };
	struct ep rb;

	ASSERT_LE(0, l);
	ASSERT_EQ(0, set_int(l, SOL_SOCKET, SO_TIMESTAMP, 1));
	listener_on(_metadata, l, variant->family, &rb);
	c = client_on(_metadata, tcp_socket(variant->family), &rb);
	s = accept_one(_metadata, l);
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(s, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(1, int_opt(s, SOL_SOCKET, SO_TIMESTAMP));
	close(l);
	usleep(200 * 1000);	/* the kernel's deferred switch-off */
	ASSERT_EQ(1, send(c, "x", 1, 0));
	ASSERT_EQ(1, GUARDED(recvmsg(s, &m, 0)));
	for (cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm))
		if (cm->cmsg_level == SOL_SOCKET &&
		    cm->cmsg_type == SO_TIMESTAMP)
			memcpy(&tv, CMSG_DATA(cm), sizeof(tv));
	EXPECT_LT(0, tv.tv_sec) TH_LOG("no timestamp");
	close(s);
	close(c);
}

/*
 * A server that closes first and starts again on its port, SO_REUSEADDR
 * set as servers do: TCP binds past the closed connection's TIME_WAIT,
 * and so must a transparent listener whose accepted socket closed first.
 * @make: tcp_socket or transparent_socket.
 */
static void restart_on_port(struct __test_metadata *_metadata, int family,
			    int (*make)(int family), const char *what)
{
	struct ep at;
	int l = make(family), c, s;

	ASSERT_LE(0, l);
	ASSERT_EQ(0, set_int(l, SOL_SOCKET, SO_REUSEADDR, 1));
	listener_on(_metadata, l, family, &at);
	c = client_on(_metadata, tcp_socket(family), &at);
	s = accept_one(_metadata, l);
	both_ways(_metadata, c, s);
	close(s);		/* the server's side goes to TIME_WAIT */
	usleep(100 * 1000);
	close(c);
	close(l);

	l = make(family);
	ASSERT_LE(0, l);
	ASSERT_EQ(0, set_int(l, SOL_SOCKET, SO_REUSEADDR, 1));
	EXPECT_EQ(0, bind(l, SA(&at), at.len))
		TH_LOG("%s: bind to port %d again: %s", what, ep_port(&at),
		       strerror(errno));
	EXPECT_EQ(0, listen(l, 16));
	close(l);
}

static int transparent_socket_plain(int family)
{
	return transparent_socket(family, 0);
}

TEST_F(tsock, restart_on_port_in_time_wait)
{
	restart_on_port(_metadata, variant->family, tcp_socket, "TCP");
	restart_on_port(_metadata, variant->family, transparent_socket_plain,
			"transparent");
}

/*
 * SO_REUSEPORT.  The socket core refuses it to every family but TCP's: a
 * transparent socket asks for it with RSTREAM_REUSEPORT, TCP's
 * SO_REUSEPORT on its TCP socket.  Listeners cannot share a port over
 * RDMA: the first on the port listens on RDMA too, the others on TCP.
 */
#define SHARE_CLIENTS	32

/*
 * Two listeners made by @make, each told to share its port by the int
 * option @level/@name before bind(), listening on one port; a third
 * without it cannot bind there.  SHARE_CLIENTS plain TCP clients connect;
 * @got: how many each listener accepted.  AF_RSTREAM listeners: the first
 * listens on RDMA and TCP and takes a transparent client over RDMA, the
 * second on TCP alone.
 */
static void share_port(struct __test_metadata *_metadata, int family,
		       int (*make)(int family), int level, int name,
		       int got[2])
{
	int l[2], c[SHARE_CLIENTS], other, s, i, n;
	bool ours;
	struct ep at;

	ep_host(&at, family, 0);
	for (i = 0; i < 2; i++) {
		l[i] = make(family);
		ASSERT_LE(0, l[i]);
		ASSERT_EQ(0, set_int(l[i], level, name, 1))
			TH_LOG("listener %d: %s", i, strerror(errno));
		ASSERT_EQ(0, bind(l[i], SA(&at), at.len))
			TH_LOG("listener %d: bind: %s", i, strerror(errno));
		if (!i)
			name_of(l[0], false, &at);
	}
	other = make(family);
	ASSERT_LE(0, other);
	EXPECT_EQ(EADDRINUSE, errno_of(bind(other, SA(&at), at.len)));
	close(other);
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, listen(l[i], SHARE_CLIENTS))
			TH_LOG("listener %d: listen: %s", i, strerror(errno));
		EXPECT_EQ(1, int_opt(l[i], level, name));
		ours = int_opt(l[i], SOL_SOCKET, SO_DOMAIN) == rstream_family();
		if (ours)
			EXPECT_EQ(1, int_opt(l[i], SOL_RDMA, RSTREAM_REUSEPORT));
	}
	if (ours) {
		EXPECT_EQ(RSTREAM_PATH_RDMA | RSTREAM_PATH_TCP,
			  int_opt(l[0], SOL_RDMA, RSTREAM_PATH));
		EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(l[1], SOL_RDMA, RSTREAM_PATH));
		EXPECT_EQ(EADDRINUSE, int_opt(l[1], SOL_RDMA, RSTREAM_FALLBACK));
	}
	for (n = 0; n < SHARE_CLIENTS; n++)
		c[n] = client_on(_metadata, tcp_socket(family), &at);
	memset(got, 0, 2 * sizeof(*got));
	for (n = 0; n < SHARE_CLIENTS; n++) {
		struct pollfd p[2] = {
			{ .fd = l[0], .events = POLLIN },
			{ .fd = l[1], .events = POLLIN },
		};

		ASSERT_LT(0, poll(p, 2, PROMPT_MS))
			TH_LOG("%d of %d clients accepted", n, SHARE_CLIENTS);
		i = p[0].revents & POLLIN ? 0 : 1;
		s = accept_one(_metadata, l[i]);
		got[i]++;
		if (ours)
			EXPECT_EQ(RSTREAM_PATH_TCP,
				  int_opt(s, SOL_RDMA, RSTREAM_PATH));
		close(s);
	}
	for (n = 0; n < SHARE_CLIENTS; n++)
		close(c[n]);
	if (ours) {
		c[0] = client_on(_metadata, transparent_socket(family, 0), &at);
		s = accept_one(_metadata, l[0]);
		EXPECT_EQ(RSTREAM_PATH_RDMA, int_opt(c[0], SOL_RDMA, RSTREAM_PATH));
		EXPECT_EQ(RSTREAM_PATH_RDMA, int_opt(s, SOL_RDMA, RSTREAM_PATH));
		both_ways(_metadata, c[0], s);
		close(s);
		close(c[0]);
	}
	close(l[1]);
	close(l[0]);
}

/*
 * Two listeners on one port share its TCP clients, as TCP's do with
 * SO_REUSEPORT in this guest (one listener per CPU, as nginx's
 * "reuseport" makes them): each accepts some.
 */
TEST_F(tsock, reuseport_listeners_share_clients)
{
	int tcp[2], trans[2];

	share_port(_metadata, variant->family, tcp_socket, SOL_SOCKET,
		   SO_REUSEPORT, tcp);
	EXPECT_TRUE(tcp[0] && tcp[1])
		TH_LOG("TCP listeners accepted %d and %d", tcp[0], tcp[1]);
	share_port(_metadata, variant->family, transparent_socket_plain,
		   SOL_RDMA, RSTREAM_REUSEPORT, trans);
	EXPECT_TRUE(trans[0] && trans[1])
		TH_LOG("transparent listeners accepted %d and %d (TCP's %d and %d)",
		       trans[0], trans[1], tcp[0], tcp[1]);
}

/* A TCP socket as a program makes it: converted by the preload. */
static int converted_socket(int family)
{
	return socket(family, SOCK_STREAM, 0);
}

/*
 * A program's SO_REUSEPORT on converted listeners: the preload makes it
 * RSTREAM_REUSEPORT, and the listeners share the port as TCP's would.
 */
TEST_F(conv, reuseport_listeners_share_clients)
{
	int fd = converted_socket(variant->family), got[2];

	ASSERT_LE(0, fd);
	EXPECT_EQ(rstream_family(), int_opt(fd, SOL_SOCKET, SO_DOMAIN));
	close(fd);
	share_port(_metadata, variant->family, converted_socket, SOL_SOCKET,
		   SO_REUSEPORT, got);
	EXPECT_TRUE(got[0] && got[1])
		TH_LOG("listeners accepted %d and %d", got[0], got[1]);
}

/*
 * SO_REUSEPORT cleared on a listener of a shared port, then a third socket
 * with it set binds there: bind()'s errno (0 if it bound), for TCP's and
 * a transparent socket's rules to be compared.
 */
static int reuseport_cleared(struct __test_metadata *_metadata, int family,
			     int (*make)(int family), int level, int name)
{
	int l = make(family), other, err;
	struct ep at;

	EXPECT_LE(0, l);
	EXPECT_EQ(0, set_int(l, level, name, 1));
	listener_on(_metadata, l, family, &at);
	EXPECT_EQ(0, set_int(l, level, name, 0));
	EXPECT_EQ(0, int_opt(l, level, name));
	EXPECT_EQ(0, set_int(l, level, name, 1));
	EXPECT_EQ(1, int_opt(l, level, name));
	EXPECT_EQ(0, set_int(l, level, name, 0));
	other = make(family);
	EXPECT_LE(0, other);
	EXPECT_EQ(0, set_int(other, level, name, 1));
	err = errno_of(bind(other, SA(&at), at.len));
	close(other);
	close(l);
	return err;
}

/*
 * Set late, as TCP takes it at any time: on a listener on RDMA and TCP,
 * on connections over RDMA and over TCP, on a bound socket.  The paths
 * stay what they were.
 */
TEST_F(tsock, reuseport_set_late)
{
	struct ep rb, tb, at;
	int rl = listener_on(_metadata, transparent_socket(variant->family, 0),
			     variant->family, &rb);
	int tl = listener_on(_metadata, tcp_socket(variant->family),
			     variant->family, &tb);
	int l, c, s;

	EXPECT_EQ(0, set_int(rl, SOL_RDMA, RSTREAM_REUSEPORT, 1));
	EXPECT_EQ(1, int_opt(rl, SOL_RDMA, RSTREAM_REUSEPORT));
	EXPECT_EQ(RSTREAM_PATH_RDMA | RSTREAM_PATH_TCP,
		  int_opt(rl, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(0, set_int(rl, SOL_RDMA, RSTREAM_REUSEPORT, 0));
	EXPECT_EQ(0, int_opt(rl, SOL_RDMA, RSTREAM_REUSEPORT));

	/* Connected over RDMA, both ends. */
	c = client_on(_metadata, transparent_socket(variant->family, 0), &rb);
	s = accept_one(_metadata, rl);
	ASSERT_EQ(RSTREAM_PATH_RDMA, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(0, set_int(c, SOL_RDMA, RSTREAM_REUSEPORT, 1));
	EXPECT_EQ(0, set_int(s, SOL_RDMA, RSTREAM_REUSEPORT, 1));
	EXPECT_EQ(1, int_opt(c, SOL_RDMA, RSTREAM_REUSEPORT));
	EXPECT_EQ(1, int_opt(s, SOL_RDMA, RSTREAM_REUSEPORT));
	EXPECT_EQ(RSTREAM_PATH_RDMA, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	both_ways(_metadata, c, s);
	close(s);
	close(c);

	/* Fallen back to TCP: as on the TCP socket it accepted. */
	c = client_on(_metadata, transparent_socket(variant->family, 0), &tb);
	s = accept_one(_metadata, tl);
	ASSERT_EQ(RSTREAM_PATH_TCP, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(0, set_int(s, SOL_SOCKET, SO_REUSEPORT, 1));
	EXPECT_EQ(0, set_int(c, SOL_RDMA, RSTREAM_REUSEPORT, 1));
	EXPECT_EQ(1, int_opt(c, SOL_RDMA, RSTREAM_REUSEPORT));
	both_ways(_metadata, c, s);
	close(s);
	close(c);

	/* Bound, then set: a lone listener keeps RDMA. */
	l = transparent_socket(variant->family, 0);
	ASSERT_LE(0, l);
	ep_host(&at, variant->family, 0);
	ASSERT_EQ(0, bind(l, SA(&at), at.len));
	EXPECT_EQ(0, set_int(l, SOL_RDMA, RSTREAM_REUSEPORT, 1));
	ASSERT_EQ(0, listen(l, 4));
	EXPECT_EQ(RSTREAM_PATH_RDMA | RSTREAM_PATH_TCP,
		  int_opt(l, SOL_RDMA, RSTREAM_PATH));
	close(l);

	/* Cleared on a listener: later binds see what TCP's would. */
	EXPECT_EQ(reuseport_cleared(_metadata, variant->family, tcp_socket,
				    SOL_SOCKET, SO_REUSEPORT),
		  reuseport_cleared(_metadata, variant->family,
				    transparent_socket_plain, SOL_RDMA,
				    RSTREAM_REUSEPORT));
	close(tl);
	close(rl);
}

/*
 * A reuseport BPF program cannot follow the option to TCP's socket: the
 * core would attach it to the AF_RSTREAM socket, where it steers nothing.
 * So it stays refused, as on a TCP socket without SO_REUSEPORT (before,
 * with the flag on the AF_RSTREAM socket, the core took it and nothing
 * happened).  The core's own SO_REUSEPORT stays off there: it reads 0.
 */
TEST_F(tsock, reuseport_bpf_refused)
{
	struct sock_filter code[] = {
		BPF_STMT(BPF_RET | BPF_K, 0),
	};
	struct sock_fprog prog = { .len = 1, .filter = code };
	socklen_t len = sizeof(int);
	int tl = tcp_socket(variant->family), val = -1;
	int l = transparent_socket(variant->family, 0);

	ASSERT_LE(0, tl);
	ASSERT_LE(0, l);
	/* TCP takes it once SO_REUSEPORT is set. */
	EXPECT_EQ(0, set_int(tl, SOL_SOCKET, SO_REUSEPORT, 1));
	EXPECT_EQ(0, setsockopt(tl, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF,
				&prog, sizeof(prog)));
	EXPECT_EQ(0, set_int(l, SOL_RDMA, RSTREAM_REUSEPORT, 1));
	/* The core's own flag, past the preload that reads ours instead. */
	EXPECT_EQ(0, syscall(SYS_getsockopt, l, SOL_SOCKET, SO_REUSEPORT,
			     &val, &len));
	EXPECT_EQ(0, val);
	EXPECT_EQ(EINVAL, errno_of(setsockopt(l, SOL_SOCKET,
					      SO_ATTACH_REUSEPORT_CBPF,
					      &prog, sizeof(prog))));
	close(l);
	close(tl);
}

/*
 * Refused over RDMA and over TCP: a nonblocking connect ends with the
 * error where SO_ERROR reads it, poll says POLLERR.
 */
TEST_F(tsock, refused_on_both_paths)
{
	struct ep tb;
	int tl = listener_on(_metadata, tcp_socket(variant->family),
			     variant->family, &tb);
	int c = transparent_socket(variant->family, SOCK_NONBLOCK), err;

	close(tl);	/* its port: nobody listens there now */
	ASSERT_LE(0, c);
	err = errno_of(connect(c, SA(&tb), tb.len));
	if (err == EINPROGRESS) {
		EXPECT_TRUE(wait_for(c, POLLOUT, PROMPT_MS) & POLLERR);
		err = int_opt(c, SOL_SOCKET, SO_ERROR);
	}
	EXPECT_EQ(ECONNREFUSED, err) TH_LOG("%s", strerror(err));
	EXPECT_EQ(ECONNREFUSED, int_opt(c, SOL_RDMA, RSTREAM_FALLBACK));
	/* Read once, the error is gone: a poll does not bring it back. */
	EXPECT_EQ(0, int_opt(c, SOL_SOCKET, SO_ERROR));
	wait_for(c, POLLOUT, 0);
	EXPECT_EQ(0, int_opt(c, SOL_SOCKET, SO_ERROR))
		TH_LOG("SO_ERROR said it again");
	close(c);

	c = transparent_socket(variant->family, 0);
	EXPECT_EQ(ECONNREFUSED, errno_of(GUARDED(connect(c, SA(&tb), tb.len))));
	close(c);
}

struct sender {
	int fd;
	int delay_ms;
	pthread_t tid;
};

static void *send_later(void *arg)
{
	struct sender *sd = arg;

	usleep(sd->delay_ms * 1000);
	if (send(sd->fd, "w", 1, MSG_NOSIGNAL) != 1)
		return (void *)1;
	return NULL;
}

/* A byte from @peer in a while: what waits on @fd must wake for it. */
static void send_later_start(struct sender *sd, int peer)
{
	sigset_t all, old;

	sd->fd = peer;
	sd->delay_ms = 200;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_create(&sd->tid, NULL, send_later, sd);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
}

/*
 * TCP's wake-ups reach every kind of waiter of a socket on TCP: a
 * blocking recv, select, epoll (level and edge), SIGIO.
 */
TEST_F(tsock, fallback_wakes_every_waiter)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct sender sd;
	struct ep tb;
	int tl = listener_on(_metadata, tcp_socket(variant->family),
			     variant->family, &tb);
	int c = client_on(_metadata, transparent_socket(variant->family, 0),
			  &tb);
	int s = accept_one(_metadata, tl);
	int epl = epoll_create1(0), epe = epoll_create1(0);
	struct timeval tv = { .tv_sec = 5 };
	fd_set rd;
	char b[4];

	ASSERT_EQ(RSTREAM_PATH_TCP, int_opt(c, SOL_RDMA, RSTREAM_PATH));
	/* A blocking recv. */
	send_later_start(&sd, s);
	EXPECT_EQ(1, GUARDED(recv(c, b, sizeof(b), 0)));
	pthread_join(sd.tid, NULL);
	/* select. */
	send_later_start(&sd, s);
	FD_ZERO(&rd);
	FD_SET(c, &rd);
	EXPECT_EQ(1, select(c + 1, &rd, NULL, NULL, &tv));
	pthread_join(sd.tid, NULL);
	EXPECT_EQ(1, recv(c, b, sizeof(b), MSG_DONTWAIT));
	/* epoll, level and edge. */
	ASSERT_EQ(0, epoll_ctl(epl, EPOLL_CTL_ADD, c, &ev));
	ev.events = EPOLLIN | EPOLLET;
	ASSERT_EQ(0, epoll_ctl(epe, EPOLL_CTL_ADD, c, &ev));
	EXPECT_EQ(0, epoll_wait(epe, &ev, 1, 0));
	send_later_start(&sd, s);
	EXPECT_EQ(1, epoll_wait(epe, &ev, 1, PROMPT_MS));
	pthread_join(sd.tid, NULL);
	EXPECT_EQ(1, epoll_wait(epl, &ev, 1, 0));
	EXPECT_EQ(0, epoll_wait(epe, &ev, 1, 0)) TH_LOG("edge reported twice");
	send_later_start(&sd, s);
	EXPECT_EQ(1, epoll_wait(epe, &ev, 1, PROMPT_MS)) TH_LOG("no second edge");
	pthread_join(sd.tid, NULL);
	EXPECT_EQ(2, recv(c, b, sizeof(b), MSG_DONTWAIT));
	/* SIGIO. */
	want_sigio(_metadata, c);
	send_later_start(&sd, s);
	pthread_join(sd.tid, NULL);
	EXPECT_TRUE(got_sigio()) TH_LOG("no SIGIO");
	EXPECT_EQ(1, recv(c, b, sizeof(b), MSG_DONTWAIT));
	close(epe);
	close(epl);
	close(s);
	close(c);
	close(tl);
}

/*
 * Where RDMA cannot listen (an address no RDMA device has: 127.0.0.1 will
 * not do, rdma_cm takes it to any device), the listener is TCP's alone,
 * and poll and epoll hear of its clients.
 */
TEST_F(tsock, listener_on_tcp_alone)
{
	struct epoll_event ev = { .events = EPOLLIN };
	int l = transparent_socket(variant->family, 0);
	int ep = epoll_create1(0), c, s;
	struct ep at, bound;

	ASSERT_LE(0, l);
	ASSERT_LE(0, ep);
	ep_host(&at, variant->family, 0);
	if (variant->family == AF_INET)
		inet_pton(AF_INET, getenv("RSTREAM_NODEV_ADDR4") ?: "198.51.100.201",
			  &((struct sockaddr_in *)&at.ss)->sin_addr);
	else
		inet_pton(AF_INET6, getenv("RSTREAM_NODEV_ADDR6") ?: "2001:db8:77::1",
			  &((struct sockaddr_in6 *)&at.ss)->sin6_addr);
	ASSERT_EQ(0, bind(l, SA(&at), at.len)) TH_LOG("%s", strerror(errno));
	ASSERT_EQ(0, listen(l, 4));
	name_of(l, false, &bound);
	EXPECT_EQ(RSTREAM_PATH_TCP, int_opt(l, SOL_RDMA, RSTREAM_PATH));
	EXPECT_LT(0, int_opt(l, SOL_RDMA, RSTREAM_FALLBACK));
	ASSERT_EQ(0, epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev));
	EXPECT_EQ(0, wait_for(l, POLLIN, 0));
	c = client_on(_metadata, tcp_socket(variant->family), &bound);
	EXPECT_EQ(POLLIN, wait_for(l, POLLIN, PROMPT_MS))
		TH_LOG("poll did not hear of the client");
	EXPECT_EQ(1, epoll_wait(ep, &ev, 1, PROMPT_MS));
	s = accept_one(_metadata, l);
	both_ways(_metadata, c, s);
	close(s);
	close(c);
	close(ep);
	close(l);
}

/* The other IP version's address: refused at once, as by TCP. */
TEST_F(tsock, other_ip_version_refused)
{
	struct ep other;
	int c = transparent_socket(variant->family, 0);

	ASSERT_LE(0, c);
	ep_host(&other, variant->family == AF_INET ? AF_INET6 : AF_INET, 9);
	EXPECT_EQ(EAFNOSUPPORT, errno_of(connect(c, SA(&other), other.len)));
	close(c);
}

/* A transparent socket does not take another's TCP listener. */
TEST_F(tsock, options_it_refuses)
{
	struct ep tb;
	int tl = listener_on(_metadata, tcp_socket(variant->family),
			     variant->family, &tb);
	int c = transparent_socket(variant->family, 0);
	int p = socket(rstream_family(), SOCK_STREAM, 0);

	ASSERT_LE(0, c);
	ASSERT_LE(0, p);
	EXPECT_EQ(EINVAL, errno_of(set_int(c, SOL_RDMA, RSTREAM_TCP_LISTEN, tl)));
	EXPECT_EQ(EINVAL, errno_of(set_int(c, SOL_RDMA, RSTREAM_PATH, 0)));
	EXPECT_EQ(EINVAL, errno_of(set_int(c, SOL_RDMA, RSTREAM_PATH, 4)));
	EXPECT_EQ(EINVAL, errno_of(set_int(c, SOL_RDMA, RSTREAM_FALLBACK, 1)));
	/* A socket that is not transparent has RDMA alone. */
	EXPECT_EQ(RSTREAM_PATH_RDMA, int_opt(p, SOL_RDMA, RSTREAM_PATH));
	EXPECT_EQ(EINVAL, errno_of(set_int(p, SOL_RDMA, RSTREAM_PATH,
					   RSTREAM_PATH_TCP)));
	EXPECT_EQ(0, set_int(p, SOL_RDMA, RSTREAM_PATH, RSTREAM_PATH_RDMA));
	EXPECT_EQ(20000, int_opt(p, SOL_RDMA, RSTREAM_CONNECT_TIMEOUT));
	close(p);
	close(c);
	close(tl);
}

TEST_HARNESS_MAIN
