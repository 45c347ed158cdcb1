// SPDX-License-Identifier: GPL-2.0
/*
 * librstream-preload.so: TCP stream sockets of an unmodified program
 * become AF_RSTREAM sockets, with TCP as the fallback (rstream-run(8)).
 *
 * socket() makes the TCP socket the program asked for.  The choice is
 * made when the program shows what the socket is for:
 *  - connect(): to a destination the configuration converts, an
 *    AF_RSTREAM socket takes the fd's place (dup3()), with the options
 *    the program set on it before; if the RDMA connection cannot be made
 *    (no RDMA route, refused, no RDMA device, out of rstream's memory,
 *    no answer in time), the TCP socket, which was kept aside, goes back
 *    in its place and connects as the program asked;
 *  - listen(): the TCP socket listens as the program asked; on a port
 *    the configuration converts, an AF_RSTREAM listener at the same
 *    address and port, given that TCP listener (RSTREAM_TCP_LISTEN),
 *    takes the fd's place, so that plain TCP clients still reach the
 *    program on the same port; if it cannot listen, TCP alone does.
 * Everything else goes to the kernel untouched: an AF_RSTREAM socket is a
 * real kernel socket, so fork, exec, threads, epoll and fd passing need
 * nothing from here.
 *
 * Configuration, from the environment (children inherit it):
 *   RSTREAM_RUN=0                 convert nothing
 *   RSTREAM_RUN_CONNECT=LIST      destinations to convert (default: all):
 *                                 ADDR[/PREFIX][,...], each optionally
 *                                 followed by :PORT ([ADDR]:PORT for
 *                                 IPv6), or :PORT alone; "none" for none
 *   RSTREAM_RUN_LISTEN=PORTS      listening ports to convert (default:
 *                                 all; "none" for none), comma-separated
 *   RSTREAM_RUN_FALLBACK=0        no fallback to TCP
 *   RSTREAM_RUN_TIMEOUT=MS        how long a connection over RDMA may
 *                                 take before TCP is tried (default 3000)
 *   RSTREAM_RUN_VERBOSE=1         one line on stderr per decision
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <linux/rstream.h>

#define MAX_OPTS	32	/* setsockopt calls remembered per socket */
#define MAX_OPTLEN	64	/* larger values are not replayed */
#define MAX_RULES	32
#define DEFAULT_TIMEOUT_MS	3000

struct opt {
	int level, name;
	socklen_t len;
	unsigned char val[MAX_OPTLEN];
};

/* A TCP socket of the program's that may become an AF_RSTREAM one. */
struct cand {
	int domain;
	int type;		/* SOCK_STREAM with SOCK_NONBLOCK/SOCK_CLOEXEC */
	int protocol;
	bool bound;
	struct sockaddr_storage addr;	/* what the program bound to */
	socklen_t addrlen;
	int nopts;
	struct opt opts[MAX_OPTS];
};

struct rule {
	int family;		/* AF_UNSPEC: any address */
	unsigned char addr[16];
	int prefix;		/* bits */
	int port;		/* 0: any */
};

static int (*real_socket)(int, int, int);
static int (*real_connect)(int, const struct sockaddr *, socklen_t);
static int (*real_listen)(int, int);
static int (*real_bind)(int, const struct sockaddr *, socklen_t);
static int (*real_setsockopt)(int, int, int, const void *, socklen_t);
static int (*real_close)(int);

static struct {
	bool off;
	bool fallback;
	bool verbose;
	int timeout_ms;
	bool connect_all, connect_none;
	int nconnect;
	struct rule connect[MAX_RULES];
	bool listen_all, listen_none;
	int nlisten;
	int listen[MAX_RULES];
} cfg;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct cand **cands;	/* by fd */
static int ncands;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void say(const char *fmt, ...)
{
	char line[256];
	va_list ap;
	int n;

	if (!cfg.verbose)
		return;
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
 * and what it refuses is said and ignored.
 */
static void parse_list(const char *name, bool *all, bool *none,
		       bool (*add)(char *w))
{
	const char *v = getenv(name);
	char *copy, *w, *save;

	*all = !v || !*v || !strcmp(v, "all");
	*none = v && !strcmp(v, "none");
	if (*all || *none)
		return;
	copy = strdup(v);
	for (w = strtok_r(copy, ",", &save); w; w = strtok_r(NULL, ",", &save))
		if (!add(w))
			fprintf(stderr, "rstream-run: %s: ignoring '%s'\n", name, w);
	free(copy);
}

static void parse_config(void)
{
	const char *v;

	v = getenv("RSTREAM_RUN");
	cfg.off = v && !strcmp(v, "0");
	v = getenv("RSTREAM_RUN_FALLBACK");
	cfg.fallback = !(v && !strcmp(v, "0"));
	v = getenv("RSTREAM_RUN_VERBOSE");
	cfg.verbose = v && *v && strcmp(v, "0");
	v = getenv("RSTREAM_RUN_TIMEOUT");
	cfg.timeout_ms = v ? atoi(v) : DEFAULT_TIMEOUT_MS;
	if (cfg.timeout_ms <= 0)
		cfg.timeout_ms = DEFAULT_TIMEOUT_MS;

	parse_list("RSTREAM_RUN_CONNECT", &cfg.connect_all, &cfg.connect_none,
		   add_connect);
	parse_list("RSTREAM_RUN_LISTEN", &cfg.listen_all, &cfg.listen_none,
		   add_listen);
}

static void init(void)
{
	real_socket = dlsym(RTLD_NEXT, "socket");
	real_connect = dlsym(RTLD_NEXT, "connect");
	real_listen = dlsym(RTLD_NEXT, "listen");
	real_bind = dlsym(RTLD_NEXT, "bind");
	real_setsockopt = dlsym(RTLD_NEXT, "setsockopt");
	real_close = dlsym(RTLD_NEXT, "close");
	parse_config();
}

static void setup(void)
{
	pthread_once(&once, init);
}

/* The family the loaded module registered; AF_RSTREAM if unknown. */
static int rstream_family(void)
{
	static int family;
	char buf[16];
	int fd, n;

	if (family)
		return family;
	family = AF_RSTREAM;
	fd = open(RSTREAM_FAMILY_SYSFS, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		n = read(fd, buf, sizeof(buf) - 1);
		if (n > 0) {
			buf[n] = 0;
			if (atoi(buf) > 0)
				family = atoi(buf);
		}
		real_close(fd);
	}
	return family;
}

/*
 * The fd still holds a TCP socket like the one socket() made: a dup2()
 * or an exec'd program's own close may have put something else there.
 */
static bool still_tcp(int fd, const struct cand *c)
{
	int domain = -1, proto = -1;
	socklen_t len = sizeof(int);

	if (getsockopt(fd, SOL_SOCKET, SO_DOMAIN, &domain, &len))
		return false;
	len = sizeof(int);
	if (getsockopt(fd, SOL_SOCKET, SO_PROTOCOL, &proto, &len))
		return false;
	return domain == c->domain && proto == IPPROTO_TCP;
}

/* lock held */
static struct cand *cand_get(int fd)
{
	return fd >= 0 && fd < ncands ? cands[fd] : NULL;
}

static void cand_drop(int fd)
{
	struct cand *c;

	pthread_mutex_lock(&lock);
	c = cand_get(fd);
	if (c)
		cands[fd] = NULL;
	pthread_mutex_unlock(&lock);
	free(c);
}

/* Take the candidate of @fd out of the table: the caller owns it now. */
static struct cand *cand_take(int fd)
{
	struct cand *c;

	pthread_mutex_lock(&lock);
	c = cand_get(fd);
	if (c)
		cands[fd] = NULL;
	pthread_mutex_unlock(&lock);
	return c;
}

static void cand_add(int fd, struct cand *c)
{
	pthread_mutex_lock(&lock);
	if (fd >= ncands) {
		int n = fd + 64;
		struct cand **t = realloc(cands, n * sizeof(*t));

		if (!t) {
			pthread_mutex_unlock(&lock);
			free(c);
			return;
		}
		memset(t + ncands, 0, (n - ncands) * sizeof(*t));
		cands = t;
		ncands = n;
	}
	free(cands[fd]);
	cands[fd] = c;
	pthread_mutex_unlock(&lock);
}

static bool is_tcp(int domain, int type, int protocol)
{
	return (domain == AF_INET || domain == AF_INET6) &&
	       (type & 0xf) == SOCK_STREAM &&
	       (protocol == 0 || protocol == IPPROTO_TCP);
}

int socket(int domain, int type, int protocol)
{
	struct cand *c;
	int fd;

	setup();
	fd = real_socket(domain, type, protocol);
	if (fd < 0 || cfg.off || !is_tcp(domain, type, protocol))
		return fd;
	c = calloc(1, sizeof(*c));
	if (!c)
		return fd;
	c->domain = domain;
	c->type = type;
	c->protocol = protocol;
	cand_add(fd, c);
	return fd;
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len)
{
	struct cand *c;
	int ret;

	setup();
	ret = real_setsockopt(fd, level, name, val, len);
	if (ret || !val || len > MAX_OPTLEN)
		return ret;
	pthread_mutex_lock(&lock);
	c = cand_get(fd);
	if (c && c->nopts < MAX_OPTS) {
		struct opt *o = &c->opts[c->nopts++];

		o->level = level;
		o->name = name;
		o->len = len;
		memcpy(o->val, val, len);
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
	struct cand *c;
	int ret;

	setup();
	ret = real_bind(fd, addr, len);
	if (ret || len > sizeof(struct sockaddr_storage))
		return ret;
	pthread_mutex_lock(&lock);
	c = cand_get(fd);
	if (c) {
		c->bound = true;
		memcpy(&c->addr, addr, len);
		c->addrlen = len;
	}
	pthread_mutex_unlock(&lock);
	return ret;
}

int close(int fd)
{
	setup();
	cand_drop(fd);
	return real_close(fd);
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

/*
 * An AF_RSTREAM socket like the program's TCP one: its flags, the options
 * the program set (those AF_RSTREAM has; the rest stay on TCP's side),
 * its address, and the TCP listener @tcp_listener to take clients from
 * (-1: none).  -1 with errno on failure.
 */
static int rstream_twin(const struct cand *c, int tcp_listener)
{
	int i, fd;

	fd = real_socket(rstream_family(),
			 c->type & (0xf | SOCK_NONBLOCK | SOCK_CLOEXEC), 0);
	if (fd < 0)
		return -1;
	if (tcp_listener >= 0 &&
	    real_setsockopt(fd, SOL_RDMA, RSTREAM_TCP_LISTEN, &tcp_listener,
			    sizeof(tcp_listener)))
		goto fail;
	for (i = 0; i < c->nopts; i++)
		real_setsockopt(fd, c->opts[i].level, c->opts[i].name,
				c->opts[i].val, c->opts[i].len);
	if (c->bound &&
	    real_bind(fd, (const struct sockaddr *)&c->addr, c->addrlen))
		goto fail;
	return fd;
fail:
	i = errno;
	real_close(fd);
	errno = i;
	return -1;
}

/* Put @from in @fd's place with @fd's close-on-exec flag, closing @from. */
static int take_place(int from, int fd)
{
	int cloexec = fcntl(fd, F_GETFD);

	if (cloexec < 0 ||
	    dup3(from, fd, (cloexec & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
		return -1;
	real_close(from);
	return 0;
}

/* Errors that say RDMA cannot be used to get there, where TCP may. */
static bool rdma_unusable(int err)
{
	switch (err) {
	case ECONNREFUSED:	/* no rsockets listener there */
	case ENETUNREACH:
	case EHOSTUNREACH:
	case EADDRNOTAVAIL:	/* no RDMA device for the route */
	case ENODEV:		/* the device went away */
	case ETIMEDOUT:
	case ENOBUFS:		/* rstream's memory limit */
	case EOPNOTSUPP:	/* a transport rstream does not take (iWARP) */
	case EAFNOSUPPORT:	/* no rstream module */
		return true;
	default:
		return false;
	}
}

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/*
 * Connect @fd over RDMA within the time limit, nonblocking underneath
 * whatever the program's mode: 0, or -1 with errno.  Left in progress
 * at the limit, it fails with ETIMEDOUT.
 */
static int rdma_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	int fl = fcntl(fd, F_GETFL), err = 0;
	socklen_t elen = sizeof(err);
	long long end = now_ms() + cfg.timeout_ms;
	struct pollfd p = { .fd = fd, .events = POLLOUT };
	int ret;

	if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK))
		return -1;
	ret = real_connect(fd, addr, len);
	if (ret && errno == EINPROGRESS) {
		do {
			long long left = end - now_ms();

			ret = left > 0 ? poll(&p, 1, left) : 0;
		} while (ret < 0 && errno == EINTR);
		if (ret == 0) {
			errno = ETIMEDOUT;
			ret = -1;
		} else if (ret > 0) {
			ret = getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
			if (!ret && err) {
				errno = err;
				ret = -1;
			}
		}
	}
	err = errno;
	fcntl(fd, F_SETFL, fl);
	errno = err;
	return ret;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
	char where[64];
	struct cand *c;
	int tcp, rfd, err;

	setup();
	if (!addr || len < sizeof(sa_family_t) ||
	    (addr->sa_family != AF_INET && addr->sa_family != AF_INET6))
		return real_connect(fd, addr, len);
	c = cand_take(fd);
	if (c && !still_tcp(fd, c)) {
		free(c);
		c = NULL;
	}
	if (!c)
		return real_connect(fd, addr, len);
	addr_str(addr, where, sizeof(where));
	if (!connect_wanted(addr)) {
		say("%s to %s: TCP (not converted)", __func__, where);
		free(c);
		return real_connect(fd, addr, len);
	}
	/* The TCP socket waits aside, for the fallback. */
	tcp = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	rfd = tcp < 0 ? -1 : rstream_twin(c, -1);
	if (rfd < 0 || take_place(rfd, fd)) {
		err = errno;
		if (rfd >= 0)
			real_close(rfd);
		if (tcp >= 0)
			real_close(tcp);
		say("%s to %s: TCP (no AF_RSTREAM socket: %s)", __func__, where,
		    strerror(err));
		free(c);
		return real_connect(fd, addr, len);
	}
	if (!rdma_connect(fd, addr, len)) {
		say("%s to %s: RDMA", __func__, where);
		real_close(tcp);
		free(c);
		return 0;
	}
	err = errno;
	if (!cfg.fallback || !rdma_unusable(err)) {
		say("%s to %s over RDMA failed: %s", __func__, where, strerror(err));
		real_close(tcp);
		free(c);
		errno = err;
		return -1;
	}
	say("%s to %s over RDMA failed (%s): TCP", __func__, where, strerror(err));
	free(c);
	if (take_place(tcp, fd)) {
		real_close(tcp);
		return -1;
	}
	return real_connect(fd, addr, len);
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
	struct cand *c;
	int rfd, port;

	setup();
	c = cand_take(fd);
	if (c && !still_tcp(fd, c)) {
		free(c);
		c = NULL;
	}
	if (!c)
		return real_listen(fd, backlog);
	/* TCP first, exactly as the program asked: the fallback, too. */
	if (real_listen(fd, backlog)) {
		free(c);
		return -1;
	}
	port = bound_port(fd);
	if (!listen_wanted(port)) {
		say("%s on port %d: TCP (not converted)", __func__, port);
		free(c);
		return 0;
	}
	/*
	 * The AF_RSTREAM listener at the address and port TCP listens on
	 * (an ephemeral one included), in rdma_cm's port space; it takes
	 * the TCP listener's clients too.  An address with no RDMA device
	 * fails here (EADDRNOTAVAIL), and TCP alone listens.
	 */
	c->addrlen = sizeof(c->addr);
	c->bound = !getsockname(fd, (struct sockaddr *)&c->addr, &c->addrlen);
	rfd = rstream_twin(c, fd);
	if (rfd < 0 || real_listen(rfd, backlog) || take_place(rfd, fd)) {
		say("%s on port %d: TCP (%s)", __func__, port, strerror(errno));
		if (rfd >= 0)
			real_close(rfd);
	} else {
		say("%s on port %d: RDMA and TCP", __func__, port);
	}
	free(c);
	return 0;
}
