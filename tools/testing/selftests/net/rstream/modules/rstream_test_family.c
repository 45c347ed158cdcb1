// SPDX-License-Identifier: GPL-2.0
/*
 * Test helper for rstream_params.sh: registers a socket family that creates
 * no sockets, to occupy one of the numbers rstream may take and so exercise
 * rstream's refusal to load on a family already in use.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/errno.h>
#include <linux/module.h>
#include <linux/net.h>

static int family = 18;
module_param(family, int, 0444);
MODULE_PARM_DESC(family, "address family number to occupy (default 18)");

static int rstream_test_family_create(struct net *net, struct socket *sock,
				      int protocol, int kern)
{
	return -EAFNOSUPPORT;
}

static struct net_proto_family rstream_test_family_ops __ro_after_init = {
	.create	= rstream_test_family_create,
	.owner	= THIS_MODULE,
};

static int __init rstream_test_family_init(void)
{
	int err;

	rstream_test_family_ops.family = family;
	err = sock_register(&rstream_test_family_ops);
	/* modprobe takes -EEXIST from init for "already loaded". */
	return err == -EEXIST ? -EBUSY : err;
}

static void __exit rstream_test_family_exit(void)
{
	sock_unregister(family);
}

module_init(rstream_test_family_init);
module_exit(rstream_test_family_exit);

MODULE_DESCRIPTION("rstream selftest helper: occupies an address family");
MODULE_LICENSE("GPL");
