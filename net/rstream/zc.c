// SPDX-License-Identifier: GPL-2.0
/*
 * Zero-copy sends (MSG_ZEROCOPY on a socket with SO_ZEROCOPY): a write
 * goes to the peer's ring straight from the sender's own pages, and the
 * sender learns from its error queue when it may write to them again.
 *
 * The notifications are the core's, as TCP's are: msg_zerocopy_realloc()
 * gives each sendmsg() a number (sk_zckey), charges the pages it pins
 * against RLIMIT_MEMLOCK (mm_account_pinned_pages()) and holds the
 * notification's skb; every write of that call holds a reference on it,
 * and the last write's completion queues "lo..hi done" on sk_error_queue,
 * merged with the one before it where the numbers follow on.
 *
 * A write's pages are taken (iov_iter_get_pages2(), as TCP takes them),
 * then mapped for the device under rs->lock, after the connection is
 * known to be alive: the teardown takes rs->lock to mark it dead before it
 * lets go of the device, so the mapping never meets a device that is
 * going away, and whatever is mapped is in a send-queue slot by then,
 * unmapped by the write's completion or by the teardown after the queue
 * pair is gone.  The device reads the pages through the protection
 * domain's local DMA key: the peer's rkey never covers them, and a write
 * needs no registration of its own.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/errqueue.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/skbuff.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <net/sock.h>
#include <rdma/ib_verbs.h>

#include "rstream.h"

/*
 * Process context, no lock: take the pages of the next @len bytes of
 * @from (fewer where they span more than @max_pages pages) for a write of
 * @uarg's send.  The iterator moves past them.
 */
struct rstream_zc *rstream_zc_get(struct iov_iter *from, u32 len,
				  u32 max_pages, struct ubuf_info *uarg)
{
	struct rstream_zc *zc;
	size_t start;
	ssize_t got;

	zc = kmalloc(sizeof(*zc), GFP_KERNEL_ACCOUNT);
	if (!zc)
		return ERR_PTR(-ENOMEM);
	max_pages = min_t(u32, max_pages, RSTREAM_ZC_PAGES);
	got = iov_iter_get_pages2(from, zc->pages, len, max_pages, &start);
	if (got <= 0) {
		kfree(zc);
		return ERR_PTR(got ?: -EFAULT);
	}
	zc->len = got;
	zc->offset = start;
	zc->npages = DIV_ROUND_UP(start + got, PAGE_SIZE);
	zc->mapped = 0;
	zc->next = NULL;
	zc->uarg = uarg;
	net_zcopy_get(uarg);
	return zc;
}

/*
 * Process context: a send of @uarg's that was copied holds its
 * notification on the writes already in flight (tx.c), so that it comes
 * after theirs, in order, as TCP's do.  Only the reference: no pages.
 */
struct rstream_zc *rstream_zc_marker(struct ubuf_info *uarg)
{
	struct rstream_zc *zc;

	zc = kzalloc(offsetof(struct rstream_zc, pages), GFP_KERNEL_ACCOUNT);
	if (!zc)
		return NULL;
	zc->uarg = uarg;
	net_zcopy_get(uarg);
	return zc;
}

/* rs->lock held, or the device kept otherwise: undo rstream_zc_map(). */
void rstream_zc_unmap(struct ib_device *dev, struct rstream_zc *zc)
{
	while (zc->mapped) {
		zc->mapped--;
		ib_dma_unmap_page(dev, zc->sge[zc->mapped].addr,
				  zc->sge[zc->mapped].length, DMA_TO_DEVICE);
	}
}

/*
 * rs->lock held, the connection alive (see above): map the pages for
 * @dev and fill the write's scatter list, read through @lkey.
 */
int rstream_zc_map(struct ib_device *dev, u32 lkey, struct rstream_zc *zc)
{
	u32 off = zc->offset, rest = zc->len;

	while (zc->mapped < zc->npages) {
		struct ib_sge *sge = &zc->sge[zc->mapped];
		u32 n = min_t(u32, rest, PAGE_SIZE - off);

		sge->addr = ib_dma_map_page(dev, zc->pages[zc->mapped], off, n,
					    DMA_TO_DEVICE);
		if (ib_dma_mapping_error(dev, sge->addr)) {
			rstream_zc_unmap(dev, zc);
			return -ENOMEM;
		}
		sge->length = n;
		sge->lkey = lkey;
		zc->mapped++;
		rest -= n;
		off = 0;
	}
	return 0;
}

/*
 * The device is done with these writes, or never had them: unmap (with
 * @dev, which the caller keeps alive), give the pages back and drop each
 * write's (or marker's) reference on its notification.  The last one queues it, and
 * wakes the sender.  Any context but hard irq; no lock of the connection
 * held, as the error queue's wake-up runs the socket's waiters.
 */
void rstream_zc_put(struct ib_device *dev, struct rstream_zc *zc)
{
	while (zc) {
		struct rstream_zc *next = zc->next;
		u32 i;

		rstream_zc_unmap(dev, zc);
		for (i = 0; i < zc->npages; i++)
			put_page(zc->pages[i]);
		net_zcopy_put(zc->uarg);
		kfree(zc);
		zc = next;
	}
}

/*
 * recvmsg(MSG_ERRQUEUE): the next notification, as TCP gives it - no
 * bytes, a cmsg of IP_RECVERR (IPV6_RECVERR on an IPv6 connection) with
 * the sock_extended_err and a zeroed offender address.  Never waits; no
 * lock needed (the queue has its own).
 */
int rstream_zc_recv_err(struct sock *sk, struct msghdr *msg, size_t len,
			bool ipv6)
{
	struct sock_exterr_skb *serr;
	struct sk_buff *skb;
	union {
		struct {
			struct sock_extended_err ee;
			struct sockaddr_in offender;
		} v4;
		struct {
			struct sock_extended_err ee;
			struct sockaddr_in6 offender;
		} v6;
	} errhdr;
	int copied, err;

	skb = sock_dequeue_err_skb(sk);
	if (!skb)
		return -EAGAIN;
	copied = min_t(size_t, skb->len, len);
	if (copied < skb->len)
		msg->msg_flags |= MSG_TRUNC;
	err = skb_copy_datagram_msg(skb, 0, msg, copied);
	if (err)
		goto out;
	sock_recv_timestamp(msg, sk, skb);
	serr = SKB_EXT_ERR(skb);
	memset(&errhdr, 0, sizeof(errhdr));
	if (ipv6) {
		errhdr.v6.ee = serr->ee;
		put_cmsg(msg, SOL_IPV6, IPV6_RECVERR, sizeof(errhdr.v6),
			 &errhdr.v6);
	} else {
		errhdr.v4.ee = serr->ee;
		put_cmsg(msg, SOL_IP, IP_RECVERR, sizeof(errhdr.v4),
			 &errhdr.v4);
	}
	msg->msg_flags |= MSG_ERRQUEUE;
	err = copied;
out:
	kfree_skb(skb);
	return err;
}
