// SPDX-License-Identifier: GPL-2.0
/*
 * A quick end-to-end check for make run: a server and a client in one
 * guest move a verified byte pattern both ways over AF_RSTREAM.
 *   rstream_smoke ADDR PORT SIZE COUNT           both ends, forked
 *   rstream_smoke server|client ADDR PORT SIZE COUNT   one end
 * With RSTREAM_SMOKE_INET set, the sockets are AF_INET ones, for running
 * one end as a userspace rsocket under librspreload.so.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/rstream.h>

#include "rstream_util.h"

static int family(void)
{
	return getenv("RSTREAM_SMOKE_INET") ? AF_INET : rstream_family();
}

static int addr_of(const char *host, int port, struct sockaddr_storage *ss)
{
	struct sockaddr_in *in = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		return sizeof(*in);
	}
	if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		return sizeof(*in6);
	}
	fprintf(stderr, "bad address %s\n", host);
	exit(2);
}

static unsigned char pattern(unsigned long long i)
{
	return (i * 7 + (i >> 11)) & 0xff;
}

static void die(const char *what)
{
	perror(what);
	exit(1);
}

/* Read everything until EOF, checking the pattern; returns the byte count. */
static unsigned long long drain(int fd)
{
	static unsigned char buf[1 << 20];
	static const size_t sizes[] = { 1, 7, 4096, 65536, sizeof(buf) };
	unsigned long long pos = 0;
	unsigned int k = 0;
	ssize_t n, i;

	for (;;) {
		n = recv(fd, buf, sizes[k++ % 5], 0);
		if (n < 0)
			die("recv");
		if (!n)
			return pos;
		for (i = 0; i < n; i++, pos++)
			if (buf[i] != pattern(pos)) {
				fprintf(stderr, "FAIL: byte %llu is %u, expected %u\n",
					pos, buf[i], pattern(pos));
				exit(1);
			}
	}
}

static void blast(int fd, size_t size, unsigned long count)
{
	unsigned char *buf = malloc(size);
	unsigned long long pos = 0;
	unsigned long c;
	size_t i, off;
	ssize_t n;

	if (!buf)
		die("malloc");
	for (c = 0; c < count; c++) {
		for (i = 0; i < size; i++)
			buf[i] = pattern(pos + i);
		for (off = 0; off < size; off += n) {
			n = send(fd, buf + off, size - off, MSG_NOSIGNAL);
			if (n < 0)
				die("send");
		}
		pos += size;
	}
	if (shutdown(fd, SHUT_WR))
		die("shutdown");
	free(buf);
}

int main(int argc, char **argv)
{
	struct sockaddr_storage ss;
	unsigned long long total, got;
	struct timeval t0, t1;
	int lfd, fd, len, status;
	unsigned long count;
	size_t size;
	double secs;
	pid_t pid = -1;
	int role = 0;	/* 0 both, 1 server, 2 client */

	if (argc == 6) {
		role = !strcmp(argv[1], "server") ? 1 : 2;
		argv++;
		argc--;
	}
	if (argc != 5) {
		fprintf(stderr, "usage: %s [server|client] ADDR PORT SIZE COUNT\n",
			argv[0]);
		return 2;
	}
	size = strtoul(argv[3], NULL, 0);
	count = strtoul(argv[4], NULL, 0);
	total = (unsigned long long)size * count;
	len = addr_of(argv[1], atoi(argv[2]), &ss);
	alarm(600);

	if (role == 2)
		goto client;
	lfd = socket(family(), SOCK_STREAM, 0);
	if (lfd < 0)
		die("socket");
	if (bind(lfd, (struct sockaddr *)&ss, len))
		die("bind");
	if (listen(lfd, 4))
		die("listen");

	if (!role)
		pid = fork();
	if (!pid) {
client:
		fd = socket(family(), SOCK_STREAM, 0);
		if (fd < 0)
			die("socket");
		if (connect(fd, (struct sockaddr *)&ss, len))
			die("connect");
		blast(fd, size, count);
		got = drain(fd);
		if (got != total) {
			fprintf(stderr, "FAIL: client got %llu of %llu bytes\n",
				got, total);
			return 1;
		}
		close(fd);
		return 0;
	}
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		die("accept");
	gettimeofday(&t0, NULL);
	got = drain(fd);
	if (got != total) {
		fprintf(stderr, "FAIL: server got %llu of %llu bytes\n", got,
			total);
		return 1;
	}
	blast(fd, size, count);
	if (pid > 0 && (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) ||
			WEXITSTATUS(status)))
		return 1;
	if (role == 1) {
		/* The client closes after reading all: wait for its EOF. */
		char c;

		if (recv(fd, &c, 1, 0) != 0)
			return 1;
	}
	gettimeofday(&t1, NULL);
	secs = t1.tv_sec - t0.tv_sec + (t1.tv_usec - t0.tv_usec) / 1e6;
	printf("ok: %llu bytes each way, verified, in %.2f s (%.1f MB/s)\n",
	       total, secs, 2 * total / secs / 1e6);
	close(fd);
	close(lfd);
	return 0;
}
