// SPDX-License-Identifier: GPL-2.0
/*
 * vfh_nvrm.c - a stand-in for NVIDIA's driver in the guest-kernel test
 * (tests/kernel/kernel.sh): on load it prints, from the kernel, the line the
 * driver prints when a GPU's adapter init fails.  The record is filed under
 * the kernel facility (0), which is what vfhealth-agent's matcher demands;
 * a userspace write of the same text is not.  `line=` replaces the text
 * after the "NVRM: " prefix (to exercise loaded rules).
 */
#include <linux/module.h>
#include <linux/printk.h>

static char *line = "GPU 0000:41:00.4: RmInitAdapter failed! (0x22:0x38:891)";
module_param(line, charp, 0444);
MODULE_PARM_DESC(line, "text printed after \"NVRM: \" at KERN_ERR on load");

static int __init vfh_nvrm_init(void)
{
	pr_err("NVRM: %s\n", line);
	return 0;
}

static void __exit vfh_nvrm_exit(void)
{
}

module_init(vfh_nvrm_init);
module_exit(vfh_nvrm_exit);
MODULE_DESCRIPTION("vfhealth test: print an NVRM adapter-init failure from the kernel");
MODULE_LICENSE("GPL");
