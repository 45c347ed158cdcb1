// SPDX-License-Identifier: GPL-2.0
/*
 * Bench helper: the round trip a kernel consumer of an RDMA device gets
 * with nothing of a socket around it.  Two RC connections' ends, both in
 * this module and joined through rdma_cm over @addr, ping-pong @size
 * bytes with RDMA WRITE WITH IMMEDIATE, as rsockets' data messages are,
 * each end spinning on its own completion queue (ib_poll_cq() in a loop,
 * giving way as AF_RSTREAM's pollers do) for the other's.  Every write is signaled, as
 * rsockets and AF_RSTREAM signal theirs.
 *
 * What it measures is the floor under AF_RSTREAM's busy-polling rows: a
 * kernel QP and a kernel CQ, on a device whose driver may treat them
 * otherwise than a process's (6.1's soft-RoCE runs a kernel QP's sends
 * from a tasklet, a process's inline; the CQ's lock is taken on every
 * poll).  `make bench` runs it next to ib_write_lat and rsockets.
 *
 * With @copy, each end also copies the bytes in from modprobe's memory
 * before its write and out to it after the peer's, with copy_from_user()
 * and copy_to_user() as any kernel socket's send and recv must: the
 * floor under a socket's latency, where copying costs more than the
 * device (a 4 KiB round trip under an emulator).
 *
 * Without @calls, everything happens in the module's init, which prints
 * one line
 *
 *   rawlat[copy] <size> <iterations> <usec per one-way>
 *
 * tears down what it made and returns 0 (or the error, which says what
 * failed).  Every wait is bounded: a lost completion ends the run with
 * ETIMEDOUT and names the side that waited; the run's size is capped, and
 * killing modprobe ends it.
 *
 * With @calls, the init makes the connection and returns, and two
 * programs make the round trips through the character devices
 * /dev/rstream_rawlat_client and /dev/rstream_rawlat_server (the
 * selftests' rstream_rawcalls): a write() of @size bytes copies them in
 * and posts them, a read() of @size bytes spins for the peer's and copies
 * them out.  That is the least a kernel socket's send() and recv() can do,
 * system calls included: the floor under a socket's busy rows that a
 * program measures.  Each device opens once at a time; every read is
 * bounded as above and ends at a signal; rmmod tears down, and is refused
 * while a device is open.  Until then the module holds the RDMA device.
 *
 * With @calls and @family, the same ends are also sockets: the module
 * registers that address family (one the kernel leaves free), and
 * socket(@family, SOCK_STREAM, 0) is the client's end, protocol 1 the
 * server's, each open once at a time, as the devices (and shared with
 * them).  A send() of @size bytes copies them in from the message and
 * posts them, a recv() of @size bytes spins and copies out, as write()
 * and read() do, and there is nothing else: the socket system calls'
 * own cost (descriptor lookup, the security hooks, the message header)
 * is all they add, which every socket family pays, where a device's
 * read() and write() do not.  Only CAP_NET_ADMIN in the initial network
 * namespace creates one.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/inet.h>
#include <linux/kthread.h>
#include <linux/miscdevice.h>
#include <linux/net.h>
#include <linux/mm.h>
#include <linux/mman.h>
#include <linux/module.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/sched/stat.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <net/sock.h>
#include <rdma/ib_verbs.h>
#include <rdma/rdma_cm.h>

#define RAWLAT_RECVS		32
#define RAWLAT_MAX_SIZE		SZ_1M
#define RAWLAT_WAIT_MS		5000
#define RAWLAT_MAX_ITERS	200000
/* Bytes each way in one run: modprobe waits for it all. */
#define RAWLAT_MAX_BYTES	SZ_1G

static char addr[64] = "192.0.2.1";
module_param_string(addr, addr, sizeof(addr), 0444);
MODULE_PARM_DESC(addr, "IPv4 address of the RDMA device to use (default 192.0.2.1)");

static unsigned short port = 7999;
module_param(port, ushort, 0444);
MODULE_PARM_DESC(port, "port of the listening end (default 7999)");

static unsigned int size = 64;
module_param(size, uint, 0444);
MODULE_PARM_DESC(size, "bytes each way per round trip, 1 to 1 MiB (default 64)");

static unsigned int iters = 10000;
module_param(iters, uint, 0444);
MODULE_PARM_DESC(iters, "round trips, at most 200000 and 1 GiB each way (default 10000)");

static bool copy;
module_param(copy, bool, 0444);
MODULE_PARM_DESC(copy, "copy the bytes in from user memory before each write and out after each arrival, as a socket's send and recv must (default off)");

static bool calls;
module_param(calls, bool, 0444);
MODULE_PARM_DESC(calls, "leave the round trips to two programs' write() and read() on /dev/rstream_rawlat_{client,server}, which copy as copy does; stay loaded until rmmod (default off)");

static int family;
module_param(family, int, 0444);
MODULE_PARM_DESC(family, "with calls: also make the ends sockets of this address family, which must be free (protocol 0: the client, 1: the server); default 0, none");

struct rawlat_end {
	const char *name;
	struct rdma_cm_id *id;
	struct ib_pd *pd;
	struct ib_cq *cq;
	struct ib_mr *mr;
	void *buf;
	struct scatterlist sg;
	bool mapped;
	struct ib_cqe cqe;		/* no done(): polled by hand, never drained */
	struct completion event;	/* the CM event waited for came */
	enum rdma_cm_event_type want;
	int err;
	struct rawlat_end *peer;
	struct task_struct *task;
	void __user *ubuf;		/* with copy: the program's bytes */
	struct completion done;
	int result;
	u64 ns;
	struct miscdevice misc;		/* with calls: the program's way in */
	unsigned long open;		/* bit 0: the device is open */
};

static struct rawlat_end rawlat_server = { .name = "server" };
static struct rawlat_end rawlat_client = { .name = "client" };
static struct rdma_cm_id *rawlat_listen_id;
/*
 * With copy: modprobe's memory, which both threads take on to copy; it
 * stays while modprobe waits in our init, until the threads have stopped.
 */
static struct mm_struct *rawlat_mm;
static unsigned long rawlat_umap;
/*
 * With calls: set once the init can no longer fail.  The devices and the
 * family are there before it (a failure after them is the family's, one
 * in use), and an open or a socket() that came first would hold a module
 * that a failed init frees regardless: they are refused until then.
 */
static bool rawlat_ready;

/* The handlers run in rdma_cm's work queue: process context. */
static int rawlat_create_qp(struct rawlat_end *e, struct rdma_cm_id *id);

static void rawlat_event(struct rawlat_end *e, struct rdma_cm_event *ev)
{
	/* The teardown's own events: nobody waits for them. */
	if (ev->event == RDMA_CM_EVENT_DISCONNECTED ||
	    ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT)
		return;
	if (ev->event == e->want) {
		e->err = 0;
	} else {
		pr_err("%s: CM event %d (status %d), waiting for %d\n",
		       e->name, ev->event, ev->status, e->want);
		e->err = -ECONNABORTED;
	}
	complete(&e->event);
}

static int rawlat_listen_handler(struct rdma_cm_id *id,
				 struct rdma_cm_event *ev)
{
	struct rawlat_end *e = &rawlat_server;
	struct rdma_conn_param param = {};
	int err;

	if (id == rawlat_listen_id)
		return 0;
	if (ev->event != RDMA_CM_EVENT_CONNECT_REQUEST) {
		rawlat_event(e, ev);
		return 0;
	}
	if (e->id) {
		/* One connection only: refuse another. */
		return -EBUSY;
	}
	e->id = id;
	err = rawlat_create_qp(e, id);
	if (!err) {
		param.responder_resources = 1;
		param.initiator_depth = 1;
		err = rdma_accept(id, &param);
	}
	if (err) {
		pr_err("server: cannot accept: %d\n", err);
		if (id->qp)
			rdma_destroy_qp(id);
		if (e->cq)
			ib_free_cq(e->cq);
		if (e->pd)
			ib_dealloc_pd(e->pd);
		e->cq = NULL;
		e->pd = NULL;
		e->id = NULL;
		e->err = err;
		complete(&e->event);
		/* rdma_cm destroys the id that we return an error for. */
		return err;
	}
	return 0;
}

static int rawlat_client_handler(struct rdma_cm_id *id,
				 struct rdma_cm_event *ev)
{
	rawlat_event(&rawlat_client, ev);
	return 0;
}

/* Wait for the CM event @e->want set before the call that brings it. */
static int rawlat_wait_event(struct rawlat_end *e)
{
	if (!wait_for_completion_timeout(&e->event,
					 msecs_to_jiffies(RAWLAT_WAIT_MS))) {
		pr_err("%s: no CM event %d in %d ms\n", e->name, e->want,
		       RAWLAT_WAIT_MS);
		return -ETIMEDOUT;
	}
	reinit_completion(&e->event);
	return e->err;
}

static int rawlat_create_qp(struct rawlat_end *e, struct rdma_cm_id *id)
{
	struct ib_qp_init_attr attr = {};
	int err;

	e->pd = ib_alloc_pd(id->device, 0);
	if (IS_ERR(e->pd)) {
		err = PTR_ERR(e->pd);
		e->pd = NULL;
		return err;
	}
	e->cq = ib_alloc_cq(id->device, NULL, 2 * RAWLAT_RECVS + 8, 0,
			    IB_POLL_DIRECT);
	if (IS_ERR(e->cq)) {
		err = PTR_ERR(e->cq);
		e->cq = NULL;
		return err;
	}
	attr.send_cq = e->cq;
	attr.recv_cq = e->cq;
	attr.cap.max_send_wr = RAWLAT_RECVS;
	attr.cap.max_recv_wr = RAWLAT_RECVS;
	attr.cap.max_send_sge = 1;
	attr.cap.max_recv_sge = 1;
	attr.sq_sig_type = IB_SIGNAL_REQ_WR;
	attr.qp_type = IB_QPT_RC;
	return rdma_create_qp(id, e->pd, &attr);
}

/* Spin on @e's CQ for one completion; bounded by RAWLAT_WAIT_MS. */
static int rawlat_poll_one(struct rawlat_end *e, struct ib_wc *wc)
{
	unsigned long end = jiffies + msecs_to_jiffies(RAWLAT_WAIT_MS);
	int n;

	while (!(n = ib_poll_cq(e->cq, 1, wc))) {
		/* A program's read() (with calls) ends at a signal. */
		if (signal_pending(current))
			return -EINTR;
		if (time_after(jiffies, end)) {
			pr_err("%s: no completion in %d ms\n", e->name,
			       RAWLAT_WAIT_MS);
			return -ETIMEDOUT;
		}
		/*
		 * Give way to a task that waits for this CPU, as AF_RSTREAM's
		 * pollers do: on 6.12's soft-RoCE that is the device's worker,
		 * which carries the very completion we wait for.
		 */
		if (!single_task_running() || need_resched())
			schedule();
	}
	if (n < 0)
		return n;
	if (wc->status != IB_WC_SUCCESS) {
		pr_err("%s: completion status %d, opcode %d\n", e->name,
		       wc->status, wc->opcode);
		return -EIO;
	}
	return 0;
}

static int rawlat_post_recv(struct rawlat_end *e)
{
	struct ib_recv_wr wr = { .wr_cqe = &e->cqe };

	return ib_post_recv(e->id->qp, &wr, NULL);
}

/* Register @e's buffer for the peer's writes, after the QP is up. */
static int rawlat_reg_buf(struct rawlat_end *e)
{
	struct ib_reg_wr wr = {};
	struct ib_wc wc;
	int err, n;

	e->buf = kzalloc(size, GFP_KERNEL);
	if (!e->buf)
		return -ENOMEM;
	sg_init_one(&e->sg, e->buf, size);
	if (ib_dma_map_sg(e->id->device, &e->sg, 1, DMA_BIDIRECTIONAL) != 1)
		return -ENOMEM;
	e->mapped = true;
	e->mr = ib_alloc_mr(e->pd, IB_MR_TYPE_MEM_REG,
			    DIV_ROUND_UP(size + offset_in_page(e->buf),
					 PAGE_SIZE));
	if (IS_ERR(e->mr)) {
		err = PTR_ERR(e->mr);
		e->mr = NULL;
		return err;
	}
	n = ib_map_mr_sg(e->mr, &e->sg, 1, NULL, PAGE_SIZE);
	if (n != 1)
		return n < 0 ? n : -EINVAL;
	wr.wr.opcode = IB_WR_REG_MR;
	wr.wr.wr_cqe = &e->cqe;
	wr.wr.send_flags = IB_SEND_SIGNALED;
	wr.mr = e->mr;
	wr.key = e->mr->rkey;
	wr.access = IB_ACCESS_LOCAL_WRITE | IB_ACCESS_REMOTE_WRITE;
	err = ib_post_send(e->id->qp, &wr.wr, NULL);
	if (!err)
		err = rawlat_poll_one(e, &wc);
	if (!err && wc.opcode != IB_WC_REG_MR)
		err = -EPROTO;
	for (n = 0; !err && n < RAWLAT_RECVS; n++)
		err = rawlat_post_recv(e);
	return err;
}

/* One write of @size bytes into the peer's buffer, with its immediate. */
static int rawlat_post_write(struct rawlat_end *e)
{
	struct ib_sge sge = {
		.addr = sg_dma_address(&e->sg),
		.length = size,
		.lkey = e->mr->lkey,
	};
	struct ib_rdma_wr wr = {
		.wr.wr_cqe = &e->cqe,
		.wr.opcode = IB_WR_RDMA_WRITE_WITH_IMM,
		.wr.send_flags = IB_SEND_SIGNALED,
		.wr.ex.imm_data = cpu_to_be32(size),
		.wr.sg_list = &sge,
		.wr.num_sge = 1,
		.remote_addr = e->peer->mr->iova,
		.rkey = e->peer->mr->rkey,
	};

	int err;

	/*
	 * With BHs off, as AF_RSTREAM posts (under rs->lock): a driver that
	 * defers the send to a tasklet (6.1's soft-RoCE for kernel QPs)
	 * then runs it here, at the enable, not in ksoftirqd later.
	 */
	local_bh_disable();
	err = ib_post_send(e->id->qp, &wr.wr, NULL);
	local_bh_enable();
	return err;
}

/*
 * Wait for the peer's write: its receive completion (our own writes'
 * completions come in the same CQ and are passed over; a ping-pong has
 * one or two in flight), then give the receive back.
 */
static int rawlat_wait_write(struct rawlat_end *e)
{
	struct ib_wc wc;
	int err;

	for (;;) {
		err = rawlat_poll_one(e, &wc);
		if (err)
			return err;
		if (wc.opcode == IB_WC_RDMA_WRITE)
			continue;
		if (wc.opcode != IB_WC_RECV_RDMA_WITH_IMM ||
		    wc.byte_len != size)
			return -EPROTO;
		return rawlat_post_recv(e);
	}
}

/* Bytes copied into the registered buffer: the device's now, and posted. */
static int rawlat_send_copied(struct rawlat_end *e)
{
	ib_dma_sync_single_for_device(e->id->device, sg_dma_address(&e->sg),
				      size, DMA_BIDIRECTIONAL);
	return rawlat_post_write(e);
}

/*
 * A socket's send: with @ubuf, the bytes come from the program's memory
 * into the registered buffer (and are made the device's) first.
 */
static int rawlat_send(struct rawlat_end *e, const void __user *ubuf)
{
	if (!ubuf)
		return rawlat_post_write(e);
	if (copy_from_user(e->buf, ubuf, size))
		return -EFAULT;
	return rawlat_send_copied(e);
}

/* The peer's write came, and its bytes are the CPU's to copy out. */
static int rawlat_recv_arrived(struct rawlat_end *e)
{
	int err = rawlat_wait_write(e);

	if (!err)
		ib_dma_sync_single_for_cpu(e->id->device,
					   sg_dma_address(&e->sg), size,
					   DMA_BIDIRECTIONAL);
	return err;
}

/* A socket's recv: with @ubuf, the bytes that came go out to the program. */
static int rawlat_recv(struct rawlat_end *e, void __user *ubuf)
{
	int err;

	if (!ubuf)
		return rawlat_wait_write(e);
	err = rawlat_recv_arrived(e);
	if (err)
		return err;
	if (copy_to_user(ubuf, e->buf, size))
		return -EFAULT;
	return 0;
}

/* Each end's thread: the client writes first, the server answers. */
static int rawlat_thread(void *arg)
{
	struct rawlat_end *e = arg;
	bool client = e == &rawlat_client;
	void __user *ubuf = copy ? e->ubuf : NULL;
	int err = 0;
	unsigned int i;
	u64 start;

	if (copy)
		kthread_use_mm(rawlat_mm);
	start = ktime_get_ns();
	for (i = 0; !err && i < iters; i++) {
		if (client) {
			err = rawlat_send(e, ubuf);
			if (!err)
				err = rawlat_recv(e, ubuf);
		} else {
			err = rawlat_recv(e, ubuf);
			if (!err)
				err = rawlat_send(e, ubuf);
		}
		/* rmmod is not possible yet, but a kill of modprobe is. */
		if (!err && kthread_should_stop())
			err = -EINTR;
	}
	e->ns = ktime_get_ns() - start;
	if (copy)
		kthread_unuse_mm(rawlat_mm);
	e->result = err;
	if (err)
		pr_err("%s: round trip %u: %d\n", e->name, i, err);
	complete(&e->done);
	/* Stay until stopped: kthread_stop() needs the task. */
	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!kthread_should_stop())
			schedule();
		__set_current_state(TASK_RUNNING);
	}
	return 0;
}

/*
 * With calls: a program's way to its end, in process context.  Only one
 * open at a time, so that one program drives each end; a child that
 * shares the open file may race it, which the QP's and the CQ's own
 * locks make safe (the bytes may be mixed, nothing else).
 */
static struct rawlat_end *rawlat_file_end(struct file *file)
{
	/* misc_open() left the miscdevice there. */
	return container_of(file->private_data, struct rawlat_end, misc);
}

static int rawlat_open(struct inode *inode, struct file *file)
{
	/* Pairs with the store at the end of the init. */
	if (!smp_load_acquire(&rawlat_ready))
		return -ENODEV;
	if (test_and_set_bit_lock(0, &rawlat_file_end(file)->open))
		return -EBUSY;
	return 0;
}

static int rawlat_release(struct inode *inode, struct file *file)
{
	clear_bit_unlock(0, &rawlat_file_end(file)->open);
	return 0;
}

/* send(): the program's @size bytes copied in and posted to the peer. */
static ssize_t rawlat_write(struct file *file, const char __user *ubuf,
			    size_t len, loff_t *pos)
{
	int err;

	if (len != size)
		return -EINVAL;
	err = rawlat_send(rawlat_file_end(file), ubuf);
	return err ? err : (ssize_t)len;
}

/* recv(): spin for the peer's write, then copy its bytes out. */
static ssize_t rawlat_read(struct file *file, char __user *ubuf, size_t len,
			   loff_t *pos)
{
	int err;

	if (len != size)
		return -EINVAL;
	err = rawlat_recv(rawlat_file_end(file), ubuf);
	return err ? err : (ssize_t)len;
}

static const struct file_operations rawlat_fops = {
	.owner = THIS_MODULE,	/* an open file keeps the module: no rmmod */
	.open = rawlat_open,
	.release = rawlat_release,
	.read = rawlat_read,
	.write = rawlat_write,
	.llseek = noop_llseek,
};

/*
 * With @family: the ends as sockets, whose calls do what the devices' do
 * (above), in process context.  The socket's end is fixed at its
 * creation and held (the open bit) until its release.
 */
struct rawlat_sock {
	struct sock sk;		/* first: what sk_alloc() allocates */
	struct rawlat_end *e;
};

static struct proto rawlat_proto = {
	.name		= "RAWLAT",
	.owner		= THIS_MODULE,
	.obj_size	= sizeof(struct rawlat_sock),
};

static struct rawlat_end *rawlat_sock_end(struct socket *sock)
{
	return container_of(sock->sk, struct rawlat_sock, sk)->e;
}

static int rawlat_sock_release(struct socket *sock)
{
	struct sock *sk = sock->sk;

	if (!sk)
		return 0;
	clear_bit_unlock(0, &rawlat_sock_end(sock)->open);
	sock_orphan(sk);
	sock->sk = NULL;
	sock_put(sk);
	return 0;
}

/* send(): as write(), from the message's iterator. */
static int rawlat_sock_sendmsg(struct socket *sock, struct msghdr *msg,
			       size_t len)
{
	struct rawlat_end *e = rawlat_sock_end(sock);
	int err;

	if (len != size)
		return -EINVAL;
	if (copy_from_iter(e->buf, size, &msg->msg_iter) != size)
		return -EFAULT;
	err = rawlat_send_copied(e);
	return err ? err : (int)len;
}

/* recv(): as read(), to the message's iterator. */
static int rawlat_sock_recvmsg(struct socket *sock, struct msghdr *msg,
			       size_t len, int flags)
{
	struct rawlat_end *e = rawlat_sock_end(sock);
	int err;

	if (len != size || (flags & ~(MSG_WAITALL | MSG_NOSIGNAL)))
		return -EINVAL;
	err = rawlat_recv_arrived(e);
	if (err)
		return err;
	if (copy_to_iter(e->buf, size, &msg->msg_iter) != size)
		return -EFAULT;
	return len;
}

static const struct proto_ops rawlat_sock_ops = {
	.owner		= THIS_MODULE,	/* a socket keeps the module */
	.release	= rawlat_sock_release,
	.bind		= sock_no_bind,
	.connect	= sock_no_connect,
	.socketpair	= sock_no_socketpair,
	.accept		= sock_no_accept,
	.getname	= sock_no_getname,
	.ioctl		= sock_no_ioctl,
	.listen		= sock_no_listen,
	.shutdown	= sock_no_shutdown,
	.sendmsg	= rawlat_sock_sendmsg,
	.recvmsg	= rawlat_sock_recvmsg,
	.mmap		= sock_no_mmap,
};

static int rawlat_sock_create(struct net *net, struct socket *sock,
			      int protocol, int kern)
{
	struct rawlat_end *e;
	struct sock *sk;

	if (!net_eq(net, &init_net) || !capable(CAP_NET_ADMIN))
		return -EPERM;
	if (sock->type != SOCK_STREAM)
		return -ESOCKTNOSUPPORT;
	if (protocol != 0 && protocol != 1)
		return -EPROTONOSUPPORT;
	/* As rawlat_open(): not while the init may still fail. */
	if (!smp_load_acquire(&rawlat_ready))
		return -ENODEV;
	e = protocol ? &rawlat_server : &rawlat_client;
	if (test_and_set_bit_lock(0, &e->open))
		return -EBUSY;
	sk = sk_alloc(net, family, GFP_KERNEL, &rawlat_proto, kern);
	if (!sk) {
		clear_bit_unlock(0, &e->open);
		return -ENOMEM;
	}
	sock->ops = &rawlat_sock_ops;
	sock_init_data(sock, sk);
	sk->sk_protocol = protocol;
	container_of(sk, struct rawlat_sock, sk)->e = e;
	return 0;
}

static struct net_proto_family rawlat_family_ops = {
	.create	= rawlat_sock_create,
	.owner	= THIS_MODULE,
};

static bool rawlat_proto_registered, rawlat_family_registered;

/* The family, once both ends are up: process context. */
static int rawlat_register_family(void)
{
	int err;

	err = proto_register(&rawlat_proto, 0);
	if (err)
		return err;
	rawlat_proto_registered = true;
	rawlat_family_ops.family = family;
	err = sock_register(&rawlat_family_ops);
	if (err) {
		pr_err("address family %d: %d (in use?)\n", family, err);
		/* modprobe takes -EEXIST from init for "already loaded". */
		return err == -EEXIST ? -EBUSY : err;
	}
	rawlat_family_registered = true;
	return 0;
}

static int rawlat_register(struct rawlat_end *e, const char *name)
{
	int err;

	e->misc.minor = MISC_DYNAMIC_MINOR;
	e->misc.name = name;
	e->misc.fops = &rawlat_fops;
	e->misc.mode = 0600;
	err = misc_register(&e->misc);
	if (err)
		e->misc.fops = NULL;	/* not registered: nothing to undo */
	return err;
}

static void rawlat_free_end(struct rawlat_end *e)
{
	/* First, so that no program reaches the end while it goes. */
	if (e->misc.fops)
		misc_deregister(&e->misc);
	if (e->task)
		kthread_stop(e->task);
	if (e->id && e->id->qp) {
		rdma_disconnect(e->id);
		rdma_destroy_qp(e->id);
	}
	if (e->mr)
		ib_dereg_mr(e->mr);
	if (e->mapped)
		ib_dma_unmap_sg(e->id->device, &e->sg, 1, DMA_BIDIRECTIONAL);
	kfree(e->buf);
	if (e->cq)
		ib_free_cq(e->cq);
	if (e->pd)
		ib_dealloc_pd(e->pd);
}

static int rawlat_run(void)
{
	struct rawlat_end *c = &rawlat_client, *s = &rawlat_server;
	struct sockaddr_in sin = { .sin_family = AF_INET };
	struct rdma_conn_param param = {};
	int err;

	if (!in4_pton(addr, -1, (u8 *)&sin.sin_addr.s_addr, -1, NULL))
		return -EINVAL;
	sin.sin_port = htons(port);

	rawlat_listen_id = rdma_create_id(&init_net, rawlat_listen_handler,
					  NULL, RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(rawlat_listen_id)) {
		err = PTR_ERR(rawlat_listen_id);
		rawlat_listen_id = NULL;
		return err;
	}
	err = rdma_bind_addr(rawlat_listen_id, (struct sockaddr *)&sin);
	if (!err)
		err = rdma_listen(rawlat_listen_id, 1);
	if (err)
		return err;

	c->id = rdma_create_id(&init_net, rawlat_client_handler, NULL,
			       RDMA_PS_TCP, IB_QPT_RC);
	if (IS_ERR(c->id)) {
		err = PTR_ERR(c->id);
		c->id = NULL;
		return err;
	}
	c->want = RDMA_CM_EVENT_ADDR_RESOLVED;
	err = rdma_resolve_addr(c->id, NULL, (struct sockaddr *)&sin,
				RAWLAT_WAIT_MS);
	if (!err)
		err = rawlat_wait_event(c);
	if (err)
		return err;
	c->want = RDMA_CM_EVENT_ROUTE_RESOLVED;
	err = rdma_resolve_route(c->id, RAWLAT_WAIT_MS);
	if (!err)
		err = rawlat_wait_event(c);
	if (!err)
		err = rawlat_create_qp(c, c->id);
	if (err)
		return err;
	param.responder_resources = 1;
	param.initiator_depth = 1;
	param.retry_count = 7;
	c->want = RDMA_CM_EVENT_ESTABLISHED;
	s->want = RDMA_CM_EVENT_ESTABLISHED;
	err = rdma_connect(c->id, &param);
	if (!err)
		err = rawlat_wait_event(c);
	if (!err)
		err = rawlat_wait_event(s);
	if (!err)
		err = rawlat_reg_buf(c);
	if (!err)
		err = rawlat_reg_buf(s);
	if (err)
		return err;

	c->peer = s;
	s->peer = c;
	if (calls) {
		/* The programs take it from here. */
		err = rawlat_register(c, "rstream_rawlat_client");
		if (!err)
			err = rawlat_register(s, "rstream_rawlat_server");
		if (!err && family)
			err = rawlat_register_family();
		return err;
	}
	if (copy) {
		/* Each end's own pages of modprobe's memory. */
		unsigned long len = PAGE_ALIGN(size);

		rawlat_umap = vm_mmap(NULL, 0, 2 * len, PROT_READ | PROT_WRITE,
				      MAP_PRIVATE | MAP_ANONYMOUS, 0);
		if (IS_ERR_VALUE(rawlat_umap)) {
			err = (int)rawlat_umap;
			rawlat_umap = 0;
			return err;
		}
		c->ubuf = (void __user *)rawlat_umap;
		s->ubuf = (void __user *)(rawlat_umap + len);
		rawlat_mm = current->mm;
	}
	s->task = kthread_run(rawlat_thread, s, "rawlat_server");
	if (IS_ERR(s->task)) {
		err = PTR_ERR(s->task);
		s->task = NULL;
		return err;
	}
	c->task = kthread_run(rawlat_thread, c, "rawlat_client");
	if (IS_ERR(c->task)) {
		err = PTR_ERR(c->task);
		c->task = NULL;
		/* The server waits for a write that never comes: its bound. */
		wait_for_completion(&s->done);
		return err;
	}
	/*
	 * A kill of modprobe stops both threads (rawlat_free_end()): each
	 * looks between round trips, and every wait of theirs is bounded.
	 */
	if (wait_for_completion_killable(&c->done))
		return -EINTR;
	wait_for_completion(&s->done);
	err = c->result ?: s->result;
	if (!err)
		pr_info("rawlat%s %u %u %llu.%02llu\n", copy ? "copy" : "",
			size, iters,
			div_u64(c->ns, 2000ULL * iters),
			div_u64(c->ns, 20ULL * iters) % 100);
	return err;
}

/* What the init made, in the order it can be undone: process context. */
static void rawlat_teardown(void)
{
	/*
	 * The listener first: once it is gone no connection request's
	 * handler runs or is running, so the server's end stays as it is.
	 */
	if (rawlat_listen_id)
		rdma_destroy_id(rawlat_listen_id);
	/*
	 * Then the family: no socket of it is left (each holds the module),
	 * and once it is unregistered no new one can be made.
	 */
	if (rawlat_family_registered)
		sock_unregister(family);
	if (rawlat_proto_registered)
		proto_unregister(&rawlat_proto);
	rawlat_free_end(&rawlat_client);
	rawlat_free_end(&rawlat_server);
	if (rawlat_client.id)
		rdma_destroy_id(rawlat_client.id);
	if (rawlat_server.id)
		rdma_destroy_id(rawlat_server.id);
	/* The threads have stopped: nobody else uses the mapping now. */
	if (rawlat_umap)
		vm_munmap(rawlat_umap, 2 * PAGE_ALIGN(size));
}

static int __init rawlat_init(void)
{
	int err;

	if (!size || size > RAWLAT_MAX_SIZE || !iters ||
	    iters > RAWLAT_MAX_ITERS ||
	    (u64)size * iters > RAWLAT_MAX_BYTES ||
	    family < 0 || family >= NPROTO || (family && !calls)) {
		pr_err("size 1 to %d, iters 1 to %d, size * iters at most %d; family 0 to %d, with calls\n",
		       RAWLAT_MAX_SIZE, RAWLAT_MAX_ITERS, RAWLAT_MAX_BYTES,
		       NPROTO - 1);
		return -EINVAL;
	}
	init_completion(&rawlat_client.event);
	init_completion(&rawlat_server.event);
	init_completion(&rawlat_client.done);
	init_completion(&rawlat_server.done);
	err = rawlat_run();
	if (err)
		pr_err("failed: %d\n", err);
	/* With calls, what worked stays for the programs until rmmod. */
	if (err || !calls)
		rawlat_teardown();
	else	/* all set up before; pairs with open's and create's loads */
		smp_store_release(&rawlat_ready, true);
	return err;
}

static void __exit rawlat_exit(void)
{
	if (calls)
		rawlat_teardown();
}

module_init(rawlat_init);
module_exit(rawlat_exit);
MODULE_DESCRIPTION("rstream bench helper: a kernel consumer's RDMA round trip");
MODULE_LICENSE("GPL");
