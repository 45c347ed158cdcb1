// SPDX-License-Identifier: GPL-2.0
/*
 * Dead-peer detection across a wire, for guest/live.sh: one guest serves,
 * the other connects, sets TCP's liveness options and blocks; the serving
 * guest then cuts its wire.  The same cases run on TCP and on AF_RSTREAM
 * at once, so that their delays are measured under the same cut.
 *
 *   rstream_live serve <addr> <port>
 *	TCP and AF_RSTREAM listeners on <port> (sink: reads and drops
 *	everything) and <port>+1 (echo).  Runs until killed.
 *   rstream_live case <peer> <port> <tcp|rdma> <what> <bound-ms>
 *	Connects, prints "ready", waits for the file GO_FILE (the script
 *	makes it, then cuts the wire once every case that echoes has
 *	printed "idle": its echo came back and the peer has acknowledged
 *	every byte, SIOCOUTQ 0), then does <what>:
 *	  recv, poll, epoll - keepalive 3/1/3: one echo, then idle, and the
 *	    blocked call ends with ETIMEDOUT (poll: POLLERR, SO_ERROR);
 *	  bulk - keepalive 3/1/3: BULK_S of streaming to the sink; "streamed",
 *	    and at SLOW_FILE (the script has made the wire slow) one more
 *	    write and TCP_KEEPIDLE set again, which has keepalive look at
 *	    once, while that write is in flight; "looked", then idle and a
 *	    blocked recv, which ends with ETIMEDOUT as recv's does;
 *	  stream - TCP_USER_TIMEOUT 4000 ms, streaming to a peer that reads,
 *	    from STEADY_FILE on (the wire no longer slow);
 *	  idle - no keepalive: still up after the wire is back (an echo
 *	    20 s after the cut);
 *	  removal - no keepalive: an echo at the go and another at GO2_FILE,
 *	    then a blocked recv, which the serving guest's RDMA device
 *	    removal ends with ECONNRESET;
 *	and prints "ok" or "not ok" with the delay since the cut (the
 *	removal case: since the second go).  A timed case passes when
 *	ETIMEDOUT comes no sooner than its earliest - 1 s and no later than
 *	<bound-ms> + 4 s after the cut, whose time is CUT_FILE's: the script
 *	makes it as the wire goes, which on a slow kernel may be seconds
 *	after the go.  The earliest is <bound-ms>, except for keepalive:
 *	its three probes a second apart start up to 3 s idle after the last
 *	answer, which may have come just before the cut or at the go, so it
 *	ends 3 to 6 s after the cut.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
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
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <linux/sockios.h>

#include "rstream_util.h"

#define GUARD_S		60	/* no case waits longer */
#define IDLE_S		20	/* for the ping's acknowledgment */
#define BULK_S		3	/* the bulk case's streaming */
#define EARLY_MS	1000
#define LATE_MS		4000
#define GO_FILE		"/tmp/rstream_live.go"
#define GO2_FILE	"/tmp/rstream_live.go2"
#define SLOW_FILE	"/tmp/rstream_live.slow"
#define STEADY_FILE	"/tmp/rstream_live.steady"
#define CUT_FILE	"/tmp/rstream_live.cut"

/* CLOCK_REALTIME in ms: what a file's time is kept in. */
static long long real_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* How long ago the wire was cut (CUT_FILE made), or -1 if it was not. */
static long long since_cut(void)
{
	struct stat st;

	if (stat(CUT_FILE, &st))
		return -1;
	return real_ms() - (st.st_mtim.tv_sec * 1000LL +
			    st.st_mtim.tv_nsec / 1000000);
}

static int domain(const char *t)
{
	return strcmp(t, "tcp") ? rstream_family() : AF_INET;
}

static void addr(struct sockaddr_in *sin, const char *str, int port)
{
	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	sin->sin_port = htons(port);
	if (inet_pton(AF_INET, str, &sin->sin_addr) != 1) {
		fprintf(stderr, "bad address %s\n", str);
		exit(2);
	}
}

static void set(int fd, int level, int name, int val)
{
	if (setsockopt(fd, level, name, &val, sizeof(val))) {
		perror("setsockopt");
		exit(2);
	}
}

/* The server: what each accepted connection gets. */
enum kind { SINK, ECHO };

struct conn {
	int fd;
	enum kind kind;
};

static void *serve_conn(void *arg)
{
	struct conn *c = arg;
	char buf[65536];
	ssize_t n;

	while ((n = recv(c->fd, buf, sizeof(buf), 0)) > 0)
		if (c->kind == ECHO && send(c->fd, buf, n, MSG_NOSIGNAL) != n)
			break;
	close(c->fd);
	free(c);
	return NULL;
}

struct listener {
	int fd;
	enum kind kind;
};

static void *serve_listener(void *arg)
{
	struct listener *l = arg;
	pthread_t tid;

	for (;;) {
		struct conn *c = malloc(sizeof(*c));
		int fd = accept(l->fd, NULL, NULL);

		/*
		 * An RDMA listener whose device is removed fails here: the
		 * others and the connections made go on, as they would on
		 * TCP (an exit would close them cleanly, hiding the reset).
		 */
		if (fd < 0 || !c) {
			perror("accept");
			if (fd >= 0)
				close(fd);
			free(c);
			return NULL;
		}
		c->fd = fd;
		c->kind = l->kind;
		pthread_create(&tid, NULL, serve_conn, c);
		pthread_detach(tid);
	}
	return NULL;
}

static int serve(const char *a, int port)
{
	static struct listener ls[4];
	pthread_t tid;
	int i;

	for (i = 0; i < 4; i++) {
		struct sockaddr_in sin;

		addr(&sin, a, port + i / 2);
		ls[i].kind = i / 2;
		ls[i].fd = socket(i % 2 ? rstream_family() : AF_INET,
				  SOCK_STREAM, 0);
		if (ls[i].fd < 0) {
			perror("socket");
			return 1;
		}
		set(ls[i].fd, SOL_SOCKET, SO_REUSEADDR, 1);
		if (bind(ls[i].fd, (struct sockaddr *)&sin, sizeof(sin)) ||
		    listen(ls[i].fd, 64)) {
			perror("bind/listen");
			return 1;
		}
		pthread_create(&tid, NULL, serve_listener, &ls[i]);
	}
	printf("serving\n");
	fflush(stdout);
	for (;;)
		pause();
}

static char sink_buf[65536];

/* Streams to the sink until a send fails (the errno) or @end (0). */
static int stream(int fd, long long end)
{
	while (now_ms() < end)
		if (send(fd, sink_buf, sizeof(sink_buf), MSG_NOSIGNAL) < 0)
			return errno;
	return 0;
}

/* Until the script says go; false if it never does. */
static bool wait_go(const char *file)
{
	long long end = now_ms() + GUARD_S * 1000;

	while (access(file, F_OK))
		if (now_ms() > end || usleep(20 * 1000))
			return false;
	return true;
}

/* Bytes we sent that the peer has not acknowledged yet, or -1. */
static int unacked(int fd)
{
	int n;

	return ioctl(fd, SIOCOUTQ, &n) ? -1 : n;
}

/*
 * Until the peer has acknowledged every byte we sent; the ms it took, or
 * -1 if it did not within IDLE_S.  Keepalive probes only an idle
 * connection, on TCP as here: a write still in flight when the wire goes
 * leaves it to the retransmission timeout, 15 minutes.  TCP's echo
 * carries the acknowledgment of the ping; RDMA's travels on its own and
 * may come after the echo.
 */
static long long wait_idle(int fd)
{
	long long start = now_ms();

	while (unacked(fd))
		if (now_ms() - start > IDLE_S * 1000 || usleep(10 * 1000))
			return -1;
	return now_ms() - start;
}

/* The error a poll or epoll_wait that said POLLERR leaves in SO_ERROR. */
static long polled(int fd, long r, bool err_seen, int *err)
{
	socklen_t len = sizeof(*err);

	if (r == 1 && err_seen &&
	    !getsockopt(fd, SOL_SOCKET, SO_ERROR, err, &len))
		return -1;
	*err = r < 0 ? errno : 0;
	return r;
}

static int run_case(const char *peer, int port, const char *t,
		    const char *what, long bound)
{
	bool idle = !strcmp(what, "idle"), stream_case = !strcmp(what, "stream");
	bool removal = !strcmp(what, "removal"), bulk = !strcmp(what, "bulk");
	int want = removal ? ECONNRESET : ETIMEDOUT;
	struct pollfd p = { .events = POLLIN | POLLRDHUP };
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	long long go, now, since, earliest;
	char from[64];
	struct sockaddr_in sin;
	int fd, ep, err = 0;
	char buf[16];
	long r = 0;

	addr(&sin, peer, port + (stream_case || bulk ? SINK : ECHO));
	fd = socket(domain(t), SOCK_STREAM, 0);
	if (fd < 0 || GUARDED(connect(fd, (struct sockaddr *)&sin,
				      sizeof(sin)))) {
		printf("not ok %s %s: connect: %s\n", t, what, strerror(errno));
		return 1;
	}
	if (stream_case) {
		set(fd, SOL_TCP, TCP_USER_TIMEOUT, 4000);
	} else if (!idle && !removal) {
		set(fd, SOL_SOCKET, SO_KEEPALIVE, 1);
		set(fd, SOL_TCP, TCP_KEEPIDLE, 3);
		set(fd, SOL_TCP, TCP_KEEPINTVL, 1);
		set(fd, SOL_TCP, TCP_KEEPCNT, 3);
	}
	printf("ready\n");
	if (!wait_go(GO_FILE)) {
		printf("not ok %s %s: no go\n", t, what);
		return 1;
	}
	go = now_ms();
	if (stream_case && !wait_go(STEADY_FILE)) {
		printf("not ok %s %s: no steady wire\n", t, what);
		return 1;
	}
	/*
	 * As a program that moved data and then went quiet; an option set
	 * has keepalive look at once (at the next tick), here at a write
	 * that the slow wire keeps in flight.
	 */
	if (bulk) {
		err = stream(fd, go + BULK_S * 1000);
		printf("streamed\n");
		if (!err && !wait_go(SLOW_FILE)) {
			printf("not ok %s %s: no slow wire\n", t, what);
			return 1;
		}
		if (!err && send(fd, sink_buf, sizeof(sink_buf), MSG_NOSIGNAL) < 0)
			err = errno;
		if (err) {
			printf("not ok %s %s: send: %s\n", t, what, strerror(err));
			return 1;
		}
		set(fd, SOL_TCP, TCP_KEEPIDLE, 3);
		usleep(100 * 1000);
		printf("looked\n");
	}
	if (!stream_case && !bulk &&
	    (send(fd, "ping", 4, MSG_NOSIGNAL) != 4 ||
	     GUARDED(recv(fd, buf, 4, MSG_WAITALL)) != 4)) {
		printf("not ok %s %s: echo: %s\n", t, what, strerror(errno));
		return 1;
	}
	/* guest/live.sh cuts the wire once every case is idle. */
	if (!stream_case && !removal) {
		long long ms = wait_idle(fd);

		if (ms < 0) {
			printf("not ok %s %s: %d bytes unacknowledged %d s after the echo\n",
			       t, what, unacked(fd), IDLE_S);
			return 1;
		}
		printf("idle %lld ms after the %s\n", ms,
		       bulk ? "stream" : "echo");
	}
	if (removal) {
		if (!wait_go(GO2_FILE)) {
			printf("not ok %s %s: no second go\n", t, what);
			return 1;
		}
		go = now_ms();
		if (send(fd, "ping", 4, MSG_NOSIGNAL) != 4 ||
		    GUARDED_S(30, recv(fd, buf, 4, MSG_WAITALL)) != 4) {
			printf("not ok %s %s: second echo: %s\n", t,
			       what, strerror(errno));
			return 1;
		}
	}

	if (idle) {
		/* Past the cut and the wire back (guest/live.sh), an echo. */
		if (!wait_go(CUT_FILE)) {
			printf("not ok %s idle: no cut\n", t);
			return 1;
		}
		sleep(20);
		if (send(fd, "ping", 4, MSG_NOSIGNAL) != 4 ||
		    GUARDED_S(30, recv(fd, buf, 4, MSG_WAITALL)) != 4) {
			printf("not ok %s idle: after the cut: %s\n", t,
			       strerror(errno));
			return 1;
		}
		printf("ok %s idle: still up after the cut\n", t);
		return 0;
	}
	if (!strcmp(what, "recv") || bulk || removal) {
		r = GUARDED(recv(fd, buf, sizeof(buf), 0));
		err = errno;
	} else if (stream_case) {
		r = -1;
		err = stream(fd, LLONG_MAX);
	} else if (!strcmp(what, "poll")) {
		p.fd = fd;
		r = GUARDED(poll(&p, 1, GUARD_S * 1000));
		r = polled(fd, r, p.revents & POLLERR, &err);
	} else if (!strcmp(what, "epoll")) {
		ep = epoll_create1(0);
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
		r = GUARDED(epoll_wait(ep, &ev, 1, GUARD_S * 1000));
		r = polled(fd, r, ev.events & EPOLLERR, &err);
	}
	now = now_ms() - go;
	since = removal ? -1 : since_cut();
	/* Keepalive 3/1/3: from the cut, 3 s of probes, plus up to 3 s idle. */
	earliest = stream_case || removal ? bound : bound - 3000;
	if (!removal && since < 0) {
		printf("not ok %s %s: returned %ld (%s) %lld ms after the go, before the cut\n",
		       t, what, r, strerror(err), now);
		return 1;
	}
	if (since < 0)
		since = now;
	if (removal)
		snprintf(from, sizeof(from), "go");
	else
		snprintf(from, sizeof(from), "cut (%lld after the go)", now);
	if (r != -1 || err != want || since < earliest - EARLY_MS ||
	    since > bound + LATE_MS) {
		printf("not ok %s %s: returned %ld (%s) ", t, what, r,
		       strerror(err));
		printf("%lld ms after the %s, bound %ld ms, %d bytes unacknowledged\n",
		       since, from, bound, unacked(fd));
		return 1;
	}
	printf("ok %s %s: %s %lld ms after the %s, bound %ld ms\n", t, what,
	       strerror(err), since, from, bound);
	return 0;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	guard_init();
	signal(SIGPIPE, SIG_IGN);
	if (argc == 4 && !strcmp(argv[1], "serve"))
		return serve(argv[2], atoi(argv[3]));
	if (argc == 7 && !strcmp(argv[1], "case"))
		return run_case(argv[2], atoi(argv[3]), argv[4], argv[5],
				atol(argv[6]));
	fprintf(stderr, "usage: %s serve ADDR PORT | case PEER PORT tcp|rdma WHAT BOUND_MS\n",
		argv[0]);
	return 2;
}
