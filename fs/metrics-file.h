/* SPDX-License-Identifier: MIT */
/* metrics-file.h - the renderer of the top-level `metrics` file
 * (metrics-file.c); the file table (vfiles.c) names it. */
#ifndef VFHEALTH_FS_METRICS_FILE_H
#define VFHEALTH_FS_METRICS_FILE_H

#include <stdio.h>

#include "fs/vfiles.h"

int metrics_render(const struct vfile_call *call, FILE *out);

#endif
