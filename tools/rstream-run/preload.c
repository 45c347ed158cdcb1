// SPDX-License-Identifier: GPL-2.0
/*
 * librstream-preload.so: TCP stream sockets of an unmodified program
 * become transparent AF_RSTREAM sockets (rstream-run(8)).
 *
 * socket(AF_INET or AF_INET6, SOCK_STREAM, 0 or IPPROTO_TCP) makes
 * socket(AF_RSTREAM, SOCK_STREAM, RSTREAM_PROTO_TCP4 or _TCP6) instead:
 * a kernel socket that holds a TCP socket from the start, listens on RDMA
 * and TCP, and connects over RDMA where it can and over TCP where it
 * cannot (rstream(7)).  Everything the program does to the descriptor -
 * flags, options, epoll, fork, exec - is the kernel's business: nothing
 * here follows the descriptor.
 *
 * Filters are looked at by connect() and listen(), and only when there
 * are some: a destination or port the configuration does not convert pins
 * the socket to TCP (RSTREAM_PATH) before the call goes on.  With -n,
 * connect() pins it to RDMA.
 *
 * The socket core refuses SO_REUSEPORT to AF_RSTREAM sockets: setsockopt()
 * makes it rstream's RSTREAM_REUSEPORT, TCP's SO_REUSEPORT on a transparent
 * socket (over RDMA, rdma_cm gives a port to one listener), and
 * getsockopt() reads it from there.  Kernels before 6.2 refuse SO_ZEROCOPY
 * too: setsockopt() makes it RSTREAM_ZEROCOPY there.
 *
 * The configuration is read once, when the library is loaded; after that
 * the wrappers take no lock and allocate nothing, so they are as
 * async-signal-safe and fork-safe as the calls they wrap.  Only -v's
 * reports format text.
 *
 * Configuration, from the environment (children inherit it):
 *   RSTREAM_RUN=0                 convert nothing
 *   RSTREAM_RUN_CONNECT=LIST      destinations to convert (default: all):
 *                                 ADDR[/PREFIX][,...], each optionally
 *                                 followed by :PORT ([ADDR]:PORT for
 *                                 IPv6), or :PORT alone; "none" for none
 *   RSTREAM_RUN_LISTEN=PORTS      listening ports to convert (default:
 *                                 all; "none" for none), comma-separated
 *   RSTREAM_RUN_FALLBACK=0        no fallback to TCP for connections
 *   RSTREAM_RUN_TIMEOUT=MS        how long a connection over RDMA may
 *                                 take before TCP is tried (default: the
 *                                 kernel's, 3000)
 *   RSTREAM_RUN_VERBOSE=1         one line on stderr per decision
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <linux/rstream.h>

#define MAX_RULES	32
#define MAX_LIST	4096	/* longest list taken from the environment */

struct rule {
	int family;		/* AF_UNSPEC: any address */
	unsigned char addr[16];
	int prefix;		/* bits */
	int port;		/* 0: any */
};

static int (*real_socket)(int, int, int);
static int (*real_connect)(int, const struct sockaddr *, socklen_t);
static int (*real_listen)(int, int);
static int (*real_getsockopt)(int, int, int, void *, socklen_t *);
static int (*real_setsockopt)(int, int, int, const void *, socklen_t);

static struct {
	bool off;
	bool fallback;
	bool verbose;
	int timeout_ms;		/* 0: the kernel's */
	int family;		/* the family number the module registered */
	bool connect_all, connect_none;
	int nconnect;
	struct rule connect[MAX_RULES];
	bool listen_all, listen_none;
	int nlisten;
	int listen[MAX_RULES];
} cfg;

static void say(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "rstream-run[%d]: ", getpid());
	va_start(ap, fmt);
	n += vsnprintf(line + n, sizeof(line) - n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(line) - 2)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

static const char *addr_str(const struct sockaddr *sa, char *buf, size_t len)
{
	const struct sockaddr_in *sin = (const void *)sa;
	const struct sockaddr_in6 *sin6 = (const void *)sa;
	char a[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &sin->sin_addr, a, sizeof(a));
		snprintf(buf, len, "%s:%u", a, ntohs(sin->sin_port));
	} else {
		inet_ntop(AF_INET6, &sin6->sin6_addr, a, sizeof(a));
		snprintf(buf, len, "[%s]:%u", a, ntohs(sin6->sin6_port));
	}
	return buf;
}

/* One rule of RSTREAM_RUN_CONNECT: ADDR[/PREFIX][:PORT], [ADDR6]:PORT, :PORT. */
static bool parse_rule(char *w, struct rule *r)
{
	char *port = NULL, *slash;

	memset(r, 0, sizeof(*r));
	if (w[0] == ':') {
		port = w + 1;
		*w = 0;
	} else if (w[0] == '[') {
		char *end = strchr(w, ']');

		if (!end)
			return false;
		*end = 0;
		if (end[1] == ':')
			port = end + 2;
		else if (end[1])
			return false;
		w++;
	} else if (strchr(w, '.') && strchr(w, ':')) {
		port = strrchr(w, ':');
		*port++ = 0;
	}
	if (port) {
		char *e;
		long p = strtol(port, &e, 10);

		if (*e || p < 1 || p > 65535)
			return false;
		r->port = p;
	}
	if (!*w)
		return true;
	slash = strchr(w, '/');
	if (slash)
		*slash++ = 0;
	if (inet_pton(AF_INET, w, r->addr) == 1) {
		r->family = AF_INET;
		r->prefix = 32;
	} else if (inet_pton(AF_INET6, w, r->addr) == 1) {
		r->family = AF_INET6;
		r->prefix = 128;
	} else {
		return false;
	}
	if (slash) {
		char *e;
		long p = strtol(slash, &e, 10);

		if (*e || p < 0 || p > r->prefix)
			return false;
		r->prefix = p;
	}
	return true;
}

/* One RSTREAM_RUN_CONNECT entry; false if it is not one. */
static bool add_connect(char *w)
{
	if (cfg.nconnect >= MAX_RULES || !parse_rule(w, &cfg.connect[cfg.nconnect]))
		return false;
	cfg.nconnect++;
	return true;
}

/* One RSTREAM_RUN_LISTEN entry, a port number and nothing else. */
static bool add_listen(char *w)
{
	char *end;
	long p = strtol(w, &end, 10);

	if (cfg.nlisten >= MAX_RULES || end == w || *end || p <= 0 || p > 65535)
		return false;
	cfg.listen[cfg.nlisten++] = p;
	return true;
}

/*
 * A comma-separated list in the environment variable @name: unset, empty
 * or "all" sets *@all, "none" sets *@none, otherwise @add takes each entry
 * and what it refuses is said and ignored.  Parsed in a buffer of its own:
 * nothing is allocated.
 */
static void parse_list(const char *name, bool *all, bool *none,
		       bool (*add)(char *w))
{
	const char *v = getenv(name);
	char copy[MAX_LIST], *w, *save = NULL;

	*all = !v || !*v || !strcmp(v, "all");
	*none = v && !strcmp(v, "none");
	if (*all || *none)
		return;
	if (strlen(v) >= sizeof(copy))
		fprintf(stderr, "rstream-run: %s: only its first %zu characters are read\n",
			name, sizeof(copy) - 1);
	snprintf(copy, sizeof(copy), "%s", v);
	for (w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save))
		if (!add(w))
			fprintf(stderr, "rstream-run: %s: ignoring '%s'\n", name, w);
}

/* The family the loaded module registered; AF_RSTREAM if it is not loaded. */
static int module_family(void)
{
	char buf[16];
	int fd, n, family = AF_RSTREAM;

	fd = open(RSTREAM_FAMILY_SYSFS, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return family;
	n = read(fd, buf, sizeof(buf) - 1);
	if (n > 0) {
		buf[n] = 0;
		if (atoi(buf) > 0)
			family = atoi(buf);
	}
	close(fd);
	return family;
}

/* Once, as the library is loaded: everything the wrappers read. */
__attribute__((constructor))
static void init(void)
{
	const char *v;

	real_socket = dlsym(RTLD_NEXT, "socket");
	real_connect = dlsym(RTLD_NEXT, "connect");
	real_listen = dlsym(RTLD_NEXT, "listen");
	real_getsockopt = dlsym(RTLD_NEXT, "getsockopt");
	real_setsockopt = dlsym(RTLD_NEXT, "setsockopt");

	v = getenv("RSTREAM_RUN");
	cfg.off = v && !strcmp(v, "0");
	v = getenv("RSTREAM_RUN_FALLBACK");
	cfg.fallback = !(v && !strcmp(v, "0"));
	v = getenv("RSTREAM_RUN_VERBOSE");
	cfg.verbose = v && *v && strcmp(v, "0");
	v = getenv("RSTREAM_RUN_TIMEOUT");
	cfg.timeout_ms = v ? atoi(v) : 0;
	if (cfg.timeout_ms < 0)
		cfg.timeout_ms = 0;
	cfg.family = module_family();
	parse_list("RSTREAM_RUN_CONNECT", &cfg.connect_all, &cfg.connect_none,
		   add_connect);
	parse_list("RSTREAM_RUN_LISTEN", &cfg.listen_all, &cfg.listen_none,
		   add_listen);
}

/*
 * The calls underneath: the next library's, or, before the constructor
 * has run (another library's constructor calling in), the system call.
 */
static int sys_socket(int domain, int type, int protocol)
{
	if (real_socket)
		return real_socket(domain, type, protocol);
	return syscall(SYS_socket, domain, type, protocol);
}

static int sys_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	if (real_connect)
		return real_connect(fd, addr, len);
	return syscall(SYS_connect, fd, addr, len);
}

static int sys_listen(int fd, int backlog)
{
	if (real_listen)
		return real_listen(fd, backlog);
	return syscall(SYS_listen, fd, backlog);
}

static int sys_getsockopt(int fd, int level, int name, void *val,
			  socklen_t *len)
{
	if (real_getsockopt)
		return real_getsockopt(fd, level, name, val, len);
	return syscall(SYS_getsockopt, fd, level, name, val, len);
}

static int sys_setsockopt(int fd, int level, int name, const void *val,
			  socklen_t len)
{
	if (real_setsockopt)
		return real_setsockopt(fd, level, name, val, len);
	return syscall(SYS_setsockopt, fd, level, name, val, len);
}

/* An int option of ours on @fd; -1 if it has none (not an AF_RSTREAM socket). */
static int rdma_opt(int fd, int name)
{
	socklen_t len = sizeof(int);
	int val;

	return sys_getsockopt(fd, SOL_RDMA, name, &val, &len) ? -1 : val;
}

/* Set an option of ours, keeping errno: on other sockets it just fails. */
static void set_rdma_opt(int fd, int name, int val)
{
	int err = errno;

	sys_setsockopt(fd, SOL_RDMA, name, &val, sizeof(val));
	errno = err;
}

static bool is_tcp(int domain, int type, int protocol)
{
	return (domain == AF_INET || domain == AF_INET6) &&
	       (type & 0xf) == SOCK_STREAM &&
	       (protocol == 0 || protocol == IPPROTO_TCP);
}

int socket(int domain, int type, int protocol)
{
	int fd;

	if (cfg.off || !is_tcp(domain, type, protocol))
		return sys_socket(domain, type, protocol);
	fd = sys_socket(cfg.family ? cfg.family : AF_RSTREAM, type,
			domain == AF_INET6 ? RSTREAM_PROTO_TCP6 :
					     RSTREAM_PROTO_TCP4);
	if (fd < 0)		/* no rstream module: a TCP socket, as asked */
		return sys_socket(domain, type, protocol);
	if (cfg.timeout_ms)
		set_rdma_opt(fd, RSTREAM_CONNECT_TIMEOUT, cfg.timeout_ms);
	return fd;
}

static bool prefix_match(const unsigned char *a, const unsigned char *b,
			 int bits)
{
	int bytes = bits / 8, rest = bits % 8;

	if (memcmp(a, b, bytes))
		return false;
	return !rest || !((a[bytes] ^ b[bytes]) & (0xff << (8 - rest)));
}

static bool connect_wanted(const struct sockaddr *sa)
{
	const struct sockaddr_in *sin = (const void *)sa;
	const struct sockaddr_in6 *sin6 = (const void *)sa;
	int port, i;

	if (cfg.connect_none)
		return false;
	if (cfg.connect_all)
		return true;
	port = ntohs(sa->sa_family == AF_INET ? sin->sin_port :
						 sin6->sin6_port);
	for (i = 0; i < cfg.nconnect; i++) {
		const struct rule *r = &cfg.connect[i];

		if (r->port && r->port != port)
			continue;
		if (r->family == AF_UNSPEC)
			return true;
		if (r->family == AF_INET && sa->sa_family == AF_INET &&
		    prefix_match(r->addr, (const void *)&sin->sin_addr,
				 r->prefix))
			return true;
		if (r->family == AF_INET6 && sa->sa_family == AF_INET6 &&
		    prefix_match(r->addr, (const void *)&sin6->sin6_addr,
				 r->prefix))
			return true;
	}
	return false;
}

static bool listen_wanted(int port)
{
	int i;

	if (cfg.listen_none)
		return false;
	if (cfg.listen_all)
		return true;
	for (i = 0; i < cfg.nlisten; i++)
		if (cfg.listen[i] == port)
			return true;
	return false;
}

/* -v: what a connection that is made (or failed) went over. */
static void report_connect(int fd, const char *where, int ret, int err)
{
	int path = rdma_opt(fd, RSTREAM_PATH), why;

	if (path < 0)
		return;		/* not ours */
	why = rdma_opt(fd, RSTREAM_FALLBACK);
	if (ret && err == EISCONN)
		return;		/* said when it was made */
	if (ret && (err == EINPROGRESS || err == EALREADY))
		say("connect to %s: under way", where);
	else if (path == RSTREAM_PATH_RDMA && ret)
		say("connect to %s over RDMA failed: %s", where, strerror(err));
	else if (path == RSTREAM_PATH_RDMA)
		say("connect to %s: RDMA", where);
	else if (path == RSTREAM_PATH_TCP && why > 0)
		say("connect to %s over RDMA failed (%s): TCP%s%s", where,
		    strerror(why), ret ? ", which failed too: " : "",
		    ret ? strerror(err) : "");
	else if (path == RSTREAM_PATH_TCP)
		say("connect to %s: TCP (not converted)%s%s", where,
		    ret ? ": " : "", ret ? strerror(err) : "");
	else
		say("connect to %s: %s", where, ret ? strerror(err) : "made");
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	char where[64] = "?";
	bool inet = addr && len >= sizeof(sa_family_t) &&
		    (addr->sa_family == AF_INET || addr->sa_family == AF_INET6);
	int ret, err;

	if (inet && !cfg.off) {
		if (!connect_wanted(addr))
			set_rdma_opt(fd, RSTREAM_PATH, RSTREAM_PATH_TCP);
		else if (!cfg.fallback)
			set_rdma_opt(fd, RSTREAM_PATH, RSTREAM_PATH_RDMA);
	}
	ret = sys_connect(fd, addr, len);
	if (!cfg.verbose || !inet)
		return ret;
	err = errno;
	report_connect(fd, addr_str(addr, where, sizeof(where)), ret, err);
	errno = err;
	return ret;
}

/* The port the socket is bound to (0: none yet). */
static int bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);

	if (getsockname(fd, (struct sockaddr *)&ss, &len))
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

int listen(int fd, int backlog)
{
	int ret, err, path, why;

	if (!cfg.off && !cfg.listen_all && !listen_wanted(bound_port(fd)))
		set_rdma_opt(fd, RSTREAM_PATH, RSTREAM_PATH_TCP);
	ret = sys_listen(fd, backlog);
	if (!cfg.verbose || ret)
		return ret;
	err = errno;
	path = rdma_opt(fd, RSTREAM_PATH);
	why = rdma_opt(fd, RSTREAM_FALLBACK);
	if (path == (RSTREAM_PATH_RDMA | RSTREAM_PATH_TCP))
		say("%s on port %d: RDMA and TCP", __func__, bound_port(fd));
	else if (path == RSTREAM_PATH_TCP && why > 0)
		say("%s on port %d: TCP (%s)", __func__, bound_port(fd),
		    strerror(why));
	else if (path == RSTREAM_PATH_TCP)
		say("%s on port %d: TCP (not converted)", __func__,
		    bound_port(fd));
	errno = err;
	return ret;
}

/*
 * SO_REUSEPORT becomes RSTREAM_REUSEPORT; its answer is the program's
 * unless the option is not the socket's (ENOPROTOOPT: not an AF_RSTREAM
 * socket; EOPNOTSUPP: not a transparent one), and then the call goes on
 * as made.  SO_ZEROCOPY, where the socket core refuses it to AF_RSTREAM
 * (EOPNOTSUPP, before 6.2), is tried again as RSTREAM_ZEROCOPY, which an
 * AF_RSTREAM socket takes and anything else refuses with ENOPROTOOPT: the
 * core's answer stands then.  Every other option goes straight through.
 */
int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	int err = errno, ret;

	if (level == SOL_SOCKET && name == SO_REUSEPORT) {
		if (!sys_setsockopt(fd, SOL_RDMA, RSTREAM_REUSEPORT, val, len))
			return 0;
		if (errno != ENOPROTOOPT && errno != EOPNOTSUPP)
			return -1;
		errno = err;
	}
	ret = sys_setsockopt(fd, level, name, val, len);
	if (ret && errno == EOPNOTSUPP && level == SOL_SOCKET &&
	    name == SO_ZEROCOPY) {
		if (!sys_setsockopt(fd, SOL_RDMA, RSTREAM_ZEROCOPY, val, len)) {
			errno = err;
			return 0;
		}
		if (errno != ENOPROTOOPT)
			return -1;
		errno = EOPNOTSUPP;
	}
	return ret;
}

/*
 * SO_REUSEPORT reads RSTREAM_REUSEPORT on an AF_RSTREAM socket.  And, -v
 * only: a nonblocking connect's outcome is known when the program asks
 * SO_ERROR after poll said so.
 */
int getsockopt(int fd, int level, int name, void *val, socklen_t *len)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	char where[64] = "?";
	int ret, err = errno;

	if (level == SOL_SOCKET && name == SO_REUSEPORT) {
		if (!sys_getsockopt(fd, SOL_RDMA, RSTREAM_REUSEPORT, val, len))
			return 0;
		if (errno != ENOPROTOOPT && errno != EOPNOTSUPP)
			return -1;
		errno = err;
	}
	ret = sys_getsockopt(fd, level, name, val, len);
	if (!cfg.verbose || ret || level != SOL_SOCKET || name != SO_ERROR ||
	    !val || !len || *len < sizeof(int))
		return ret;
	err = *(int *)val;
	if (!getpeername(fd, (struct sockaddr *)&ss, &sslen))
		addr_str((struct sockaddr *)&ss, where, sizeof(where));
	else if (!err)
		return ret;	/* nothing connected: not a connect's end */
	report_connect(fd, where, err ? -1 : 0, err);
	return ret;
}
