/* SPDX-License-Identifier: MIT */
/*
 * gpus.c - a parent GPU's drain (store.h, "GPUs"): the phase each GPU is
 * in, kept in the `gpus` table and mirrored in struct store's `gpus` (a
 * GPU absent from it serves), the refusal it adds to claims and placement,
 * and its history (`gpu_history`).
 *
 * Design notes
 * ============
 *
 * The mirror's GPU table is read and written under mirror_lock, like every
 * VF entry, so a claim's reservation (mirror_reservation_add) and a drain's
 * application after its commit are ordered: a claim either got its
 * reservation before the drain was applied (it lives; the GPU is draining)
 * or it is refused (-EBUSY).  The table's room is reserved by the op while
 * it runs inside the batch (write_lock held), so applying after COMMIT
 * cannot fail.  A phase read from the database that this code does not
 * write makes the whole load fail (the store opens unavailable): an
 * unknown phase never serves.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/vf.h"
#include "store/store-internal.h"

const char *store_gpu_state_name(enum store_gpu_state state)
{
	static const char *const names[] = {
		[STORE_GPU_SERVING] = "serving",
		[STORE_GPU_DRAINING] = "draining",
		[STORE_GPU_DRAINED] = "drained",
	};
	return (size_t)state < ARRAY_SIZE(names) && names[state] ? names[state] : "unknown";
}

/* mirror_lock held (either side).  The phase of parent: SERVING when it is
 * not in the table (also for "", an unknown parent). */
enum gpu_phase gpu_phase_locked(const struct store *s, const char *parent)
{
	if (!parent || !parent[0])
		return GPU_PHASE_SERVING;
	for (size_t i = 0; i < s->n_gpus; i++)
		if (strcmp(s->gpus[i].parent, parent) == 0)
			return s->gpus[i].phase;
	return GPU_PHASE_SERVING;
}

bool gpu_refuses_claims_locked(const struct store *s, const char *parent)
{
	return gpu_phase_locked(s, parent) != GPU_PHASE_SERVING;
}

/* mirror_lock's write side held: parent's phase becomes phase (room was
 * reserved by gpus_reserve). */
static void gpu_phase_set_locked(struct store *s, const char *parent, enum gpu_phase phase)
{
	for (size_t i = 0; i < s->n_gpus; i++) {
		if (strcmp(s->gpus[i].parent, parent) != 0)
			continue;
		if (phase == GPU_PHASE_SERVING)
			s->gpus[i] = s->gpus[--s->n_gpus];
		else
			s->gpus[i].phase = phase;
		return;
	}
	if (phase == GPU_PHASE_SERVING || s->n_gpus == s->cap_gpus)
		return; /* cap_gpus: never short, gpus_reserve ran in the op */
	copy_string(s->gpus[s->n_gpus].parent, VF_ADDR_BUFSZ, parent);
	s->gpus[s->n_gpus++].phase = phase;
}

/* Room for `want` GPUs in the mirror's table (takes mirror_lock). */
static int gpus_reserve(struct store *s, size_t want)
{
	int r = 0;

	pthread_rwlock_wrlock(&s->mirror_lock);
	if (want > s->cap_gpus) {
		size_t cap = MAX(want, 2 * s->cap_gpus);
		struct gpu_entry *grown = reallocarray(s->gpus, cap, sizeof(*grown));
		if (grown) {
			s->gpus = grown;
			s->cap_gpus = cap;
		} else {
			r = -ENOMEM;
		}
	}
	pthread_rwlock_unlock(&s->mirror_lock);
	return r;
}

/* The op inside the batch: the row, the history, and room for the mirror. */
int gpus_op_drain(struct store *s, struct op *op)
{
	char now[RFC3339_BUFSZ];
	int64_t n;
	int r;

	/* a parent only some registered VF names is a GPU */
	r = db_int(s, &n, "SELECT COUNT(*) FROM vfs WHERE parent = ?", "t", op->parent);
	if (r < 0)
		return r;
	if (n == 0)
		return -ENOENT;
	r = db_int(s, &n, "SELECT COALESCE((SELECT phase FROM gpus WHERE parent = ?), 0)", "t",
		   op->parent);
	if (r < 0)
		return r;
	if (n == op->value)
		return 0;
	if (op->value == GPU_PHASE_SERVING)
		r = db_exec(s, "DELETE FROM gpus WHERE parent = ?", "t", op->parent);
	else
		r = db_exec(s, "INSERT OR REPLACE INTO gpus (parent, phase) VALUES (?, ?)", "ti",
			    op->parent, (int64_t)op->value);
	if (r < 0)
		return r;
	rfc3339_now(now);
	r = db_exec(s, "INSERT INTO gpu_history (parent, at, event, by) VALUES (?, ?, ?, ?)",
		    "ttti", op->parent, now, op->how, op->uid);
	if (r < 0)
		return r;
	/* every op of a batch may add one GPU */
	if ((r = gpus_reserve(s, s->n_gpus + ++s->gpus_pending)) < 0)
		return r;
	op->gpu_applied = true;
	return op_change_gpu(op);
}

void gpus_apply_batch(struct store *s, struct op *batch, bool committed)
{
	pthread_rwlock_wrlock(&s->mirror_lock);
	for (struct op *op = batch; committed && op; op = op->next)
		if (op->kind == OP_DRAIN && op->rc == 0 && op->gpu_applied)
			gpu_phase_set_locked(s, op->parent, (enum gpu_phase)op->value);
	s->gpus_pending = 0;
	pthread_rwlock_unlock(&s->mirror_lock);
}

int gpus_load(struct store *s)
{
	_cleanup_free_ struct gpu_entry *list = NULL;
	size_t n = 0, cap = 0;
	int r;
	_cleanup_stmt_ sqlite3_stmt *st = db_prepare(s, "SELECT parent, phase FROM gpus", "");

	if (!st)
		return -EIO;
	while ((r = db_step(s, st)) == 1) {
		const char *parent = db_col_text(st, 0);
		int64_t phase = sqlite3_column_int64(st, 1);

		if (!vf_address_valid(parent) || phase <= GPU_PHASE_SERVING ||
		    phase >= GPU_PHASE_COUNT || n == VFS_MAX) {
			s->batch_failed = true;
			snprintf(s->batch_error, sizeof(s->batch_error),
				 "database content invalid: GPU '%.16s' in phase %lld", parent,
				 (long long)phase);
			return -EIO;
		}
		if (n == cap) {
			cap = cap ? 2 * cap : 8;
			struct gpu_entry *grown = reallocarray(list, cap, sizeof(*grown));
			if (!grown)
				return -ENOMEM;
			list = grown;
		}
		copy_string(list[n].parent, VF_ADDR_BUFSZ, parent);
		list[n++].phase = (enum gpu_phase)phase;
	}
	if (r < 0)
		return r;
	pthread_rwlock_wrlock(&s->mirror_lock);
	free(s->gpus);
	s->gpus = move_ptr(list);
	s->n_gpus = n;
	s->cap_gpus = cap;
	s->gpus_pending = 0;
	pthread_rwlock_unlock(&s->mirror_lock);
	return 0;
}

/* -- the public entry points ------------------------------------------------ */

static int parent_valid(const char *parent)
{
	return parent && vf_address_valid(parent) ? 0 : -EINVAL;
}

static int decide_drain(const struct store *s, const struct vf_entry *e, struct op *op)
{
	bool known = false;

	for (size_t i = 0; i < s->n_vfs && !known; i++)
		known = strcmp(s->by_addr[i]->parent, op->parent) == 0;
	if (!known)
		return -ENOENT;
	op->noop = gpu_phase_locked(s, op->parent) == (enum gpu_phase)op->value;
	return 0;
}

int store_gpu_drain(struct store *s, const char *parent, bool drain, int64_t uid, bool *unchanged)
{
	struct op op = { .kind = OP_DRAIN, .uid = uid };
	int r;

	if ((r = parent_valid(parent)) < 0)
		return r;
	copy_string(op.parent, sizeof(op.parent), parent);
	op.value = drain ? GPU_PHASE_DRAIN : GPU_PHASE_SERVING;
	op.how = drain ? "drain" : "undrain";
	if ((r = mutate(s, &op, decide_drain)) < 0)
		return r;
	if (unchanged)
		*unchanged = op.noop;
	return 0;
}

/* mirror_lock held: what one GPU is, from its VFs and its phase. */
static void gpu_fill_locked(const struct store *s, const char *parent, struct store_gpu_info *g)
{
	memset(g, 0, sizeof(*g));
	copy_string(g->parent, sizeof(g->parent), parent);
	for (size_t i = 0; i < s->n_vfs; i++) {
		const struct vf_entry *e = s->by_addr[i];
		if (strcmp(e->parent, parent) != 0)
			continue;
		g->vfs++;
		g->claimed += e->claim || e->reservation;
	}
	switch (gpu_phase_locked(s, parent)) {
	case GPU_PHASE_SERVING:
		g->state = STORE_GPU_SERVING;
		break;
	case GPU_PHASE_DRAIN:
	default: /* gpus_load admits no other phase; fail closed anyway */
		g->state = g->claimed ? STORE_GPU_DRAINING : STORE_GPU_DRAINED;
		break;
	}
}

int store_gpu_get(struct store *s, const char *parent, enum store_read how,
		  struct store_gpu_info *ret)
{
	int r;

	if (!ret || parent_valid(parent) < 0)
		return -EINVAL;
	if ((r = read_ready(s, how)) < 0)
		return r;
	mirror_rdlock(s);
	gpu_fill_locked(s, parent, ret);
	mirror_unlock(s);
	return ret->vfs ? 0 : -ENOENT;
}

static int compare_addr(const void *a, const void *b)
{
	return strcmp(a, b);
}

int store_gpu_list(struct store *s, struct store_gpu_info **ret, size_t *count)
{
	_cleanup_free_ char(*parents)[VF_ADDR_BUFSZ] = NULL;
	_cleanup_free_ struct store_gpu_info *list = NULL;
	size_t n = 0, unique = 0;
	int r;

	if (!ret || !count)
		return -EINVAL;
	if ((r = read_ready(s, STORE_READ_MEMORY)) < 0)
		return r;
	mirror_rdlock(s);
	parents = calloc(MAX(s->n_vfs, (size_t)1), sizeof(*parents));
	list = calloc(MAX(s->n_vfs, (size_t)1), sizeof(*list));
	for (size_t i = 0; parents && list && i < s->n_vfs; i++)
		if (s->by_addr[i]->parent[0])
			memcpy(parents[n++], s->by_addr[i]->parent, VF_ADDR_BUFSZ);
	if (parents && list) {
		qsort(parents, n, sizeof(*parents), compare_addr);
		for (size_t i = 0; i < n; i++)
			if (unique == 0 || strcmp(list[unique - 1].parent, parents[i]) != 0)
				gpu_fill_locked(s, parents[i], &list[unique++]);
	}
	mirror_unlock(s);
	if (!parents || !list)
		return -ENOMEM;
	*ret = move_ptr(list);
	*count = unique;
	return 0;
}

int store_gpu_vfs(struct store *s, const char *parent, char (**ret)[VF_ADDR_BUFSZ], size_t *count)
{
	_cleanup_free_ char(*vfs)[VF_ADDR_BUFSZ] = NULL;
	size_t n = 0;
	int r;

	if (!ret || !count || parent_valid(parent) < 0)
		return -EINVAL;
	if ((r = read_ready(s, STORE_READ_MEMORY)) < 0)
		return r;
	mirror_rdlock(s);
	vfs = calloc(MAX(s->n_vfs, (size_t)1), sizeof(*vfs));
	for (size_t i = 0; vfs && i < s->n_vfs; i++)
		if (strcmp(s->by_addr[i]->parent, parent) == 0)
			memcpy(vfs[n++], s->by_addr[i]->addr, VF_ADDR_BUFSZ);
	mirror_unlock(s);
	if (!vfs)
		return -ENOMEM;
	if (n == 0)
		return -ENOENT;
	*ret = move_ptr(vfs);
	*count = n;
	return 0;
}
