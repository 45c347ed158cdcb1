/* SPDX-License-Identifier: GPL-2.0 */
/*
 * AF_RSTREAM internal interfaces shared by the files of the module.
 */
#ifndef _NET_RSTREAM_RSTREAM_H
#define _NET_RSTREAM_RSTREAM_H

#include <linux/compiler.h>
#include <linux/types.h>
#include <linux/completion.h>
#include <linux/dma-direction.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/hrtimer.h>
#include <linux/timer.h>
#include <linux/sched/signal.h>
#include <linux/workqueue.h>
#include <net/sock.h>
/* Not self-contained: after <linux/list.h>, which <net/sock.h> brings. */
#include <linux/irq_poll.h>
#include <rdma/ib_verbs.h>

#include <linux/rstream.h>

#include "proto.h"

/* Valid page orders are 0..RSTREAM_MAX_ORDER (the name changed in 6.8). */
#ifdef MAX_PAGE_ORDER
#define RSTREAM_MAX_ORDER	MAX_PAGE_ORDER
#else
#define RSTREAM_MAX_ORDER	(MAX_ORDER - 1)
#endif

struct seq_file;
struct mem_cgroup;

#define RSTREAM_VERSION		"0.2.0"

struct rdma_cm_id;
struct ib_cq;
struct rstream_napi;
struct ib_pd;
struct ib_qp;
struct ib_mr;

/*
 * zc.c: one zero-copy write, from the sender's pages.  A write carries at
 * most 64 KiB (rsocket's RS_MAX_TRANSFER), which spans at most this many
 * pages, each one scatter entry (the queue pair is made with as many
 * where the device allows, conn.c).
 */
#define RSTREAM_ZC_PAGES	(SZ_64K / PAGE_SIZE + 1)

struct rstream_zc {
	struct rstream_zc *next;	/* on a slot's chain, or a list to free */
	struct ubuf_info *uarg;		/* its send's notification */
	u32 len;
	u32 offset;			/* into the first page */
	u8 npages;
	u8 mapped;			/* of those, mapped for the device */
	/* A marker (rstream_zc_marker()) ends here. */
	struct page *pages[RSTREAM_ZC_PAGES];
	struct ib_sge sge[RSTREAM_ZC_PAGES];
};

/*
 * buf.c: memory the HCA reads or writes, registered as one memory region
 * of its own (FRWR), virtually contiguous for the CPU through vmap().
 */
struct rstream_buf {
	void *vaddr;
	size_t size;
	unsigned int order;	/* each chunk is PAGE_SIZE << order */
	unsigned int nchunks;
	struct page **chunks;
	struct sg_table sgt;
	int dma_nents;		/* 0 while not DMA-mapped */
	enum dma_data_direction dir;
	struct ib_device *ibdev;
	struct ib_mr *mr;
	int access;		/* IB_ACCESS_* granted by the registration */
};

/* The target array the peer writes its grants into, and our grants' room. */
#define RSTREAM_SGL_BYTES	(RSTREAM_SGL_ENTRIES * sizeof(struct rstream_wire_sge))
#define RSTREAM_CTRL_BYTES	(RSTREAM_CTRL_SLOTS * sizeof(struct rstream_wire_sge))

/* Connection flags, in rstream_sock.flags (atomic bitops). */
enum {
	RSTREAM_F_VERBS,	/* QP, CQ, MRs exist */
	RSTREAM_F_QP_LIVE,	/* the QP left RESET: drain before destroying */
	RSTREAM_F_CONNECTED,	/* data may move (QP in RTS, peer known) */
	RSTREAM_F_DEAD,		/* no more posting: reset, error or teardown */
	RSTREAM_F_DISC_SENT,	/* our DISCONNECT is posted */
	RSTREAM_F_DISC_RECV,	/* the peer's DISCONNECT or DREQ arrived */
	RSTREAM_F_ABORT,	/* closed throwing data away: no DISCONNECT */
	RSTREAM_F_SHUT_SENT,	/* our SHUTDOWN is posted */
	RSTREAM_F_SHUT_RECV,	/* the peer's SHUTDOWN arrived */
	RSTREAM_F_TEARDOWN,	/* teardown work queued */
	RSTREAM_F_UPDATES_HELD,	/* an update is due and waits for a slot */
	RSTREAM_F_PEER_SPOKE,	/* a message of the peer's has arrived */
};

/* The completion queue's pollers (cq.c), in rstream_sock.cq_state. */
enum {
	RSTREAM_CQ_LIVE,	/* the CQ exists and may be polled */
	RSTREAM_CQ_POLLING,	/* someone polls the CQ: one at a time */
	RSTREAM_CQ_MISSED,	/* a poller found it polled: run irq_poll again */
	RSTREAM_CQ_ARMED,	/* armed, and no event since: nothing new in it */
};

struct rstream_sock {
	struct sock sk;		/* first: sk_alloc() sizes the object by proto */

	/* Sizes, fixed when the connection is set up (sock lock). */
	u32 ring_size;
	u32 sbuf_size;
	u16 sq_size;
	u16 rq_size;
	u16 inline_size;
	bool sizes_fixed;	/* SOL_RDMA options refused from now on */
	int mem_charged;	/* bytes charged to the socket (mem.c) */
	bool nodelay;		/* TCP_NODELAY: no cork window (tx.c) */
	bool cork;		/* TCP_CORK: sends hold partial writes */

	/* Addresses, for getsockname/getpeername. */
	struct sockaddr_storage local_addr;
	struct sockaddr_storage peer_addr;
	bool bound;

	/*
	 * The rdma_cm id.  Its handler runs in process context with the id's
	 * handler mutex held and never takes the sock lock, so that process
	 * context may call rdma_destroy_id() (which waits for the handler)
	 * without holding anything the handler needs.
	 */
	struct rdma_cm_id *cm_id;
	unsigned long flags;

	/*
	 * Listener: children in set-up (@embryo_count of them, TCP's SYN
	 * queue), and established ones to accept (sk_ack_backlog).  Under
	 * rstream_accept_lock.
	 */
	struct list_head embryos;
	struct list_head accept_queue;
	unsigned int embryo_count;
	/*
	 * TCP beside RDMA (fallback.c): a transparent socket's own kernel TCP
	 * socket, or the caller's TCP listener (RSTREAM_TCP_LISTEN, then
	 * @tcp_borrowed, with our entry on its wait queue).  Set and cleared
	 * under the sock lock.  @paths: the RSTREAM_PATH_* the socket may
	 * use.  @on_tcp, once set, stays: every call of a connection goes to
	 * @tcp (read locklessly, rstream_on_tcp()).  @fallback_err: the
	 * errno of the RDMA attempt given up for TCP, set before the work
	 * that connects TCP is queued: from then on the attempt's end shows
	 * nothing of RDMA's.
	 */
	struct socket *tcp;
	bool tcp_borrowed;
	bool on_tcp;
	/*
	 * RSTREAM_REUSEPORT, TCP's SO_REUSEPORT, for @tcp.  Not in our own
	 * sk_reuseport: there the core would take SO_ATTACH_REUSEPORT_CBPF
	 * and _EBPF for a group of AF_RSTREAM sockets that never forms.
	 */
	bool reuseport;
	u8 paths;
	int fallback_err;
	struct wait_queue_entry tcp_wait;
	struct work_struct fallback_work;
	void (*tcp_error_report)(struct sock *sk);	/* @tcp's own */
	bool tcp_err_copied;		/* @tcp's pending error is SO_ERROR's */
	/*
	 * Handed to the CM by the socket layer for a transparent socket: the
	 * RDMA connection attempt failed with @err (positive); true if the
	 * socket goes on over TCP, and the CM then publishes nothing of the
	 * failure.  CM handler or workqueue, no lock held.
	 */
	bool (*fallback)(struct rstream_sock *rs, int err);
	/*
	 * Handed to the CM by the socket layer: a new socket for a connection
	 * arriving on this listener, with what it inherits from it.  CM
	 * handler (process context).
	 */
	struct rstream_sock *(*new_child)(struct rstream_sock *lrs);
	unsigned long connect_timeout;	/* jiffies connect() waits for RDMA */
	/* Child: its place in one of the listener's lists, and the listener. */
	struct list_head accept_node;
	struct rstream_sock *listener;

	/*
	 * Verbs resources (conn.c), owned by the connection.  @ibdev is the
	 * device they live on, held (ib_device_try_get()) from their creation
	 * to their destruction: its unregistration waits for that.
	 */
	struct ib_device *ibdev;
	u32 port;			/* the port of @ibdev */
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct irq_poll iop;		/* the CQ's softirq poller (cq.c) */
	struct ib_wc *wc;		/* one poll's completions */
	unsigned long cq_state;		/* RSTREAM_CQ_* bits */
	struct timer_list cq_timer;	/* arms an unarmed CQ left idle */
	struct hrtimer cork_timer;	/* ends a short cork (cq.c) */
	unsigned int cq_polls;		/* process polls, for the timer */
	unsigned int cq_polls_seen;
	struct rstream_napi *napi;	/* the CQ's busy-poll context (cq.c) */
	struct ib_qp *qp;
	struct rstream_buf ring;	/* receive ring, remote write */
	struct rstream_buf sgl;		/* target SGL array, remote write */
	struct rstream_buf sbuf;	/* send staging, local */
	struct ib_cqe send_cqe;
	struct ib_cqe recv_cqe;
	struct ib_cqe reg_cqe;
	atomic_t reg_pending;
	int reg_status;
	struct completion reg_done;

	/*
	 * The data path: both directions' state, the send queue accounting,
	 * the message queue.  Taken with spin_lock_bh() in process context and
	 * spin_lock() in the completion handlers (softirq, or BHs off: cq.c).
	 */
	spinlock_t lock;
	struct rstream_conn_params peer;
	struct rstream_rx_state rx;
	struct rstream_tx_state tx;
	u8 remote_sge;			/* the peer's entry our next grant fills */
	u32 *rmsg;			/* lengths of unconsumed data messages */
	u32 rmsg_size;
	u32 rmsg_head;
	u32 rmsg_tail;
	struct rstream_sq_ring sq;
	u32 sq_ctrl;			/* control messages in flight */
	u32 disc_seq;			/* SQ sequence of our DISCONNECT */
	u32 grant_count;
	u64 sbuf_head;			/* bytes copied in, ever */
	u64 sbuf_sent;			/* of those, posted (the rest corked) */
	u64 sbuf_tail;			/* bytes whose sends completed */
	u32 zc_bytes;			/* in zero-copy writes in flight */
	u64 zc_sent;			/* in zero-copy writes posted, ever */
	/*
	 * Held, inside rs->lock, from taking finished zero-copy writes off
	 * their slots to the end of giving them back (tx.c): notifications
	 * are queued in order.
	 */
	spinlock_t zc_lock;
	u8 tx_pages;			/* scatter entries a zero-copy write may use */
	u64 tx_last_send;		/* local_clock() at the last sendmsg's end */
	u64 tx_rx_mark;			/* rx.written at the last data write */
	u64 tx_hold_until;		/* MSG_MORE/TCP_CORK hold ends; 0: none */
	u64 tx_timer_at;		/* when the queued cork timer ends */
	/* What the liveness timer reads (conn.c), in jiffies. */
	unsigned long alive_at;		/* the last completion that succeeded */
	unsigned long busy_at;		/* writes in flight since */
	unsigned long probe_at;		/* the last keepalive probe counted */
	unsigned long keepalive_at;	/* SO_KEEPALIVE was set */
	unsigned long stall_at;		/* a sender found no room; 0: none */
	unsigned long data_sent_at;	/* the last data write posted */
	unsigned long data_recv_at;	/* the last data message received */
	/*
	 * TCP_INFO's round trip: one signaled write timed at a time, at most
	 * one started in a tick (tx.c).
	 */
	u64 rtt_start;			/* local_clock() at its post */
	unsigned long rtt_at;		/* jiffies then */
	u32 rtt_seq;			/* its SQ sequence */
	bool rtt_timing;
	u32 srtt_us;			/* smoothed, << 3, as TCP's */
	u32 mdev_us;			/* mean deviation, << 2 */
	u32 probe_seq;			/* SQ sequence of the probe in flight */
	u8 probes;			/* probes counted and not answered */
	bool probe_out;			/* a probe is in the send queue */

	/*
	 * Liveness, as TCP's keepalive and retransmission limits (conn.c):
	 * set under the sock lock, read by the timer.  The keepalive times
	 * are in jiffies, 0 for the namespace's net.ipv4.tcp_keepalive_*.
	 */
	struct timer_list live_timer;
	bool keepalive;			/* SO_KEEPALIVE */
	u8 keepcnt;			/* TCP_KEEPCNT; 0: the sysctl */
	u32 keepidle;			/* TCP_KEEPIDLE */
	u32 keepintvl;			/* TCP_KEEPINTVL */
	u32 user_timeout;		/* TCP_USER_TIMEOUT, ms; 0: TCP's limit */

	/*
	 * Serialises who destroys the cm_id and the verbs resources: teardown,
	 * the reset work and the CM handler (device removal).  Never held
	 * across rdma_destroy_id(), which waits for the handler.
	 */
	struct mutex cm_lock;
	/*
	 * Held by the QP event handler (any context) while it uses cm_id,
	 * and by whoever clears cm_id while the QP may still raise events.
	 */
	spinlock_t qp_event_lock;
	struct completion disc_done;	/* our DISCONNECT has completed */
	struct completion dreq_done;	/* the DREQ is answered, or came */
	struct work_struct reset_work;
	struct work_struct teardown_work;
	struct delayed_work connect_work;	/* connect()'s deadline */
};

/*
 * How long connect() waits for the RDMA connection by default, in ms:
 * rdma_cm retries an unanswered REQ for about a minute, and a connect()
 * to a host that is not there gives up sooner, with ETIMEDOUT; a
 * transparent socket goes over to TCP sooner still.
 * RSTREAM_CONNECT_TIMEOUT sets it per socket, up to the maximum.
 */
#define RSTREAM_CONNECT_TIMEOUT_MS	20000
#define RSTREAM_FALLBACK_TIMEOUT_MS	3000
#define RSTREAM_CONNECT_TIMEOUT_MAX_MS	60000

/*
 * Socket flags that SOL_SOCKET options set, that TCP reads and that an
 * accepted socket inherits from its listener, as TCP's do.  None of them
 * is one whose setting enabled the global timestamp key (SOCK_TIMESTAMP):
 * copying them owes the destructor nothing.
 */
#define RSTREAM_TCP_FLAGS	(BIT(SOCK_KEEPOPEN) | BIT(SOCK_LINGER) |      \
				 BIT(SOCK_URGINLINE) | BIT(SOCK_LOCALROUTE) | \
				 BIT(SOCK_RCVTSTAMP) | BIT(SOCK_RCVTSTAMPNS) | \
				 BIT(SOCK_TSTAMP_NEW) | BIT(SOCK_ZEROCOPY))

static inline struct rstream_sock *rstream_sk(const struct sock *sk)
{
	return container_of(sk, struct rstream_sock, sk);
}

/*
 * The CM handler sets sk_state without the sock lock (see cm.c); readers
 * pair with it so that what the handler set up before is visible too.
 */
static inline int rstream_state(const struct sock *sk)
{
	/* Pairs with rstream_set_state(). */
	return smp_load_acquire(&sk->sk_state);
}

static inline void rstream_set_state(struct sock *sk, int state)
{
	/* Pairs with rstream_state(). */
	smp_store_release(&sk->sk_state, state);
}

/*
 * Before a blocking call sleeps: -EAGAIN if it may not wait (nonblocking,
 * or its timeout ran out), the signal's errno if one is pending, else 0.
 */
static inline int rstream_may_wait(long timeo)
{
	if (!timeo)
		return -EAGAIN;
	if (signal_pending(current))
		return sock_intr_errno(timeo);
	return 0;
}

/* rs->lock held: data writes posted whose completions are not handled. */
static inline u32 rstream_data_inflight(const struct rstream_sock *rs)
{
	return rstream_sq_inflight(&rs->sq) - rs->sq_ctrl;
}

/* rs->lock held: bytes sendmsg copied in and left for a later write. */
static inline u32 rstream_tx_pending(const struct rstream_sock *rs)
{
	return rs->sbuf_head - rs->sbuf_sent;
}

/* A sleeper, poll, select or epoll on the socket (a full barrier). */
static inline bool rstream_has_waiter(struct rstream_sock *rs)
{
	struct socket_wq *wq;
	bool sleeper;

	rcu_read_lock();
	wq = rcu_dereference(rs->sk.sk_wq);
	sleeper = skwq_has_sleeper(wq);
	rcu_read_unlock();
	return sleeper;
}

static inline u32 rstream_rx_ready(const struct rstream_sock *rs)
{
	return READ_ONCE(rs->rx.written) - READ_ONCE(rs->rx.consumed);
}

/* params.c: module parameters, validated on every write */

enum rstream_param_id {
	RSTREAM_PARAM_FAMILY,
	RSTREAM_PARAM_MEM,
	RSTREAM_PARAM_WMEM,
	RSTREAM_PARAM_SQSIZE,
	RSTREAM_PARAM_RQSIZE,
	RSTREAM_PARAM_INLINE,
	RSTREAM_PARAM_MEM_LIMIT,
	RSTREAM_PARAM_POLLING_TIME,
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

/* buf.c */

int rstream_buf_alloc(struct rstream_buf *buf, struct ib_pd *pd, size_t size,
		      enum dma_data_direction dir, int access);
void rstream_buf_unregister(struct rstream_buf *buf);
void rstream_buf_free(struct rstream_buf *buf);
void rstream_buf_reg_wr(struct rstream_buf *buf, struct ib_reg_wr *wr);
void rstream_buf_sync_for_cpu(struct rstream_buf *buf, size_t off, size_t len);
void rstream_buf_sync_for_device(struct rstream_buf *buf, size_t off,
				 size_t len);
u64 rstream_buf_iova(const struct rstream_buf *buf, size_t off);
size_t rstream_buf_copy_from_iter(struct rstream_buf *buf, u32 ring_size,
				  u64 pos, size_t len, struct iov_iter *from);
size_t rstream_buf_copy_to_iter(struct rstream_buf *buf, u32 ring_size,
				u64 pos, size_t len, struct iov_iter *to);

/* mem.c: what connections pin, charged to their sockets */

extern atomic_long_t rstream_memory_allocated;
DECLARE_PER_CPU(int, rstream_memory_per_cpu_fw_alloc);
extern long rstream_sysctl_mem[3];
extern int rstream_sysctl_rmem[3];
extern int rstream_sysctl_wmem[3];

int rstream_mem_charge(struct rstream_sock *rs, bool rings);
void rstream_mem_uncharge(struct rstream_sock *rs, bool final);
const char *rstream_mem_limit_text(const struct rstream_sock *rs);
void rstream_mem_show(struct seq_file *seq);

/* The memory cgroup a socket's memory is charged to, if any. */
static inline struct mem_cgroup *rstream_memcg(const struct sock *sk)
{
	return mem_cgroup_sockets_enabled ? sk->sk_memcg : NULL;
}

/* conn.c: verbs resources of one connection */

extern struct workqueue_struct *rstream_wq;

u32 rstream_conn_send_wrs(u32 sq_size);
u32 rstream_conn_recv_wrs(u32 rq_size);
u32 rstream_conn_cq_entries(u32 sq_size, u32 rq_size);
int rstream_conn_create(struct rstream_sock *rs, struct rdma_cm_id *id,
			bool rings);
int rstream_conn_alloc_data(struct rstream_sock *rs);
int rstream_conn_start(struct rstream_sock *rs, struct rdma_cm_id *id);
void rstream_conn_destroy(struct rstream_sock *rs);
void rstream_conn_stop(struct rstream_sock *rs);
void rstream_conn_reset(struct rstream_sock *rs, int err, const char *why);
void rstream_conn_live_update(struct rstream_sock *rs);
u32 rstream_conn_keepidle(const struct rstream_sock *rs);
u32 rstream_conn_keepintvl(const struct rstream_sock *rs);
u8 rstream_conn_keepcnt(const struct rstream_sock *rs);
void rstream_wc_failed(struct rstream_sock *rs, const struct ib_wc *wc);
void rstream_conn_build_params(struct rstream_sock *rs,
			       struct rstream_conn_params *p);
void rstream_conn_established(struct rstream_sock *rs);
void rstream_conn_teardown(struct rstream_sock *rs);
void rstream_conn_init(struct rstream_sock *rs);
void rstream_conn_free(struct rstream_sock *rs);
struct rdma_cm_id *rstream_cm_id_detach(struct rstream_sock *rs);
void rstream_cm_drop_id(struct rstream_sock *rs);

/* cm.c: connection management */

int rstream_cm_connect(struct rstream_sock *rs,
		       const struct sockaddr_storage *addr);
int rstream_cm_bind(struct rstream_sock *rs, struct sockaddr *addr);
int rstream_cm_listen(struct rstream_sock *rs, int backlog);
void rstream_cm_close_listener(struct rstream_sock *rs);
int rstream_cm_ensure_id(struct rstream_sock *rs);
void rstream_cm_init(struct rstream_sock *rs);
struct rstream_sock *rstream_cm_dequeue(struct rstream_sock *lrs);
bool rstream_cm_accept_ready(struct rstream_sock *lrs);

/* fallback.c: TCP beside RDMA, transparent sockets and RSTREAM_TCP_LISTEN */

/* Once true, every call of the connection goes to its TCP socket. */
static inline bool rstream_on_tcp(const struct rstream_sock *rs)
{
	/* Pairs with rstream_fallback_switch(): @tcp is set up before. */
	return smp_load_acquire(&rs->on_tcp);
}

/*
 * The paths @rs may still use (RSTREAM_PATH_*): a connection, the one it
 * uses; a listener, those it listens on; else those it may try.
 */
static inline u8 rstream_paths(const struct rstream_sock *rs)
{
	if (rstream_on_tcp(rs))
		return RSTREAM_PATH_TCP;
	/* The state says established before the flag says connected. */
	if (test_bit(RSTREAM_F_CONNECTED, &rs->flags) ||
	    rstream_state(&rs->sk) == TCP_ESTABLISHED)
		return RSTREAM_PATH_RDMA;
	/*
	 * A transparent listener whose device went away listens on TCP
	 * alone: its RDMA id went with the device (cm.c).
	 */
	if (rstream_state(&rs->sk) == TCP_LISTEN &&
	    (READ_ONCE(rs->paths) & RSTREAM_PATH_TCP) && !READ_ONCE(rs->cm_id))
		return RSTREAM_PATH_TCP;
	return READ_ONCE(rs->paths);
}

static inline bool rstream_transparent(const struct rstream_sock *rs)
{
	return rs->sk.sk_protocol == RSTREAM_PROTO_TCP4 ||
	       rs->sk.sk_protocol == RSTREAM_PROTO_TCP6;
}

void rstream_fallback_sock_init(struct rstream_sock *rs);
int rstream_fallback_create(struct rstream_sock *rs, struct socket *sock);
void rstream_fallback_release(struct rstream_sock *rs);
bool rstream_fallback_begin(struct rstream_sock *rs, int err);
bool rstream_fallback_usable(struct rstream_sock *rs, int err);
int rstream_fallback_bind(struct rstream_sock *rs, struct sockaddr *addr,
			  int addrlen);
int rstream_fallback_listen(struct rstream_sock *rs, int backlog);
int rstream_fallback_connect(struct rstream_sock *rs, struct sockaddr *addr,
			     int addrlen, int flags, int why);
int rstream_fallback_getname(struct rstream_sock *rs, struct sockaddr *addr,
			     int peer);
__poll_t rstream_fallback_poll(struct file *file, struct rstream_sock *rs);
int rstream_fallback_ioctl(struct rstream_sock *rs, unsigned int cmd,
			   unsigned long arg);
int rstream_fallback_shutdown(struct rstream_sock *rs, int how);
int rstream_fallback_setsockopt(struct rstream_sock *rs, int level,
				int optname, sockptr_t optval,
				unsigned int optlen);
int rstream_fallback_getsockopt(struct rstream_sock *rs, int level,
				int optname, char __user *optval,
				int __user *optlen);
int rstream_fallback_sendmsg(struct rstream_sock *rs, struct msghdr *msg,
			     size_t len);
int rstream_fallback_recvmsg(struct rstream_sock *rs, struct msghdr *msg,
			     size_t len, int flags);
void rstream_fallback_splice_eof(struct rstream_sock *rs);
void rstream_fallback_keepalive(struct rstream_sock *rs, int val);
int rstream_fallback_reuseport(struct rstream_sock *rs, bool on);
int rstream_fallback_attach(struct rstream_sock *rs, int fd);
bool rstream_fallback_accept_ready(struct rstream_sock *rs);
struct socket *rstream_fallback_accept(struct rstream_sock *rs);
void rstream_fallback_adopt(struct rstream_sock *rs, struct socket *tcp);
void rstream_fallback_put(struct socket *tcp);

/* tx.c and rx.c: the data path */

int rstream_rdma_sendmsg(struct socket *sock, struct msghdr *msg, size_t len);
int rstream_rdma_recvmsg(struct socket *sock, struct msghdr *msg, size_t len,
			 int flags);
/* cq.c: the completion queue, polled by irq_poll and by processes */
int rstream_cq_create(struct rstream_sock *rs, u32 entries);
void rstream_cq_destroy(struct rstream_sock *rs);
void rstream_cq_poll(struct rstream_sock *rs);
void rstream_cq_drain(struct rstream_sock *rs);
bool rstream_cq_try_drain(struct rstream_sock *rs);
void rstream_give_way(void);
bool rstream_cq_busy_poll(struct rstream_sock *rs,
			  bool (*done)(struct rstream_sock *rs), long *timeo);
int rstream_cq_init(void);
void rstream_cq_exit(void);
bool rstream_tx_cork_window(struct rstream_sock *rs, u64 *left);

void rstream_send_done(struct ib_cq *cq, struct ib_wc *wc);
void rstream_recv_done(struct ib_cq *cq, struct ib_wc *wc);
int rstream_post_recvs(struct rstream_sock *rs, unsigned int n);
int rstream_send_ctrl(struct rstream_sock *rs, enum rstream_ctrl ctrl);
void rstream_tx_updates(struct rstream_sock *rs);
int rstream_tx_probe_locked(struct rstream_sock *rs, u32 *seq);
bool rstream_tx_shut_out_locked(struct rstream_sock *rs);
int rstream_tx_push_locked(struct rstream_sock *rs);
int rstream_tx_release_locked(struct rstream_sock *rs);
bool rstream_tx_held(const struct rstream_sock *rs, u64 *left);
void rstream_tx_cork_timer(struct rstream_sock *rs, u64 ns);
int rstream_tx_push(struct rstream_sock *rs, bool force);
void rstream_tx_updates_locked(struct rstream_sock *rs);
bool rstream_tx_writable(struct rstream_sock *rs);
u32 rstream_tx_unacked(struct rstream_sock *rs);
void rstream_wake(struct sock *sk, __poll_t events);

/* zc.c: zero-copy sends */
struct rstream_zc *rstream_zc_get(struct iov_iter *from, u32 len,
				  u32 max_pages, struct ubuf_info *uarg);
int rstream_zc_map(struct ib_device *dev, u32 lkey, struct rstream_zc *zc);
void rstream_zc_unmap(struct ib_device *dev, struct rstream_zc *zc);
void rstream_zc_put(struct ib_device *dev, struct rstream_zc *zc);
struct rstream_zc *rstream_zc_marker(struct ubuf_info *uarg);
int rstream_zc_recv_err(struct sock *sk, struct msghdr *msg, size_t len,
			bool ipv6);
void rstream_tx_zc_drop(struct rstream_sock *rs);

/* options.c */

int rstream_rdma_setsockopt(struct socket *sock, int level, int optname,
			    sockptr_t optval, unsigned int optlen);
int rstream_rdma_getsockopt(struct socket *sock, int level, int optname,
			    char __user *optval, int __user *optlen);
int rstream_sol_socket_setsockopt(struct socket *sock, int optname,
				  sockptr_t optval, unsigned int optlen);

#endif /* _NET_RSTREAM_RSTREAM_H */
