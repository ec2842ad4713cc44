/* SPDX-License-Identifier: MIT */
/*
 * gpus.c - a parent GPU's drain and recovery (store.h, "GPUs", "Recovery"):
 * the phase each GPU is in (rule_gpu_next), kept in the `gpus` table and
 * mirrored in struct store's `gpus` (a GPU absent from it serves), the
 * refusal it adds to claims and placement, its history (`gpu_history`),
 * and the auto_recover setting.
 *
 * Design notes
 * ============
 *
 * The mirror's GPU table is read and written under mirror_lock, like every
 * VF entry, so a claim's reservation (mirror_reservation_add) and a drain's
 * application after its commit are ordered: a claim either got its
 * reservation before the drain was applied (it lives; the GPU is draining)
 * or it is refused (-EBUSY).  The same order makes a cycle safe: the op
 * that marks a GPU recovering checks, under mirror_lock, that none of its
 * VFs has a claim or reservation while the GPU already refuses new ones
 * (drained or failed), so none can appear before the cycle is applied.
 * The table's room is reserved by the op while
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
		[STORE_GPU_SERVING] = "serving", [STORE_GPU_DRAINING] = "draining",
		[STORE_GPU_DRAINED] = "drained", [STORE_GPU_RECOVERING] = "recovering",
		[STORE_GPU_FAILED] = "failed",
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

static const char *const gpu_event_words[] = {
	[GPU_EV_DRAIN] = "drain",
	[GPU_EV_UNDRAIN] = "undrain",
	[GPU_EV_RECOVER] = "recover",
	[GPU_EV_RECOVERED] = "recovered",
	[GPU_EV_RECOVER_FAILED] = "recover-failed",
	[GPU_EV_INTERRUPTED] = "recover-failed",
};

/* mirror_lock held: whether a VF of parent has a claim or a reservation,
 * and (other) which other GPU is recovering. */
static void gpu_scan_locked(const struct store *s, const char *parent, size_t *claimed,
			    char other[static VF_ADDR_BUFSZ])
{
	*claimed = 0;
	other[0] = '\0';
	for (size_t i = 0; i < s->n_vfs; i++) {
		const struct vf_entry *e = s->by_addr[i];
		if (strcmp(e->parent, parent) == 0)
			*claimed += e->claim || e->reservation;
	}
	for (size_t i = 0; i < s->n_gpus && !other[0]; i++)
		if (s->gpus[i].phase == GPU_PHASE_RECOVERING &&
		    strcmp(s->gpus[i].parent, parent) != 0)
			copy_string(other, VF_ADDR_BUFSZ, s->gpus[i].parent);
}

static void gpu_fill_locked(const struct store *s, const char *parent, struct store_gpu_info *g);

/* mirror_lock held: op's step decided against the mirror; op->noop when
 * it changes nothing, op->gpu_why filled when refused. */
static int gpu_decide_locked(const struct store *s, struct op *op)
{
	enum gpu_phase phase = gpu_phase_locked(s, op->parent);
	struct store_gpu_info g;
	size_t claimed;
	char other[VF_ADDR_BUFSZ];

	gpu_scan_locked(s, op->parent, &claimed, other);
	int next = rule_gpu_next(phase, (enum gpu_event)op->value, claimed > 0, other[0] != '\0');
	if (next == -EBUSY) {
		gpu_fill_locked(s, op->parent, &g);
		op->gpu_why = (struct store_gpu_refusal){ .state = g.state, .claimed = claimed };
		copy_string(op->gpu_why.recovering, VF_ADDR_BUFSZ, other);
	}
	if (next < 0)
		return next;
	op->noop = next == (int)phase;
	op->gpu_next = (enum gpu_phase)next;
	return 0;
}

/* The op inside the batch: decided again against what SQLite holds now
 * (an earlier op of the batch may have changed the GPU), then the row,
 * the history and room for the mirror.  A cycle begins only when the
 * mirror agrees with SQLite: a drain committed by this very batch is not
 * applied yet and would let a claim in before the cycle is. */
int gpus_op(struct store *s, struct op *op)
{
	char now[RFC3339_BUFSZ];
	int64_t n, phase;
	int r;

	/* a parent only some registered VF names is a GPU */
	r = db_int(s, &n, "SELECT COUNT(*) FROM vfs WHERE parent = ?",
		   DB_ARGS(db_text(op->parent)));
	if (r < 0)
		return r;
	if (n == 0)
		return -ENOENT;
	r = db_int(s, &phase, "SELECT COALESCE((SELECT phase FROM gpus WHERE parent = ?), 0)",
		   DB_ARGS(db_text(op->parent)));
	if (r < 0)
		return r;
	mirror_rdlock(s);
	r = gpu_decide_locked(s, op);
	bool agrees = gpu_phase_locked(s, op->parent) == (enum gpu_phase)phase;
	mirror_unlock(s);
	if (r < 0)
		return r;
	if (op->value == GPU_EV_RECOVER) {
		if (!agrees)
			return -EBUSY;
		r = db_int(s, &n, "SELECT COUNT(*) FROM gpus WHERE phase = ? AND parent <> ?",
			   DB_ARGS(db_i64((int64_t)GPU_PHASE_RECOVERING), db_text(op->parent)));
		if (r < 0)
			return r;
		if (n > 0)
			return -EBUSY;
	}
	r = rule_gpu_next((enum gpu_phase)phase, (enum gpu_event)op->value, false, false);
	if (r < 0)
		return r;
	op->gpu_next = (enum gpu_phase)r;
	if (op->gpu_next == (enum gpu_phase)phase)
		return 0;
	if (op->gpu_next == GPU_PHASE_SERVING)
		r = db_exec(s, "DELETE FROM gpus WHERE parent = ?", DB_ARGS(db_text(op->parent)));
	else
		r = db_exec(s, "INSERT OR REPLACE INTO gpus (parent, phase) VALUES (?, ?)",
			    DB_ARGS(db_text(op->parent), db_i64((int64_t)op->gpu_next)));
	if (r < 0)
		return r;
	rfc3339_now(now);
	r = db_exec(s,
		    "INSERT INTO gpu_history (parent, at, event, by, detail) VALUES (?, ?, ?, ?, ?)",
		    DB_ARGS(db_text(op->parent), db_text(now), db_text(gpu_event_words[op->value]),
			    db_i64(op->uid), db_text(op->message ? op->message : "")));
	if (r < 0)
		return r;
	if (op->value == GPU_EV_RECOVERED && (r = ops_recovered_vfs(s, op)) < 0)
		return r;
	/* every op of a batch may add one GPU */
	if ((r = gpus_reserve(s, s->n_gpus + ++s->gpus_pending)) < 0)
		return r;
	op->gpu_applied = true;
	return op_change_gpu(op);
}

int gpus_op_auto_recover(struct store *s, struct op *op)
{
	int r = db_setting_put(s, "auto_recover", op->value);

	if (r <= 0)
		return r;
	op->gpu_applied = true;
	return op_change_global(op, STORE_CHANGE_AUTO_RECOVER);
}

void gpus_apply_batch(struct store *s, struct op *batch, bool committed)
{
	pthread_rwlock_wrlock(&s->mirror_lock);
	for (struct op *op = batch; committed && op; op = op->next) {
		if (op->rc != 0 || !op->gpu_applied)
			continue;
		if (op->kind == OP_GPU)
			gpu_phase_set_locked(s, op->parent, op->gpu_next);
		else if (op->kind == OP_AUTO_RECOVER)
			atomic_store(&s->auto_recover, op->value);
	}
	s->gpus_pending = 0;
	pthread_rwlock_unlock(&s->mirror_lock);
}

int gpus_load(struct store *s)
{
	_cleanup_free_ struct gpu_entry *list = NULL;
	size_t n = 0, cap = 0;
	int r;
	_cleanup_stmt_ sqlite3_stmt *st = db_prepare(s, "SELECT parent, phase FROM gpus", DB_NONE);

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
	int64_t auto_recover;
	if ((r = db_setting(s, "auto_recover", &auto_recover)) < 0)
		return r;
	if (auto_recover < 0 || auto_recover > AUTO_RECOVER_MAX) {
		s->batch_failed = true;
		snprintf(s->batch_error, sizeof(s->batch_error),
			 "database content invalid: auto_recover %lld", (long long)auto_recover);
		return -EIO;
	}
	atomic_store(&s->auto_recover, (int)auto_recover);
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

static int decide_gpu(const struct store *s, const struct vf_entry *e, struct op *op)
{
	bool known = false;

	for (size_t i = 0; i < s->n_vfs && !known; i++)
		known = strcmp(s->by_addr[i]->parent, op->parent) == 0;
	if (!known)
		return -ENOENT;
	return gpu_decide_locked(s, op);
}

/* One step of a GPU (enum gpu_event), decided from the mirror, then in the
 * batch; *op is what the batch made of it. */
static int gpu_step(struct store *s, const char *parent, int64_t uid, enum gpu_event event,
		    const char *detail, struct op *op)
{
	*op = (struct op){ .kind = OP_GPU, .uid = uid, .value = event, .message = detail };
	copy_string(op->parent, sizeof(op->parent), parent);
	if (parent_valid(op->parent) < 0)
		return -EINVAL;
	return mutate(s, op, decide_gpu);
}

int store_gpu_drain(struct store *s, const char *parent, bool drain, int64_t uid,
		    const char *detail, bool *unchanged)
{
	struct op op;
	int r = gpu_step(s, parent, uid, drain ? GPU_EV_DRAIN : GPU_EV_UNDRAIN, detail, &op);

	if (r == 0 && unchanged)
		*unchanged = op.noop;
	return r;
}

int store_gpu_recover_begin(struct store *s, const char *parent, int64_t uid,
			    struct store_gpu_refusal *why)
{
	struct op op;
	int r = gpu_step(s, parent, uid, GPU_EV_RECOVER, NULL, &op);

	if (r == -EBUSY && why) {
		if (op.gpu_why.state == STORE_GPU_SERVING && !op.gpu_why.recovering[0]) {
			/* refused inside the batch: say what the mirror says now */
			struct store_gpu_info g;
			mirror_rdlock(s);
			gpu_fill_locked(s, parent, &g);
			gpu_scan_locked(s, parent, &op.gpu_why.claimed, op.gpu_why.recovering);
			mirror_unlock(s);
			op.gpu_why.state = g.state;
		}
		*why = op.gpu_why;
	}
	return r;
}

int store_gpu_recover_end(struct store *s, const char *parent, bool ok, const char *detail,
			  size_t *cleared)
{
	struct op op;
	int r = gpu_step(s, parent, -1, ok ? GPU_EV_RECOVERED : GPU_EV_RECOVER_FAILED, detail, &op);

	if (r == 0 && cleared)
		*cleared = op.gpu_cleared;
	return r;
}

int store_gpu_fail_interrupted(struct store *s, char (**ret)[VF_ADDR_BUFSZ], size_t *count)
{
	_cleanup_free_ char(*list)[VF_ADDR_BUFSZ] = NULL;
	size_t n = 0;
	int r = 0;

	if (!ret || !count)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	list = calloc(MAX(s->n_gpus, (size_t)1), sizeof(*list));
	for (size_t i = 0; list && i < s->n_gpus; i++)
		if (s->gpus[i].phase == GPU_PHASE_RECOVERING)
			memcpy(list[n++], s->gpus[i].parent, VF_ADDR_BUFSZ);
	mirror_unlock(s);
	if (!list)
		return -ENOMEM;
	for (size_t i = 0; i < n && r == 0; i++) {
		struct op op;
		r = gpu_step(s, list[i], -1, GPU_EV_INTERRUPTED,
			     "interrupted: vfhealthd stopped during the cycle", &op);
	}
	if (r < 0)
		return r;
	*ret = n ? move_ptr(list) : NULL;
	*count = n;
	return 0;
}

int store_auto_recover_get(struct store *s)
{
	return atomic_setting_get(s, &s->auto_recover);
}

int store_auto_recover_set(struct store *s, int n)
{
	struct op op = { .kind = OP_AUTO_RECOVER, .uid = -1, .value = n };

	if (n < 0 || n > AUTO_RECOVER_MAX)
		return -EINVAL;
	return mutate(s, &op, decide_atomic_setting);
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
	case GPU_PHASE_RECOVERING:
		g->state = STORE_GPU_RECOVERING;
		break;
	case GPU_PHASE_FAILED:
		g->state = STORE_GPU_FAILED;
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

/* -- the GPU's VFs as sysfs says (store_gpu_adopt) ------------------------- */

static int decide_adopt(const struct store *s, const struct vf_entry *e, struct op *op)
{
	if (!e)
		return -ENOENT;
	op->noop = strcmp(e->parent, op->parent) == 0;
	return 0;
}

int store_gpu_adopt(struct store *s, const char *parent, char (*vfs)[VF_ADDR_BUFSZ], size_t n,
		    size_t *adopted)
{
	size_t changed = 0;

	if (parent_valid(parent) < 0 || (n && !vfs))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		struct op op = { .kind = OP_SET_PARENT, .uid = -1, .value = 1 };
		int r;

		if (!vf_address_valid(vfs[i]) || strcmp(vfs[i], parent) == 0)
			return -EINVAL;
		copy_string(op.vf, sizeof(op.vf), vfs[i]);
		copy_string(op.parent, sizeof(op.parent), parent);
		r = mutate(s, &op, decide_adopt);
		if (r == -ENOENT)
			continue; /* not registered: nothing can claim it */
		if (r < 0)
			return r;
		changed += !op.noop;
	}
	if (adopted)
		*adopted = changed;
	return 0;
}

int store_vfs_in_use(struct store *s, char (*vfs)[VF_ADDR_BUFSZ], size_t n, size_t *in_use,
		     char first[static VF_ADDR_BUFSZ])
{
	size_t count = 0;

	first[0] = '\0';
	if (!in_use || (n && !vfs))
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	for (size_t i = 0; i < n; i++) {
		const struct vf_entry *e = mirror_find(s, vfs[i]);
		if (!e || !(e->claim || e->reservation))
			continue;
		if (!count++)
			copy_string(first, VF_ADDR_BUFSZ, vfs[i]);
	}
	mirror_unlock(s);
	*in_use = count;
	return 0;
}
