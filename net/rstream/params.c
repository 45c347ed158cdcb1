// SPDX-License-Identifier: GPL-2.0
/*
 * Module parameters: the address family number, the defaults that size
 * each new socket, with rsocket(7)'s default values, and the limit of what
 * all connections together may pin.
 *
 * Every value is range-checked when it is set, at load time (modprobe
 * arguments: a bad one fails the load) and through sysfs afterwards (a bad
 * one fails the write).  Sockets read the current values locklessly when they
 * are created; the kernel serialises writers with kernel_param_lock().
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/socket.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <kunit/visibility.h>
#include <linux/rstream.h>

#include "rstream.h"

/* rsocket clamps queue sizes to [16, 0xfffe]; rstream rejects instead. */
#define RSTREAM_QP_MIN_SIZE	16
#define RSTREAM_QP_MAX_SIZE	0xfffe
/* rsocket's minimum inline size: one 16-byte SGL entry (a ring grant). */
#define RSTREAM_MIN_INLINE	16
/* A ring half must fit the 29-bit length of a data immediate. */
#define RSTREAM_MEM_MIN		4096
#define RSTREAM_MEM_MAX		(256U << 20)

#define RSTREAM_FAMILY_DEFAULT	AF_RSTREAM
#define RSTREAM_MEM_DEFAULT	(128U << 10)
/*
 * Smaller than rsocket's 384: sends are corked into few writes (tx.c), so
 * 64 send entries keep every write the staging ring allows in flight;
 * 128 receive entries are the credits an rsocket peer, which writes once
 * per send, streams small messages with.  The device's queues for them
 * are most of what an idle connection costs beyond its rings.
 */
#define RSTREAM_SQ_DEFAULT_SIZE	64
#define RSTREAM_RQ_DEFAULT_SIZE	128
#define RSTREAM_INLINE_DEFAULT	64
/* Microseconds: a second of spinning is more than any wait is worth. */
#define RSTREAM_POLLING_TIME_MAX	1000000
/* Pages; 0 takes a quarter of the RAM (mem.c). */
#define RSTREAM_MEM_LIMIT_MAX	(UINT_MAX - 1)

/*
 * Family numbers below AF_MAX that no socket family of Linux 6.1 or 6.12
 * implements and that mean nothing else (unlike AF_BRIDGE, AF_SECURITY,
 * AF_IB and AF_MPLS): IPX, DECnet, NETBEUI, ASH, ECONET, SNA, IRDA, WANPIPE.
 * Taking the number of a family whose module is merely not loaded yet
 * (vsock, RDS, ...) would hand that family's users rstream sockets.
 */
static const unsigned int rstream_free_families[] = {
	4, 12, 13, 18, 19, 22, 23, 25, 0
};

#define RSTREAM_FREE_FAMILIES	"4, 12, 13, 18, 19, 22, 23, 25"

struct rstream_param rstream_params[RSTREAM_PARAM_COUNT] = {
	[RSTREAM_PARAM_FAMILY] = {
		.name = "family", .value = RSTREAM_FAMILY_DEFAULT,
		.dflt = RSTREAM_FAMILY_DEFAULT, .min = 4, .max = 25,
		.only = rstream_free_families,
		.only_text = RSTREAM_FREE_FAMILIES,
	},
	[RSTREAM_PARAM_MEM] = {
		.name = "mem_default", .value = RSTREAM_MEM_DEFAULT,
		.dflt = RSTREAM_MEM_DEFAULT,
		.min = RSTREAM_MEM_MIN, .max = RSTREAM_MEM_MAX,
	},
	[RSTREAM_PARAM_WMEM] = {
		.name = "wmem_default", .value = RSTREAM_MEM_DEFAULT,
		.dflt = RSTREAM_MEM_DEFAULT,
		.min = RSTREAM_MEM_MIN, .max = RSTREAM_MEM_MAX,
	},
	[RSTREAM_PARAM_SQSIZE] = {
		.name = "sqsize_default", .value = RSTREAM_SQ_DEFAULT_SIZE,
		.dflt = RSTREAM_SQ_DEFAULT_SIZE,
		.min = RSTREAM_QP_MIN_SIZE, .max = RSTREAM_QP_MAX_SIZE,
	},
	[RSTREAM_PARAM_RQSIZE] = {
		.name = "rqsize_default", .value = RSTREAM_RQ_DEFAULT_SIZE,
		.dflt = RSTREAM_RQ_DEFAULT_SIZE,
		.min = RSTREAM_QP_MIN_SIZE, .max = RSTREAM_QP_MAX_SIZE,
	},
	[RSTREAM_PARAM_INLINE] = {
		.name = "inline_default", .value = RSTREAM_INLINE_DEFAULT,
		.dflt = RSTREAM_INLINE_DEFAULT,
		.min = RSTREAM_MIN_INLINE, .max = RSTREAM_QP_MAX_SIZE,
	},
	[RSTREAM_PARAM_MEM_LIMIT] = {
		.name = "mem_limit", .value = 0, .dflt = 0,
		.min = 0, .max = RSTREAM_MEM_LIMIT_MAX,
	},
	/* Off by default, as TCP's busy polling (net.core.busy_read). */
	[RSTREAM_PARAM_POLLING_TIME] = {
		.name = "polling_time", .value = 0, .dflt = 0,
		.min = 0, .max = RSTREAM_POLLING_TIME_MAX,
	},
};
EXPORT_SYMBOL_IF_KUNIT(rstream_params);

/**
 * rstream_param_parse() - parse and range-check a parameter value
 * @param: the parameter, for its range
 * @val: the text written (decimal, 0x hex or 0 octal; one trailing newline)
 * @out: the value, written only on success
 *
 * Pure function, no side effects: the KUnit suite checks every edge.
 * Return: 0, or -EINVAL for text that is not a number, is out of range or
 * is not one of the values the parameter allows.
 */
int rstream_param_parse(const struct rstream_param *param, const char *val,
			unsigned int *out)
{
	const unsigned int *p;
	unsigned int v;

	if (kstrtouint(val, 0, &v))
		return -EINVAL;
	if (v < param->min || v > param->max)
		return -EINVAL;
	if (param->only) {
		for (p = param->only; *p && *p != v; p++)
			;
		if (!*p)
			return -EINVAL;
	}
	*out = v;
	return 0;
}
EXPORT_SYMBOL_IF_KUNIT(rstream_param_parse);

/* Process context, kernel_param_lock held (load time or a sysfs write). */
static int rstream_param_set(const char *val, const struct kernel_param *kp)
{
	struct rstream_param *param = kp->arg;
	unsigned int v;

	if (rstream_param_parse(param, val, &v)) {
		/* Echo at most 32 bytes of what was written, minus "\n", escaped. */
		int len = min_t(size_t, strcspn(val, "\n"), 32);

		if (param->only)
			pr_err("%s: invalid value '%*pE': must be one of %s\n",
			       param->name, len, val, param->only_text);
		else
			pr_err("%s: invalid value '%*pE': must be an integer in %u..%u\n",
			       param->name, len, val, param->min, param->max);
		return -EINVAL;
	}
	WRITE_ONCE(param->value, v);
	return 0;
}

static int rstream_param_get(char *buf, const struct kernel_param *kp)
{
	const struct rstream_param *param = kp->arg;

	return sysfs_emit(buf, "%u\n", READ_ONCE(param->value));
}

static const struct kernel_param_ops rstream_param_ops = {
	.set = rstream_param_set,
	.get = rstream_param_get,
};

/* Read-only: the family is registered once, at load time. */
module_param_cb(family, &rstream_param_ops,
		&rstream_params[RSTREAM_PARAM_FAMILY], 0444);
MODULE_PARM_DESC(family,
		 "address family number to register (default 22, or one of "
		 RSTREAM_FREE_FAMILIES "); read-only once loaded");

module_param_cb(mem_default, &rstream_param_ops,
		&rstream_params[RSTREAM_PARAM_MEM], 0644);
MODULE_PARM_DESC(mem_default,
		 "receive ring bytes of a new socket (4096..268435456, default 131072); SO_RCVBUF sets twice its value");

module_param_cb(wmem_default, &rstream_param_ops,
		&rstream_params[RSTREAM_PARAM_WMEM], 0644);
MODULE_PARM_DESC(wmem_default,
		 "send staging ring bytes of a new socket (4096..268435456, default 131072); SO_SNDBUF sets twice its value");

module_param_cb(sqsize_default, &rstream_param_ops,
		&rstream_params[RSTREAM_PARAM_SQSIZE], 0644);
MODULE_PARM_DESC(sqsize_default,
		 "send queue entries of a new socket (16..65534, default 64); SOL_RDMA RDMA_SQSIZE overrides");

module_param_cb(rqsize_default, &rstream_param_ops,
		&rstream_params[RSTREAM_PARAM_RQSIZE], 0644);
MODULE_PARM_DESC(rqsize_default,
		 "receive queue entries, the message credits a socket grants (16..65534, default 128); SOL_RDMA RDMA_RQSIZE overrides");

module_param_cb(inline_default, &rstream_param_ops,
		&rstream_params[RSTREAM_PARAM_INLINE], 0644);
MODULE_PARM_DESC(inline_default,
		 "largest send posted inline, in bytes (16..65534, default 64); SOL_RDMA RDMA_INLINE overrides");

module_param_cb(mem_limit, &rstream_param_ops,
		&rstream_params[RSTREAM_PARAM_MEM_LIMIT], 0644);
MODULE_PARM_DESC(mem_limit,
		 "pages all connections together may pin: rings, target arrays, queues (default 0: a quarter of the RAM); a connection over it is refused with ENOBUFS");

module_param_cb(polling_time, &rstream_param_ops,
		&rstream_params[RSTREAM_PARAM_POLLING_TIME], 0644);
MODULE_PARM_DESC(polling_time,
		 "microseconds a blocking call on a new socket busy-polls before it sleeps (its SO_BUSY_POLL time), when more than net.core.busy_read (0..1000000, default 0: off)");
