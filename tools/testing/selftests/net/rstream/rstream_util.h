/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Small helpers shared by the AF_RSTREAM test programs.
 */
#ifndef RSTREAM_UTIL_H
#define RSTREAM_UTIL_H

#include <stdio.h>
#include <linux/rstream.h>

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
