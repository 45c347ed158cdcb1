// SPDX-License-Identifier: GPL-2.0
/*
 * What a connection pins, charged the way TCP charges socket buffers.
 *
 * A connection holds its receive ring, its target array and its send
 * staging ring, registered for DMA for as long as it lives, and the device
 * holds its queues.  Any process that can open a socket can ask for those
 * (SO_RCVBUF, RDMA_SQSIZE, ... and many sockets), so before anything is
 * allocated the whole is charged to the socket with the core's socket
 * memory accounting: to the protocol's total, which the mem_limit module
 * parameter bounds as tcp_mem bounds TCP, and to the memory cgroup of the
 * socket's owner (an accepted connection: the listener's).  Over either
 * limit, or leaving the cgroup less than RSTREAM_MEMCG_HEADROOM, the
 * connection is refused with ENOBUFS, not allocated.  The total shows in
 * /proc/net/protocols (give or take what the core caches per CPU), exactly
 * in /proc/net/rstream/memory, a cgroup's part in its memory.stat (sock).
 *
 * The charge is taken with __sk_mem_schedule() and then kept out of
 * sk_forward_alloc, in rs->mem_charged, until the pages are freed: the core
 * reclaims what sk_forward_alloc holds beyond a socket's reserve whenever
 * SO_RESERVE_MEM shrinks (which 6.1 allows on any accounted socket), and
 * must not take back what the rings still pin.  Both ends of the charge
 * run where nothing else touches the socket's accounting: under the sock
 * lock (connect()), on a child nobody can reach yet (the passive side),
 * or in the destructor.
 */
#include <linux/mm.h>
#include <linux/percpu.h>
#include <linux/seq_file.h>
#include <net/sock.h>

#include "rstream.h"

/*
 * What a device keeps for a queue: a power-of-two count of slots, one more
 * than the entries asked for, of a power-of-two size of at least a cache
 * line, behind a header, in whole pages.  That is how soft-RoCE allocates
 * them (rxe_queue_init()), with its entries: a send entry's fixed part
 * then room for its gather list or its inline bytes, whichever is larger;
 * a receive entry's fixed part then its one scatter entry; a completion.
 * The sizes are soft-RoCE's on the two kernels, which rstream_mem.sh checks
 * against what it really allocates; other devices are charged the same.
 */
#define RSTREAM_DEV_SEND_WQE	208
#define RSTREAM_DEV_RECV_WQE	40
#define RSTREAM_DEV_SGE		16
#define RSTREAM_DEV_CQE		72

/* 64-bit: 2^17 slots of 2^17 bytes would wrap a 32-bit size_t. */
static u64 rstream_queue_bytes(u32 entries, u32 entry_bytes)
{
	entry_bytes = roundup_pow_of_two(max_t(u32, entry_bytes,
					       L1_CACHE_BYTES));
	return PAGE_SIZE + round_up((u64)roundup_pow_of_two(entries + 1) *
				    entry_bytes, PAGE_SIZE);
}

/*
 * Bytes the device keeps for a connection with @rs's sizes: its send,
 * receive and completion queues, at the sizes asked for, which the device
 * may cut (conn.c): an upper bound.  An inline size the device refuses is
 * charged anyway.
 */
static u64 rstream_dev_bytes(const struct rstream_sock *rs)
{
	u32 sq = min_t(u32, rs->sq_size, RSTREAM_QP_MAX);
	u32 rq = min_t(u32, rs->rq_size, RSTREAM_QP_MAX);
	u32 send = RSTREAM_DEV_SEND_WQE +
		   max_t(u32, RSTREAM_ZC_PAGES * RSTREAM_DEV_SGE,
			 rs->inline_size);

	return rstream_queue_bytes(rstream_conn_send_wrs(sq), send) +
	       rstream_queue_bytes(rstream_conn_recv_wrs(rq),
				   RSTREAM_DEV_RECV_WQE + RSTREAM_DEV_SGE) +
	       rstream_queue_bytes(rstream_conn_cq_entries(sq, rq),
				   RSTREAM_DEV_CQE);
}

/*
 * Room a memory cgroup must still have once a connection is charged to
 * it.  The owner's small allocations (the socket, its file, the
 * connection's bookkeeping, whatever the process does next) come after
 * the charge, and with the cgroup at its limit each of them would wake
 * its OOM killer: the connection is refused instead.
 */
#define RSTREAM_MEMCG_HEADROOM		(256U << 10)

atomic_long_t rstream_memory_allocated;
DEFINE_PER_CPU(int, rstream_memory_per_cpu_fw_alloc);
/*
 * The limit in pages, the same three times: the core refuses a charge over
 * [2] and, between [0] and [2], one that protocols with memory pressure
 * (which rstream has not) would still allow.  Written before each charge
 * from the mem_limit parameter, so a change applies to new connections.
 */
long rstream_sysctl_mem[3];
/* Read only between the limits, which are equal: no minimum buffer. */
int rstream_sysctl_rmem[3];
int rstream_sysctl_wmem[3];

/* Pages all connections together may pin: mem_limit, else a quarter of RAM. */
static unsigned long rstream_mem_limit(void)
{
	unsigned long pages = rstream_param(RSTREAM_PARAM_MEM_LIMIT);

	return pages ?: totalram_pages() / 4;
}

/*
 * Bytes a connection with @rs's sizes pins: its target array and the
 * device's queues from its request on, and its two rings (@rings) once it
 * is established (conn.c).
 */
static u64 rstream_conn_bytes(const struct rstream_sock *rs, bool rings)
{
	u64 bytes = PAGE_ALIGN(RSTREAM_SGL_BYTES) + rstream_dev_bytes(rs);

	if (rings)
		bytes += PAGE_ALIGN(rs->ring_size) +
			 PAGE_ALIGN(rs->sbuf_size + RSTREAM_CTRL_BYTES);
	return bytes;
}

/* Bytes charged by every connection, for /proc/net/rstream/memory. */
static atomic_long_t rstream_mem_pinned = ATOMIC_LONG_INIT(0);

/*
 * Charge the connection of @rs, whose sizes are fixed, before anything is
 * allocated: -ENOBUFS if it would go over rstream's limit or the socket's
 * memory cgroup's.  Without @rings, what a half-open passive side holds:
 * the rest comes with a second call once it is established, and must fit
 * now as well, or the request is refused rather than reset later.  Sock
 * lock held, or a child not yet visible.
 */
int rstream_mem_charge(struct rstream_sock *rs, bool rings)
{
	long limit = min_t(unsigned long, rstream_mem_limit(), LONG_MAX);
	u64 bytes = rstream_conn_bytes(rs, rings);
	u64 room = rstream_conn_bytes(rs, true) - bytes;
	struct sock *sk = &rs->sk;
	int i, pages;

	/* What is charged already is in whole pages (sk_mem_pages()). */
	if (rs->mem_charged >= bytes)
		return 0;
	bytes -= rs->mem_charged;
	for (i = 0; i < ARRAY_SIZE(rstream_sysctl_mem); i++)
		WRITE_ONCE(rstream_sysctl_mem[i], limit);
	if (rstream_memcg(sk))
		room += RSTREAM_MEMCG_HEADROOM;
	/*
	 * Ring sizes are capped at 256 MiB, queues at 65534 entries and
	 * inline sizes at 65534 bytes: the whole stays far below U64_MAX,
	 * and over INT_MAX it is refused.  The room (the rings to come, the
	 * headroom) is charged with the rest, to the cgroup and to rstream's
	 * total alike, and given back at once.
	 */
	if (rs->mem_charged + bytes + room > INT_MAX - PAGE_SIZE ||
	    !__sk_mem_schedule(sk, bytes + room, SK_MEM_RECV))
		return -ENOBUFS;
	pages = sk_mem_pages(bytes);
	rs->mem_charged += pages << PAGE_SHIFT;
	atomic_long_add(pages << PAGE_SHIFT, &rstream_mem_pinned);
	WRITE_ONCE(sk->sk_forward_alloc,
		   sk->sk_forward_alloc - (pages << PAGE_SHIFT));
	if (room)
		__sk_mem_reclaim(sk, (sk_mem_pages(bytes + room) - pages) <<
				 PAGE_SHIFT);
	return 0;
}

/*
 * Give back the connection's charge once its pages are freed, and what
 * SO_RESERVE_MEM left reserved when the socket goes.  Sock lock held, or
 * the destructor.
 */
void rstream_mem_uncharge(struct rstream_sock *rs, bool final)
{
	struct sock *sk = &rs->sk;

	if (rs->mem_charged) {
		atomic_long_sub(rs->mem_charged, &rstream_mem_pinned);
		WRITE_ONCE(sk->sk_forward_alloc,
			   sk->sk_forward_alloc + rs->mem_charged);
		__sk_mem_reclaim(sk, rs->mem_charged);
		rs->mem_charged = 0;
	}
	if (final) {
		WRITE_ONCE(sk->sk_reserved_mem, 0);
		if (sk->sk_forward_alloc)
			__sk_mem_reclaim(sk, sk->sk_forward_alloc);
	}
}

/* Why a connection was refused with ENOBUFS, for the log. */
const char *rstream_mem_limit_text(const struct rstream_sock *rs)
{
	return rstream_memcg(&rs->sk) ?
	       "over the memory limit of its cgroup or of rstream (mem_limit)" :
	       "over rstream's memory limit (mem_limit)";
}

/*
 * /proc/net/rstream/memory: what connections pin, module-wide (the limit
 * is), in bytes.  Process context.
 */
void rstream_mem_show(struct seq_file *seq)
{
	seq_printf(seq, "pinned %ld\nlimit %lu\n",
		   atomic_long_read(&rstream_mem_pinned),
		   min_t(unsigned long, rstream_mem_limit(),
			 LONG_MAX >> PAGE_SHIFT) << PAGE_SHIFT);
}
