// SPDX-License-Identifier: GPL-2.0
/*
 * The RDMA devices rstream can use.
 *
 * rstream is an ib_client: the RDMA core calls rstream_add_device() for
 * every device present when the client registers and for every device added
 * later (rdma link add, driver load), and rstream_remove_device() when one
 * goes away or the client unregisters.  Both run in process context and may
 * sleep; the core serialises them per device.
 *
 * Each usable device gets a protection domain for the connections that will
 * run on it.  The PD has no global rkey: remote access is only ever granted
 * through per-connection memory regions.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/list.h>
#include <linux/mutex.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <rdma/ib_verbs.h>

#include "rstream.h"

struct rstream_device {
	struct list_head list;		/* in rstream_devices */
	struct ib_device *ibdev;
	struct ib_pd *pd;
	/*
	 * A copy of the device's name, under rstream_devices_lock: a rename
	 * frees the old dev_name() string under the RDMA core's own lock.
	 */
	char name[IB_DEVICE_NAME_MAX];
};

/* Protects rstream_devices; taken in process context only. */
static DEFINE_MUTEX(rstream_devices_lock);
static LIST_HEAD(rstream_devices);

static struct ib_client rstream_ib_client;

/* Every port must reach peers through rdma_cm on a reliable connection. */
static bool rstream_device_usable(struct ib_device *ibdev)
{
	u32 port;

	if (!(ibdev->attrs.device_cap_flags & IB_DEVICE_MEM_MGT_EXTENSIONS)) {
		pr_info("%s: not used: no memory management extensions, so no per-connection memory regions\n",
			dev_name(&ibdev->dev));
		return false;
	}
	rdma_for_each_port(ibdev, port) {
		if (!rdma_cap_ib_cm(ibdev, port) && !rdma_cap_iw_cm(ibdev, port)) {
			pr_info("%s: not used: port %u has no RDMA connection manager\n",
				dev_name(&ibdev->dev), port);
			return false;
		}
	}
	return true;
}

/* The core holds devices_rwsem, so dev_name() cannot change under us. */
static int rstream_add_device(struct ib_device *ibdev)
{
	struct rstream_device *dev;

	if (!rstream_device_usable(ibdev))
		return -EOPNOTSUPP;

	dev = kzalloc(sizeof(*dev), GFP_KERNEL);
	if (!dev)
		return -ENOMEM;
	dev->ibdev = ibdev;
	dev->pd = ib_alloc_pd(ibdev, 0);
	if (IS_ERR(dev->pd)) {
		int err = PTR_ERR(dev->pd);

		pr_err("%s: cannot allocate a protection domain: %d\n",
		       dev_name(&ibdev->dev), err);
		kfree(dev);
		return err;
	}

	ib_set_client_data(ibdev, &rstream_ib_client, dev);
	mutex_lock(&rstream_devices_lock);
	strscpy(dev->name, dev_name(&ibdev->dev), sizeof(dev->name));
	list_add_tail(&dev->list, &rstream_devices);
	mutex_unlock(&rstream_devices_lock);
	pr_debug("%s: added\n", dev->name);
	return 0;
}

/* Called by the RDMA core after the device took its new name. */
static void rstream_rename_device(struct ib_device *ibdev, void *client_data)
{
	struct rstream_device *dev = client_data;

	mutex_lock(&rstream_devices_lock);
	strscpy(dev->name, dev_name(&ibdev->dev), sizeof(dev->name));
	mutex_unlock(&rstream_devices_lock);
}

static void rstream_remove_device(struct ib_device *ibdev, void *client_data)
{
	struct rstream_device *dev = client_data;

	mutex_lock(&rstream_devices_lock);
	list_del(&dev->list);
	mutex_unlock(&rstream_devices_lock);

	pr_debug("%s: removed\n", dev->name);
	ib_dealloc_pd(dev->pd);
	kfree(dev);
}

static struct ib_client rstream_ib_client = {
	.name	= "rstream",
	.add	= rstream_add_device,
	.remove	= rstream_remove_device,
	.rename	= rstream_rename_device,
};

static const char *rstream_port_transport(struct ib_device *ibdev, u32 port)
{
	if (rdma_protocol_roce(ibdev, port))
		return "roce";
	if (rdma_protocol_iwarp(ibdev, port))
		return "iwarp";
	if (rdma_protocol_ib(ibdev, port))
		return "ib";
	return "other";
}

/*
 * One line per port of each device this network namespace can use:
 * "<device> <port> <transport>".  Process context (a /proc read).
 */
void rstream_device_show(struct seq_file *seq, const struct net *net)
{
	struct rstream_device *dev;
	u32 port;

	seq_puts(seq, "device port transport\n");
	mutex_lock(&rstream_devices_lock);
	list_for_each_entry(dev, &rstream_devices, list) {
		if (!rdma_dev_access_netns(dev->ibdev, net))
			continue;
		rdma_for_each_port(dev->ibdev, port)
			seq_printf(seq, "%s %u %s\n", dev->name, port,
				   rstream_port_transport(dev->ibdev, port));
	}
	mutex_unlock(&rstream_devices_lock);
}

int rstream_device_init(void)
{
	return ib_register_client(&rstream_ib_client);
}

/* Calls rstream_remove_device() for every device still present. */
void rstream_device_exit(void)
{
	ib_unregister_client(&rstream_ib_client);
}
