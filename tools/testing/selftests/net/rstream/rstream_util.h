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

#endif /* RSTREAM_UTIL_H */
