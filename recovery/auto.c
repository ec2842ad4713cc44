/* SPDX-License-Identifier: MIT */
/*
 * auto.c - the automatic recovery policy (recovery-internal.h, auto_next):
 * a pure function of the GPUs' states, no I/O.
 */
#include "recovery/recovery-internal.h"

struct auto_step auto_next(const struct auto_gpu *gpus, size_t n, int threshold)
{
	struct auto_step none = { .action = AUTO_NOTHING };

	if (threshold <= 0)
		return none;
	for (size_t i = 0; i < n; i++)
		if (gpus[i].state == STORE_GPU_RECOVERING)
			return none; /* one at a time, whoever started it */
	for (size_t i = 0; i < n; i++) {
		if (!gpus[i].auto_drained)
			continue;
		if (gpus[i].state == STORE_GPU_DRAINED)
			return (struct auto_step){ .action = AUTO_CYCLE, .index = i };
		if (gpus[i].state == STORE_GPU_DRAINING)
			return none; /* its VMs have not left yet */
	}
	for (size_t i = 0; i < n; i++)
		if (gpus[i].state == STORE_GPU_SERVING &&
		    gpus[i].fresh_quarantines >= (size_t)threshold)
			return (struct auto_step){ .action = AUTO_DRAIN, .index = i };
	return none;
}
