// SPDX-License-Identifier: GPL-2.0
/*
 * rstream: the ping-pong test of rdma-core's rstream(1), over AF_RSTREAM.
 *
 * Same command line, same test sequences, same 16-byte sync exchange, same
 * -T v byte pattern and same output columns as librdmacm's rstream, so
 * that either end of a run can be rdma-core's tool (over userspace
 * rsockets) and the tables compare line by line.  -T s runs the same test
 * over kernel TCP.  Differences, all on purpose:
 *   - the exit status is non-zero when any transfer or check failed, in
 *     every mode (rdma-core's ignores failures of the default sequence);
 *   - the end of the stream in the middle of a transfer is a failure
 *     (rdma-core's loops on it);
 *   - -T f keeps AF_RSTREAM (a kernel socket survives fork; rsockets'
 *     does not, so rdma-core's switches to TCP);
 *   - -T r resolves with getaddrinfo(): the kernel's rdma_cm resolves the
 *     route of every AF_RSTREAM connection anyway;
 *   - -f gid (AF_IB) is refused: AF_RSTREAM takes IPv4 and IPv6 addresses.
 * See rstream.1.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/errqueue.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <linux/rstream.h>

/* The sizes of the default sequence; "all" adds the ones marked extra. */
static const struct {
	int size;
	int extra;
} test_sizes[] = {
	{ 64, 0 },
	{ 128, 1 }, { 192, 1 }, { 256, 1 }, { 384, 1 },
	{ 512, 1 }, { 768, 1 }, { 1024, 1 }, { 1536, 1 },
	{ 2048, 1 }, { 3072, 1 }, { 4096, 0 }, { 6144, 1 },
	{ 8192, 1 }, { 12288, 1 }, { 16384, 1 }, { 24576, 1 },
	{ 32768, 1 }, { 49152, 1 }, { 65536, 0 }, { 98304, 1 },
	{ 131072, 1 }, { 196608, 1 }, { 262144, 1 }, { 393216, 1 },
	{ 524288, 1 }, { 786432, 1 }, { 1048576, 0 }, { 1572864, 1 },
	{ 2097152, 1 }, { 3145728, 1 }, { 4194304, 1 }, { 6291456, 1 },
};

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define N_SIZES ARRAY_SIZE(test_sizes)
#define SYNC_BYTES 16

enum inline_choice { INLINE_DEFAULT, INLINE_LATENCY, INLINE_BANDWIDTH };

static struct {
	const char *server;	/* -s: run as client of this server */
	const char *bind_addr;	/* -b */
	const char *port;	/* -p */
	int numeric;		/* -f ip / ipv6 */
	int buffer_size;	/* -B */
	int inline_size;	/* -i */
	int keepalive;		/* -k */
	int busy_poll;		/* --busy-poll, microseconds */
	int zerocopy;		/* --zerocopy */
	int all_sizes;		/* -S all */
	int custom;		/* -I, -C or -S SIZE given */
	int use_tcp;		/* -T s */
	int use_poll;		/* -T a */
	int use_fork;		/* -T f */
	int verify;		/* -T v */
	int flags;		/* MSG_DONTWAIT, or MSG_WAITALL with -T b */
} opt = {
	.port = "7471",
	.inline_size = 64,
	.flags = MSG_DONTWAIT,
};

static int iterations = 1, transfer_count = 1000, transfer_size = 1000;
static char test_name[10] = "custom";
static int poll_timeout;
static int family;		/* AF_RSTREAM's number, or 0 for TCP */
static int conn_fd = -1, listen_fd = -1;
static pid_t child_pid;
static unsigned char *buf;
static struct timeval t_start, t_end;

/* As librdmacm's examples print sizes: 1.5k, 64k, 1m. */
static void format_size(char *str, size_t len, long long size)
{
	long long base = 1, tenths = 0;
	const char *mag = "";

	if (size >= 1 << 30) {
		base = 1 << 30;
		mag = "g";
	} else if (size >= 1 << 20) {
		base = 1 << 20;
		mag = "m";
	} else if (size >= 1 << 10) {
		base = 1 << 10;
		mag = "k";
	}
	if (size / base < 10)
		tenths = size % base * 10 / base;
	if (tenths)
		snprintf(str, len, "%lld.%lld%s", size / base, tenths, mag);
	else
		snprintf(str, len, "%lld%s", size / base, mag);
}

/* Counts in thousands, millions, billions: 100k, 1m. */
static void format_count(char *str, size_t len, long long count)
{
	if (count >= 1000000000)
		snprintf(str, len, "%lldb", count / 1000000000);
	else if (count >= 1000000)
		snprintf(str, len, "%lldm", count / 1000000);
	else if (count >= 1000)
		snprintf(str, len, "%lldk", count / 1000);
	else
		snprintf(str, len, "%lld", count);
}

static int count_for_size(int size)
{
	if (size >= 1 << 20)
		return 100;
	if (size >= 1 << 16)
		return 1000;
	if (size >= 1 << 10)
		return 10000;
	return 100000;
}

/* -T v: each direction carries a running byte counter from 0, wrapping. */
static void fill_pattern(unsigned char *p, int size)
{
	static unsigned char next;
	int i;

	for (i = 0; i < size; i++)
		p[i] = next++;
}

static int check_pattern(const unsigned char *p, int size)
{
	static unsigned char expected;
	static long long offset;
	int i;

	for (i = 0; i < size; i++, offset++) {
		if (p[i] != expected++) {
			printf("data verification failed byte %lld\n", offset);
			return -1;
		}
	}
	return 0;
}

static void print_result(void)
{
	long long bytes = (long long)iterations * transfer_count *
			  transfer_size * 2;
	double usec = (t_end.tv_sec - t_start.tv_sec) * 1000000.0 +
		      (t_end.tv_usec - t_start.tv_usec);
	char str[32];

	printf("%-10s", test_name);
	format_size(str, sizeof(str), transfer_size);
	printf("%-8s", str);
	format_count(str, sizeof(str), transfer_count);
	printf("%-8s", str);
	format_count(str, sizeof(str), iterations);
	printf("%-8s", str);
	format_size(str, sizeof(str), bytes);
	printf("%-8s", str);
	printf("%8.2fs%10.2f%11.2f\n", usec / 1000000.0,
	       bytes * 8 / (1000.0 * usec),
	       usec / iterations / (transfer_count * 2));
	fflush(stdout);
}

/* 0 when the socket is ready, else the error or hang-up it reports. */
static int wait_ready(short events)
{
	struct pollfd pfd = { .fd = conn_fd, .events = events };
	int ret;

	do {
		ret = poll(&pfd, 1, poll_timeout);
	} while (ret == 0 || (ret < 0 && errno == EINTR));
	if (ret < 0) {
		perror("poll");
		return -1;
	}
	return pfd.revents & (POLLERR | POLLHUP);
}

/* --zerocopy: sends made with MSG_ZEROCOPY, and of those, notified. */
static unsigned int zc_sent, zc_done;

/*
 * Take the zero-copy notifications the error queue holds; with @all,
 * wait until every send has its own, so that the buffer may be written.
 */
static int zc_reap(int all)
{
	while (zc_done != zc_sent) {
		char control[128];
		struct msghdr msg = {
			.msg_control = control,
			.msg_controllen = sizeof(control),
		};
		struct pollfd pfd = { .fd = conn_fd };
		struct sock_extended_err *ee;
		struct cmsghdr *cm;

		if (recvmsg(conn_fd, &msg, MSG_ERRQUEUE | MSG_DONTWAIT) < 0) {
			if (errno != EAGAIN) {
				perror("recvmsg MSG_ERRQUEUE");
				return -1;
			}
			if (!all)
				return 0;
			if (poll(&pfd, 1, -1) < 0 && errno != EINTR) {
				perror("poll");
				return -1;
			}
			continue;
		}
		cm = CMSG_FIRSTHDR(&msg);
		if (!cm)
			continue;
		ee = (struct sock_extended_err *)CMSG_DATA(cm);
		if (ee->ee_origin == SO_EE_ORIGIN_ZEROCOPY)
			zc_done = ee->ee_data + 1;
	}
	return 0;
}

static int send_bytes(int size)
{
	int flags = opt.flags | MSG_NOSIGNAL;
	int done = 0;
	ssize_t n;

	if (opt.zerocopy) {
		flags |= MSG_ZEROCOPY;
		/* The bytes of sends in flight are the peer's to read yet. */
		if (opt.verify && zc_reap(1))
			return -1;
	}
	if (opt.verify)
		fill_pattern(buf, size);
	while (done < size) {
		if (opt.use_poll && wait_ready(POLLOUT))
			return -1;
		n = send(conn_fd, buf + done, size - done, flags);
		if (n > 0) {
			done += n;
			zc_sent += opt.zerocopy;
		} else if (n < 0 && errno == ENOBUFS && zc_done != zc_sent) {
			/* Notifications in flight use up the socket's optmem. */
			if (zc_reap(1))
				return -1;
		} else if (errno != EAGAIN && errno != EWOULDBLOCK &&
			   errno != EINTR) {
			perror("send");
			return -1;
		}
	}
	return opt.zerocopy ? zc_reap(0) : 0;
}

static int recv_bytes(int size)
{
	int done = 0;
	ssize_t n;

	while (done < size) {
		if (opt.use_poll && wait_ready(POLLIN))
			return -1;
		n = recv(conn_fd, buf + done, size - done, opt.flags);
		if (n > 0) {
			done += n;
		} else if (n == 0) {
			fprintf(stderr, "recv: end of stream after %d of %d bytes\n",
				done, size);
			return -1;
		} else if (errno != EAGAIN && errno != EWOULDBLOCK &&
			   errno != EINTR) {
			perror("recv");
			return -1;
		}
	}
	return opt.verify ? check_pattern(buf, size) : 0;
}

/* The client sends first; both ends leave with the same idea of "now". */
static int run_test(void)
{
	int client = !!opt.server;
	int i, t;

	if ((client ? send_bytes(SYNC_BYTES) : recv_bytes(SYNC_BYTES)) ||
	    (client ? recv_bytes(SYNC_BYTES) : send_bytes(SYNC_BYTES)))
		return -1;

	gettimeofday(&t_start, NULL);
	for (i = 0; i < iterations; i++) {
		for (t = 0; t < transfer_count; t++)
			if (client ? send_bytes(transfer_size) :
				     recv_bytes(transfer_size))
				return -1;
		for (t = 0; t < transfer_count; t++)
			if (client ? recv_bytes(transfer_size) :
				     send_bytes(transfer_size))
				return -1;
	}
	gettimeofday(&t_end, NULL);
	print_result();
	return 0;
}

static void set_keepalive(int fd)
{
	socklen_t len = sizeof(int);
	int val = 1;

	if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &val, len)) {
		perror("setsockopt SO_KEEPALIVE");
		return;
	}
	val = opt.keepalive;
	if (setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &val, len))
		perror("setsockopt TCP_KEEPIDLE");
	if (!getsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &val, &len))
		printf("Keepalive: %s\n", val ? "ON" : "OFF");
	if (!getsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &val, &len))
		printf("  time: %i\n", val);
}

/* --busy-poll: SO_BUSY_POLL, on TCP as on AF_RSTREAM. */
static void set_busy_poll(int fd)
{
	int val = opt.busy_poll;

	if (setsockopt(fd, SOL_SOCKET, SO_BUSY_POLL, &val, sizeof(val)))
		perror("setsockopt SO_BUSY_POLL");
}

/*
 * --zerocopy: SO_ZEROCOPY, on TCP as on AF_RSTREAM; where the socket
 * core refuses it to AF_RSTREAM (before 6.2), RSTREAM_ZEROCOPY.
 */
static void set_zerocopy(int fd)
{
	int val = 1;

	if (!setsockopt(fd, SOL_SOCKET, SO_ZEROCOPY, &val, sizeof(val)))
		return;
	if (errno == EOPNOTSUPP && family &&
	    !setsockopt(fd, SOL_RDMA, RSTREAM_ZEROCOPY, &val, sizeof(val)))
		return;
	perror("setsockopt SO_ZEROCOPY");
}

/* Options as rdma-core's tool sets them, errors ignored as there. */
static void set_options(int fd, enum inline_choice inl)
{
	int val = opt.buffer_size ? opt.buffer_size : 1 << 19;

	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &val, sizeof(val));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &val, sizeof(val));
	val = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &val, sizeof(val));
	if (opt.flags & MSG_DONTWAIT)
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	if (family != 0 && inl == INLINE_LATENCY)
		setsockopt(fd, SOL_RDMA, RDMA_INLINE, &opt.inline_size,
			   sizeof(opt.inline_size));
	if (family != 0 && inl == INLINE_BANDWIDTH) {
		val = 0;
		setsockopt(fd, SOL_RDMA, RDMA_INLINE, &val, sizeof(val));
	}
	if (opt.keepalive)
		set_keepalive(fd);
	if (opt.busy_poll)
		set_busy_poll(fd);
	if (opt.zerocopy)
		set_zerocopy(fd);
}

static struct addrinfo *resolve(const char *host, int passive)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	int ret;

	hints.ai_flags = (opt.numeric ? AI_NUMERICHOST : 0) |
			 (passive ? AI_PASSIVE : 0);
	ret = getaddrinfo(host, opt.port, &hints, &ai);
	if (ret) {
		printf("getaddrinfo: %s\n", gai_strerror(ret));
		return NULL;
	}
	return ai;
}

static int open_socket(const struct addrinfo *ai)
{
	int fd = socket(family ? family : ai->ai_family, SOCK_STREAM, 0);

	if (fd < 0)
		perror("socket");
	return fd;
}

static int server_listen(void)
{
	struct addrinfo *ai = resolve(opt.bind_addr, 1);
	int val = 1, ret = -1;

	if (!ai)
		return -1;
	listen_fd = open_socket(ai);
	if (listen_fd < 0)
		goto out;
	if (setsockopt(listen_fd, SOL_SOCKET, SO_REUSEADDR, &val, sizeof(val)))
		perror("setsockopt SO_REUSEADDR");
	else if (bind(listen_fd, ai->ai_addr, ai->ai_addrlen))
		perror("bind");
	else if (listen(listen_fd, 1))
		perror("listen");
	else
		ret = 0;
out:
	freeaddrinfo(ai);
	return ret;
}

static int server_accept(enum inline_choice inl)
{
	set_options(listen_fd, inl);
	for (;;) {
		if (opt.use_poll) {
			struct pollfd pfd = { .fd = listen_fd, .events = POLLIN };

			while (poll(&pfd, 1, poll_timeout) == 0)
				;
		}
		conn_fd = accept(listen_fd, NULL, NULL);
		if (conn_fd >= 0)
			break;
		if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
			perror("accept");
			return -1;
		}
	}
	if (opt.use_fork) {
		child_pid = fork();
		if (child_pid < 0) {
			perror("fork");
			return -1;
		}
	}
	if (!child_pid)
		set_options(conn_fd, inl);
	return 0;
}

static int client_connect(enum inline_choice inl)
{
	struct addrinfo *ai = resolve(opt.server, 0), *src = NULL;
	int err = 0, ret = -1;
	socklen_t len = sizeof(err);

	if (!ai)
		return -1;
	if (opt.bind_addr) {
		src = resolve(opt.bind_addr, 1);
		if (!src)
			goto out;
	}
	conn_fd = open_socket(ai);
	if (conn_fd < 0)
		goto out;
	set_options(conn_fd, inl);
	if (src && bind(conn_fd, src->ai_addr, src->ai_addrlen)) {
		perror("bind");
		goto close;
	}
	if (!connect(conn_fd, ai->ai_addr, ai->ai_addrlen)) {
		ret = 0;
		goto out;
	}
	if (errno != EINPROGRESS) {
		perror("connect");
		goto close;
	}
	if (wait_ready(POLLOUT) < 0 ||
	    getsockopt(conn_fd, SOL_SOCKET, SO_ERROR, &err, &len))
		goto close;
	if (err) {
		errno = err;
		perror("async connect");
		goto close;
	}
	ret = 0;
	goto out;
close:
	close(conn_fd);
	conn_fd = -1;
out:
	if (src)
		freeaddrinfo(src);
	freeaddrinfo(ai);
	return ret;
}

static int open_connection(enum inline_choice inl)
{
	return opt.server ? client_connect(inl) : server_accept(inl);
}

/* The parent of a forked server waits for its child's verdict. */
static int close_connection(void)
{
	int status, ret = 0;

	if (child_pid > 0) {
		if (waitpid(child_pid, &status, 0) < 0 || !WIFEXITED(status) ||
		    WEXITSTATUS(status))
			ret = -1;
		child_pid = 0;
	} else {
		shutdown(conn_fd, SHUT_RDWR);
	}
	close(conn_fd);
	conn_fd = -1;
	return ret;
}

static int run_sequence(int latency)
{
	char size[5];
	unsigned int i;
	int failed = 0;

	for (i = 0; i < N_SIZES; i++) {
		if (test_sizes[i].extra && !opt.all_sizes)
			continue;
		format_size(size, sizeof(size), test_sizes[i].size);
		transfer_size = test_sizes[i].size;
		if (latency) {
			snprintf(test_name, sizeof(test_name), "%s_lat", size);
			transfer_count = 1;
			iterations = count_for_size(transfer_size);
		} else {
			snprintf(test_name, sizeof(test_name), "%s_bw", size);
			iterations = 1;
			transfer_count = count_for_size(transfer_size);
		}
		if (run_test()) {
			failed = 1;
			break;	/* the stream is out of step: stop here */
		}
	}
	return failed;
}

static int run(void)
{
	int failed = 0;

	/* The sync exchange uses the buffer too, whatever -S says. */
	buf = malloc(opt.custom && transfer_size > SYNC_BYTES ? transfer_size :
		     opt.custom ? SYNC_BYTES : test_sizes[N_SIZES - 1].size);
	if (!buf) {
		perror("malloc");
		return 1;
	}
	if (!opt.server && server_listen())
		return 1;

	printf("%-10s%-8s%-8s%-8s%-8s%8s %10s%13s\n", "name", "bytes",
	       "xfers", "iters", "total", "time", "Gb/sec", "usec/xfer");
	fflush(stdout);
	if (opt.custom) {
		if (open_connection(INLINE_DEFAULT))
			return 1;
		if (!child_pid)
			failed |= run_test() != 0;
		if (opt.use_fork && !child_pid)
			exit(failed);
		failed |= close_connection() != 0;
		return failed;
	}

	/* Latency on one connection, then bandwidth on a second. */
	if (open_connection(INLINE_LATENCY))
		return 1;
	if (!child_pid)
		failed |= run_sequence(1);
	if (opt.use_fork && !child_pid)
		exit(failed);
	failed |= close_connection() != 0;

	if (open_connection(INLINE_BANDWIDTH))
		return 1;
	if (!child_pid)
		failed |= run_sequence(0);
	if (opt.use_fork && !child_pid)
		exit(failed);
	failed |= close_connection() != 0;
	return failed;
}

static int rstream_family(void)
{
	FILE *f = fopen(RSTREAM_FAMILY_SYSFS, "r");
	int nr = AF_RSTREAM;

	if (f) {
		if (fscanf(f, "%d", &nr) != 1)
			nr = AF_RSTREAM;
		fclose(f);
	}
	return nr;
}

static int set_test_option(const char *arg)
{
	static const struct {
		const char *word;
		char letter;
	} names[] = {
		{ "socket", 's' }, { "async", 'a' }, { "block", 'b' },
		{ "fork", 'f' }, { "nonblock", 'n' }, { "resolve", 'r' },
		{ "verify", 'v' },
	};
	char c = 0;
	unsigned int i;

	if (strlen(arg) == 1) {
		c = arg[0];
	} else {
		for (i = 0; i < ARRAY_SIZE(names); i++)
			if (!strncasecmp(names[i].word, arg,
					 strlen(names[i].word)))
				c = names[i].letter;
	}
	switch (c) {
	case 's':
		opt.use_tcp = 1;
		return 0;
	case 'a':
		opt.use_poll = 1;
		return 0;
	case 'b':
		opt.flags = (opt.flags & ~MSG_DONTWAIT) | MSG_WAITALL;
		return 0;
	case 'f':
		opt.use_fork = 1;
		return 0;
	case 'n':
		opt.flags |= MSG_DONTWAIT;
		return 0;
	case 'r':
		return 0;
	case 'v':
		opt.verify = 1;
		return 0;
	default:
		return -1;
	}
}

/* A whole non-negative number, or -1. */
static int parse_count(const char *arg)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < 0 || v > 0x7fffffff)
		return -1;
	return v;
}

static void print_usage(FILE *out, const char *prog)
{
	fprintf(out,
		"usage: %s\n"
		"\t[-s server_address]\n"
		"\t[-b bind_address]\n"
		"\t[-f address_format]\n"
		"\t    name, ip or ipv6\n"
		"\t[-B buffer_size]\n"
		"\t[-i inline_size]\n"
		"\t[-I iterations]\n"
		"\t[-C transfer_count]\n"
		"\t[-S transfer_size or all]\n"
		"\t[-p port_number]\n"
		"\t[-k keepalive_time]\n"
		"\t[-T test_option]\n"
		"\t    s|sockets - use standard tcp/ip sockets\n"
		"\t    a|async - asynchronous operation (use poll)\n"
		"\t    b|blocking - use blocking calls\n"
		"\t    f|fork - fork server processing\n"
		"\t    n|nonblocking - use nonblocking calls\n"
		"\t    r|resolve - resolve the address (rdma_cm resolves the route)\n"
		"\t    v|verify - verify data\n"
		"\t[--busy-poll usec]\n"
		"\t[--zerocopy]\n"
		"AF_RSTREAM sockets unless -T s; see rstream(1).\n", prog);
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "help", no_argument, NULL, 'h' },
		{ "busy-poll", required_argument, NULL, 'P' },
		{ "zerocopy", no_argument, NULL, 'Z' },
		{ NULL, 0, NULL, 0 },
	};
	int op, n;

	while ((op = getopt_long(argc, argv, "s:b:f:B:i:I:C:S:p:k:T:h",
				 longopts, NULL)) != -1) {
		n = optarg ? parse_count(optarg) : 0;
		switch (op) {
		case 's':
			opt.server = optarg;
			break;
		case 'b':
			opt.bind_addr = optarg;
			break;
		case 'f':
			if (!strncasecmp("ip", optarg, 2)) {
				opt.numeric = 1;
			} else if (strcasecmp("name", optarg)) {
				fprintf(stderr, "%s: -f %s: AF_RSTREAM takes name, ip or ipv6\n",
					argv[0], optarg);
				print_usage(stderr, argv[0]);
				return 1;
			}
			break;
		case 'B':
		case 'i':
		case 'I':
		case 'C':
		case 'k':
		case 'P':
			if (n < 0 || ((op == 'I' || op == 'C') && n == 0)) {
				if (op == 'P')
					fprintf(stderr, "%s: --busy-poll %s: not a valid number\n",
						argv[0], optarg);
				else
					fprintf(stderr, "%s: -%c %s: not a valid number\n",
						argv[0], op, optarg);
				print_usage(stderr, argv[0]);
				return 1;
			}
			if (op == 'B')
				opt.buffer_size = n;
			else if (op == 'i')
				opt.inline_size = n;
			else if (op == 'k')
				opt.keepalive = n;
			else if (op == 'P')
				opt.busy_poll = n;
			else if (op == 'I')
				iterations = n;
			else
				transfer_count = n;
			if (op == 'I' || op == 'C')
				opt.custom = 1;
			break;
		case 'S':
			if (!strncasecmp("all", optarg, 3)) {
				opt.all_sizes = 1;
			} else if (n > 0) {
				opt.custom = 1;
				transfer_size = n;
			} else {
				fprintf(stderr, "%s: -S %s: a size or 'all'\n",
					argv[0], optarg);
				print_usage(stderr, argv[0]);
				return 1;
			}
			break;
		case 'p':
			opt.port = optarg;
			break;
		case 'Z':
			opt.zerocopy = 1;
			break;
		case 'T':
			if (!set_test_option(optarg))
				break;
			fprintf(stderr, "%s: -T %s: unknown test option\n",
				argv[0], optarg);
			print_usage(stderr, argv[0]);
			return 1;
		case 'h':
			print_usage(stdout, argv[0]);
			return 0;
		default:
			print_usage(stderr, argv[0]);
			return 1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "%s: unexpected argument '%s'\n", argv[0],
			argv[optind]);
		print_usage(stderr, argv[0]);
		return 1;
	}
	if (!(opt.flags & MSG_DONTWAIT))
		poll_timeout = -1;
	family = opt.use_tcp ? 0 : rstream_family();
	return run() ? 1 : 0;
}
