// SPDX-License-Identifier: GPL-2.0
/*
 * AF_RSTREAM socket creation and release, run with rstream.ko loaded with
 * its default parameters.
 *
 * Connections and data are in rstream_stream.c and rstream_data.sh.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/rstream.h>

#include "kselftest_harness.h"
#include "rstream_util.h"

#ifndef IPPROTO_SCTP
#define IPPROTO_SCTP 132
#endif

/* The sockets column of /proc/net/protocols for RSTREAM. */
static int rstream_sockets_in_use(void)
{
	char line[512], name[64];
	int size, sockets, found = -1;
	FILE *f = fopen("/proc/net/protocols", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %d %d", name, &size, &sockets) == 3 &&
		    !strcmp(name, "RSTREAM"))
			found = sockets;
	}
	fclose(f);
	return found;
}

TEST(family_matches_sysfs)
{
	int family = rstream_read_int(RSTREAM_FAMILY_SYSFS);
	socklen_t len;
	int fd, v;

	ASSERT_EQ(AF_RSTREAM, family);
	fd = socket(family, SOCK_STREAM, 0);
	ASSERT_LE(0, fd) TH_LOG("socket: %s", strerror(errno));
	len = sizeof(v);
	ASSERT_EQ(0, getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len));
	EXPECT_EQ(family, v);
	EXPECT_EQ(0, close(fd));
}

FIXTURE(socket_types) {
};

FIXTURE_VARIANT(socket_types) {
	int type;
	int protocol;
	int err;	/* 0: the socket is created */
};

FIXTURE_VARIANT_ADD(socket_types, stream) {
	.type = SOCK_STREAM, .protocol = 0, .err = 0,
};

FIXTURE_VARIANT_ADD(socket_types, stream_tcp) {
	.type = SOCK_STREAM, .protocol = IPPROTO_TCP, .err = 0,
};

FIXTURE_VARIANT_ADD(socket_types, stream_transparent4) {
	.type = SOCK_STREAM, .protocol = RSTREAM_PROTO_TCP4, .err = 0,
};

FIXTURE_VARIANT_ADD(socket_types, stream_transparent6) {
	.type = SOCK_STREAM, .protocol = RSTREAM_PROTO_TCP6, .err = 0,
};

FIXTURE_VARIANT_ADD(socket_types, stream_past_transparent) {
	.type = SOCK_STREAM, .protocol = RSTREAM_PROTO_TCP6 + 1,
	.err = EPROTONOSUPPORT,
};

FIXTURE_VARIANT_ADD(socket_types, dgram_transparent) {
	.type = SOCK_DGRAM, .protocol = RSTREAM_PROTO_TCP4,
	.err = ESOCKTNOSUPPORT,
};

FIXTURE_VARIANT_ADD(socket_types, stream_udp) {
	.type = SOCK_STREAM, .protocol = IPPROTO_UDP,
	.err = EPROTONOSUPPORT,
};

FIXTURE_VARIANT_ADD(socket_types, stream_sctp) {
	.type = SOCK_STREAM, .protocol = IPPROTO_SCTP,
	.err = EPROTONOSUPPORT,
};

FIXTURE_VARIANT_ADD(socket_types, stream_raw_protocol) {
	.type = SOCK_STREAM, .protocol = IPPROTO_RAW,
	.err = EPROTONOSUPPORT,
};

FIXTURE_VARIANT_ADD(socket_types, stream_negative_protocol) {
	.type = SOCK_STREAM, .protocol = -1, .err = EPROTONOSUPPORT,
};

FIXTURE_VARIANT_ADD(socket_types, dgram) {
	.type = SOCK_DGRAM, .protocol = 0, .err = ESOCKTNOSUPPORT,
};

FIXTURE_VARIANT_ADD(socket_types, dgram_udp) {
	.type = SOCK_DGRAM, .protocol = IPPROTO_UDP, .err = ESOCKTNOSUPPORT,
};

FIXTURE_VARIANT_ADD(socket_types, seqpacket) {
	.type = SOCK_SEQPACKET, .protocol = 0, .err = ESOCKTNOSUPPORT,
};

FIXTURE_VARIANT_ADD(socket_types, raw) {
	.type = SOCK_RAW, .protocol = 0, .err = ESOCKTNOSUPPORT,
};

FIXTURE_VARIANT_ADD(socket_types, rdm) {
	.type = SOCK_RDM, .protocol = 0, .err = ESOCKTNOSUPPORT,
};

FIXTURE_VARIANT_ADD(socket_types, packet) {
	.type = SOCK_PACKET, .protocol = 0, .err = ESOCKTNOSUPPORT,
};

FIXTURE_SETUP(socket_types)
{
}

FIXTURE_TEARDOWN(socket_types)
{
}

TEST_F(socket_types, create)
{
	int fd = socket(AF_RSTREAM, variant->type, variant->protocol);
	int saved = errno;

	if (variant->err) {
		EXPECT_EQ(-1, fd);
		EXPECT_EQ(variant->err, saved) TH_LOG("errno %s",
						      strerror(saved));
		if (fd >= 0)
			close(fd);
		return;
	}
	ASSERT_LE(0, fd) TH_LOG("socket: %s", strerror(saved));
	EXPECT_EQ(0, close(fd));
}

/*
 * SO_DOMAIN and SO_TYPE say what the socket is.  SO_PROTOCOL is 0 whichever
 * protocol was asked for: a socket whose protocol reads IPPROTO_TCP is taken
 * for a TCP socket by BPF helpers (bpf_tcp_sock(), bpf_setsockopt()), which
 * would then read and write past the end of it.
 */
TEST(socket_identity)
{
	int protocols[] = { 0, IPPROTO_TCP };
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(protocols); i++) {
		int fd = socket(AF_RSTREAM, SOCK_STREAM, protocols[i]);
		socklen_t len = sizeof(int);
		int v;

		ASSERT_LE(0, fd);
		ASSERT_EQ(0, getsockopt(fd, SOL_SOCKET, SO_TYPE, &v, &len));
		EXPECT_EQ(SOCK_STREAM, v);
		ASSERT_EQ(0, getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &v, &len));
		EXPECT_EQ(0, (int)v);
		ASSERT_EQ(0, getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &v, &len));
		EXPECT_EQ(AF_RSTREAM, v);
		EXPECT_EQ(0, close(fd));
	}
}

/*
 * SO_REUSEPORT: the socket core refuses it for any family but AF_INET and
 * AF_INET6, before rstream sees it (rstream(7)).
 */
TEST(so_reuseport_refused)
{
	int fd = socket(AF_RSTREAM, SOCK_STREAM, 0), one = 1;

	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one,
				 sizeof(one)));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_EQ(0, close(fd));
}

/*
 * Nor does rstream's own RSTREAM_REUSEPORT make a socket share a port: it
 * is for transparent sockets, which take TCP for it.
 */
TEST(rstream_reuseport_refused)
{
	int fd = socket(AF_RSTREAM, SOCK_STREAM, 0), one = 1, val = -1;
	socklen_t len = sizeof(val);

	ASSERT_LE(0, fd);
	EXPECT_EQ(-1, setsockopt(fd, SOL_RDMA, RSTREAM_REUSEPORT, &one,
				 sizeof(one)));
	EXPECT_EQ(EOPNOTSUPP, errno);
	EXPECT_EQ(0, getsockopt(fd, SOL_RDMA, RSTREAM_REUSEPORT, &val, &len));
	EXPECT_EQ(0, val);
	len = sizeof(val);
	EXPECT_EQ(0, getsockopt(fd, SOL_RDMA, RSTREAM_PATH, &val, &len));
	EXPECT_EQ(RSTREAM_PATH_RDMA, val);
	EXPECT_EQ(0, close(fd));
}

TEST(socket_flags)
{
	int fd = socket(AF_RSTREAM, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
			0);

	ASSERT_LE(0, fd);
	EXPECT_TRUE(fcntl(fd, F_GETFL) & O_NONBLOCK);
	EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(0, close(fd));

	fd = socket(AF_RSTREAM, SOCK_STREAM, 0);
	ASSERT_LE(0, fd);
	EXPECT_FALSE(fcntl(fd, F_GETFL) & O_NONBLOCK);
	EXPECT_FALSE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	EXPECT_EQ(0, close(fd));
}

/* Like TCP, any user may create one. */
TEST(socket_unprivileged)
{
	pid_t pid = fork();
	int status;

	ASSERT_LE(0, pid);
	if (pid == 0) {
		int fd;

		if (setgid(65534) || setuid(65534))
			_exit(2);
		fd = socket(AF_RSTREAM, SOCK_STREAM, 0);
		_exit(fd >= 0 && close(fd) == 0 ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	ASSERT_TRUE(WIFEXITED(status));
	EXPECT_EQ(0, WEXITSTATUS(status));
}

/* An unconnected socket answers as an unconnected TCP socket does. */
TEST(unconnected_calls)
{
	struct sockaddr_in sin;
	socklen_t len = sizeof(sin);
	unsigned int v = 0;
	struct pollfd pfd;
	int fd, pair[2];
	char c = 'x';

	fd = socket(AF_RSTREAM, SOCK_STREAM | SOCK_NONBLOCK, 0);
	ASSERT_LE(0, fd);

	memset(&sin, 0xff, sizeof(sin));
	EXPECT_EQ(0, getsockname(fd, (struct sockaddr *)&sin, &len));
	EXPECT_EQ(sizeof(sin), len);
	EXPECT_EQ(AF_INET, sin.sin_family);
	EXPECT_EQ(0, sin.sin_port);
	EXPECT_EQ(htonl(INADDR_ANY), sin.sin_addr.s_addr);
	EXPECT_EQ(-1, getpeername(fd, (struct sockaddr *)&sin, &len));
	EXPECT_EQ(ENOTCONN, errno);
	EXPECT_EQ(-1, shutdown(fd, SHUT_RDWR));
	EXPECT_EQ(ENOTCONN, errno);
	EXPECT_EQ(-1, send(fd, &c, 1, MSG_NOSIGNAL));
	EXPECT_EQ(EPIPE, errno);
	EXPECT_EQ(-1, recv(fd, &c, 1, 0));
	EXPECT_EQ(ENOTCONN, errno);
	EXPECT_EQ(-1, accept(fd, NULL, NULL));
	EXPECT_EQ(EINVAL, errno);
	len = sizeof(v);
	EXPECT_EQ(0, getsockopt(fd, SOL_RDMA, RDMA_SQSIZE, &v, &len));
	EXPECT_EQ(64, (int)v);
	EXPECT_EQ(0, ioctl(fd, FIONREAD, &v));
	EXPECT_EQ(0, (int)v);
	EXPECT_EQ(-1, socketpair(AF_RSTREAM, SOCK_STREAM, 0, pair));
	EXPECT_EQ(EOPNOTSUPP, errno);

	/* Unconnected, as a TCP socket in TCP_CLOSE: hung up, at once. */
	pfd.fd = fd;
	pfd.events = POLLIN | POLLOUT | POLLRDHUP;
	EXPECT_EQ(1, poll(&pfd, 1, 1000));
	EXPECT_EQ(POLLHUP, pfd.revents);

	EXPECT_EQ(0, close(fd));
}

/* close() gives every socket back: the protocol's in-use count returns. */
TEST(close_releases_sockets)
{
	enum { N = 1000 };
	int before, fds[N], i;

	before = rstream_sockets_in_use();
	ASSERT_LE(0, before) TH_LOG("no RSTREAM line in /proc/net/protocols");
	for (i = 0; i < N; i++) {
		fds[i] = socket(AF_RSTREAM, SOCK_STREAM, 0);
		ASSERT_LE(0, fds[i]) TH_LOG("socket %d: %s", i,
					    strerror(errno));
	}
	EXPECT_EQ(before + N, rstream_sockets_in_use());
	for (i = 0; i < N; i++)
		ASSERT_EQ(0, close(fds[i]));
	EXPECT_EQ(before, rstream_sockets_in_use());
}

TEST_HARNESS_MAIN
