// SPDX-License-Identifier: GPL-2.0
/*
 * Helper for the shell selftests: create one socket and report the result.
 *
 *   rstream_sock FAMILY [hold]
 *
 * Prints "ok" if socket(FAMILY, SOCK_STREAM, 0) succeeds, else the errno
 * name; with "hold", keeps the socket open until killed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static const char *errno_name(int err)
{
	switch (err) {
	case EAFNOSUPPORT: return "EAFNOSUPPORT";
	case EPROTONOSUPPORT: return "EPROTONOSUPPORT";
	case ESOCKTNOSUPPORT: return "ESOCKTNOSUPPORT";
	case EINVAL: return "EINVAL";
	case EACCES: return "EACCES";
	case EPERM: return "EPERM";
	case ENOMEM: return "ENOMEM";
	default: return strerror(err);
	}
}

int main(int argc, char **argv)
{
	int fd;

	if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "hold"))) {
		fprintf(stderr, "usage: %s FAMILY [hold]\n", argv[0]);
		return 2;
	}
	fd = socket(atoi(argv[1]), SOCK_STREAM, 0);
	if (fd < 0) {
		printf("%s\n", errno_name(errno));
		return 1;
	}
	printf("ok\n");
	fflush(stdout);
	if (argc == 3)
		for (;;)
			pause();
	return close(fd) ? 1 : 0;
}
