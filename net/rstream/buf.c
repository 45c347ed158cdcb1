// SPDX-License-Identifier: GPL-2.0
/*
 * Registered buffers: the receive ring and the target SGL array the peer
 * writes into, and the send staging ring our writes come from.
 *
 * Each buffer is its own fast-registration memory region (FRWR), so the
 * peer can reach exactly that buffer and nothing else; no global rkey is
 * ever used.  The memory is allocated in naturally aligned chunks as large
 * as needed for the device's page-list limit (rxe allows 512 entries) and
 * mapped contiguously for the CPU with vmap().  Process context: it may
 * sleep.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/uio.h>
#include <linux/vmalloc.h>
#include <rdma/ib_verbs.h>

#include "rstream.h"

static void rstream_buf_free_pages(struct rstream_buf *buf)
{
	unsigned int i;

	if (buf->vaddr)
		vunmap(buf->vaddr);
	for (i = 0; buf->chunks && i < buf->nchunks; i++)
		if (buf->chunks[i])
			__free_pages(buf->chunks[i], buf->order);
	kvfree(buf->chunks);
}

static int rstream_buf_alloc_pages(struct rstream_buf *buf)
{
	size_t chunk = PAGE_SIZE << buf->order;
	unsigned int per_chunk = 1U << buf->order;
	struct page **pages;
	unsigned int i, j;
	gfp_t gfp = GFP_KERNEL | __GFP_NOWARN;

	/*
	 * What the peer may write (the ring, the target array) must start
	 * out zeroed: a peer can claim bytes it never wrote, and recvmsg()
	 * would copy whatever was there.  The staging ring only ever goes
	 * out where sendmsg() copied the caller's bytes, so it need not be
	 * (kernels built with init_on_alloc, Debian's among them, zero every
	 * page anyway).
	 */
	if (buf->dir != DMA_TO_DEVICE)
		gfp |= __GFP_ZERO;
	if (buf->order)
		gfp |= __GFP_NORETRY;
	buf->nchunks = DIV_ROUND_UP(buf->size, chunk);
	buf->chunks = kvcalloc(buf->nchunks, sizeof(*buf->chunks), GFP_KERNEL);
	if (!buf->chunks)
		return -ENOMEM;
	pages = kvcalloc((size_t)buf->nchunks * per_chunk, sizeof(*pages),
			 GFP_KERNEL);
	if (!pages)
		return -ENOMEM;
	for (i = 0; i < buf->nchunks; i++) {
		buf->chunks[i] = alloc_pages(gfp, buf->order);
		if (!buf->chunks[i]) {
			kvfree(pages);
			return -ENOMEM;
		}
		for (j = 0; j < per_chunk; j++)
			pages[i * per_chunk + j] = buf->chunks[i] + j;
	}
	buf->vaddr = vmap(pages, buf->nchunks * per_chunk, VM_MAP, PAGE_KERNEL);
	kvfree(pages);
	return buf->vaddr ? 0 : -ENOMEM;
}

/*
 * Allocate @size bytes, DMA-map them for @dir and prepare a memory region
 * granting @access.  The region is not usable until the caller has posted
 * the work request from rstream_buf_reg_wr() and seen it complete.
 */
int rstream_buf_alloc(struct rstream_buf *buf, struct ib_pd *pd, size_t size,
		      enum dma_data_direction dir, int access)
{
	struct ib_device *ibdev = pd->device;
	u32 max_pages = ibdev->attrs.max_fast_reg_page_list_len;
	struct scatterlist *sg;
	size_t left;
	unsigned int i;
	int err, n;

	memset(buf, 0, sizeof(*buf));
	buf->ibdev = ibdev;
	buf->size = size;
	buf->dir = dir;
	buf->access = access;
	if (!max_pages)
		max_pages = 1;
	while (DIV_ROUND_UP(size, PAGE_SIZE << buf->order) > max_pages)
		buf->order++;
	if (buf->order > RSTREAM_MAX_ORDER)
		return -EMSGSIZE;

	err = rstream_buf_alloc_pages(buf);
	if (err)
		goto err;

	err = sg_alloc_table(&buf->sgt, buf->nchunks, GFP_KERNEL);
	if (err)
		goto err;
	left = size;
	for_each_sgtable_sg(&buf->sgt, sg, i) {
		size_t len = min_t(size_t, left, PAGE_SIZE << buf->order);

		sg_set_page(sg, buf->chunks[i], len, 0);
		left -= len;
	}
	n = ib_dma_map_sg(ibdev, buf->sgt.sgl, buf->sgt.orig_nents, dir);
	if (!n) {
		err = -ENOMEM;
		goto err;
	}
	buf->dma_nents = n;
	buf->sgt.nents = n;

	buf->mr = ib_alloc_mr(pd, IB_MR_TYPE_MEM_REG, buf->nchunks);
	if (IS_ERR(buf->mr)) {
		err = PTR_ERR(buf->mr);
		buf->mr = NULL;
		goto err;
	}
	n = ib_map_mr_sg(buf->mr, buf->sgt.sgl, buf->dma_nents, NULL,
			 PAGE_SIZE << buf->order);
	if (n != buf->dma_nents) {
		err = n < 0 ? n : -EINVAL;
		goto err;
	}
	return 0;

err:
	rstream_buf_free(buf);
	return err;
}

/*
 * After the QP is gone, so that no work request can still reach the
 * memory: deregistering invalidates the region, and the DMA mapping goes
 * with it, so the device may leave.  The pages stay for readers still
 * copying out of them under the sock lock; rstream_buf_free() frees them.
 */
void rstream_buf_unregister(struct rstream_buf *buf)
{
	if (buf->mr)
		ib_dereg_mr(buf->mr);
	buf->mr = NULL;
	if (buf->dma_nents)
		ib_dma_unmap_sg(buf->ibdev, buf->sgt.sgl, buf->sgt.orig_nents,
				buf->dir);
	buf->dma_nents = 0;
	sg_free_table(&buf->sgt);
	memset(&buf->sgt, 0, sizeof(buf->sgt));
}

void rstream_buf_free(struct rstream_buf *buf)
{
	rstream_buf_unregister(buf);
	rstream_buf_free_pages(buf);
	memset(buf, 0, sizeof(*buf));
}

void rstream_buf_reg_wr(struct rstream_buf *buf, struct ib_reg_wr *wr)
{
	memset(wr, 0, sizeof(*wr));
	wr->wr.opcode = IB_WR_REG_MR;
	wr->mr = buf->mr;
	wr->key = buf->mr->rkey;
	wr->access = buf->access;
}

u64 rstream_buf_iova(const struct rstream_buf *buf, size_t off)
{
	return buf->mr->iova + off;
}

/* Sync [off, off + len) of the buffer, entry by DMA-mapped entry. */
static void rstream_buf_sync(struct rstream_buf *buf, size_t off, size_t len,
			     bool for_cpu)
{
	struct scatterlist *sg;
	size_t pos = 0;
	unsigned int i;

	/*
	 * Not mapped (any more): nothing to sync, and the device may be
	 * gone.  Software devices (rxe, siw) reach the memory by its kernel
	 * address: nothing to sync either, and no reason to walk the table
	 * for it on every message.
	 */
	if (!buf->dma_nents || ib_uses_virt_dma(buf->ibdev))
		return;
	for_each_sgtable_dma_sg(&buf->sgt, sg, i) {
		size_t slen = sg_dma_len(sg), from, n;

		if (off < pos + slen && off + len > pos) {
			from = max(off, pos) - pos;
			n = min(off + len, pos + slen) - pos - from;
			if (for_cpu)
				ib_dma_sync_single_for_cpu(buf->ibdev,
							   sg_dma_address(sg) + from,
							   n, buf->dir);
			else
				ib_dma_sync_single_for_device(buf->ibdev,
							      sg_dma_address(sg) + from,
							      n, buf->dir);
		}
		pos += slen;
		if (pos >= off + len)
			break;
	}
}

void rstream_buf_sync_for_cpu(struct rstream_buf *buf, size_t off, size_t len)
{
	rstream_buf_sync(buf, off, len, true);
}

void rstream_buf_sync_for_device(struct rstream_buf *buf, size_t off,
				 size_t len)
{
	rstream_buf_sync(buf, off, len, false);
}

/*
 * Copy @len bytes between @iter and the ring that fills the first
 * @ring_size bytes of @buf, starting at stream byte @pos and wrapping at
 * the ring's end: at most two calls, one per contiguous piece.
 *
 * The unchecked _copy_{to,from}_iter(), as fs/proc/kcore.c uses for the
 * same reason: on a vmap() address, hardened usercopy's check looks the
 * address up among all vmap areas, under their global lock, on every send
 * and every receive, and it could only confirm bounds that the ring
 * arithmetic here already keeps (off < ring_size, n <= ring_size - off,
 * and the ring lies inside the vmap).  Not copy_page_to_iter(): given a
 * pipe's iterator (splice on 6.1) it lends the page instead of copying.
 * Returns the bytes copied.  Process context, sock lock held.
 */
static size_t rstream_buf_ring_copy(struct rstream_buf *buf, u32 ring_size,
				    u64 pos, size_t len, struct iov_iter *iter,
				    bool to_buf)
{
	u32 off = pos % ring_size;
	size_t done = 0;

	while (done < len) {
		size_t n = min_t(size_t, len - done, ring_size - off);
		size_t c;

		if (to_buf)
			c = _copy_from_iter(buf->vaddr + off, n, iter);
		else
			c = _copy_to_iter(buf->vaddr + off, n, iter);
		done += c;
		if (c != n)
			break;
		off = 0;
	}
	return done;
}

size_t rstream_buf_copy_from_iter(struct rstream_buf *buf, u32 ring_size,
				  u64 pos, size_t len, struct iov_iter *from)
{
	return rstream_buf_ring_copy(buf, ring_size, pos, len, from, true);
}

size_t rstream_buf_copy_to_iter(struct rstream_buf *buf, u32 ring_size,
				u64 pos, size_t len, struct iov_iter *to)
{
	return rstream_buf_ring_copy(buf, ring_size, pos, len, to, false);
}
