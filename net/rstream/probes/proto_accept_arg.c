// SPDX-License-Identifier: GPL-2.0
/* Compile probe: proto_ops.accept takes a struct proto_accept_arg (6.10+). */
#include <linux/net.h>
#include <net/sock.h>

static int rstream_probe_accept(struct socket *sock, struct socket *newsock,
				struct proto_accept_arg *arg)
{
	return arg->flags;
}

const struct proto_ops rstream_probe_ops = {
	.accept = rstream_probe_accept,
};
