/* SPDX-License-Identifier: MIT */
/*
 * gpus.h - the files of a parent GPU's directory, gpus/PF/ (vfhealth(5)):
 * what each says and what writing `drain` does.  The table that names them
 * is gpu_files[] (vfiles.c); call->vf is the GPU's address.
 */
#ifndef VFHEALTH_FS_GPUS_H
#define VFHEALTH_FS_GPUS_H

#include <stdint.h>
#include <stdio.h>

#include "fs/vfiles.h"

int gpu_vfs_render(const struct vfile_call *call, FILE *out);
int gpu_state_render(const struct vfile_call *call, FILE *out);
int gpu_drain_render(const struct vfile_call *call, FILE *out);
int gpu_drain_write(const struct vfile_call *call, char *command);
int gpu_history_render(const struct vfile_call *call, FILE *out);
/* `cycle`: recovery_request (recovery/recovery.h). */
int gpu_recover_write(const struct vfile_call *call, char *command);
/* The top-level auto_recover: `off` or N (store_auto_recover_set). */
int auto_recover_render(const struct vfile_call *call, FILE *out);
int auto_recover_write(const struct vfile_call *call, char *command);
/* The GPU families of `metrics`: vfhealth_gpu_state, one series per GPU and
 * state, 1 for the state it is in (a drain is shown apart from the VFs'
 * quarantines). */
void gpu_metrics_render(struct store *s, FILE *out);

/* A GPU's address as 32 bits (domain, bus, device, function), for its
 * inode numbers, and back; -EINVAL for no address. */
int gpu_addr_pack(const char *addr, uint32_t *ret);
void gpu_addr_unpack(uint32_t packed, char addr[static VF_ADDR_BUFSZ]);

#endif
