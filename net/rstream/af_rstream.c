// SPDX-License-Identifier: GPL-2.0
/*
 * AF_RSTREAM: reliable byte-stream sockets over RDMA, speaking the rsockets
 * v1 wire protocol of librdmacm so that a kernel socket and a userspace
 * rsocket talk to each other.
 *
 * This file owns the socket family: module load and unload, socket creation
 * and release, and the proto_ops table.  Connection set-up and the data path
 * are not implemented yet; their calls fail with EOPNOTSUPP.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/in.h>
#include <linux/module.h>
#include <linux/net.h>
#include <linux/socket.h>
#include <net/net_namespace.h>
#include <net/sock.h>
#include <linux/rstream.h>

#include "rstream.h"

static struct proto rstream_proto = {
	.name		= "RSTREAM",
	.owner		= THIS_MODULE,
	.obj_size	= sizeof(struct rstream_sock),
};

/*
 * The socket lock gets classes of its own, so that lockdep reports name
 * AF_RSTREAM rather than the slot's old name; kernel sockets get separate
 * ones, as sock_lock_init() gives every family.
 */
static struct lock_class_key rstream_slock_keys[2];
static struct lock_class_key rstream_sk_lock_keys[2];
static const char *const rstream_slock_names[2] = {
	"slock-AF_RSTREAM", "slock-AF_RSTREAM-kern"
};

static const char *const rstream_sk_lock_names[2] = {
	"sk_lock-AF_RSTREAM", "sk_lock-AF_RSTREAM-kern"
};

/* Process context; the socket is going away and no other caller holds it. */
static int rstream_release(struct socket *sock)
{
	struct sock *sk = sock->sk;

	if (!sk)
		return 0;

	lock_sock(sk);
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	sock_orphan(sk);
	release_sock(sk);

	sock_prot_inuse_add(sock_net(sk), &rstream_proto, -1);
	sock->sk = NULL;
	sock_put(sk);
	return 0;
}

/*
 * Nothing connects yet, so every socket is as a TCP socket in TCP_CLOSE:
 * hung up, never readable or writable.
 */
static __poll_t rstream_poll(struct file *file, struct socket *sock,
			     poll_table *wait)
{
	return EPOLLHUP;
}

/* No rstream ioctls yet: let the core try the generic ones, else ENOTTY. */
static int rstream_ioctl(struct socket *sock, unsigned int cmd,
			 unsigned long arg)
{
	return -ENOIOCTLCMD;
}

/* SOL_SOCKET options are handled by the core before these are called. */
static int rstream_setsockopt(struct socket *sock, int level, int optname,
			      sockptr_t optval, unsigned int optlen)
{
	return level == SOL_RDMA ? -EOPNOTSUPP : -ENOPROTOOPT;
}

static int rstream_getsockopt(struct socket *sock, int level, int optname,
			      char __user *optval, int __user *optlen)
{
	return level == SOL_RDMA ? -EOPNOTSUPP : -ENOPROTOOPT;
}

/*
 * No .family: the number is chosen at load time, and the core takes a
 * socket's family from rstream_family_ops and sk->sk_family, not from here.
 */
static const struct proto_ops rstream_stream_ops = {
	.owner		= THIS_MODULE,
	.release	= rstream_release,
	.bind		= sock_no_bind,
	.connect	= sock_no_connect,
	.socketpair	= sock_no_socketpair,
	.accept		= sock_no_accept,
	.getname	= sock_no_getname,
	.poll		= rstream_poll,
	.ioctl		= rstream_ioctl,
	.listen		= sock_no_listen,
	.shutdown	= sock_no_shutdown,
	.setsockopt	= rstream_setsockopt,
	.getsockopt	= rstream_getsockopt,
	.sendmsg	= sock_no_sendmsg,
	.recvmsg	= sock_no_recvmsg,
	.mmap		= sock_no_mmap,
};

/*
 * socket(AF_RSTREAM, SOCK_STREAM, 0 or IPPROTO_TCP), as rsocket() accepts.
 * Process context.
 */
static int rstream_create(struct net *net, struct socket *sock, int protocol,
			  int kern)
{
	struct sock *sk;

	if (sock->type != SOCK_STREAM)
		return -ESOCKTNOSUPPORT;
	if (protocol && protocol != IPPROTO_TCP)
		return -EPROTONOSUPPORT;

	/* The family parameter is read-only: this is the registered number. */
	sk = sk_alloc(net, rstream_param(RSTREAM_PARAM_FAMILY), GFP_KERNEL,
		      &rstream_proto, kern);
	if (!sk)
		return -ENOMEM;

	sock->state = SS_UNCONNECTED;
	sock->ops = &rstream_stream_ops;
	sock_init_data(sock, sk);
	kern = !!kern;
	sock_lock_init_class_and_name(sk, rstream_slock_names[kern],
				      &rstream_slock_keys[kern],
				      rstream_sk_lock_names[kern],
				      &rstream_sk_lock_keys[kern]);
	/*
	 * Never IPPROTO_TCP, whichever was asked for: BPF helpers
	 * (bpf_tcp_sock(), bpf_setsockopt(SOL_TCP)) take any full socket
	 * with that protocol for a tcp_sock and would run off the end of
	 * this one.
	 */
	sk->sk_protocol = 0;

	sock_prot_inuse_add(net, &rstream_proto, 1);
	return 0;
}

/* Not const: .family is the number chosen at load time. */
static struct net_proto_family rstream_family_ops __ro_after_init = {
	.create	= rstream_create,
	.owner	= THIS_MODULE,
};

static int __init rstream_init(void)
{
	int family = rstream_param(RSTREAM_PARAM_FAMILY);
	int err;

	rstream_family_ops.family = family;

	err = proto_register(&rstream_proto, 1);
	if (err)
		return err;
	err = rstream_proc_init();
	if (err)
		goto err_proto;
	err = rstream_device_init();
	if (err)
		goto err_proc;

	/* Last: once registered, sockets can be created. */
	err = sock_register(&rstream_family_ops);
	if (err == -EEXIST) {
		pr_err("address family %d is already registered by another protocol; load rstream with family= one of %s\n",
		       family, rstream_params[RSTREAM_PARAM_FAMILY].only_text);
		/* modprobe takes -EEXIST from init for "already loaded". */
		err = -EBUSY;
		goto err_device;
	}
	if (err) {
		pr_err("cannot register address family %d: %d\n", family, err);
		goto err_device;
	}

	pr_info("AF_RSTREAM registered as address family %d (rsockets v1)\n",
		family);
	return 0;

err_device:
	rstream_device_exit();
err_proc:
	rstream_proc_exit();
err_proto:
	proto_unregister(&rstream_proto);
	return err;
}

static void __exit rstream_exit(void)
{
	/* No sockets remain: each holds a reference on this module. */
	sock_unregister(rstream_family_ops.family);
	rstream_device_exit();
	rstream_proc_exit();
	proto_unregister(&rstream_proto);
}

module_init(rstream_init);
module_exit(rstream_exit);

MODULE_DESCRIPTION("AF_RSTREAM: reliable byte streams over RDMA (rsockets v1)");
MODULE_LICENSE("GPL");
MODULE_VERSION(RSTREAM_VERSION);
