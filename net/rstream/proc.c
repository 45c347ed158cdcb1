// SPDX-License-Identifier: GPL-2.0
/*
 * /proc/net/rstream/: what the module sees, per network namespace.
 *
 *   devices	the RDMA devices (and ports) new sockets can use
 *   memory	bytes pinned by connections, module-wide, and the limit
 */
#include <linux/proc_fs.h>
#include <linux/seq_file.h>
#include <net/net_namespace.h>

#include "rstream.h"

static int rstream_devices_show(struct seq_file *seq, void *v)
{
	rstream_device_show(seq, seq_file_single_net(seq));
	return 0;
}

static int rstream_memory_show(struct seq_file *seq, void *v)
{
	rstream_mem_show(seq);
	return 0;
}

static int __net_init rstream_proc_net_init(struct net *net)
{
	struct proc_dir_entry *dir;

	dir = proc_net_mkdir(net, "rstream", net->proc_net);
	if (!dir)
		return -ENOMEM;
	if (!proc_create_net_single("devices", 0444, dir,
				    rstream_devices_show, NULL) ||
	    !proc_create_net_single("memory", 0444, dir,
				    rstream_memory_show, NULL)) {
		remove_proc_subtree("rstream", net->proc_net);
		return -ENOMEM;
	}
	return 0;
}

static void __net_exit rstream_proc_net_exit(struct net *net)
{
	remove_proc_subtree("rstream", net->proc_net);
}

static struct pernet_operations rstream_proc_net_ops = {
	.init = rstream_proc_net_init,
	.exit = rstream_proc_net_exit,
};

int rstream_proc_init(void)
{
	return register_pernet_subsys(&rstream_proc_net_ops);
}

void rstream_proc_exit(void)
{
	unregister_pernet_subsys(&rstream_proc_net_ops);
}
