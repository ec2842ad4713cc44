/* SPDX-License-Identifier: MIT */
/*
 * store-fixture.h - what the store's test suites (tests/store/test-store-*.c)
 * share: a fresh database path under a mkdtemp directory per test (setup,
 * teardown), opening through the faultvfs shim, shorthands for the calls
 * most cases make, reading the database file with SQLite directly, and the
 * suite each file builds from its generated case list.
 */
#ifndef VFHEALTH_TESTS_STORE_FIXTURE_H
#define VFHEALTH_TESTS_STORE_FIXTURE_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cleanup.h"
#include "store/store.h"
#include "tests/common/check-main.h"

/* store_release() of the claim with this claimed_at, by an unknown uid */
#define RELEASE_IF(at) (&(struct store_release_opts){ .claimed_at = (at), .uid = -1 })
/* VFs, their parent GPUs, stamps and a boot */
#define VF_A "0000:41:00.1"
#define VF_B "0000:41:00.2"
#define VF_C "0000:41:00.3"
#define VF_D "0000:41:00.4"
#define PF_1 "0000:40:00.0"
#define PF_2 "0000:50:00.0"
#define T1 "2026-11-29T07:00:01.000000000Z"
#define T2 "2026-11-29T07:00:02.000000000Z"
#define T3 "2026-11-29T07:00:03.000000000Z"
#define T1_PLUS_1S "2026-11-29T07:00:02.000000000Z"
#define BOOT_ID "0123abcd-4567-89ef-0123-456789abcdef"

/* The test's directory and its database (nested: store_open creates the
 * parents); setup and teardown are every case's checked fixture. */
extern char tmpdir[64];
extern char db_path[256];
void setup(void);
void teardown(void);

/* Opening: open_with the given settings through VFS; open_store keeps the
 * stored settings, through the fault shim so any case can inject; reopen
 * closes first; open_window with an init window of window_s seconds. */
struct store *open_with(int threshold, int max_quarantined, const char *vfs);
struct store *open_store(void);
struct store *reopen(struct store *s);
struct store *open_window(int64_t window_s);

/* The calls most cases make, each asserting it succeeded. */
void reg(struct store *s, const char *vf);
enum store_outcome report_fail(struct store *s, const char *vf, const char *inst, const char *at);
struct store_success_result ok(struct store *s, const char *vf, const char *inst, const char *at);
struct store_vf_info info(struct store *s, const char *vf);
/* VF has N live failures, the last of them (N > 0) reported as LAST. */
void assert_failures(struct store *s, const char *vf, size_t n, const char *last);
uint64_t commits(struct store *s);
enum store_gpu_state gpu_state(struct store *s, const char *parent);
bool allocatable_has(struct store *s, const char *vf);
struct store_claim gpu_claim(const char *vf, const char *inst);
void claim_at(struct store *s, const char *vf, const char *inst, const char *at);
/* Release inst's claim at claimed_at, its VMM dead at died_at (NULL: now):
 * whether the VF became suspect (-errno on a refusal). */
int crash(struct store *s, const char *vf, const char *inst, const char *claimed_at,
	  const char *died_at, int64_t *after_ms);

/* The database file read and written with SQLite directly: one integer
 * (db_query), a statement (db_write); a whole file's bytes (read_file). */
long long db_query(const char *sql);
void db_write(const char *sql);
char *read_file(const char *path, size_t *len);

/* The changes a change callback saw (on_change, userdata a struct seen). */
#define SEEN_MAX 16
struct seen {
	struct store *s;
	unsigned bits[SEEN_MAX];
	char vf[SEEN_MAX][VF_ADDR_BUFSZ];
	char instance[SEEN_MAX][INSTANCE_ID_MAX + 1];
	char parent[SEEN_MAX][VF_ADDR_BUFSZ];
	bool quarantined_when_notified[SEEN_MAX];
	int n;
};
void on_change(void *userdata, const struct store_change *c);

/* One case of a suite: its name (CK_RUN_CASE) and its test. */
struct store_case {
	const char *name;
	const TTest *test;
};

/* The suite NAME of N cases, each its own test case with the shared
 * fixture and a 60 s timeout. */
Suite *store_cases_suite(const char *name, const struct store_case *cases, size_t n);

/* The main() of a family's suite NAME: the cases its generated
 * store-cases-FAMILY.h lists (STORE_CASES), included before. */
#define STORE_CASE_(name) { #name, name },
#define STORE_SUITE_MAIN(suite_name)                                              \
	static Suite *store_suite_(void)                                          \
	{                                                                         \
		const struct store_case cases_[] = { STORE_CASES(STORE_CASE_) };  \
		return store_cases_suite(suite_name, cases_, ARRAY_SIZE(cases_)); \
	}                                                                         \
	CHECK_MAIN(store_suite_)

#endif
