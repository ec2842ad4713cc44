/* SPDX-License-Identifier: MIT */
/*
 * prometheus.h - the Prometheus text exposition format (version 0.0.4), in
 * one place: every family of the `metrics` file (vfhealthd's, the parent
 * GPUs', the recovery's, the sentinel's) is written through it.
 *
 * A family is its "# HELP" and "# TYPE" lines, once, then its samples
 * (prom_family, prom_sample*); a family of one unlabelled sample is
 * prom_scalar_u64.  HELP text escapes backslash and line feed; a label value
 * escapes backslash, double quote and line feed, as the format says, so no
 * value (a path, a version a peer reported) can end a label or a line early.
 * Tested by tests/common/test-prometheus.c.
 */
#ifndef VFHEALTH_PROMETHEUS_H
#define VFHEALTH_PROMETHEUS_H

#include <stdint.h>
#include <stdio.h>

struct prom_label {
	const char *name; /* a label name: a constant of the caller's */
	const char *value;
};

/* The labels of a sample, in order: PROM_LABELS({ "vf", vf }, { "parent", parent }). */
#define PROM_LABELS(...) ((const struct prom_label[]){ __VA_ARGS__, { NULL, NULL } })

/* "# HELP name help" and "# TYPE name type". */
void prom_family(FILE *out, const char *name, const char *type, const char *help);

/* "name{label=\"value\",...} value"; labels NULL for none (no braces).
 * value is the sample's text, as formatted by the caller. */
void prom_sample(FILE *out, const char *name, const struct prom_label *labels, const char *value);
void prom_sample_u64(FILE *out, const char *name, const struct prom_label *labels, uint64_t value);
void prom_sample_i64(FILE *out, const char *name, const struct prom_label *labels, int64_t value);

/* A family of one unlabelled sample. */
void prom_scalar_u64(FILE *out, const char *name, const char *type, const char *help,
		     uint64_t value);

#endif
