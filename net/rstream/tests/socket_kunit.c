// SPDX-License-Identifier: GPL-2.0
/*
 * KUnit tests for AF_RSTREAM sockets created inside the kernel, with
 * rstream.ko loaded: they are created and released like user sockets, take
 * no network namespace reference, and their socket lock is in a lockdep
 * class of its own, apart from user sockets', as for every family.
 */
#include <kunit/test.h>
#include <linux/module.h>
#include <linux/net.h>
#include <net/net_namespace.h>
#include <net/sock.h>

#include "../rstream.h"

/* The lockdep classes of the socket lock and its spinlock, by name. */
static void rstream_expect_lock_classes(struct kunit *test, struct sock *sk,
					const char *sk_lock, const char *slock)
{
#ifdef CONFIG_DEBUG_LOCK_ALLOC
	KUNIT_EXPECT_STREQ(test, sk->sk_lock.dep_map.name, sk_lock);
	KUNIT_EXPECT_STREQ(test, sk->sk_lock.slock.dep_map.name, slock);
#endif
}

static void rstream_kern_socket_test(struct kunit *test)
{
	struct socket *sock;
	int err;

	err = sock_create_kern(&init_net, rstream_param(RSTREAM_PARAM_FAMILY),
			       SOCK_STREAM, 0, &sock);
	KUNIT_ASSERT_EQ(test, err, 0);
	KUNIT_EXPECT_TRUE(test, sock->sk->sk_kern_sock);
	KUNIT_EXPECT_FALSE(test, sock->sk->sk_net_refcnt);
	KUNIT_EXPECT_EQ(test, sock->sk->sk_family,
			(unsigned short)rstream_param(RSTREAM_PARAM_FAMILY));
	KUNIT_EXPECT_EQ(test, sock->sk->sk_protocol, 0);
	rstream_expect_lock_classes(test, sock->sk, "sk_lock-AF_RSTREAM-kern",
				    "slock-AF_RSTREAM-kern");
	sock_release(sock);
}

static void rstream_user_socket_lock_class_test(struct kunit *test)
{
	struct socket *sock;
	int err;

	/* kern == 0: created as a user's would be, in this task's netns */
	err = sock_create(rstream_param(RSTREAM_PARAM_FAMILY), SOCK_STREAM,
			  IPPROTO_TCP, &sock);
	KUNIT_ASSERT_EQ(test, err, 0);
	KUNIT_EXPECT_FALSE(test, sock->sk->sk_kern_sock);
	KUNIT_EXPECT_EQ(test, sock->sk->sk_protocol, 0);
	rstream_expect_lock_classes(test, sock->sk, "sk_lock-AF_RSTREAM",
				    "slock-AF_RSTREAM");
	sock_release(sock);
}

static struct kunit_case rstream_socket_test_cases[] = {
	KUNIT_CASE(rstream_kern_socket_test),
	KUNIT_CASE(rstream_user_socket_lock_class_test),
	{}
};

static struct kunit_suite rstream_socket_test_suite = {
	.name = "rstream_socket",
	.test_cases = rstream_socket_test_cases,
};

kunit_test_suite(rstream_socket_test_suite);
