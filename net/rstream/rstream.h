/* SPDX-License-Identifier: GPL-2.0 */
/*
 * AF_RSTREAM internal interfaces shared by the files of the module.
 */
#ifndef _NET_RSTREAM_RSTREAM_H
#define _NET_RSTREAM_RSTREAM_H

#include <linux/compiler.h>
#include <linux/types.h>
#include <net/sock.h>

struct seq_file;

#define RSTREAM_VERSION		"0.1.0"

struct rstream_sock {
	struct sock sk;		/* first: sk_alloc() sizes the object by proto */
};

static inline struct rstream_sock *rstream_sk(const struct sock *sk)
{
	return container_of(sk, struct rstream_sock, sk);
}

/* params.c: module parameters, validated on every write */

enum rstream_param_id {
	RSTREAM_PARAM_FAMILY,
	RSTREAM_PARAM_MEM,
	RSTREAM_PARAM_WMEM,
	RSTREAM_PARAM_SQSIZE,
	RSTREAM_PARAM_RQSIZE,
	RSTREAM_PARAM_INLINE,
	RSTREAM_PARAM_COUNT
};

struct rstream_param {
	const char *name;
	unsigned int value;	/* read locklessly with READ_ONCE() */
	unsigned int dflt;
	unsigned int min;
	unsigned int max;
	/* If set, the value must also be one of these (zero-terminated). */
	const unsigned int *only;
	const char *only_text;	/* the same list, for messages */
};

extern struct rstream_param rstream_params[RSTREAM_PARAM_COUNT];

static inline unsigned int rstream_param(enum rstream_param_id id)
{
	return READ_ONCE(rstream_params[id].value);
}

int rstream_param_parse(const struct rstream_param *param, const char *val,
			unsigned int *out);

/* device.c: the RDMA devices rstream can use */

int rstream_device_init(void);
void rstream_device_exit(void);
void rstream_device_show(struct seq_file *seq, const struct net *net);

/* proc.c: /proc/net/rstream */

int rstream_proc_init(void);
void rstream_proc_exit(void);

#endif /* _NET_RSTREAM_RSTREAM_H */
