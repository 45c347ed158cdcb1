/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Small helpers shared by the AF_RSTREAM test programs.
 */
#ifndef RSTREAM_UTIL_H
#define RSTREAM_UTIL_H

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <linux/rstream.h>

/* The errno of a call that failed, 0 if it succeeded. */
#define errno_of(call)	((call) < 0 ? errno : 0)

static inline long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static inline void rstream_on_alarm(int sig)
{
}

/* Without SA_RESTART: a call the alarm interrupts returns at once. */
static inline void guard_init(void)
{
	struct sigaction sa = { .sa_handler = rstream_on_alarm };

	sigaction(SIGALRM, &sa, NULL);
}

/*
 * A blocking call that lasts more than @s seconds fails with ETIME,
 * whatever it returns once the alarm interrupted it (alarm(0) returns 0
 * only if the alarm went off).  GUARDED() is the file's GUARD_S.
 */
#define GUARDED_S(s, call) ({		\
	long __ret;			\
	int __err;			\
					\
	alarm(s);			\
	__ret = (call);			\
	__err = errno;			\
	if (!alarm(0)) {		\
		__ret = -1;		\
		__err = ETIME;		\
	}				\
	errno = __err;			\
	__ret;				\
})
#define GUARDED(call)	GUARDED_S(GUARD_S, call)

/* The integer in the file at @path, or -1 if there is none. */
static inline int rstream_read_int(const char *path)
{
	FILE *f = fopen(path, "r");
	int v = -1;

	if (!f)
		return -1;
	if (fscanf(f, "%d", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

/* The family number the loaded module registered (AF_RSTREAM if unknown). */
static inline int rstream_family(void)
{
	int v = rstream_read_int(RSTREAM_FAMILY_SYSFS);

	return v > 0 ? v : AF_RSTREAM;
}

/*
 * Sets, for as long as the calling process lives, the static keys that
 * TCP's and IP's socket options switch on with the first socket that
 * uses them and off with the last (SO_TIMESTAMP, TCP_TX_DELAY,
 * TCP_MD5SIG, IP_MINTTL, IPV6_MINHOPCOUNT).  Each switch patches kernel
 * text; under QEMU's TCG a vCPU that runs the patched code meanwhile may
 * still execute the patch's temporary int3 afterwards, a false "Oops:
 * int3".  With the keys held, tests that use the options switch nothing.
 * Returns -1 if a socket could not be made.
 */
static inline int rstream_pin_static_keys(void)
{
	int one = 1, fd4 = socket(AF_INET, SOCK_STREAM, 0);
	int fd6 = socket(AF_INET6, SOCK_STREAM, 0);
	struct tcp_md5sig md5 = { .tcpm_keylen = 4 };
	struct sockaddr_in *sin = (struct sockaddr_in *)&md5.tcpm_addr;

	if (fd4 < 0 || fd6 < 0)
		return -1;
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, "198.51.100.254", &sin->sin_addr);
	setsockopt(fd4, SOL_SOCKET, SO_TIMESTAMP, &one, sizeof(one));
	setsockopt(fd4, SOL_TCP, 37 /* TCP_TX_DELAY */, &one, sizeof(one));
	setsockopt(fd4, SOL_TCP, TCP_MD5SIG, &md5, sizeof(md5));
	setsockopt(fd4, SOL_IP, IP_MINTTL, &one, sizeof(one));
	setsockopt(fd6, SOL_IPV6, 73 /* IPV6_MINHOPCOUNT */, &one, sizeof(one));
	return 0;
}

#endif /* RSTREAM_UTIL_H */
