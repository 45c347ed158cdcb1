// SPDX-License-Identifier: GPL-2.0
/*
 * Connection management over rdma_cm: bind, listen, connect, the passive
 * side's accept queue, disconnect and device removal.
 *
 * rstream_cm_handler() runs in process context (rdma_cm's work queues)
 * with the id's handler mutex held.  It never takes the sock lock: process
 * context may then destroy an id, which waits for its handler, while
 * holding the sock lock.  Socket state the handler changes is published
 * with smp_store_release() and waiters are woken through rstream_wake().
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/in.h>
#include <linux/in6.h>
#include <net/tcp.h>
#include <net/tcp_states.h>
#include <rdma/ib_cm.h>
#include <rdma/rdma_cm.h>

#include "rstream.h"

#define RSTREAM_RESOLVE_TIMEOUT_MS	5000

/* Protects every listener's embryos and accept_queue and child->listener. */
static DEFINE_SPINLOCK(rstream_accept_lock);

static void rstream_cm_embryo_failed(struct rstream_sock *child);
static int rstream_cm_handler(struct rdma_cm_id *id,
			      struct rdma_cm_event *ev);

int rstream_cm_ensure_id(struct rstream_sock *rs)
{
	struct rdma_cm_id *id;

	if (rs->cm_id)
		return 0;
	id = rdma_create_id(sock_net(&rs->sk), rstream_cm_handler, rs,
			    RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(id))
		return PTR_ERR(id);
	mutex_lock(&rs->cm_lock);
	rs->cm_id = id;
	mutex_unlock(&rs->cm_lock);
	return 0;
}

/*
 * The errno (negative) a TCP user expects for a connection attempt that
 * failed with rdma_cm @event and @status.
 */
static int rstream_cm_errno(enum rdma_cm_event_type event, int status)
{
	switch (event) {
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		return -ECONNREFUSED;
	default:
		break;
	}
	switch (status) {
	case -ETIMEDOUT:
	case -ENETUNREACH:
	case -EHOSTUNREACH:
	case -EADDRNOTAVAIL:
	case -ECONNREFUSED:
	case -ENOBUFS:		/* over a memory limit (mem.c) */
	case -ENOMEM:
		return status;
	case -ENODEV:		/* no RDMA device reaches the address */
		return -ENETUNREACH;
	default:
		return -EHOSTUNREACH;
	}
}

/* connect() has its answer: the deadline's reference goes. */
static void rstream_cm_connect_done(struct rstream_sock *rs)
{
	if (cancel_delayed_work(&rs->connect_work))
		sock_put(&rs->sk);
}

/*
 * A socket the socket layer handed a fallback (a transparent one) may go
 * on without RDMA after the attempt failed with @err: then nothing of the
 * failure is published, and the socket layer carries on.  Asked before
 * anything of the failure shows.
 */
static bool rstream_cm_fallback(struct rstream_sock *rs, int err)
{
	return rs->fallback && rs->fallback(rs, err);
}

/*
 * Active side set-up failed with @err: free what exists, wake connect().
 * The error goes first: rstream_conn_destroy() marks the connection dead
 * long before it has freed everything (milliseconds under soft-RoCE), and
 * a poll() in that window reports it hung up; SO_ERROR must then say why,
 * or a nonblocking connect() looks made (rstream_poll() pairs the barrier).
 */
static void rstream_cm_connect_failed(struct rstream_sock *rs, int err)
{
	struct sock *sk = &rs->sk;
	bool quiet = rstream_cm_fallback(rs, err);

	if (!quiet)
		WRITE_ONCE(sk->sk_err, err);
	smp_wmb();	/* the error before the dead flag; see above */
	rstream_cm_connect_done(rs);
	mutex_lock(&rs->cm_lock);
	rstream_conn_destroy(rs);
	mutex_unlock(&rs->cm_lock);
	if (quiet)
		return;
	WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
	rstream_set_state(sk, TCP_CLOSE);
	rstream_wake(sk, EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP);
}

static void rstream_cm_params(struct rstream_sock *rs,
			      struct rdma_conn_param *param,
			      struct rstream_conn_data *cd)
{
	struct rstream_conn_params p;

	rstream_conn_build_params(rs, &p);
	rstream_conn_data_build(cd, &p);
	param->private_data = cd;
	param->private_data_len = sizeof(*cd);
	param->flow_control = 1;
	param->retry_count = 7;
	/* Infinite RNR retry: the CM gives each side's QP the other's value. */
	param->rnr_retry_count = 7;
	param->qp_num = rs->qp->qp_num;
	param->srq = 0;
}

/*
 * rsockets on iWARP replaces each immediate with a 4-byte SEND, and the
 * iWARP CM drives the QP differently: not implemented, so say so.
 */
static bool rstream_cm_transport_ok(struct rdma_cm_id *id)
{
	if (rdma_cap_ib_cm(id->device, id->port_num))
		return true;
	net_warn_ratelimited("%s: iWARP connections are not supported\n",
			     dev_name(&id->device->dev));
	return false;
}

static void rstream_cm_route_resolved(struct rstream_sock *rs,
				      struct rdma_cm_id *id)
{
	struct rdma_conn_param param = {};
	struct rstream_conn_data cd;
	int err;

	if (!rstream_cm_transport_ok(id)) {
		rstream_cm_connect_failed(rs, EOPNOTSUPP);
		return;
	}
	mutex_lock(&rs->cm_lock);
	err = rstream_conn_create(rs, id, true);
	mutex_unlock(&rs->cm_lock);
	if (!err) {
		rstream_cm_params(rs, &param, &cd);
		err = rdma_connect_locked(id, &param);
	}
	if (err)
		rstream_cm_connect_failed(rs, -rstream_cm_errno(0, err));
}

static void rstream_cm_connect_response(struct rstream_sock *rs,
					struct rdma_cm_id *id,
					struct rdma_cm_event *ev)
{
	struct sock *sk = &rs->sk;
	const char *why = NULL;
	int err;

	err = rstream_conn_data_parse(ev->param.conn.private_data,
				      ev->param.conn.private_data_len, true,
				      &rs->peer, &why);
	if (err) {
		net_warn_ratelimited("connection to %pISpc refused: %s\n",
				     &rs->peer_addr, why);
		rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
		rstream_cm_connect_failed(rs, EPROTO);
		return;
	}
	err = rstream_conn_start(rs, id);
	if (err) {
		rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
		rstream_cm_connect_failed(rs, -err == ETIMEDOUT ? ETIMEDOUT :
					  ECONNREFUSED);
		return;
	}
	/*
	 * Past connect()'s deadline the id is being destroyed; cm_lock keeps
	 * the deadline out until the state says established.
	 */
	mutex_lock(&rs->cm_lock);
	err = rs->cm_id == id ? 0 : -ETIMEDOUT;
	/* The RTU: only now may the peer write into our regions. */
	if (!err)
		err = rdma_accept(id, NULL);
	if (!err) {
		memcpy(&rs->local_addr, &id->route.addr.src_addr,
		       sizeof(rs->local_addr));
		rstream_set_state(sk, TCP_ESTABLISHED);
	}
	mutex_unlock(&rs->cm_lock);
	if (err) {
		if (err != -ETIMEDOUT)
			rstream_cm_connect_failed(rs, ECONNREFUSED);
		return;
	}
	rstream_cm_connect_done(rs);
	rstream_conn_established(rs);
}

/*
 * Workqueue: connect() has waited long enough.  Destroying the id stops
 * rdma_cm's retries and waits for a handler that may be running.
 */
static void rstream_cm_connect_timeout(struct work_struct *work)
{
	struct rstream_sock *rs = container_of(to_delayed_work(work),
					       struct rstream_sock,
					       connect_work);
	struct rdma_cm_id *id = NULL;

	/* A child whose peer never sent the RTU (rstream_cm_add_embryo()). */
	if (rstream_state(&rs->sk) == TCP_SYN_RECV) {
		rstream_cm_embryo_failed(rs);
		sock_put(&rs->sk);
		return;
	}
	mutex_lock(&rs->cm_lock);
	if (rstream_state(&rs->sk) == TCP_SYN_SENT)
		id = rstream_cm_id_detach(rs);
	mutex_unlock(&rs->cm_lock);
	if (id) {
		rdma_destroy_id(id);
		rstream_cm_connect_failed(rs, ETIMEDOUT);
	}
	sock_put(&rs->sk);
}

/* Every socket of the family, at its creation. */
void rstream_cm_init(struct rstream_sock *rs)
{
	INIT_DELAYED_WORK(&rs->connect_work, rstream_cm_connect_timeout);
}

/* A child taken off @lrs's embryo list: close it.  Any context. */
static void rstream_cm_drop_embryo(struct rstream_sock *lrs,
				   struct rstream_sock *child)
{
	/*
	 * Its RTU may have come in meanwhile: then the peer's connect()
	 * succeeded, and it must read a reset, not a clean end of stream.
	 */
	set_bit(RSTREAM_F_ABORT, &child->flags);
	sock_put(&lrs->sk);
	rstream_set_state(&child->sk, TCP_CLOSE);
	rstream_conn_teardown(child);	/* takes the list's reference */
}

/*
 * How long a child may wait for its peer's RTU: as long as TCP keeps a
 * connection in SYN-RECV, tcp_synack_retries resends of the SYN-ACK one
 * second apart and doubling up to TCP_RTO_MAX (63 s by default).  Not the
 * REQ's timeouts: those are the peer's to choose, up to days.
 */
static unsigned long rstream_cm_rtu_timeout(const struct sock *lsk)
{
	unsigned int n = READ_ONCE(sock_net(lsk)->ipv4.sysctl_tcp_synack_retries);
	unsigned long t = 0, rto = TCP_TIMEOUT_INIT;

	do {
		t += rto;
		rto = min_t(unsigned long, rto * 2, TCP_RTO_MAX);
	} while (n--);
	return t;
}

/*
 * A child set up, its REP sent: it waits on @lrs's embryo list for the
 * peer's RTU.  Half-open children have a queue of their own, as TCP's SYN
 * queue, as long as the backlog: a peer that sends requests and never
 * completes them must not fill the accept queue, or every other client
 * would be refused.  When it is full the oldest is dropped (its peer gets
 * a REJ), so the memory they pin stays bounded per listener while an
 * honest handshake, one round trip long, still gets through; and it waits
 * no longer than TCP would.  False if the listener has closed.  CM handler
 * of the child.
 */
static bool rstream_cm_add_embryo(struct rstream_sock *lrs,
				  struct rstream_sock *child)
{
	struct sock *lsk = &lrs->sk;
	unsigned int max = max(READ_ONCE(lsk->sk_max_ack_backlog), 1U);
	struct rstream_sock *oldest, *tmp;
	LIST_HEAD(dropped);

	spin_lock(&rstream_accept_lock);
	if (READ_ONCE(lsk->sk_state) != TCP_LISTEN) {
		spin_unlock(&rstream_accept_lock);
		return false;
	}
	/* Down to one under the backlog, which listen() may have lowered. */
	while (lrs->embryo_count >= max) {
		oldest = list_first_entry(&lrs->embryos, struct rstream_sock,
					  accept_node);
		list_move_tail(&oldest->accept_node, &dropped);
		oldest->listener = NULL;
		lrs->embryo_count--;
	}
	sock_hold(lsk);
	child->listener = lrs;
	list_add_tail(&child->accept_node, &lrs->embryos);
	lrs->embryo_count++;
	/*
	 * Its deadline (rstream_cm_connect_timeout()), armed before anyone
	 * else can take the child off the list: teardown cancels it, and a
	 * deadline armed after would outlive the teardown with its reference.
	 */
	sock_hold(&child->sk);
	if (!queue_delayed_work(rstream_wq, &child->connect_work,
				rstream_cm_rtu_timeout(lsk)))
		sock_put(&child->sk);
	spin_unlock(&rstream_accept_lock);

	list_for_each_entry_safe(oldest, tmp, &dropped, accept_node) {
		list_del_init(&oldest->accept_node);
		net_info_ratelimited("%pISpc: more half-open connections than the backlog (%u), possible request flood: dropping the oldest, from %pISpc\n",
				     &lrs->local_addr, max, &oldest->peer_addr);
		rstream_cm_drop_embryo(lrs, oldest);
	}
	return true;
}

/*
 * CONNECT_REQUEST on a listener: @id is the new connection's id.  Build
 * the child socket and its QP, register, and accept with our private data.
 * A non-zero return makes rdma_cm destroy @id.
 */
static int rstream_cm_request(struct rstream_sock *lrs, struct rdma_cm_id *id,
			      struct rdma_cm_event *ev)
{
	struct sock *lsk = &lrs->sk;
	struct rdma_conn_param param = {};
	struct rstream_conn_params peer;
	struct rstream_conn_data cd;
	struct rstream_sock *child;
	struct mem_cgroup *old_memcg;
	const char *why = NULL;
	int err;

	if (!rstream_cm_transport_ok(id)) {
		rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
		return 1;
	}
	/*
	 * SO_BINDTODEVICE on the listener: only connections that came
	 * through that netdev, as for a TCP listener.
	 */
	if (READ_ONCE(lsk->sk_bound_dev_if) &&
	    READ_ONCE(lsk->sk_bound_dev_if) !=
	    id->route.addr.dev_addr.bound_dev_if) {
		rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
		return 1;
	}
	err = rstream_conn_data_parse(ev->param.conn.private_data,
				      ev->param.conn.private_data_len, false,
				      &peer, &why);
	if (err) {
		net_warn_ratelimited("connection from %pISpc rejected: %s\n",
				     &id->route.addr.dst_addr, why);
		rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
		return 1;
	}

	/* The child is the listener owner's, as is the memory it pins. */
	old_memcg = set_active_memcg(rstream_memcg(lsk));
	child = lrs->new_child(lrs);
	set_active_memcg(old_memcg);
	if (!child) {
		rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
		return 1;
	}
	child->cm_id = id;
	child->peer = peer;
	memcpy(&child->local_addr, &id->route.addr.src_addr,
	       sizeof(child->local_addr));
	memcpy(&child->peer_addr, &id->route.addr.dst_addr,
	       sizeof(child->peer_addr));

	/* As TCP: no new connection while the accept queue is full. */
	if (READ_ONCE(lsk->sk_state) != TCP_LISTEN || sk_acceptq_is_full(lsk)) {
		err = -ECONNREFUSED;
		goto err_free;
	}

	id->context = child;
	err = rstream_mem_charge(child, false);
	if (err) {
		net_warn_ratelimited("connection from %pISpc rejected: %s\n",
				     &child->peer_addr,
				     rstream_mem_limit_text(child));
		goto err_reject;
	}
	mutex_lock(&child->cm_lock);
	err = rstream_conn_create(child, id, false);
	mutex_unlock(&child->cm_lock);
	if (!err)
		err = rstream_conn_start(child, id);
	if (err)
		goto err_reject;

	/*
	 * rsocket copies the request's parameters; rsockets never reads
	 * remotely, so the read depths the peer asked for are not granted
	 * (param stays zeroed there) and the rest are ours.
	 */
	rstream_cm_params(child, &param, &cd);
	rstream_set_state(&child->sk, TCP_SYN_RECV);
	err = rdma_accept(id, &param);
	if (err)
		goto err_reject;
	/*
	 * Only now, set up, does the child join the listener: its own
	 * events wait for this handler (rdma_cm holds its handler mutex),
	 * so nothing else has seen it yet.
	 */
	if (!rstream_cm_add_embryo(lrs, child))
		goto err_free;	/* the listener closed: the REP is undone */
	return 0;

err_reject:
	rdma_reject(id, NULL, 0, IB_CM_REJ_CONSUMER_DEFINED);
err_free:
	mutex_lock(&child->cm_lock);
	rstream_conn_destroy(child);
	rstream_cm_id_detach(child);
	mutex_unlock(&child->cm_lock);
	id->context = NULL;
	sock_put(&child->sk);
	return 1;
}

/*
 * A child still being set up failed (rejected, unreachable, disconnected,
 * its device gone): take it off the listener's list and close it.  CM
 * handler.
 */
static void rstream_cm_embryo_failed(struct rstream_sock *child)
{
	struct rstream_sock *lrs;

	spin_lock(&rstream_accept_lock);
	lrs = child->listener;
	if (lrs && rstream_state(&child->sk) == TCP_SYN_RECV) {
		list_del_init(&child->accept_node);
		child->listener = NULL;
		lrs->embryo_count--;
	} else {
		lrs = NULL;
	}
	spin_unlock(&rstream_accept_lock);
	if (lrs)
		rstream_cm_drop_embryo(lrs, child);
}

/* RTU received (or COMM_EST): the child may be accepted. */
static void rstream_cm_child_established(struct rstream_sock *child)
{
	struct rstream_sock *lrs;
	const char *why = NULL;

	rstream_cm_connect_done(child);		/* the RTU came in time */
	/*
	 * Only now the rings (conn.c): charged like the rest, and refused
	 * the same way, as a connection reset before accept() sees it.
	 */
	if (rstream_mem_charge(child, true))
		why = rstream_mem_limit_text(child);
	else if (rstream_conn_alloc_data(child))
		why = "cannot allocate or register its rings";
	if (why) {
		rstream_conn_reset(child, ENOBUFS, why);
		rstream_cm_embryo_failed(child);
		return;
	}
	/* Ready before accept() can see it. */
	rstream_set_state(&child->sk, TCP_ESTABLISHED);
	rstream_conn_established(child);

	/*
	 * It joins the accept queue even when that is full: at most the
	 * backlog's worth of children in set-up can take it over, as they
	 * were admitted while it had room.
	 */
	spin_lock(&rstream_accept_lock);
	lrs = child->listener;
	if (lrs) {
		list_move_tail(&child->accept_node, &lrs->accept_queue);
		lrs->embryo_count--;
		sk_acceptq_added(&lrs->sk);
		sock_hold(&lrs->sk);	/* accept() may drop the child's */
	}
	spin_unlock(&rstream_accept_lock);
	if (!lrs)
		return;		/* the listener closed: teardown is queued */
	rstream_wake(&lrs->sk, EPOLLIN | EPOLLRDNORM);
	sock_put(&lrs->sk);
}

/*
 * The RDMA device is going away: free everything on it now, as rdma_cm
 * waits for that.  Returns 1 if rdma_cm is to destroy the id, which it
 * does unless teardown has already taken it and is waiting to.
 */
static int rstream_cm_device_removal(struct rstream_sock *rs,
				     struct rdma_cm_id *id)
{
	struct sock *sk = &rs->sk;
	bool ours, quiet;

	/*
	 * Once the id is detached, a close() or a teardown finds no id to
	 * wait for and may free the socket at once: it is ours until the
	 * end.  It is alive here: whoever frees it first destroys the id,
	 * which waits for this handler.
	 */
	sock_hold(sk);
	/* While it still reads as an embryo, which drops the list's reference. */
	rstream_cm_embryo_failed(rs);

	/*
	 * The error before the connection reads as dead (see rx.c).  Not on
	 * a listener: it has no connection to fail, and its accept() and
	 * poll() tell from the missing id (a listener may go on without
	 * RDMA).  Nor on an attempt that goes on without RDMA.
	 */
	quiet = rstream_state(sk) == TCP_SYN_SENT &&
		rstream_cm_fallback(rs, ENODEV);
	if (!quiet && !READ_ONCE(sk->sk_err) && sk->sk_state != TCP_LISTEN)
		WRITE_ONCE(sk->sk_err, ENODEV);
	mutex_lock(&rs->cm_lock);
	ours = rs->cm_id == id;
	if (ours)
		rstream_cm_id_detach(rs);
	rstream_conn_destroy(rs);
	mutex_unlock(&rs->cm_lock);

	rstream_cm_connect_done(rs);
	if (!quiet) {
		WRITE_ONCE(sk->sk_shutdown, SHUTDOWN_MASK);
		if (sk->sk_state != TCP_LISTEN)
			rstream_set_state(sk, TCP_CLOSE);
		rstream_wake(sk, EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP);
	}
	sock_put(sk);
	return ours;
}

/*
 * The peer's DREQ (process context).  rsockets v1 ends a stream in band:
 * a peer that closes cleanly posts its DISCONNECT and waits for that
 * write to complete, which it does only once our device has taken it,
 * before its DREQ goes out.  So the DISCONNECT is in our CQ by now, and
 * handling the CQ tells the two ends apart: a DREQ with no DISCONNECT
 * before it is a peer that threw data away, TCP's reset.  Unless the
 * stream had ended otherwise: a peer that has our DISCONNECT, or that
 * had sent its SHUTDOWN and then had ours, sends none (rsocket's rule).
 */
static void rstream_cm_disconnected(struct rstream_sock *rs,
				    struct rdma_cm_id *id)
{
	/* Decided before the DREP: an aborting peer waits for it (conn.c). */
	if (test_bit(RSTREAM_F_CONNECTED, &rs->flags) &&
	    !test_bit(RSTREAM_F_ABORT, &rs->flags)) {
		rstream_cq_drain(rs);
		if (!test_bit(RSTREAM_F_DISC_RECV, &rs->flags) &&
		    !test_bit(RSTREAM_F_DISC_SENT, &rs->flags) &&
		    !(test_bit(RSTREAM_F_SHUT_RECV, &rs->flags) &&
		      test_bit(RSTREAM_F_SHUT_SENT, &rs->flags)))
			rstream_conn_reset(rs, ECONNRESET,
					   "the peer reset the connection");
	}
	set_bit(RSTREAM_F_DISC_RECV, &rs->flags);
	rdma_disconnect(id);
	complete_all(&rs->dreq_done);
	rstream_wake(&rs->sk, EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLHUP);
	rstream_cm_embryo_failed(rs);
}

static int rstream_cm_handler(struct rdma_cm_id *id, struct rdma_cm_event *ev)
{
	struct rstream_sock *rs = id->context;
	int err;

	if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
		return rstream_cm_request(rs, id, ev);
	if (!rs)
		return 0;

	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		err = rdma_resolve_route(id, RSTREAM_RESOLVE_TIMEOUT_MS);
		if (err)
			rstream_cm_connect_failed(rs, -rstream_cm_errno(0, err));
		break;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		rstream_cm_route_resolved(rs, id);
		break;
	case RDMA_CM_EVENT_CONNECT_RESPONSE:
		rstream_cm_connect_response(rs, id, ev);
		break;
	case RDMA_CM_EVENT_ESTABLISHED:
		rstream_cm_child_established(rs);
		break;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
	case RDMA_CM_EVENT_CONNECT_ERROR:
		if (rs->sk.sk_state == TCP_SYN_SENT) {
			rstream_cm_connect_failed(rs, -rstream_cm_errno(ev->event,
									ev->status));
		} else {
			rstream_conn_reset(rs, ECONNRESET,
					   rdma_event_msg(ev->event));
			rstream_cm_embryo_failed(rs);
		}
		break;
	case RDMA_CM_EVENT_DISCONNECTED:
		rstream_cm_disconnected(rs, id);
		break;
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		return rstream_cm_device_removal(rs, id);
	default:
		break;
	}
	return 0;
}

/*
 * rdma_cm says EADDRNOTAVAIL both for an address that is not ours and for
 * a port taken by a wildcard bind on the same port, where TCP says
 * EADDRINUSE; and ENODEV for an address no RDMA device has.  A scratch id
 * bound to the same address on any port tells the cases apart.
 */
static int rstream_cm_bind_errno(struct rstream_sock *rs,
				 struct sockaddr *addr, int err)
{
	struct sockaddr_storage any;
	struct rdma_cm_id *id;

	if (err == -ENODEV)
		return -EADDRNOTAVAIL;
	if (err != -EADDRNOTAVAIL)
		return err;
	id = rdma_create_id(sock_net(&rs->sk), rstream_cm_handler, NULL,
			    RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(id))
		return err;
	memcpy(&any, addr, addr->sa_family == AF_INET6 ?
	       sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in));
	if (any.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&any)->sin6_port = 0;
	else
		((struct sockaddr_in *)&any)->sin_port = 0;
	if (!rdma_bind_addr(id, (struct sockaddr *)&any))
		err = -EADDRINUSE;
	rdma_destroy_id(id);
	return err;
}

/*
 * The calls below use the socket's id under cm_lock: the handler may
 * destroy it at any moment when its device goes away (rdma_cm frees it
 * once the handler returns), and it detaches it under cm_lock first.  An
 * id that is gone reads as an address no longer there.  rdma_cm's calls
 * here take its global lock, never an id's handler mutex, so the order
 * cm_lock -> rdma_cm's lock cannot meet the handler's handler mutex ->
 * cm_lock in a cycle (but see rstream_cm_listen()).
 */

/* Sock lock held.  @addr is checked by the caller. */
int rstream_cm_bind(struct rstream_sock *rs, struct sockaddr *addr)
{
	struct rdma_cm_id *id;
	int err;

	err = rstream_cm_ensure_id(rs);
	if (err)
		return err;
	mutex_lock(&rs->cm_lock);
	id = rs->cm_id;
	if (!id) {
		mutex_unlock(&rs->cm_lock);
		return -EADDRNOTAVAIL;
	}
	if (rs->sk.sk_reuse)
		rdma_set_reuseaddr(id, 1);
	if (addr->sa_family == AF_INET6 && rs->sk.sk_ipv6only)
		rdma_set_afonly(id, 1);
	err = rdma_bind_addr(id, addr);
	if (!err)
		memcpy(&rs->local_addr, &id->route.addr.src_addr,
		       sizeof(rs->local_addr));
	mutex_unlock(&rs->cm_lock);
	if (err)
		return rstream_cm_bind_errno(rs, addr, err);
	rs->bound = true;
	return 0;
}

/* Sock lock held: start resolving; the handler carries on from there. */
int rstream_cm_connect(struct rstream_sock *rs,
		       const struct sockaddr_storage *addr)
{
	struct sockaddr *src = NULL;
	int err;

	err = rstream_cm_ensure_id(rs);
	if (err)
		return err;
	if (rs->bound)
		src = (struct sockaddr *)&rs->local_addr;
	memcpy(&rs->peer_addr, addr, sizeof(rs->peer_addr));
	rstream_set_state(&rs->sk, TCP_SYN_SENT);
	sock_hold(&rs->sk);
	if (!queue_delayed_work(rstream_wq, &rs->connect_work,
				rs->connect_timeout))
		sock_put(&rs->sk);
	mutex_lock(&rs->cm_lock);
	/*
	 * SO_BINDTODEVICE: the route to the peer, and so the RDMA device,
	 * must go through that netdev, as TCP's route must.
	 */
	if (rs->cm_id && rs->sk.sk_bound_dev_if)
		rs->cm_id->route.addr.dev_addr.bound_dev_if =
			rs->sk.sk_bound_dev_if;
	err = rs->cm_id ? rdma_resolve_addr(rs->cm_id, src,
					    (struct sockaddr *)&rs->peer_addr,
					    RSTREAM_RESOLVE_TIMEOUT_MS) :
			  -EADDRNOTAVAIL;
	mutex_unlock(&rs->cm_lock);
	if (err) {
		rstream_cm_connect_done(rs);
		rstream_set_state(&rs->sk, TCP_CLOSE);
		return rstream_cm_errno(0, err);
	}
	return 0;
}

/* Sock lock held; the socket is bound (rstream_cm_bind()). */
/*
 * Sock lock held.  A listener bound to a wildcard address is the one
 * exception to the rule above: rdma_listen() makes an internal listener
 * on every device, and when one of them fails (an iWARP device whose TCP
 * port is taken) it cancels the others under their handler mutexes.  That
 * id has no device, so no removal can destroy it, and only this socket's
 * own calls, under the sock lock, can: it listens without cm_lock.
 */
int rstream_cm_listen(struct rstream_sock *rs, int backlog)
{
	struct rdma_cm_id *id;
	int err;

	mutex_lock(&rs->cm_lock);
	id = rs->cm_id;
	if (id && id->device) {
		err = rdma_listen(id, backlog);
		mutex_unlock(&rs->cm_lock);
	} else {
		mutex_unlock(&rs->cm_lock);
		err = id ? rdma_listen(id, backlog) : -EADDRNOTAVAIL;
	}
	if (err)
		return err;
	WRITE_ONCE(rs->sk.sk_max_ack_backlog, backlog);
	rstream_set_state(&rs->sk, TCP_LISTEN);
	return 0;
}

/* Take the first established child off @lrs's queue, or NULL. */
struct rstream_sock *rstream_cm_dequeue(struct rstream_sock *lrs)
{
	struct rstream_sock *child = NULL;

	spin_lock(&rstream_accept_lock);
	if (!list_empty(&lrs->accept_queue)) {
		child = list_first_entry(&lrs->accept_queue,
					 struct rstream_sock, accept_node);
		list_del_init(&child->accept_node);
		child->listener = NULL;
		sk_acceptq_removed(&lrs->sk);
	}
	spin_unlock(&rstream_accept_lock);
	if (child)
		sock_put(&lrs->sk);
	return child;
}

bool rstream_cm_accept_ready(struct rstream_sock *lrs)
{
	return !list_empty_careful(&lrs->accept_queue);
}

/*
 * Close a listener: no new requests once its id is destroyed, then every
 * child not yet accepted is closed abortively, as TCP resets them.  Process
 * context, sock lock not held (rdma_destroy_id() waits for handlers).
 */
void rstream_cm_close_listener(struct rstream_sock *lrs)
{
	struct rstream_sock *child, *tmp;
	LIST_HEAD(orphans);

	rstream_set_state(&lrs->sk, TCP_CLOSE);
	rstream_cm_drop_id(lrs);

	spin_lock(&rstream_accept_lock);
	list_splice_init(&lrs->embryos, &orphans);
	list_splice_tail_init(&lrs->accept_queue, &orphans);
	list_for_each_entry(child, &orphans, accept_node)
		child->listener = NULL;
	lrs->embryo_count = 0;
	WRITE_ONCE(lrs->sk.sk_ack_backlog, 0);
	spin_unlock(&rstream_accept_lock);

	list_for_each_entry_safe(child, tmp, &orphans, accept_node) {
		list_del_init(&child->accept_node);
		sock_put(&lrs->sk);
		/* As TCP: a connection nobody accepted is reset. */
		set_bit(RSTREAM_F_ABORT, &child->flags);
		rstream_conn_teardown(child);	/* takes the list's reference */
	}
}
