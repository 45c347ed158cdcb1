// SPDX-License-Identifier: GPL-2.0
/*
 * rstream_xfer: moves byte streams over AF_RSTREAM and checks every byte,
 * in one guest or between two.
 *
 *   rstream_xfer server ADDR PORT [options]  accepts CONNS connections
 *   rstream_xfer client ADDR PORT [options]  makes CONNS connections
 *   rstream_xfer loop ADDR PORT [options]    both: forks the server
 *
 *   -s SIZE     bytes per send (default 64k; k, m, g: powers of 1024)
 *   -n COUNT    sends per connection (default 16)
 *   -b BUF      SO_SNDBUF and SO_RCVBUF, set before connect and listen
 *               (0, the default: left alone)
 *   -d          both directions at once, each end sending from a second
 *               thread while it receives
 *   -c CONNS    connections in parallel, each with streams of its own
 *   -T SECONDS  time limit of the whole run (default 300)
 *
 * On each connection the client sends SIZE * COUNT bytes, and with -d the
 * server sends as many back at the same time.  The client tells the server
 * SIZE, COUNT and -d in a header, so that only -b, -c and -T count on the
 * server's command line.  Byte i of a stream is byte i % 8 of a hash of
 * i / 8, the connection and the direction: a byte lost, repeated, moved
 * by any distance or taken from another stream shows where it happens.
 * Receivers read 1, 7, 4 KiB, 64 KiB and 1 MiB at a time, in turn.  When
 * both directions are done, each end sends one byte to say that all it
 * received was right and shuts its side, and expects that byte and then
 * the end of the stream from the other: a missing or an extra byte fails.
 * The server confirms last, so the client's result covers both ends.
 *
 * Ends with "ok: N bytes each way in T s (X MB/s)" ("one way" without
 * -d; N summed over the connections) and exit status 0, or a line
 * "FAIL: ..." and status 1; 2 for a bad command line.
 *
 * The family is the one in /sys/module/rstream/parameters/family; with
 * RSTREAM_XFER_TCP set in the environment, TCP (to check this program).
 */
#include <arpa/inet.h>
#include <endian.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <linux/rstream.h>

#include "rstream_util.h"

#define MAGIC		0x52535831	/* "RSX1" */
#define FLAG_BOTH	1
#define MAX_SIZE	(64ULL << 20)
#define MAX_CONNS	1000
#define MAX_READ	(1024 * 1024)
#define CONFIRM		'K'

static struct {
	unsigned long long size, count;
	int buf;
	bool both;
	int conns;
	int limit;
	bool client_retry;	/* the server may be starting elsewhere */
} opt = { .size = 64 << 10, .count = 16, .conns = 1, .limit = 300 };

static pid_t server_pid;	/* loop: the forked server */
static const char *role = "";

static void fail(const char *fmt, ...)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	va_list ap;

	pthread_mutex_lock(&lock);
	if (server_pid > 0)
		kill(server_pid, SIGKILL);
	printf("FAIL: %s", role);
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

	if (server_pid > 0)
		kill(server_pid, SIGKILL);
	if (write(STDOUT_FILENO, msg, sizeof(msg) - 1) < 0)
		_exit(1);
	_exit(1);
}

static void *xmalloc(size_t len)
{
	void *p = malloc(len);

	if (!p)
		fail("out of memory for %zu bytes", len);
	return p;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The pattern */

static unsigned long long mix(unsigned long long x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* The 8 bytes at offset 8 * @w of the stream @seed, little-endian. */
static unsigned long long word(unsigned long long w, unsigned int seed)
{
	return htole64(mix(w ^ ((unsigned long long)seed << 44)));
}

static unsigned char byte_at(unsigned long long off, unsigned int seed)
{
	return le64toh(word(off >> 3, seed)) >> ((off & 7) * 8);
}

static void fill(char *buf, size_t len, unsigned long long off,
		 unsigned int seed)
{
	size_t i = 0;

	for (; i < len && ((off + i) & 7); i++)
		buf[i] = byte_at(off + i, seed);
	for (; i + 8 <= len; i += 8) {
		unsigned long long w = word((off + i) >> 3, seed);

		memcpy(buf + i, &w, 8);
	}
	for (; i < len; i++)
		buf[i] = byte_at(off + i, seed);
}

/* The index of the first byte that is not the pattern, or -1. */
static long long verify(const char *buf, size_t len, unsigned long long off,
			unsigned int seed)
{
	size_t i = 0, j;

	for (; i < len && ((off + i) & 7); i++)
		if ((unsigned char)buf[i] != byte_at(off + i, seed))
			return i;
	for (; i + 8 <= len; i += 8) {
		unsigned long long w;

		memcpy(&w, buf + i, 8);
		if (w == word((off + i) >> 3, seed))
			continue;
		for (j = i; j < i + 8; j++)
			if ((unsigned char)buf[j] != byte_at(off + j, seed))
				return j;
	}
	for (; i < len; i++)
		if ((unsigned char)buf[i] != byte_at(off + i, seed))
			return i;
	return -1;
}

/* Sockets */

static int family(int addr_family)
{
	return getenv("RSTREAM_XFER_TCP") ? addr_family : rstream_family();
}

struct ep {
	struct sockaddr_storage ss;
	socklen_t len;
};

static int parse_ep(const char *host, const char *port, struct ep *ep)
{
	struct sockaddr_in *in = (struct sockaddr_in *)&ep->ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ep->ss;
	char *end;
	long p = strtol(port, &end, 10);

	memset(ep, 0, sizeof(*ep));
	if (*end || p < 0 || p > 65535)
		return -1;
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons(p);
		ep->len = sizeof(*in);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(p);
		ep->len = sizeof(*in6);
		return 0;
	}
	return -1;
}

static int new_socket(const struct ep *ep)
{
	int fd = socket(family(ep->ss.ss_family), SOCK_STREAM, 0);

	if (fd < 0)
		fail("socket: %s", strerror(errno));
	if (opt.buf &&
	    (setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &opt.buf, sizeof(int)) ||
	     setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &opt.buf, sizeof(int))))
		fail("SO_SNDBUF/SO_RCVBUF %d: %s", opt.buf, strerror(errno));
	return fd;
}

static int listen_on(struct ep *ep)
{
	int fd = new_socket(ep), one = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)))
		fail("SO_REUSEADDR: %s", strerror(errno));
	if (bind(fd, (struct sockaddr *)&ep->ss, ep->len))
		fail("bind: %s", strerror(errno));
	if (listen(fd, opt.conns + 16))
		fail("listen: %s", strerror(errno));
	/* With port 0, the client needs the port that was bound. */
	ep->len = sizeof(ep->ss);
	if (getsockname(fd, (struct sockaddr *)&ep->ss, &ep->len))
		fail("getsockname: %s", strerror(errno));
	return fd;
}

static int connect_to(const struct ep *ep, int idx)
{
	double give_up = now_s() + 10;
	int fd;

	/*
	 * A hundred connections made at once took longer than connect()'s
	 * default 20 s on the debug kernel under TCG (a CI run at 7949ec4:
	 * connection 80 of hundred_connections_both_directions timed out):
	 * they get the run's own limit, up to the option's maximum.
	 */
	int ms = opt.limit >= 60 ? 60000 : (int)opt.limit * 1000;

	for (;;) {
		fd = new_socket(ep);
		if (!getenv("RSTREAM_XFER_TCP") &&
		    setsockopt(fd, SOL_RDMA, RSTREAM_CONNECT_TIMEOUT, &ms,
			       sizeof(ms)))
			fail("RSTREAM_CONNECT_TIMEOUT %d: %s", ms,
			     strerror(errno));
		if (!connect(fd, (struct sockaddr *)&ep->ss, ep->len))
			return fd;
		if (errno != ECONNREFUSED || !opt.client_retry ||
		    now_s() > give_up)
			fail("connection %d: connect: %s", idx,
			     strerror(errno));
		close(fd);
		usleep(100000);
	}
}

static void send_all(int fd, const char *buf, size_t len, int idx,
		     unsigned long long off)
{
	while (len) {
		ssize_t r = send(fd, buf, len, MSG_NOSIGNAL);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail("connection %d: send at byte %llu: %s", idx, off,
			     r ? strerror(errno) : "returned 0");
		buf += r;
		len -= r;
		off += r;
	}
}

static void recv_all(int fd, char *buf, size_t len, int idx, const char *what)
{
	while (len) {
		ssize_t r = recv(fd, buf, len, 0);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			fail("connection %d: %s: %s", idx, what,
			     r ? strerror(errno) : "end of stream");
		buf += r;
		len -= r;
	}
}

/* Connections */

struct header {
	unsigned int magic, flags, conn, conns;
	unsigned long long size, count;
};

struct conn {
	int fd;
	int idx;
	bool both;
	unsigned long long size, count;
	unsigned long long tx_bytes, rx_bytes;
	unsigned int tx_seed, rx_seed;
	pthread_t tid;
};

static void send_stream(struct conn *c)
{
	char *buf = xmalloc(c->size);
	unsigned long long n, off = 0;

	for (n = 0; n < c->count && c->tx_bytes; n++) {
		fill(buf, c->size, off, c->tx_seed);
		send_all(c->fd, buf, c->size, c->idx, off);
		off += c->size;
	}
	free(buf);
}

/*
 * The first wrong byte, how many follow it up to the next right one in
 * what this read returned, and whose bytes they are when they are the
 * stream's own from another place: bytes a whole number of 64 KiB behind
 * or ahead (a ring or staging buffer lap, a grant) tell a stale or an
 * early copy from random damage.
 */
static void mismatch(struct conn *c, const char *buf, size_t bad, ssize_t len,
		     unsigned long long off)
{
	unsigned long long at = off + bad;
	size_t end = bad, n;
	long long lap;
	char whose[96] = "";

	while (end < (size_t)len &&
	       (unsigned char)buf[end] != byte_at(off + end, c->rx_seed))
		end++;
	n = end - bad;
	for (lap = -64; lap <= 64; lap++) {
		long long from = (long long)at + lap * 65536;
		size_t i;

		if (!lap || from < 0)
			continue;
		for (i = 0; i < n; i++)
			if ((unsigned char)buf[bad + i] !=
			    byte_at(from + i, c->rx_seed))
				break;
		if (i == n) {
			snprintf(whose, sizeof(whose),
				 "; they are the stream's bytes at %lld (%+lld x 64 KiB)",
				 from, lap);
			break;
		}
	}
	fail("connection %d: byte %llu is 0x%02x, expected 0x%02x (read %zd at %llu; %zu wrong%s)",
	     c->idx, at, (unsigned char)buf[bad], byte_at(at, c->rx_seed),
	     len, off, n, whose);
}

static void *recv_stream(void *arg)
{
	static const size_t steps[] = { 1, 7, 4096, 65536, MAX_READ };
	struct conn *c = arg;
	char *buf = xmalloc(MAX_READ);
	unsigned long long off = 0;
	unsigned int k = 0;

	while (off < c->rx_bytes) {
		size_t want = steps[k++ % 5];
		long long bad;
		ssize_t r;

		if (want > c->rx_bytes - off)
			want = c->rx_bytes - off;
		r = recv(c->fd, buf, want, 0);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			fail("connection %d: recv at byte %llu of %llu: %s",
			     c->idx, off, c->rx_bytes, strerror(errno));
		if (r == 0)
			fail("connection %d: end of stream at byte %llu of %llu",
			     c->idx, off, c->rx_bytes);
		bad = verify(buf, r, off, c->rx_seed);
		if (bad >= 0)
			mismatch(c, buf, bad, r, off);
		off += r;
	}
	free(buf);
	return NULL;
}

static void confirm(struct conn *c)
{
	char b = CONFIRM;

	send_all(c->fd, &b, 1, c->idx, c->tx_bytes);
	if (shutdown(c->fd, SHUT_WR))
		fail("connection %d: shutdown: %s", c->idx, strerror(errno));
}

/* Exactly the peer's confirmation after the stream, then its end. */
static void expect_confirm(struct conn *c)
{
	char b[2];
	ssize_t r;

	recv_all(c->fd, b, 1, c->idx, "waiting for the peer's confirmation");
	if (b[0] != CONFIRM)
		fail("connection %d: byte 0x%02x after the stream", c->idx,
		     (unsigned char)b[0]);
	do
		r = recv(c->fd, b, sizeof(b), 0);
	while (r < 0 && errno == EINTR);
	if (r)
		fail("connection %d: %s after the peer's confirmation", c->idx,
		     r < 0 ? strerror(errno) : "more data");
}

/*
 * The streams, then the confirmations: the client's says that what it
 * received was right; the server sends its own only once it has checked
 * the client's and the end of stream behind it, so that the client's
 * "ok" covers both ends.
 */
static void run_streams(struct conn *c, bool client)
{
	pthread_t rx;

	if (c->both) {
		if (pthread_create(&rx, NULL, recv_stream, c))
			fail("pthread_create");
		send_stream(c);
		pthread_join(rx, NULL);
	} else {
		send_stream(c);
		recv_stream(c);
	}
	if (client) {
		confirm(c);
		expect_confirm(c);
	} else {
		expect_confirm(c);
		confirm(c);
	}
	close(c->fd);
}

static void *server_conn(void *arg)
{
	struct conn *c = arg;
	struct header h;

	recv_all(c->fd, (char *)&h, sizeof(h), c->idx, "header");
	if (ntohl(h.magic) != MAGIC)
		fail("connection %d: bad header (magic 0x%08x)", c->idx,
		     ntohl(h.magic));
	c->idx = ntohl(h.conn);
	c->both = ntohl(h.flags) & FLAG_BOTH;
	c->size = be64toh(h.size);
	c->count = be64toh(h.count);
	if (!c->size || c->size > MAX_SIZE)
		fail("connection %d: bad size %llu in the header", c->idx,
		     c->size);
	c->rx_bytes = c->size * c->count;
	c->tx_bytes = c->both ? c->rx_bytes : 0;
	c->rx_seed = 2 * c->idx + 1;
	c->tx_seed = 2 * c->idx + 2;
	run_streams(c, false);
	return NULL;
}

struct client_arg {
	struct conn c;
	const struct ep *ep;
};

static void *client_run(void *arg)
{
	struct client_arg *a = arg;
	struct conn *c = &a->c;
	struct header h = {
		.magic = htonl(MAGIC),
		.flags = htonl(opt.both ? FLAG_BOTH : 0),
		.conn = htonl(c->idx),
		.conns = htonl(opt.conns),
		.size = htobe64(opt.size),
		.count = htobe64(opt.count),
	};

	c->fd = connect_to(a->ep, c->idx);
	c->both = opt.both;
	c->size = opt.size;
	c->count = opt.count;
	c->tx_bytes = opt.size * opt.count;
	c->rx_bytes = opt.both ? c->tx_bytes : 0;
	c->tx_seed = 2 * c->idx + 1;
	c->rx_seed = 2 * c->idx + 2;
	send_all(c->fd, (char *)&h, sizeof(h), c->idx, 0);
	run_streams(c, true);
	return NULL;
}

static void summary(double t0)
{
	double t = now_s() - t0;
	unsigned long long total = opt.size * opt.count * opt.conns;

	printf("ok: %llu bytes %s in %.2f s (%.1f MB/s)\n", total,
	       opt.both ? "each way" : "one way", t,
	       t > 0 ? total / t / 1e6 : 0.0);
	fflush(stdout);
}

static void run_client(const struct ep *ep)
{
	struct client_arg *a = calloc(opt.conns, sizeof(*a));
	double t0 = now_s();
	int i;

	if (!a)
		fail("out of memory");
	for (i = 0; i < opt.conns; i++) {
		a[i].c.idx = i;
		a[i].ep = ep;
		if (pthread_create(&a[i].c.tid, NULL, client_run, &a[i]))
			fail("pthread_create");
	}
	for (i = 0; i < opt.conns; i++)
		pthread_join(a[i].c.tid, NULL);
	summary(t0);
	free(a);
}

/* Accepts CONNS connections, each served by a thread of its own. */
static void run_server(int l, bool quiet)
{
	struct conn *c = calloc(opt.conns, sizeof(*c));
	double t0 = now_s();
	int i;

	if (!c)
		fail("out of memory");
	for (i = 0; i < opt.conns; i++) {
		c[i].idx = i;
		do
			c[i].fd = accept(l, NULL, NULL);
		while (c[i].fd < 0 && errno == EINTR);
		if (c[i].fd < 0)
			fail("accept: %s", strerror(errno));
		if (pthread_create(&c[i].tid, NULL, server_conn, &c[i]))
			fail("pthread_create");
	}
	close(l);
	for (i = 0; i < opt.conns; i++)
		pthread_join(c[i].tid, NULL);
	/* The sizes came in the headers: the same on every connection. */
	opt.size = c[0].size;
	opt.count = c[0].count;
	opt.both = c[0].both;
	if (!quiet)
		summary(t0);
	free(c);
}

static unsigned long long parse_size(const char *s, unsigned long long max)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	switch (*end) {
	case 'k': case 'K':
		v <<= 10, end++;
		break;
	case 'm': case 'M':
		v <<= 20, end++;
		break;
	case 'g': case 'G':
		v <<= 30, end++;
		break;
	}
	if (errno || *end || *s == '-' || v > max) {
		fprintf(stderr, "bad number '%s' (at most %llu)\n", s, max);
		exit(2);
	}
	return v;
}

static void usage(const char *prog)
{
	fprintf(stderr, "%s server|client|loop ADDR PORT %s\n", prog,
		"[-s SIZE] [-n COUNT] [-b BUF] [-d] [-c CONNS] [-T SECONDS]");
	exit(2);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_alarm };
	const char *mode;
	struct ep ep;
	int c, l, status;

	if (argc < 4)
		usage(argv[0]);
	mode = argv[1];
	if (parse_ep(argv[2], argv[3], &ep)) {
		fprintf(stderr, "bad address or port: %s %s\n", argv[2],
			argv[3]);
		exit(2);
	}
	optind = 4;
	while ((c = getopt(argc, argv, "s:n:b:dc:T:")) != -1) {
		switch (c) {
		case 's':
			opt.size = parse_size(optarg, MAX_SIZE);
			break;
		case 'n':
			opt.count = parse_size(optarg, 1ULL << 40);
			break;
		case 'b':
			opt.buf = parse_size(optarg, 1 << 30);
			break;
		case 'd':
			opt.both = true;
			break;
		case 'c':
			opt.conns = parse_size(optarg, MAX_CONNS);
			break;
		case 'T':
			opt.limit = parse_size(optarg, 1 << 20);
			break;
		default:
			usage(argv[0]);
		}
	}
	if (optind != argc || !opt.size || !opt.count || !opt.conns ||
	    !opt.limit || opt.count > (1ULL << 50) / opt.size)
		usage(argv[0]);

	sigaction(SIGALRM, &sa, NULL);
	alarm(opt.limit);

	if (!strcmp(mode, "server")) {
		run_server(listen_on(&ep), false);
	} else if (!strcmp(mode, "client")) {
		opt.client_retry = true;
		run_client(&ep);
	} else if (!strcmp(mode, "loop")) {
		l = listen_on(&ep);
		fflush(stdout);
		server_pid = fork();
		if (server_pid < 0)
			fail("fork: %s", strerror(errno));
		if (!server_pid) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			alarm(opt.limit);	/* not inherited */
			role = "server: ";
			run_server(l, true);
			exit(0);
		}
		close(l);
		role = "client: ";
		run_client(&ep);
		if (waitpid(server_pid, &status, 0) != server_pid)
			fail("waitpid: %s", strerror(errno));
		server_pid = 0;
		if (!WIFEXITED(status) || WEXITSTATUS(status))
			fail("the server failed (status 0x%x)", status);
	} else {
		usage(argv[0]);
	}
	return 0;
}
