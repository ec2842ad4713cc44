/* SPDX-License-Identifier: MIT */
/*
 * gpus.c - the files of gpus/PF/ (gpus.h): a parent GPU's VFs, its state,
 * its drain and its history.  The store decides (store.h, "GPUs"); this
 * caller logs the event once.  A drain and a cycle act only on what sysfs
 * shows as an NVIDIA GPU with SR-IOV, and on the VFs its virtfn links name
 * (recovery_gpu_target); an undrain needs no such check: it acts on no
 * device.
 */
#include "fs/gpus.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/vf.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/prometheus.h"
#include "recovery/recovery.h"

/* The history a read shows at most (older events are counted). */
#define GPU_HISTORY_MAX 1000

int gpu_addr_pack(const char *addr, uint32_t *ret)
{
	unsigned domain, bus, dev, fn;
	int used = 0;

	if (!vf_address_valid(addr) ||
	    sscanf(addr, "%4x:%2x:%2x.%1u%n", &domain, &bus, &dev, &fn, &used) != 4 ||
	    addr[used] != '\0' || dev > 0x1f || fn > 7)
		return -EINVAL;
	*ret = domain << 16 | bus << 8 | dev << 3 | fn;
	return 0;
}

void gpu_addr_unpack(uint32_t packed, char addr[static VF_ADDR_BUFSZ])
{
	snprintf(addr, VF_ADDR_BUFSZ, "%04x:%02x:%02x.%u", packed >> 16, (packed >> 8) & 0xff,
		 (packed >> 3) & 0x1f, packed & 7);
}

int gpu_vfs_render(const struct vfile_call *call, FILE *out)
{
	_cleanup_free_ char(*vfs)[VF_ADDR_BUFSZ] = NULL;
	size_t count = 0;
	int r = store_gpu_vfs(call->store, call->vf, &vfs, &count);

	if (r < 0)
		return r;
	for (size_t i = 0; i < count; i++)
		fprintf(out, "%s\n", vfs[i]);
	return 0;
}

/* Placement-facing: a drain takes VFs out of placement, so the state
 * fails closed while the store is unavailable. */
int gpu_state_render(const struct vfile_call *call, FILE *out)
{
	struct store_gpu_info g;
	int r = store_gpu_get(call->store, call->vf, call->read, &g);

	if (r < 0)
		return r;
	fprintf(out, "%s\n", store_gpu_state_name(g.state));
	return 0;
}

int gpu_drain_render(const struct vfile_call *call, FILE *out)
{
	struct store_gpu_info g;
	int r = store_gpu_get(call->store, call->vf, call->read, &g);

	if (r < 0)
		return r;
	fprintf(out, "%d\n", g.state != STORE_GPU_SERVING);
	return 0;
}

int gpu_drain_write(const struct vfile_call *call, char *command)
{
	bool drain, unchanged = false;
	int r;

	if (strcmp(command, "1") == 0)
		drain = true;
	else if (strcmp(command, "0") == 0)
		drain = false;
	else {
		if (call->why)
			*call->why = "drain is 1 (start a drain) or 0 (end it)";
		return -EINVAL;
	}
	if (drain) {
		/* what sysfs shows under the GPU, registered or not, is its own */
		_cleanup_free_ char(*vfs)[VF_ADDR_BUFSZ] = NULL;
		const char *why = NULL;
		size_t n = 0;

		r = recovery_gpu_target(call->sysfs_root, call->store, call->vf, &vfs, &n, &why);
		if (r < 0) {
			if (call->why)
				*call->why = why;
			return r;
		}
	}
	r = store_gpu_drain(call->store, call->vf, drain, call->uid, NULL, &unchanged);
	if (r < 0)
		return r;
	if (unchanged && call->unchanged)
		*call->unchanged = true;
	if (!unchanged)
		log_notice("GPU %s: drain %s by uid %" PRId64, call->vf,
			   drain ? "started: its VFs take no new claim" : "ended: its VFs serve",
			   call->uid);
	return 0;
}

int gpu_recover_write(const struct vfile_call *call, char *command)
{
	const char *why = NULL;
	int r;

	if (strcmp(command, "cycle") != 0) {
		if (call->why)
			*call->why = "recover takes `cycle` (an SR-IOV cycle of the drained GPU)";
		return -EINVAL;
	}
	r = recovery_request(call->recovery, call->vf, call->uid, &why);
	if (r < 0 && why && call->why)
		*call->why = why;
	if (r == 0) {
		log_notice("GPU %s: recovery asked by uid %" PRId64 ": its cycle starts", call->vf,
			   call->uid);
		if (call->outcome)
			snprintf(call->outcome, VFILE_OUTCOME_MAX, "recovering");
	}
	return r;
}

int auto_recover_render(const struct vfile_call *call, FILE *out)
{
	int n = store_auto_recover_get(call->store);

	if (n < 0)
		return n;
	if (n == 0)
		fputs("off\n", out);
	else
		fprintf(out, "%d\n", n);
	return 0;
}

int auto_recover_write(const struct vfile_call *call, char *command)
{
	uint64_t n = 0;

	if (strcmp(command, "off") != 0 && parse_uint64(command, 0, AUTO_RECOVER_MAX, &n) < 0) {
		if (call->why)
			*call->why = "auto_recover is off or a number of VFs, 1..256";
		return -EINVAL;
	}
	if (n > 0 && !recovery_configured(call->recovery)) {
		if (call->why)
			*call->why =
				"vfhealthd runs no cycle: it was started without --recover-program";
		return -EOPNOTSUPP;
	}
	return store_auto_recover_set(call->store, (int)n);
}

int gpu_history_render(const struct vfile_call *call, FILE *out)
{
	_cleanup_free_ struct store_gpu_event *h = NULL;
	size_t count = 0, dropped = 0;
	char by[24];
	int r;

	r = store_gpu_history(call->store, call->vf, GPU_HISTORY_MAX, &h, &count, &dropped);
	if (r < 0) {
		log_warn("GPU %s: listing the history failed: %s", call->vf, strerror(-r));
		return r;
	}
	if (dropped)
		fprintf(out, "# %zu older entries dropped\n", dropped);
	for (size_t i = 0; i < count; i++) {
		if (h[i].by >= 0)
			snprintf(by, sizeof(by), "%" PRId64, h[i].by);
		else
			snprintf(by, sizeof(by), "-");
		if (h[i].detail[0])
			fprintf(out, "%s %s by=%s why=%s\n", h[i].at, h[i].event, by, h[i].detail);
		else
			fprintf(out, "%s %s by=%s\n", h[i].at, h[i].event, by);
	}
	return 0;
}

void gpu_metrics_render(struct store *s, FILE *out)
{
	static const enum store_gpu_state states[] = { STORE_GPU_SERVING, STORE_GPU_DRAINING,
						       STORE_GPU_DRAINED, STORE_GPU_RECOVERING,
						       STORE_GPU_FAILED };
	_cleanup_free_ struct store_gpu_info *gpus = NULL;
	size_t count = 0;

	prom_family(out, "vfhealth_gpu_state", "gauge",
		    "1 for the state the parent GPU is in (serving, draining, drained, recovering, "
		    "failed), 0 for the others.");
	if (store_gpu_list(s, &gpus, &count) < 0)
		return; /* never loaded: no GPUs to tell */
	for (size_t i = 0; i < count; i++)
		for (size_t j = 0; j < ARRAY_SIZE(states); j++)
			prom_sample_u64(out, "vfhealth_gpu_state",
					PROM_LABELS({ "parent", gpus[i].parent },
						    { "state", store_gpu_state_name(states[j]) }),
					gpus[i].state == states[j]);
}
