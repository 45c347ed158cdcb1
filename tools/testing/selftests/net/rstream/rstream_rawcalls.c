// SPDX-License-Identifier: GPL-2.0
/*
 * rstream_rawcalls: the round trips of rstream_test_rawlat calls=1, made
 * by two programs as a socket's ping-pong is: this one writes and reads
 * /dev/rstream_rawlat_client, a child reads and writes
 * /dev/rstream_rawlat_server.  Each write() copies SIZE bytes in and
 * posts them to the other end; each read() spins until the other end's
 * arrive and copies them out.  It prints
 *
 *   rawcalls SIZE ROUNDTRIPS USEC-PER-ONE-WAY
 *
 * and exits 0, or names the call that failed and exits 1.  The first
 * byte of each round trip's message is its number, which the server
 * sends back and the client checks, so that bytes that did not move are
 * seen (exit 1).  Each read gives up after 5 s in the module
 * (ETIMEDOUT), so a lost write cannot hang it.
 *
 * With FAMILY (rstream_test_rawlat calls=1 family=FAMILY), the two ends
 * are sockets of that family instead, made with socket() and driven with
 * send() and recv(), as a socket program's are (the line then starts
 * "rawsockcalls").
 *
 *   rstream_rawcalls SIZE ROUNDTRIPS [FAMILY]
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEV "/dev/rstream_rawlat_"

static int family;	/* 0: the devices; else sockets of this family */

static ssize_t put(int fd, const char *buf, size_t size)
{
	return family ? send(fd, buf, size, 0) : write(fd, buf, size);
}

static ssize_t get(int fd, char *buf, size_t size)
{
	return family ? recv(fd, buf, size, 0) : read(fd, buf, size);
}

/* @n round trips at one end: the client writes first, the server answers. */
static int pingpong(const char *end, char *buf, size_t size, long n)
{
	int client = !strcmp(end, "client");
	char path[64];
	long i;
	int fd;

	snprintf(path, sizeof(path), DEV "%s", end);
	if (family)
		fd = socket(family, SOCK_STREAM, client ? 0 : 1);
	else
		fd = open(path, O_RDWR);
	if (fd < 0) {
		fprintf(stderr, "%s %s: %s\n", family ? "socket" : "open",
			family ? end : path, strerror(errno));
		return -1;
	}
	for (i = 0; i < n; i++) {
		errno = 0;
		buf[0] = (char)i;
		if (client && put(fd, buf, size) != (ssize_t)size)
			goto fail;
		buf[0] = (char)~i;	/* what a read that moved nothing leaves */
		if (get(fd, buf, size) != (ssize_t)size)
			goto fail;
		if (buf[0] != (char)i) {
			fprintf(stderr, "%s: round trip %ld: byte %d came\n",
				end, i, buf[0]);
			goto out;
		}
		if (!client && put(fd, buf, size) != (ssize_t)size)
			goto fail;
	}
	close(fd);
	return 0;
fail:
	fprintf(stderr, "%s: round trip %ld: %s\n", end, i,
		errno ? strerror(errno) : "short");
out:
	close(fd);
	return -1;
}

/* A decimal argument, or -1 if it is not one (or too big for an int). */
static long number(const char *arg)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(arg, &end, 10);
	if (errno || end == arg || *end || v < 0 || v > INT_MAX)
		return -1;
	return v;
}

int main(int argc, char **argv)
{
	struct timespec a, b;
	long size, n;
	char *buf;
	pid_t pid;
	int status, rc;
	double us;

	size = argc == 3 || argc == 4 ? number(argv[1]) : 0;
	n = argc == 3 || argc == 4 ? number(argv[2]) : 0;
	/* Not a number is refused, not taken as 0 (the devices). */
	family = argc == 4 ? number(argv[3]) : 0;
	if (size <= 0 || n <= 0 || family < 0) {
		fprintf(stderr, "usage: %s SIZE ROUNDTRIPS [FAMILY]\n",
			argv[0]);
		return 2;
	}
	buf = calloc(1, size);
	if (!buf)
		return 1;
	pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (!pid)
		_exit(pingpong("server", buf, size, n) ? 1 : 0);
	clock_gettime(CLOCK_MONOTONIC, &a);
	rc = pingpong("client", buf, size, n);
	clock_gettime(CLOCK_MONOTONIC, &b);
	if (rc)
		kill(pid, SIGTERM);	/* ends its read at once */
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status))
		rc = -1;
	if (rc)
		return 1;
	us = (b.tv_sec - a.tv_sec) * 1e6 + (b.tv_nsec - a.tv_nsec) / 1e3;
	printf("%s %ld %ld %.2f\n", family ? "rawsockcalls" : "rawcalls",
	       size, n, us / (2.0 * n));
	return 0;
}
