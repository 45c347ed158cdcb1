// SPDX-License-Identifier: GPL-2.0
/* Compile probe: proto_ops has .splice_eof (6.5+). */
#include <linux/net.h>
#include <net/sock.h>

static void rstream_probe_splice_eof(struct socket *sock)
{
}

const struct proto_ops rstream_probe_ops = {
	.splice_eof = rstream_probe_splice_eof,
};
