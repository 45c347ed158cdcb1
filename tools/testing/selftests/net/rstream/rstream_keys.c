// SPDX-License-Identifier: GPL-2.0
/*
 * rstream_keys: holds, for a test guest's life, the kernel's static keys
 * that the tests' sockets would otherwise switch on and off, so that no
 * kernel text is patched while tests move data.
 *
 *   rstream_keys
 *
 * Under QEMU's TCG (the test rig's guests) a vCPU that runs code another
 * vCPU is patching may execute the patch's temporary int3 after the patch
 * is done: a false "Oops: int3" in whatever code was patched.  So, before
 * any test runs:
 *
 *  - the socket-option keys are set on sockets held to the end
 *    (rstream_pin_static_keys(): timestamps, TCP_TX_DELAY, MD5, minimum
 *    TTL and hop count);
 *  - one TCP connection over IPv4 and one over IPv6 (loopback) are made
 *    and closed, and one of each refused (a reset: IPv6 labels it with a
 *    flow hash), which runs the kernel's one-time initialisations of
 *    connection hashing, sequence numbers and flow hashing
 *    (net_get_random_once()); each switches a key off from a work item
 *    just after.
 *
 * Prints "ready" when done, then waits to be killed.  Exit status 1 if a
 * socket call failed.  (The memory cgroup keys are held by a cgroup that
 * the guest's init makes.)
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include "rstream_util.h"

/*
 * A connection to ourselves on @addr (of @family), made and closed, then
 * one to a port nobody listens on, refused.
 */
static int loop_connections(int family, const char *addr)
{
	struct sockaddr_storage ss = { .ss_family = family };
	socklen_t len = sizeof(ss);
	int l, c, a, r, ok;

	if (family == AF_INET)
		inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr);
	else
		inet_pton(AF_INET6, addr,
			  &((struct sockaddr_in6 *)&ss)->sin6_addr);
	l = socket(family, SOCK_STREAM, 0);
	c = socket(family, SOCK_STREAM, 0);
	r = socket(family, SOCK_STREAM, 0);
	ok = l >= 0 && c >= 0 && r >= 0 &&
	     !bind(l, (struct sockaddr *)&ss, len) && !listen(l, 1) &&
	     !getsockname(l, (struct sockaddr *)&ss, &len) &&
	     !connect(c, (struct sockaddr *)&ss, len);
	a = ok ? accept(l, NULL, NULL) : -1;
	if (a < 0) {
		fprintf(stderr, "rstream_keys: a connection to %s: %s\n", addr,
			strerror(errno));
		ok = 0;
	}
	close(a);
	close(c);
	close(l);
	/* The listener's port is closed now. */
	if (ok && (connect(r, (struct sockaddr *)&ss, len) == 0 ||
		   errno != ECONNREFUSED)) {
		fprintf(stderr, "rstream_keys: a closed port on %s: %s\n",
			addr, strerror(errno));
		ok = 0;
	}
	close(r);
	return ok ? 0 : -1;
}

int main(int argc, char **argv)
{
	if (argc != 1) {
		fprintf(stderr, "usage: %s\n", argv[0]);
		return 2;
	}
	if (rstream_pin_static_keys() ||
	    loop_connections(AF_INET, "127.0.0.1") ||
	    loop_connections(AF_INET6, "::1")) {
		perror("rstream_keys");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
