// SPDX-License-Identifier: GPL-2.0
/*
 * rstream_rpeer: one end of an interop scenario, over AF_RSTREAM (the
 * kernel) or over librdmacm's rsocket API (rsocket, rconnect, rsend,
 * rrecv, rshutdown, rclose: userspace rsockets, rdma-core's own code).
 *
 *   rstream_rpeer server|client kernel|rsocket ADDR PORT SCENARIO [LIMIT]
 *
 * Both ends run the same scenario, each with the API it is given, so that
 * running it twice with the APIs swapped covers both directions:
 *
 *   small_sends[=N] the client sends N sends of 64 bytes (200,000 unless
 *                   given); the server checks them and answers one byte
 *   gib             the same with 1 GiB in 64 KiB sends
 *   mib=N           the same with N MiB in 64 KiB sends
 *   send_file=PATH  sends the file, shuts its side (SHUT_WR) and reads
 *                   the peer's stream, discarding it, to its end
 *   recv_file=PATH  writes what comes to the file, up to the end of
 *                   stream, then closes
 *   half_close      the client sends 1 MB and shuts its side (SHUT_WR); the
 *                   server reads up to the end of the stream, then sends
 *                   1 MB back and closes; the client reads it to the end
 *   both_shut       the client shuts its side, the server reads the end
 *                   and shuts its own, the client reads the end and
 *                   closes: the server still reads the end, no reset
 *   close_in_flight the client sends 4 MiB and closes at once; the server
 *                   must still read every byte, then the end of stream
 *   peer_closes_recv  the server blocks in recv(); the client closes after
 *                   a second: recv() must return 0 or an error at once
 *   peer_aborts_recv  the server waits in poll(); the client closes after
 *                   a second with SO_LINGER's zero time: the server sees
 *                   the end of the stream (an AF_RSTREAM reset reads so
 *                   to a userspace rsocket, which itself cannot abort)
 *   peer_exits      the server waits in poll(); the client exits after a
 *                   second without closing: a userspace rsocket's exit
 *                   reads as ECONNRESET, an AF_RSTREAM one's as the end
 *   peer_closes_send  the server sends until send() blocks (the client
 *                   reads nothing); the client closes: send() must fail
 *   connects=N      set-up time: the client makes N connections one
 *                   after another, holding them, and prints "fill: N
 *                   made" and "fill-time: MS ms" as rstream_cmd's fill
 *                   does, then "pause: waiting" and holds them until a
 *                   signal; the server accepts and holds N (for make
 *                   bench, which compares rsockets' set-up with ours)
 *   no_answer       the server listens with rdma_cm itself and never
 *                   reads its events, so a connection request to it is
 *                   never answered, until LIMIT (server only; rsockets
 *                   accepts in a thread of its own, raccept() or not)
 *
 * Bytes follow a pattern of their offset, so a lost, repeated or moved
 * byte is seen where it happens.  With RSTREAM_RPEER_TCP set in the
 * environment, "kernel" means TCP (to check this program).  Prints "ok: ..." and exits 0, or
 * "FAIL: ..." and exits 1; LIMIT (default 300 s) bounds the whole run.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <rdma/rsocket.h>

#include "rstream_util.h"

struct api {
	int (*socket)(int domain, int type, int protocol);
	int (*bind)(int fd, const struct sockaddr *addr, socklen_t len);
	int (*listen)(int fd, int backlog);
	int (*accept)(int fd, struct sockaddr *addr, socklen_t *len);
	int (*connect)(int fd, const struct sockaddr *addr, socklen_t len);
	ssize_t (*send)(int fd, const void *buf, size_t len, int flags);
	ssize_t (*recv)(int fd, void *buf, size_t len, int flags);
	int (*setsockopt)(int fd, int level, int name, const void *val,
			  socklen_t len);
	int (*shutdown)(int fd, int how);
	int (*close)(int fd);
	int (*poll)(struct pollfd *fds, nfds_t n, int timeout);
	int family;		/* 0: the address's own (rsockets) */
};

static const struct api rsocket_api = {
	.socket = rsocket, .bind = rbind, .listen = rlisten,
	.accept = raccept, .connect = rconnect, .send = rsend,
	.recv = rrecv, .setsockopt = rsetsockopt, .shutdown = rshutdown,
	.close = rclose, .poll = rpoll,
};

static struct api kernel_api = {
	.socket = socket, .bind = bind, .listen = listen,
	.accept = accept, .connect = connect, .send = send,
	.recv = recv, .setsockopt = setsockopt, .shutdown = shutdown,
	.close = close, .poll = poll,
};

static const struct api *api;
static const char *role;

static void fail(const char *fmt, ...)
{
	va_list ap;

	printf("FAIL: %s: ", role);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n");
	fflush(stdout);
	_exit(1);
}

static void on_alarm(int sig)
{
	static const char msg[] = "FAIL: time limit reached\n";

	(void)sig;
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static unsigned char pattern_byte(unsigned long long off)
{
	unsigned int x = (unsigned int)(off >> 3) * 2654435761u;

	return (unsigned char)((x >> ((off & 3) * 8)) ^ (off >> 32));
}

static void fill(unsigned char *p, size_t len, unsigned long long off)
{
	size_t i;

	for (i = 0; i < len; i++)
		p[i] = pattern_byte(off + i);
}

static void check(const unsigned char *p, size_t len, unsigned long long off)
{
	size_t i;

	for (i = 0; i < len; i++)
		if (p[i] != pattern_byte(off + i))
			fail("byte %llu is %u, expected %u",
			     (off + i), p[i],
			     pattern_byte(off + i));
}

static void send_all(int fd, const unsigned char *p, size_t len)
{
	ssize_t n;

	while (len) {
		n = api->send(fd, p, len, MSG_NOSIGNAL);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			fail("send: %s", strerror(errno));
		p += n;
		len -= n;
	}
}

/* Sends @total bytes of the pattern in sends of @chunk. */
static void send_stream(int fd, unsigned long long total, size_t chunk)
{
	unsigned char *buf = malloc(chunk);
	unsigned long long off;
	size_t len;

	if (!buf)
		fail("out of memory");
	for (off = 0; off < total; off += len) {
		len = total - off < chunk ? total - off : chunk;
		fill(buf, len, off);
		send_all(fd, buf, len);
	}
	free(buf);
}

/*
 * The server's wait for a peer that goes away: poll() up to 10 s, then a
 * nonblocking recv() of one byte, its result; *@t the wait in seconds.
 */
static ssize_t poll_then_recv(int fd, struct pollfd *p, double *t)
{
	unsigned char c;
	int r;

	p->fd = fd;
	p->events = POLLIN;
	p->revents = 0;
	*t = now();
	r = api->poll(p, 1, 10000);
	*t = now() - *t;
	if (r != 1)
		fail("poll returned %d (%s) %.1f s after it blocked",
		     r, r ? strerror(errno) : "nothing", *t);
	return api->recv(fd, &c, 1, MSG_DONTWAIT);
}

/* Reads and checks @total bytes; with @then_eof, the end of stream next. */
static void recv_stream(int fd, unsigned long long total, int then_eof)
{
	static unsigned char buf[1 << 16];
	unsigned long long off = 0;
	ssize_t n;

	while (off < total) {
		size_t want = total - off < sizeof(buf) ? total - off : sizeof(buf);

		n = api->recv(fd, buf, want, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail("recv at byte %llu: %s", (unsigned long long)off,
			     strerror(errno));
		if (n == 0)
			fail("end of stream at byte %llu of %llu",
			     (unsigned long long)off, (unsigned long long)total);
		check(buf, n, off);
		off += n;
	}
	if (then_eof) {
		n = api->recv(fd, buf, 1, 0);
		if (n != 0)
			fail("expected the end of stream after %llu bytes, got %zd (%s)",
			     (unsigned long long)total, n,
			     n < 0 ? strerror(errno) : "data");
	}
}

static void expect_byte(int fd)
{
	unsigned char c;
	ssize_t n;

	do {
		n = api->recv(fd, &c, 1, 0);
	} while (n < 0 && errno == EINTR);
	if (n != 1 || c != 'K')
		fail("no confirmation from the peer (%zd, %s)", n,
		     n < 0 ? strerror(errno) : "end of stream");
}

static bool no_answer;	/* the no_answer scenario */

/* no_answer: a listener that takes requests and answers none. */
static void listen_no_answer(const struct addrinfo *ai)
{
	struct rdma_event_channel *ch = rdma_create_event_channel();
	struct rdma_cm_id *id;

	if (!ch || rdma_create_id(ch, &id, NULL, RDMA_PS_TCP) ||
	    rdma_bind_addr(id, ai->ai_addr) || rdma_listen(id, 1))
		fail("rdma_cm listener: %s", strerror(errno));
	printf("listening\n");
	fflush(stdout);
	pause();
}

/*
 * connects=N: N connections made one after another and held, timed at
 * the client; the server holds what it accepts.  Ends at a signal.
 */
static void connects(const char *addr, const char *port, int server,
		     unsigned long long n)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST }, *ai;
	int family, fd, one = 1, ret;
	unsigned long long made = 0;
	double t;

	ret = getaddrinfo(addr, port, &hints, &ai);
	if (ret)
		fail("getaddrinfo %s: %s", addr, gai_strerror(ret));
	family = api->family ? api->family : ai->ai_family;
	alarm(0);
	if (server) {
		fd = api->socket(family, SOCK_STREAM, 0);
		api->setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one,
				sizeof(one));
		if (fd < 0 || api->bind(fd, ai->ai_addr, ai->ai_addrlen) ||
		    api->listen(fd, 128))
			fail("bind/listen %s:%s: %s", addr, port,
			     strerror(errno));
		printf("listening\n");
		fflush(stdout);
		for (; made < n; made++)
			if (api->accept(fd, NULL, NULL) < 0)
				fail("accept %llu: %s", made, strerror(errno));
		printf("serve: held %llu\n", made);
		fflush(stdout);
		pause();
		_exit(0);
	}
	t = now();
	for (; made < n; made++) {
		fd = api->socket(family, SOCK_STREAM, 0);
		if (fd < 0 || api->connect(fd, ai->ai_addr, ai->ai_addrlen)) {
			printf("fill: %llu made, then %s\n", made,
			       strerror(errno));
			break;
		}
		/* Progress, for a run cut short: the rate so far. */
		if ((made + 1) % 100 == 0) {
			printf("progress: %llu in %.1f ms\n", made + 1,
			       (now() - t) * 1e3);
			fflush(stdout);
		}
	}
	if (made == n)
		printf("fill: %llu made\n", made);
	printf("fill-time: %.1f ms\n", (now() - t) * 1e3);
	printf("pause: waiting\n");
	fflush(stdout);
	pause();
	_exit(0);
}

static int open_conn(const char *addr, const char *port, int server)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM,
				  .ai_flags = AI_NUMERICHOST }, *ai;
	int fd, conn, one = 1, ret;

	ret = getaddrinfo(addr, port, &hints, &ai);
	if (ret)
		fail("getaddrinfo %s: %s", addr, gai_strerror(ret));
	if (server && no_answer)
		listen_no_answer(ai);
	fd = api->socket(api->family ? api->family : ai->ai_family,
			 SOCK_STREAM, 0);
	if (fd < 0)
		fail("socket: %s", strerror(errno));
	if (!server) {
		/* The server may not listen yet: try for 20 s. */
		double end = now() + 20;

		while (api->connect(fd, ai->ai_addr, ai->ai_addrlen)) {
			if (errno != ECONNREFUSED || now() > end)
				fail("connect: %s", strerror(errno));
			api->close(fd);
			usleep(200000);
			fd = api->socket(api->family ? api->family :
					 ai->ai_family, SOCK_STREAM, 0);
			if (fd < 0)
				fail("socket: %s", strerror(errno));
		}
		freeaddrinfo(ai);
		return fd;
	}
	api->setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (api->bind(fd, ai->ai_addr, ai->ai_addrlen) || api->listen(fd, 1))
		fail("bind/listen %s:%s: %s", addr, port, strerror(errno));
	freeaddrinfo(ai);
	printf("listening\n");
	fflush(stdout);
	conn = api->accept(fd, NULL, NULL);
	if (conn < 0)
		fail("accept: %s", strerror(errno));
	api->close(fd);
	return conn;
}

static void streamed(int fd, int server, unsigned long long total, size_t chunk)
{
	double t = now();

	if (server) {
		recv_stream(fd, total, 0);
		send_all(fd, (const unsigned char *)"K", 1);
	} else {
		send_stream(fd, total, chunk);
		expect_byte(fd);
	}
	t = now() - t;
	printf("ok: %llu bytes in %zu-byte sends, %.2f s (%.1f MB/s)\n",
	       (unsigned long long)total, chunk, t, total / t / 1e6);
}

/* The file at @path, then SHUT_WR; then the peer's stream to its end. */
static void send_file(int fd, const char *path)
{
	static unsigned char buf[1 << 16];
	unsigned long long sent = 0, got = 0;
	int file = open(path, O_RDONLY);
	ssize_t n;

	if (file < 0)
		fail("%s: %s", path, strerror(errno));
	while ((n = read(file, buf, sizeof(buf))) > 0) {
		send_all(fd, buf, n);
		sent += n;
	}
	if (n < 0)
		fail("%s: %s", path, strerror(errno));
	close(file);
	if (api->shutdown(fd, SHUT_WR))
		fail("shutdown(SHUT_WR): %s", strerror(errno));
	while ((n = api->recv(fd, buf, sizeof(buf), 0)) != 0) {
		if (n < 0 && errno != EINTR)
			fail("recv after %llu bytes: %s", got, strerror(errno));
		if (n > 0)
			got += n;
	}
	printf("ok: sent %llu bytes of %s, then got %llu and the end of stream\n",
	       sent, path, got);
}

/* What comes, to the file at @path, up to the end of stream. */
static void recv_file(int fd, const char *path)
{
	static unsigned char buf[1 << 16];
	unsigned long long got = 0;
	int file = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ssize_t n;

	if (file < 0)
		fail("%s: %s", path, strerror(errno));
	while ((n = api->recv(fd, buf, sizeof(buf), 0)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			fail("recv after %llu bytes: %s", got, strerror(errno));
		if (write(file, buf, n) != n)
			fail("%s: %s", path, strerror(errno));
		got += n;
	}
	if (close(file))
		fail("%s: %s", path, strerror(errno));
	printf("ok: got %llu bytes into %s, then the end of stream\n", got,
	       path);
}

int main(int argc, char **argv)
{
	unsigned long long count = 0;
	const char *scenario, *arg = "";
	char *eq;
	int server, fd;
	double t;

	if (argc < 6 || argc > 7) {
		fprintf(stderr, "usage: %s server|client kernel|rsocket %s\n",
			argv[0], "ADDR PORT SCENARIO [LIMIT]");
		return 2;
	}
	role = argv[1];
	server = !strcmp(role, "server");
	if (!server && strcmp(role, "client"))
		return 2;
	if (!strcmp(argv[2], "kernel")) {
		/* TCP with RSTREAM_RPEER_TCP set: to check this program. */
		kernel_api.family = getenv("RSTREAM_RPEER_TCP") ? 0 :
				    rstream_family();
		api = &kernel_api;
	} else if (!strcmp(argv[2], "rsocket")) {
		api = &rsocket_api;
	} else {
		return 2;
	}
	/* SCENARIO=ARG: a count or a file, for the scenarios that take one. */
	scenario = argv[5];
	eq = strchr(scenario, '=');
	if (eq) {
		char *end;

		*eq = '\0';
		arg = eq + 1;
		/* A count must be all digits and fit once scaled to bytes. */
		errno = 0;
		count = strtoull(arg, &end, 10);
		if (errno || *end || count > (1ULL << 40) / 65536)
			count = 0;
	}
	signal(SIGALRM, on_alarm);
	alarm(argc == 7 ? atoi(argv[6]) : 300);
	signal(SIGPIPE, SIG_IGN);

	if (!strcmp(scenario, "connects") && count)
		connects(argv[3], argv[4], server, count);
	no_answer = !strcmp(scenario, "no_answer");
	fd = open_conn(argv[3], argv[4], server);
	if (!strcmp(scenario, "small_sends") && (!eq || count)) {
		streamed(fd, server, (count ? count : 200000ULL) * 64, 64);
	} else if (!strcmp(scenario, "gib")) {
		streamed(fd, server, 1ULL << 30, 65536);
	} else if (!strcmp(scenario, "mib") && count) {
		streamed(fd, server, count << 20, 65536);
	} else if (!strcmp(scenario, "send_file") && *arg) {
		send_file(fd, arg);
	} else if (!strcmp(scenario, "recv_file") && *arg) {
		recv_file(fd, arg);
	} else if (!strcmp(scenario, "half_close")) {
		if (server) {
			recv_stream(fd, 1000000, 1);
			send_stream(fd, 1000000, 4096);
		} else {
			send_stream(fd, 1000000, 4096);
			if (api->shutdown(fd, SHUT_WR))
				fail("shutdown(SHUT_WR): %s", strerror(errno));
			recv_stream(fd, 1000000, 1);
		}
		printf("ok: 1000000 bytes each way around a half-close\n");
	} else if (!strcmp(scenario, "both_shut")) {
		unsigned char c;
		ssize_t n;

		if (server) {
			recv_stream(fd, 0, 1);
			if (api->shutdown(fd, SHUT_WR))
				fail("shutdown(SHUT_WR): %s", strerror(errno));
			sleep(2);	/* the client closes meanwhile */
			n = api->recv(fd, &c, 1, 0);
			if (n)
				fail("after the client closed, recv returned %zd (%s)",
				     n, n < 0 ? strerror(errno) : "data");
		} else {
			if (api->shutdown(fd, SHUT_WR))
				fail("shutdown(SHUT_WR): %s", strerror(errno));
			recv_stream(fd, 0, 1);
		}
		printf("ok: both sides shut, then the end of stream, no reset\n");
	} else if (!strcmp(scenario, "close_in_flight")) {
		if (server)
			recv_stream(fd, 4 << 20, 1);
		else
			send_stream(fd, 4 << 20, 65536);
		printf("ok: 4 MiB, then the end of stream\n");
	} else if (!strcmp(scenario, "peer_closes_recv")) {
		if (server) {
			unsigned char c;
			ssize_t n;

			t = now();
			n = api->recv(fd, &c, 1, 0);
			t = now() - t;
			if (n > 0)
				fail("recv returned data");
			if (t > 15)
				fail("recv returned only %.1f s after the peer closed", t - 1);
			printf("ok: recv returned %zd (%s) %.2f s after it blocked\n",
			       n, n ? strerror(errno) : "end of stream", t);
		} else {
			sleep(1);
		}
	} else if (!strcmp(scenario, "peer_aborts_recv")) {
		if (server) {
			struct pollfd p;
			ssize_t n = poll_then_recv(fd, &p, &t);

			/*
			 * AF_RSTREAM: a userspace rsocket closes cleanly
			 * whatever SO_LINGER says.  A userspace rsocket
			 * reads the kernel's reset as the end of the stream.
			 */
			if (n)
				fail("recv returned %zd (%s), not the end of the stream",
				     n, n < 0 ? strerror(errno) : "data");
			printf("ok: poll said %#x %.2f s after it blocked, then recv 0\n",
			       p.revents, t);
		} else {
			struct linger lg = { .l_onoff = 1, .l_linger = 0 };

			/* Ignored by rsocket, which has no abortive close. */
			api->setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg,
					sizeof(lg));
			sleep(1);
		}
	} else if (!strcmp(scenario, "peer_exits")) {
		if (server) {
			int want = api == &kernel_api ? ECONNRESET : 0;
			struct pollfd p;
			ssize_t n = poll_then_recv(fd, &p, &t);

			/*
			 * A userspace rsocket that exits sends no DISCONNECT:
			 * its DREQ alone reads as a reset.  A process with an
			 * AF_RSTREAM socket that exits closes it cleanly.
			 */
			if (want ? n != -1 || errno != want : n != 0)
				fail("recv returned %zd (%s), not %s", n,
				     n < 0 ? strerror(errno) : n ? "data" : "the end",
				     want ? strerror(want) : "the end of the stream");
			printf("ok: poll said %#x %.2f s after it blocked, then recv %s\n",
			       p.revents, t, want ? strerror(want) : "0");
		} else {
			sleep(1);
			_exit(0);
		}
	} else if (!strcmp(scenario, "peer_closes_send")) {
		if (server) {
			static unsigned char buf[65536];
			unsigned long long sent = 0;
			ssize_t n;

			t = now();
			for (;;) {
				n = api->send(fd, buf, sizeof(buf), MSG_NOSIGNAL);
				if (n < 0 && errno == EINTR)
					continue;
				if (n <= 0)
					break;
				sent += n;
				t = now();
			}
			t = now() - t;
			if (t > 15)
				fail("send failed only %.1f s after the last one went", t);
			printf("ok: send failed (%s) after %llu bytes, %.2f s %s\n",
			       strerror(errno), sent, t, "after the last one went");
		} else {
			sleep(2);
		}
	} else {
		fail("unknown scenario %s", scenario);
	}
	if (api->close(fd))
		fail("close: %s", strerror(errno));
	return 0;
}
