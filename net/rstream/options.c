// SPDX-License-Identifier: GPL-2.0
/*
 * Socket options beyond SOL_SOCKET (which the core handles: SO_SNDBUF and
 * SO_RCVBUF there size the rings at connect time, as in rsocket).
 *
 * SOL_RDMA takes rsocket's options with rsocket's rules: queue sizes and
 * the inline threshold only before the connection exists, capped at
 * 0xfffe.  SOL_TCP's TCP_NODELAY, TCP_CORK and TCP_MAXSEG mean what they
 * mean to TCP, mapped onto how sends are corked (tx.c): TCP_NODELAY turns
 * off the short cork window of a stream of sends (TCP's Nagle delay) but,
 * as in TCP, not the corking behind a write in flight; TCP_CORK holds
 * partial writes for up to 200 ms, as MSG_MORE does for one send; setting
 * TCP_NODELAY or clearing TCP_CORK posts what is held.  TCP_MAXSEG reads
 * what one write can carry and is otherwise ignored, as in rsocket.
 * TCP_INFO reads what the connection has of TCP's (rstream_tcp_info()).
 * TCP_KEEPIDLE, TCP_KEEPINTVL, TCP_KEEPCNT and TCP_USER_TIMEOUT, with
 * TCP's limits, set the liveness timer (conn.c); TCP_QUICKACK is taken
 * and reads 1: the device acknowledges every write at once.
 * rstream's own at SOL_RDMA: RSTREAM_TCP_LISTEN gives a socket that will
 * listen the caller's TCP listener to take clients from too; RSTREAM_PATH
 * says which paths a transparent socket may take or took, RSTREAM_FALLBACK
 * why it took TCP (fallback.c); RSTREAM_CONNECT_TIMEOUT how long
 * connect() waits for RDMA; RSTREAM_REUSEPORT is SO_REUSEPORT for a
 * transparent socket (fallback.c); RSTREAM_POLLING_TIME is the socket's
 * busy-poll time (cq.c), SO_BUSY_POLL's; RSTREAM_ZEROCOPY is SO_ZEROCOPY
 * (zc.c), which the core of kernels before 6.2 refuses to any family of
 * ours.  Process context.
 */
#include <linux/in6.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <net/tcp.h>
#include <linux/rstream.h>

#include "rstream.h"

/*
 * RSTREAM_PATH: a transparent socket's paths, chosen before it connects or
 * listens; any other socket has RDMA's alone.  Sock lock held.
 */
static int rstream_set_paths(struct rstream_sock *rs, u32 val)
{
	const u32 both = RSTREAM_PATH_RDMA | RSTREAM_PATH_TCP;

	if (!val || (val & ~both))
		return -EINVAL;
	if (!rs->tcp || rs->tcp_borrowed)
		return val == RSTREAM_PATH_RDMA && rs->paths == val ? 0 : -EINVAL;
	if (rs->sk.sk_state != TCP_CLOSE || rs->on_tcp ||
	    rs->sk.sk_socket->state != SS_UNCONNECTED)
		return -EINVAL;
	WRITE_ONCE(rs->paths, val);
	return 0;
}

/*
 * SO_ZEROCOPY, by either name: sends with MSG_ZEROCOPY may go from the
 * caller's pages (zc.c).  A transparent socket's TCP side gets the flag
 * with the others it reads (fallback.c).  Sock lock held.
 */
static int rstream_set_zerocopy(struct rstream_sock *rs, int val)
{
	if (val < 0 || val > 1)
		return -EINVAL;
	sock_valbool_flag(&rs->sk, SOCK_ZEROCOPY, val);
	return 0;
}

/*
 * SOL_SOCKET, on kernels that give it to the family (af_rstream.c):
 * SO_ZEROCOPY is ours, the core sets everything else as it does on
 * kernels that do not.
 */
int rstream_sol_socket_setsockopt(struct socket *sock, int optname,
				  sockptr_t optval, unsigned int optlen)
{
	struct sock *sk = sock->sk;
	int val, err;

	if (optname != SO_ZEROCOPY)
		return sock_setsockopt(sock, SOL_SOCKET, optname, optval,
				       optlen);
	if (optlen < sizeof(val))
		return -EINVAL;
	if (copy_from_sockptr(&val, optval, sizeof(val)))
		return -EFAULT;
	lock_sock(sk);
	err = rstream_set_zerocopy(rstream_sk(sk), val);
	release_sock(sk);
	return err;
}

static int rstream_set_rdma(struct rstream_sock *rs, int optname, u32 val)
{
	switch (optname) {
	case RSTREAM_TCP_LISTEN:
		if (rs->sk.sk_state != TCP_CLOSE)
			return -EINVAL;		/* before listen() */
		return rstream_fallback_attach(rs, (int)val);
	case RSTREAM_PATH:
		return rstream_set_paths(rs, val);
	case RSTREAM_CONNECT_TIMEOUT:
		if (!val || val > RSTREAM_CONNECT_TIMEOUT_MAX_MS)
			return -EINVAL;
		rs->connect_timeout = msecs_to_jiffies(val);
		return 0;
	case RSTREAM_REUSEPORT:
		return rstream_fallback_reuseport(rs, !!val);
	case RSTREAM_ZEROCOPY:
		return rstream_set_zerocopy(rs, (int)val);
	case RSTREAM_FALLBACK:
	case RSTREAM_INFO:
		return -EINVAL;		/* read only */
	}
	if (rs->sizes_fixed && rs->sk.sk_state != TCP_LISTEN)
		return -EINVAL;
	switch (optname) {
	case RDMA_SQSIZE:
		rs->sq_size = min_t(u32, val, RSTREAM_QP_MAX);
		return 0;
	case RDMA_RQSIZE:
		rs->rq_size = min_t(u32, val, RSTREAM_QP_MAX);
		return 0;
	case RDMA_INLINE:
		rs->inline_size = min_t(u32, val, RSTREAM_QP_MAX);
		return 0;
	case RDMA_IOMAPSIZE:
		/* No iomap (riowrite) support: only "none" is accepted. */
		return val ? -EINVAL : 0;
	case RDMA_ROUTE:
		return -EOPNOTSUPP;
	default:
		return -ENOPROTOOPT;
	}
}

/*
 * TCP's liveness options, with TCP's limits, for the timer in conn.c;
 * times in seconds (TCP_USER_TIMEOUT in ms).  Sock lock held.
 */
static int rstream_set_live(struct rstream_sock *rs, int optname, int val)
{
	switch (optname) {
	case TCP_KEEPIDLE:
		if (val < 1 || val > MAX_TCP_KEEPIDLE)
			return -EINVAL;
		WRITE_ONCE(rs->keepidle, val * HZ);
		break;
	case TCP_KEEPINTVL:
		if (val < 1 || val > MAX_TCP_KEEPINTVL)
			return -EINVAL;
		WRITE_ONCE(rs->keepintvl, val * HZ);
		break;
	case TCP_KEEPCNT:
		if (val < 1 || val > MAX_TCP_KEEPCNT)
			return -EINVAL;
		WRITE_ONCE(rs->keepcnt, val);
		break;
	case TCP_USER_TIMEOUT:
		if (val < 0)
			return -EINVAL;
		WRITE_ONCE(rs->user_timeout, val);
		break;
	default:
		return -ENOPROTOOPT;
	}
	rstream_conn_live_update(rs);
	return 0;
}

int rstream_rdma_setsockopt(struct socket *sock, int level, int optname,
			    sockptr_t optval, unsigned int optlen)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	u32 val;
	int err = 0;

	if (level == SOL_RDMA && optname == RDMA_ROUTE)
		return -EOPNOTSUPP;
	if (level != SOL_RDMA && level != SOL_TCP && level != SOL_IPV6)
		return -ENOPROTOOPT;
	if (optlen < sizeof(val))
		return -EINVAL;
	if (copy_from_sockptr(&val, optval, sizeof(val)))
		return -EFAULT;
	/*
	 * SO_BUSY_POLL's time under rsocket's name, with the core's rules
	 * for it; the core takes the sock lock itself.
	 */
	if (level == SOL_RDMA && optname == RSTREAM_POLLING_TIME)
		return sock_setsockopt(sock, SOL_SOCKET, SO_BUSY_POLL,
				       KERNEL_SOCKPTR(&val), sizeof(val));

	lock_sock(sk);
	switch (level) {
	case SOL_RDMA:
		err = rstream_set_rdma(rs, optname, val);
		break;
	case SOL_TCP:
		if (optname == TCP_NODELAY) {
			WRITE_ONCE(rs->nodelay, !!val);
			if (val)
				rstream_tx_push(rs, true);
		} else if (optname == TCP_CORK) {
			rs->cork = !!val;
			if (!val)
				rstream_tx_push(rs, true);
		} else if (optname != TCP_MAXSEG && optname != TCP_QUICKACK) {
			err = rstream_set_live(rs, optname, (int)val);
		}
		break;
	case SOL_IPV6:
		if (optname != IPV6_V6ONLY)
			err = -ENOPROTOOPT;
		else if (rs->bound || sk->sk_state != TCP_CLOSE)
			err = -EINVAL;	/* rdma_cm takes it before bind */
		else
			sk->sk_ipv6only = !!val;
		break;
	}
	release_sock(sk);
	return err;
}

/* What TCP_MAXSEG and TCP_INFO's MSS read: half the receive ring. */
static u32 rstream_maxseg(struct rstream_sock *rs)
{
	return rs->ring_size ? rs->ring_size / 2 :
	       READ_ONCE(rs->sk.sk_rcvbuf) / 2;
}

/*
 * TCP_INFO, as far as the connection has the same things: its state, the
 * bytes sent, completed, corked and received, the writes in flight, the
 * peer's current grant (tcpi_snd_wnd) and the message credits it left us
 * (tcpi_snd_cwnd, in writes), the round trip from a write's post to its
 * completion, smoothed as TCP smooths its own (tcpi_rtt, tcpi_rttvar; at
 * most one write timed a tick, where TCP samples every ACK: tx.c),
 * the times since data last went and came and since the peer's device
 * last answered (tcpi_last_*), the keepalive probes unanswered.
 * tcpi_snd_mss is TCP_MAXSEG's.  What the RDMA device keeps to itself
 * reads 0: retransmissions.  Sock lock held.
 */
static void rstream_tcp_info(struct rstream_sock *rs, struct tcp_info *info)
{
	memset(info, 0, sizeof(*info));
	info->tcpi_state = rs->sk.sk_state;
	info->tcpi_snd_mss = rstream_maxseg(rs);
	info->tcpi_rcv_mss = info->tcpi_snd_mss;
	info->tcpi_advmss = info->tcpi_snd_mss;
	info->tcpi_rcv_space = rs->ring_size;
	if (!test_bit(RSTREAM_F_VERBS, &rs->flags))
		return;
	spin_lock_bh(&rs->lock);
	info->tcpi_unacked = rstream_data_inflight(rs);
	info->tcpi_snd_wnd = rs->tx.sge_left;
	info->tcpi_snd_cwnd = (u16)(rs->tx.sseq_comp - rs->tx.sseq_no);
	/* Zero-copy bytes count as any others (tx.c), as on TCP. */
	info->tcpi_bytes_sent = rs->sbuf_sent + rs->zc_sent;
	info->tcpi_bytes_acked = rs->sbuf_tail + rs->zc_sent - rs->zc_bytes;
	info->tcpi_notsent_bytes = rstream_tx_pending(rs);
	info->tcpi_bytes_received = rs->rx.written;
	info->tcpi_segs_out = rs->sq.posted;
	info->tcpi_rtt = rs->srtt_us >> 3;
	info->tcpi_rttvar = rs->mdev_us >> 2;
	info->tcpi_probes = rs->probes;
	if (test_bit(RSTREAM_F_CONNECTED, &rs->flags)) {
		unsigned long now = jiffies;

		info->tcpi_last_data_sent =
			jiffies_to_msecs(now - (rs->data_sent_at ?: rs->alive_at));
		info->tcpi_last_data_recv =
			jiffies_to_msecs(now - (rs->data_recv_at ?: rs->alive_at));
		info->tcpi_last_ack_recv = jiffies_to_msecs(now - rs->alive_at);
	}
	spin_unlock_bh(&rs->lock);
}

/*
 * RSTREAM_INFO: the connection's RDMA side.  Sock lock held; the verbs
 * resources exist while RSTREAM_F_VERBS is set, and only a teardown or the
 * CM handler (device removal), under cm_lock, frees them.
 */
static void rstream_rdma_info(struct rstream_sock *rs,
			      struct rstream_info *info)
{
	struct ib_qp_init_attr init;
	struct ib_qp_attr attr;

	memset(info, 0, sizeof(*info));
	mutex_lock(&rs->cm_lock);
	if (test_bit(RSTREAM_F_VERBS, &rs->flags) && rs->ibdev && rs->qp) {
		strscpy(info->ri_device, dev_name(&rs->ibdev->dev),
			sizeof(info->ri_device));
		info->ri_port = rs->port;
		info->ri_qp_num = rs->qp->qp_num;
		if (!ib_query_qp(rs->qp, &attr, IB_QP_DEST_QPN, &init))
			info->ri_dest_qp_num = attr.dest_qp_num;
	}
	mutex_unlock(&rs->cm_lock);
	info->ri_sq_size = rs->sq_size;
	info->ri_rq_size = rs->rq_size;
	info->ri_inline_size = rs->inline_size;
	info->ri_ring_size = rs->ring_size;
	info->ri_sbuf_size = rs->sbuf_size;
	if (!test_bit(RSTREAM_F_CONNECTED, &rs->flags))
		return;
	spin_lock_bh(&rs->lock);
	info->ri_credits = (u16)(rs->tx.sseq_comp - rs->tx.sseq_no);
	info->ri_grant_left = rs->tx.sge_left;
	info->ri_granted = rs->rx.granted - rs->rx.written;
	info->ri_unread = rs->rx.written - rs->rx.consumed;
	info->ri_writes_inflight = rstream_sq_inflight(&rs->sq);
	info->ri_probes = rs->probes;
	spin_unlock_bh(&rs->lock);
}

/* The start of a struct, as much of it as the caller's buffer holds. */
static int rstream_put_struct(const void *val, size_t size,
			      char __user *optval, int __user *optlen,
			      int len)
{
	len = min_t(unsigned int, len, size);
	if (put_user(len, optlen) || copy_to_user(optval, val, len))
		return -EFAULT;
	return 0;
}

int rstream_rdma_getsockopt(struct socket *sock, int level, int optname,
			    char __user *optval, int __user *optlen)
{
	struct sock *sk = sock->sk;
	struct rstream_sock *rs = rstream_sk(sk);
	int len, val;

	if (get_user(len, optlen))
		return -EFAULT;
	if (len < 0)
		return -EINVAL;
	if (level == SOL_TCP && optname == TCP_INFO) {
		struct tcp_info info;

		lock_sock(sk);
		rstream_tcp_info(rs, &info);
		release_sock(sk);
		return rstream_put_struct(&info, sizeof(info), optval, optlen,
					  len);
	}
	if (level == SOL_RDMA && optname == RSTREAM_INFO) {
		struct rstream_info info;

		lock_sock(sk);
		rstream_rdma_info(rs, &info);
		release_sock(sk);
		return rstream_put_struct(&info, sizeof(info), optval, optlen,
					  len);
	}

	lock_sock(sk);
	switch (level) {
	case SOL_RDMA:
		switch (optname) {
		case RDMA_SQSIZE:
			val = rs->sq_size;
			break;
		case RDMA_RQSIZE:
			val = rs->rq_size;
			break;
		case RDMA_INLINE:
			val = rs->inline_size;
			break;
		case RDMA_IOMAPSIZE:
			val = 0;
			break;
		case RSTREAM_TCP_LISTEN:
			val = rs->tcp_borrowed;
			break;
		case RSTREAM_PATH:
			val = rstream_paths(rs);
			break;
		case RSTREAM_FALLBACK:
			val = READ_ONCE(rs->fallback_err);
			break;
		case RSTREAM_CONNECT_TIMEOUT:
			val = jiffies_to_msecs(rs->connect_timeout);
			break;
		case RSTREAM_REUSEPORT:
			val = rs->reuseport;
			break;
		case RSTREAM_ZEROCOPY:
			val = sock_flag(sk, SOCK_ZEROCOPY);
			break;
#ifdef CONFIG_NET_RX_BUSY_POLL
		case RSTREAM_POLLING_TIME:
			val = READ_ONCE(sk->sk_ll_usec);
			break;
#endif
		case RDMA_ROUTE:
			release_sock(sk);
			return -EOPNOTSUPP;
		default:
			release_sock(sk);
			return -ENOPROTOOPT;
		}
		break;
	case SOL_TCP:
		if (optname == TCP_NODELAY) {
			val = rs->nodelay;
		} else if (optname == TCP_CORK) {
			val = rs->cork;
		} else if (optname == TCP_MAXSEG) {
			val = rstream_maxseg(rs);
		} else if (optname == TCP_KEEPIDLE) {
			val = rstream_conn_keepidle(rs) / HZ;
		} else if (optname == TCP_KEEPINTVL) {
			val = rstream_conn_keepintvl(rs) / HZ;
		} else if (optname == TCP_KEEPCNT) {
			val = rstream_conn_keepcnt(rs);
		} else if (optname == TCP_USER_TIMEOUT) {
			val = READ_ONCE(rs->user_timeout);
		} else if (optname == TCP_QUICKACK) {
			val = 1;	/* the device acknowledges at once */
		} else {
			release_sock(sk);
			return -ENOPROTOOPT;
		}
		break;
	case SOL_IPV6:
		if (optname != IPV6_V6ONLY) {
			release_sock(sk);
			return -ENOPROTOOPT;
		}
		val = sk->sk_ipv6only;
		break;
	default:
		release_sock(sk);
		return -ENOPROTOOPT;
	}
	release_sock(sk);
	return rstream_put_struct(&val, sizeof(val), optval, optlen, len);
}
