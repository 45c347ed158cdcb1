// SPDX-License-Identifier: GPL-2.0
/*
 * rstream_cmd: AF_RSTREAM socket calls in the order given, for the shell
 * selftests to put device removal, cgroups or module parameters between
 * them.  Each step prints one line, "STEP: ok [detail]" or "STEP: ERRNAME",
 * and the run goes on whatever a step returned.
 *
 *   rstream_cmd STEP...
 *
 * A step is words joined by commas (addresses keep their colons):
 *
 *   socket,S                 a new socket in slot S (0..127)
 *   tsocket,S                a new transparent socket (IPv4) in slot S
 *   bind,S,ADDR,PORT         bind, connect: an IPv4 or IPv6 address
 *   connect,S,ADDR,PORT
 *   connect_nb,S,ADDR,PORT   connect with O_NONBLOCK set: EINPROGRESS, and
 *                            the set-up goes on after the step
 *   listen,S,BACKLOG
 *   accept,S,T               accept into slot T
 *   poll,S                   prints the revents (POLLIN, POLLOUT, ...)
 *   sockname,S               prints the local address and port
 *   opt,S,NAME,VALUE         setsockopt: rcvbuf, sndbuf, sqsize, rqsize
 *   getopt,S,NAME            getsockopt: those, maxseg, and path
 *                            (RSTREAM_PATH)
 *   xfer,S,BYTES             send BYTES and read them back (an echo peer)
 *   echo,S                   echo what comes until EOF
 *   close,S
 *   close_on_error,S,T       close each of slots S..T as soon as poll
 *                            reports an error on it (checking every
 *                            100 us, for 60 s at most): "close_on_error:
 *                            N closed on an error, M at the end"
 *   pause                    print "pause: waiting" and wait for SIGUSR1
 *   serve,ADDR,PORT          listen and accept, holding every connection,
 *                            until SIGUSR1 or SIGTERM
 *   fill,ADDR,PORT,MAX       connect until a connect fails or MAX are
 *                            made, holding them: "fill: N made, then ERR",
 *                            and "fill-time: MS ms" they took in all
 *
 * Every blocking call gives up after 10 s (SO_RCVTIMEO and SO_SNDTIMEO).
 * Exit status 0, or 2 for a step it does not know.  With
 * RSTREAM_CMD_TCP set in the environment, TCP (to check this program).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <linux/rstream.h>

#include "rstream_util.h"

#define SLOTS		128
#define MAX_HELD	16384
#define TIMEOUT_S	10
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))

static int fds[SLOTS];
static int woken;	/* set by the signal handler */

static void on_signal(int sig)
{
	__atomic_store_n(&woken, 1, __ATOMIC_RELAXED);
}

static bool signalled(void)
{
	return __atomic_load_n(&woken, __ATOMIC_RELAXED);
}

static int addr_of(const char *host, const char *port,
		   struct sockaddr_storage *ss, socklen_t *len)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &sin->sin_addr) == 1) {
		sin->sin_family = AF_INET;
		sin->sin_port = htons(atoi(port));
		*len = sizeof(*sin);
		return 0;
	}
	if (inet_pton(AF_INET6, host, &sin6->sin6_addr) == 1) {
		sin6->sin6_family = AF_INET6;
		sin6->sin6_port = htons(atoi(port));
		*len = sizeof(*sin6);
		return 0;
	}
	return -1;
}

static int new_socket(bool transparent)
{
	struct timeval tv = { .tv_sec = TIMEOUT_S };
	int fd = socket(getenv("RSTREAM_CMD_TCP") ? AF_INET : rstream_family(),
			SOCK_STREAM, transparent ? RSTREAM_PROTO_TCP4 : 0);

	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	}
	return fd;
}

static const struct {
	const char *name;
	int level, opt;
} options[] = {
	{ "rcvbuf", SOL_SOCKET, SO_RCVBUF },
	{ "sndbuf", SOL_SOCKET, SO_SNDBUF },
	{ "sqsize", SOL_RDMA, RDMA_SQSIZE },
	{ "rqsize", SOL_RDMA, RDMA_RQSIZE },
	{ "maxseg", SOL_TCP, TCP_MAXSEG },
	{ "path", SOL_RDMA, RSTREAM_PATH },
};

static int option(const char *name, int *level, int *opt)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(options); i++) {
		if (!strcmp(options[i].name, name)) {
			*level = options[i].level;
			*opt = options[i].opt;
			return 0;
		}
	}
	return -1;
}

/* Send @n bytes and read them back from an echoing peer. */
static int xfer(int fd, long n)
{
	static char out[65536], in[65536];
	long done = 0, got, m, i;

	for (i = 0; i < (long)sizeof(out); i++)
		out[i] = i * 7 + 3;
	while (done < n) {
		m = n - done < (long)sizeof(out) ? n - done : (long)sizeof(out);
		if (send(fd, out, m, MSG_NOSIGNAL) != m)
			return -1;
		for (got = 0; got < m; got += i) {
			i = recv(fd, in + got, m - got, 0);
			if (i <= 0) {
				if (!i)
					errno = ECONNRESET;
				return -1;
			}
		}
		if (memcmp(in, out, m)) {
			errno = EILSEQ;
			return -1;
		}
		done += m;
	}
	return 0;
}

static void echo(int fd)
{
	char buf[65536];
	long n;

	while ((n = recv(fd, buf, sizeof(buf), 0)) > 0)
		if (send(fd, buf, n, MSG_NOSIGNAL) != n)
			break;
}

static void wait_signal(void)
{
	while (!signalled())
		pause();
	__atomic_store_n(&woken, 0, __ATOMIC_RELAXED);
}

/* Listen and accept until signalled, holding what arrives. */
static int accept_all(struct sockaddr_storage *ss, socklen_t len)
{
	static int held[MAX_HELD];
	int lfd = new_socket(false), one = 1, n = 0, i;

	if (lfd < 0)
		return -1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(lfd, (struct sockaddr *)ss, len) || listen(lfd, 128))
		return -1;
	printf("%s: listening\n", "serve");
	while (!signalled()) {
		struct pollfd p = { .fd = lfd, .events = POLLIN };
		int fd;

		if (poll(&p, 1, 100) <= 0)
			continue;
		fd = accept(lfd, NULL, NULL);
		if (fd >= 0 && n < MAX_HELD)
			held[n++] = fd;
		else if (fd >= 0)
			close(fd);
	}
	printf("%s: held %d\n", "serve", n);
	for (i = 0; i < n; i++)
		close(held[i]);
	close(lfd);
	return 0;
}

/* Connect until refused, holding each connection; report the count. */
static void connect_all(struct sockaddr_storage *ss, socklen_t len, int max)
{
	struct timespec t0, t1;
	int n = 0, err = 0;

	clock_gettime(CLOCK_MONOTONIC, &t0);

	while (n < max) {
		int fd = new_socket(false);

		if (fd < 0) {
			err = errno;
			break;
		}
		if (connect(fd, (struct sockaddr *)ss, len)) {
			err = errno;
			close(fd);
			break;
		}
		n++;	/* held open until the program ends */
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	if (err)
		printf("%s: %d made, then %s\n", "fill", n, strerrorname_np(err));
	else
		printf("%s: %d made\n", "fill", n);
	printf("fill-time: %.1f ms\n", (t1.tv_sec - t0.tv_sec) * 1e3 +
	       (t1.tv_nsec - t0.tv_nsec) / 1e6);
}

/* Close slots @first..@last each as soon as it reports an error. */
static void close_on_error(int first, int last)
{
	int open = 0, on_error = 0, s, round;

	for (s = first; s <= last; s++)
		open += fds[s] >= 0;
	for (round = 0; open && round < 600000; round++) {
		for (s = first; s <= last; s++) {
			struct pollfd p = { .fd = fds[s] };

			if (fds[s] < 0 || poll(&p, 1, 0) != 1 ||
			    !(p.revents & (POLLERR | POLLHUP)))
				continue;
			close(fds[s]);
			fds[s] = -1;
			on_error++;
			open--;
		}
		usleep(100);
	}
	for (s = first; s <= last; s++) {
		if (fds[s] >= 0)
			close(fds[s]);
		fds[s] = -1;
	}
	printf("%s: %d closed on an error, %d at the end\n", "close_on_error",
	       on_error, open);
}

static const char *revents(short r)
{
	static char buf[128];

	snprintf(buf, sizeof(buf), "%s%s%s%s%s", r & POLLIN ? " POLLIN" : "",
		 r & POLLOUT ? " POLLOUT" : "", r & POLLERR ? " POLLERR" : "",
		 r & POLLHUP ? " POLLHUP" : "", r & POLLRDHUP ? " POLLRDHUP" : "");
	return buf[0] ? buf + 1 : "none";
}

/* One step; 0, or -1 for a step this program does not know. */
static int step(char **f, int n)
{
	struct sockaddr_storage ss;
	int s = n > 1 ? atoi(f[1]) % SLOTS : 0;
	int ret = 0, level, opt, val;
	const char *detail = "";
	char buf[128];
	socklen_t len;

	errno = 0;
	if ((!strcmp(f[0], "socket") || !strcmp(f[0], "tsocket")) && n == 2) {
		fds[s] = new_socket(f[0][0] == 't');
		ret = fds[s];
	} else if (!strcmp(f[0], "bind") && n == 4) {
		if (addr_of(f[2], f[3], &ss, &len))
			return -1;
		ret = bind(fds[s], (struct sockaddr *)&ss, len);
	} else if (!strcmp(f[0], "connect") && n == 4) {
		if (addr_of(f[2], f[3], &ss, &len))
			return -1;
		ret = connect(fds[s], (struct sockaddr *)&ss, len);
	} else if (!strcmp(f[0], "connect_nb") && n == 4) {
		if (addr_of(f[2], f[3], &ss, &len))
			return -1;
		ret = fcntl(fds[s], F_SETFL, fcntl(fds[s], F_GETFL) | O_NONBLOCK);
		if (!ret)
			ret = connect(fds[s], (struct sockaddr *)&ss, len);
	} else if (!strcmp(f[0], "listen") && n == 3) {
		ret = listen(fds[s], atoi(f[2]));
	} else if (!strcmp(f[0], "accept") && n == 3) {
		ret = accept(fds[s], NULL, NULL);
		if (ret >= 0)
			fds[atoi(f[2]) % SLOTS] = ret;
	} else if (!strcmp(f[0], "poll") && n == 2) {
		struct pollfd p = {
			.fd = fds[s], .events = POLLIN | POLLOUT | POLLRDHUP,
		};

		ret = poll(&p, 1, 0);
		detail = revents(p.revents);
	} else if (!strcmp(f[0], "sockname") && n == 2) {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;
		struct sockaddr_in *sin = (struct sockaddr_in *)&ss;
		char host[INET6_ADDRSTRLEN] = "";

		len = sizeof(ss);
		ret = getsockname(fds[s], (struct sockaddr *)&ss, &len);
		if (!ret && ss.ss_family == AF_INET6) {
			inet_ntop(AF_INET6, &sin6->sin6_addr, host, sizeof(host));
			snprintf(buf, sizeof(buf), "%s %u scope %u", host,
				 ntohs(sin6->sin6_port), sin6->sin6_scope_id);
		} else if (!ret) {
			inet_ntop(AF_INET, &sin->sin_addr, host, sizeof(host));
			snprintf(buf, sizeof(buf), "%s %u", host,
				 ntohs(sin->sin_port));
		}
		detail = ret ? "" : buf;
	} else if (!strcmp(f[0], "opt") && n == 4) {
		if (option(f[2], &level, &opt))
			return -1;
		val = atoi(f[3]);
		ret = setsockopt(fds[s], level, opt, &val, sizeof(val));
	} else if (!strcmp(f[0], "getopt") && n == 3) {
		if (option(f[2], &level, &opt))
			return -1;
		len = sizeof(val);
		ret = getsockopt(fds[s], level, opt, &val, &len);
		snprintf(buf, sizeof(buf), "%d", val);
		detail = ret ? "" : buf;
	} else if (!strcmp(f[0], "xfer") && n == 3) {
		ret = xfer(fds[s], atol(f[2]));
	} else if (!strcmp(f[0], "echo") && n == 2) {
		echo(fds[s]);
	} else if (!strcmp(f[0], "close") && n == 2) {
		ret = close(fds[s]);
		fds[s] = -1;
	} else if (!strcmp(f[0], "close_on_error") && n == 3) {
		close_on_error(s, atoi(f[2]) % SLOTS);
		return 0;
	} else if (!strcmp(f[0], "pause") && n == 1) {
		printf("pause: waiting\n");
		wait_signal();
	} else if (!strcmp(f[0], "serve") && n == 3) {
		if (addr_of(f[1], f[2], &ss, &len))
			return -1;
		ret = accept_all(&ss, len);
	} else if (!strcmp(f[0], "fill") && n == 4) {
		if (addr_of(f[1], f[2], &ss, &len))
			return -1;
		connect_all(&ss, len, atoi(f[3]));
		return 0;
	} else {
		return -1;
	}
	if (ret < 0)
		printf("%s: %s\n", f[0], strerrorname_np(errno));
	else
		printf("%s: ok%s%s\n", f[0], *detail ? " " : "", detail);
	return 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	int i, n;

	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
	setvbuf(stdout, NULL, _IOLBF, 0);
	for (i = 0; i < SLOTS; i++)
		fds[i] = -1;
	for (i = 1; i < argc; i++) {
		char *f[6], *save = NULL, *tok;

		n = 0;
		for (tok = strtok_r(argv[i], ",", &save); tok && n < 6;
		     tok = strtok_r(NULL, ",", &save))
			f[n++] = tok;
		if (!n || step(f, n)) {
			fprintf(stderr, "rstream_cmd: bad step %d\n", i);
			return 2;
		}
	}
	return 0;
}
