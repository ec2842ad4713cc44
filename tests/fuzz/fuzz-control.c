/* SPDX-License-Identifier: MIT */
/*
 * fuzz-control.c - the control-file command parsers of fs/vfiles.c
 * (threshold, status, max_quarantined, VF/quarantined, VF/report), called
 * through the file table exactly as the FUSE write handler calls them, over
 * a real store in a scratch directory (tmpfs where there is one).
 *
 * The first input byte picks the file; the rest is one command, prepared
 * as op_write prepares it (at most 4096 bytes, no NUL, one trailing newline
 * stripped).  Invariants: the result is success or EINVAL (EBUSY only where
 * the contract has it); a rejected command changes nothing the store
 * reports; an accepted setting reads back.
 */
#include <errno.h>
#include <ftw.h>
#include <stdbool.h>
#include <unistd.h>

#include "store/store.h"
#include "fs/vfiles.h"
#include "common/cleanup.h"
#include "common/log.h"
#include "tests/fuzz/fuzz.h"

#define VF_A "0000:71:00.1"
#define VF_B "0000:71:00.2"

static struct store *store;
static char scratch[64];
static uint64_t id_a, id_b;

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static void teardown(void)
{
	store_close(store);
	nftw(scratch, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	char path[128];
	struct store_vf_info info;
	struct store_claim claim = { .a.vf = VF_B, .a.instance_id = "vm-b" };

	log_set_max_priority(LOG_ERR); /* every accepted report would log */
	snprintf(scratch, sizeof(scratch), "%s/vfhealth-fuzz.XXXXXX",
		 access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
	if (!mkdtemp(scratch))
		abort();
	snprintf(path, sizeof(path), "%s/store.db", scratch);
	struct store_options opt = { .path = path, .threshold = 3, .max_quarantined = -1 };
	fuzz_check(store_open(&opt, &store) == 0);
	atexit(teardown);
	fuzz_check(store_vf_register(store, VF_A, NULL) == 0);
	fuzz_check(store_vf_register(store, VF_B, NULL) == 0);
	fuzz_check(store_claim(store, &claim, NULL) == 0);
	fuzz_check(store_vf_get(store, VF_A, STORE_READ_RETRY, &info) == 0);
	id_a = info.id;
	fuzz_check(store_vf_get(store, VF_B, STORE_READ_RETRY, &info) == 0);
	id_b = info.id;
	return 0;
}

/* What the store says, as text. */
static char *state(void)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	struct store_stats st;

	if (!f)
		abort();
	store_get_stats(store, &st);
	fprintf(f, "threshold=%d max=%d vfs=%zu q=%zu claimed=%zu avail=%d\n",
		store_threshold_get(store), store_max_quarantined_get(store), st.vfs,
		st.quarantined, st.claimed, st.available);
	const char *vfs[] = { VF_A, VF_B };
	for (int i = 0; i < 2; i++) {
		_cleanup_free_ struct store_failure *fl = NULL;
		struct store_vf_info info;
		size_t n = 0;

		fuzz_check(store_vf_get(store, vfs[i], STORE_READ_RETRY, &info) == 0);
		fuzz_check(store_failure_list(store, vfs[i], &fl, &n) == 0);
		fprintf(f, "%s tally=%u q=%d held=%d claimed=%d\n", vfs[i], info.tally,
			info.quarantined, info.held, info.claimed);
		for (size_t k = 0; k < n; k++)
			fprintf(f, "  %s %s %s\n", fl[k].instance_id, fl[k].assigned_at,
				fl[k].message);
	}
	fclose(f);
	return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const struct {
		bool per_vf;
		int index;
	} files[] = {
		{ false, TOP_THRESHOLD }, { false, TOP_STATUS }, { false, TOP_MAX_QUARANTINED },
		{ true, VF_QUARANTINED }, { true, VF_REPORT },
	};
	char outcome[VFILE_OUTCOME_MAX] = "";
	size_t len;
	int r;

	if (size < 1 || size - 1 > VFILE_COMMAND_MAX || memchr(data + 1, '\0', size - 1))
		return 0; /* op_write answers EINVAL before any parser runs */
	unsigned pick = data[0] % ARRAY_SIZE(files);
	bool on_b = data[0] & 0x80;
	_cleanup_free_ char *command = fuzz_strndup(data + 1, size - 1);
	if (!command)
		return 0;
	len = size - 1;
	strip_trailing_newline(command, &len);

	const struct vfile *file = files[pick].per_vf ? &vf_files[files[pick].index] :
							&top_files[files[pick].index];
	struct vfile_call call = {
		.store = store,
		.vf = files[pick].per_vf ? (on_b ? VF_B : VF_A) : NULL,
		.vf_id = on_b ? id_b : id_a,
		.outcome = outcome,
	};
	_cleanup_free_ char *before = state();
	r = file->write(&call, command);
	fuzz_check(r == 0 || r == -EINVAL);
	if (r < 0) {
		_cleanup_free_ char *after = state();
		fuzz_check(strcmp(before, after) == 0);
		return 0;
	}
	if (files[pick].index == TOP_THRESHOLD && !files[pick].per_vf)
		fuzz_check(store_threshold_get(store) == atoi(command));
	if (files[pick].per_vf && files[pick].index == VF_REPORT)
		fuzz_check(outcome[0] != '\0'); /* read back on the same handle */
	/* Keep the store small and the next input's world alike. */
	if (store_threshold_get(store) != 3)
		fuzz_check(store_threshold_set(store, 3) == 0);
	return 0;
}
