// SPDX-License-Identifier: GPL-2.0
/*
 * Test helper for rstream_module.sh: holds up every call of one function
 * of rstream (rstream_conn_destroy unless told otherwise) for a while, so
 * that a device removal can be made to land between two steps of a
 * teardown, where it once found a connection's QP with no CM id left to
 * tell it of the removal, and freed the device under it.
 *
 * A kprobe's handler runs with preemption off and cannot sleep: it spins.
 * delay_ms is capped far below the soft-lockup threshold (20 s).  Each
 * hold is logged with its caller, so a test can tell that its window did
 * open, and where.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/kprobes.h>
#include <linux/module.h>

#define RSTREAM_TEST_STALL_MAX_MS	5000

static char func[64] = "rstream_conn_destroy";
module_param_string(func, func, sizeof(func), 0444);
MODULE_PARM_DESC(func, "function to hold up (default rstream_conn_destroy)");

static unsigned int delay_ms = 1000;
module_param(delay_ms, uint, 0444);
MODULE_PARM_DESC(delay_ms, "how long each call is held up, at most 5000 (default 1000)");

/*
 * Any context the probed function runs in.  At its first instruction the
 * top of the stack is the return address: the log names the caller.
 */
static int rstream_test_stall_pre(struct kprobe *p, struct pt_regs *regs)
{
	pr_info("holding up %s, called from %pS, for %u ms\n", func,
		(void *)regs_get_kernel_stack_nth(regs, 0), delay_ms);
	mdelay(delay_ms);
	return 0;
}

static struct kprobe rstream_test_stall_kp = {
	.pre_handler = rstream_test_stall_pre,
};

static int __init rstream_test_stall_init(void)
{
	int err;

	if (delay_ms > RSTREAM_TEST_STALL_MAX_MS) {
		pr_err("delay_ms: %u is over %u\n", delay_ms,
		       RSTREAM_TEST_STALL_MAX_MS);
		return -EINVAL;
	}
	rstream_test_stall_kp.symbol_name = func;
	err = register_kprobe(&rstream_test_stall_kp);
	if (err)
		pr_err("cannot probe %s: %d\n", func, err);
	return err;
}

static void __exit rstream_test_stall_exit(void)
{
	unregister_kprobe(&rstream_test_stall_kp);
}

module_init(rstream_test_stall_init);
module_exit(rstream_test_stall_exit);
MODULE_DESCRIPTION("rstream test helper: holds up calls of one function");
MODULE_LICENSE("GPL");
