/* SPDX-License-Identifier: MIT */
/*
 * placement.h - the placement order (store.h, "Placement") in one pure
 * module: the group of each VF (rule_placement_group, from its parent's
 * state) and the draw of the order within each group.  The store collects
 * the VFs from its mirror and calls placement_order(); the filesystem only
 * renders the result.  Tests: tests/store/test-rules.c (placement_*),
 * tests/store/test-store.c (allocatable_order).
 */
#ifndef VFHEALTH_STORE_PLACEMENT_H
#define VFHEALTH_STORE_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* What placement needs of one VF. */
struct placement_vf {
	char vf[VF_ADDR_BUFSZ];
	char parent[VF_ADDR_BUFSZ]; /* "" when unknown */
	bool out_of_service;
	bool claimed; /* a live claim or a reservation */
	bool held_back;
	bool suspect;
};

/* The allocatable VFs among vfs[0..n) (sorted by address), into out (room
 * for n), group by group in placement order; within a group the order is
 * drawn from seed (a uniform shuffle: splitmix64, no modulo bias), so two
 * reads with fresh seeds rank a group differently and a guest cannot steer
 * its next assignment.  A parent is degraded when one of its VFs is out of
 * service.  *n_out: how many are allocatable.  0 or -ENOMEM. */
int placement_order(enum store_mode mode, const struct placement_vf *vfs, size_t n, uint64_t seed,
		    struct store_placement *out, size_t *n_out);

/* A seed from getrandom(2): 0, or -EIO when the kernel has none to give (no
 * order a guest could predict). */
int placement_seed(uint64_t *seed);

#endif
