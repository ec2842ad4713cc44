/* SPDX-License-Identifier: MIT */
/*
 * placement.h - the placement order (store.h, "Placement") in one pure
 * module: the group of each VF (rule_placement_group, its own evidence),
 * then the rank of its parent GPU (rule_placement_parent_rank, how many of
 * the parent's VFs are out of service), and the draw of the order among
 * equals.  The store collects the VFs from its mirror and calls
 * placement_order(); the filesystem only renders the result.  Tests:
 * tests/store/test-rules.c (placement_*), tests/store/test-store-claims.c
 * (allocatable_order), tests/fs/test-placement.sh.
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
	bool failing;   /* failed assignments on record, below the threshold */
	bool probation; /* back from its GPU's cycle, no OK since (store.h, Probation) */
};

/* The allocatable VFs among vfs[0..n) (sorted by address), into out (room
 * for n), in placement order: by group, then by parent rank (the parent's
 * VFs out of service counted among vfs, whatever else they are); among
 * equals the order is drawn from seed (a uniform shuffle: splitmix64, no
 * modulo bias), so two reads with fresh seeds rank equals differently and a
 * guest cannot steer its next assignment.  *n_out: how many are
 * allocatable.  0 or -ENOMEM. */
int placement_order(enum store_mode mode, const struct placement_vf *vfs, size_t n, uint64_t seed,
		    struct store_placement *out, size_t *n_out);

/* A seed from getrandom(2): 0, or -EIO when the kernel has none to give (no
 * order a guest could predict). */
int placement_seed(uint64_t *seed);

#endif
