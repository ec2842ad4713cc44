/* SPDX-License-Identifier: MIT */
/*
 * api.c - the store's public entry points (store.h) but the claims'
 * (claims.c): argument checks, the one shape every mutation takes, and the
 * reads served from the mirror.
 *
 * A mutation is: validate (the entry point) -> mutate(): the store must be
 * loaded -> decide from the committed mirror (a decide_fn, using the pure
 * rules of rules.h, so refusals and no-ops take no transaction and are
 * answered even while latched) -> the store must be writable -> submit to
 * group commit (commit.c) and wait until durable.
 *
 * Reads: each takes an enum store_read (read_ready): placement-facing ones
 * retry a latched store once (store_retry_for_read: at most one retry a
 * second) or not at all, and then fail with -EIO; reads from memory are
 * answered from the mirror while the store is unavailable, as long as it
 * was ever loaded.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/message.h"
#include "common/log.h"
#include "grammar/vf.h"
#include "store/placement.h"
#include "store/rules.h"
#include "store/store-internal.h"

/* -- argument checks ---------------------------------------------------------- */

const char *store_outcome_name(enum store_outcome o)
{
	switch (o) {
	case STORE_OUTCOME_UNCHANGED:
		return "unchanged";
	case STORE_OUTCOME_RECORDED:
		return "recorded";
	case STORE_OUTCOME_QUARANTINED:
		return "quarantined";
	}
	return "unknown";
}

const char *store_vf_state_name(enum store_vf_state state)
{
	static const char *const names[] = {
		[STORE_VF_OK] = "ok",
		[STORE_VF_FAILING] = "failing",
		[STORE_VF_QUARANTINED] = "quarantined",
		[STORE_VF_HELD] = "held",
		[STORE_VF_HELD_BACK] = "held-back",
		[STORE_VF_SUSPECT] = "suspect",
		[STORE_VF_PROBATION] = "probation",
	};

	return (size_t)state < ARRAY_SIZE(names) && names[state] ? names[state] : "unknown";
}

const char *store_mode_name(enum store_mode mode)
{
	return mode == STORE_MODE_OBSERVE ? "observe" :
	       mode == STORE_MODE_ENFORCE ? "enforce" :
					    "unknown";
}

/* Placement-facing reads: a latched store retries once (at most one such
 * retry a second for the whole store, and only for a reader who may write),
 * then -EIO.  They also notice the store's files vanish while no write
 * comes (files_check_due: at most once a second, no thread of its own). */
static int ensure_available(struct store *s, bool may_repair)
{
	files_check_due(s);
	if (atomic_load(&s->available))
		return 0;
	return may_repair && store_retry_for_read(s) == 0 ? 0 : -EIO;
}

/* The check every read makes before it copies from the mirror: a
 * placement-facing one (ensure_available), or, from memory, only that the
 * database was ever loaded.  -EINVAL for another value of how. */
int read_ready(struct store *s, enum store_read how)
{
	switch (how) {
	case STORE_READ_RETRY:
	case STORE_READ_NORETRY:
		return ensure_available(s, how == STORE_READ_RETRY);
	case STORE_READ_MEMORY:
		return atomic_load(&s->loaded) ? 0 : -EIO;
	}
	return -EINVAL;
}

int store_retry_for_read(struct store *s)
{
	int64_t now = monotonic_ns(), last = atomic_load(&s->read_repair_ns);

	if (atomic_load(&s->available))
		return 0;
	/* one caller a second wins the slot; the others fail closed at once */
	if ((last != 0 && now - last < STORE_READ_REPAIR_INTERVAL_NS) ||
	    !atomic_compare_exchange_strong(&s->read_repair_ns, &last, now))
		return -EIO;
	return store_repair(s);
}

bool store_status(struct store *s, char *reason, size_t reason_size)
{
	pthread_rwlock_rdlock(&s->mirror_lock);
	bool available = atomic_load(&s->available);
	if (!available && reason && reason_size > 0)
		copy_string(reason, reason_size, s->reason);
	pthread_rwlock_unlock(&s->mirror_lock);
	return available;
}

/* -- the one shape of a mutation ----------------------------------------------- */

/* Loaded -> decide -> writable: 0 when op is to be committed or is
 * op->noop (nothing to change; op holds the results), else -errno.
 * decide NULL: always committed. */
static int mutate_decide(struct store *s, struct op *op, decide_fn decide)
{
	if (!atomic_load(&s->loaded))
		return -EIO;
	if (decide) {
		mirror_rdlock(s);
		int r = decide(s, op->vf[0] ? mirror_find(s, op->vf) : NULL, op);
		mirror_unlock(s);
		if (r < 0 || op->noop)
			return r;
	}
	/* only a change needs a writable store */
	return atomic_load(&s->available) ? 0 : -EIO;
}

/* mutate_decide() -> submit (store-internal.h). */
int mutate(struct store *s, struct op *op, decide_fn decide)
{
	int r = mutate_decide(s, op, decide);

	if (r < 0 || op->noop)
		return r;
	commit_submit(s, &op, 1);
	return op->rc;
}

/* -- VFs ------------------------------------------------------------------------ */

/* A mutation named by a VF address alone; a no-op succeeds. */
static int vf_action(struct store *s, enum op_kind kind, const char *vf, decide_fn decide)
{
	struct op op = { .kind = kind, .uid = -1 };

	if (!vf_address_valid(vf))
		return -EINVAL;
	copy_string(op.vf, sizeof(op.vf), vf);
	return mutate(s, &op, decide);
}

/* A reservation blocks unregistering like a claim (the SQL sees only claims). */
/* A reservation, or a cycle of its GPU (which checks every VF of it when
 * it ends), keeps a VF registered. */
static int decide_unregister(const struct store *s, const struct vf_entry *e, struct op *op)
{
	if (!e)
		return 0;
	return e->reservation || gpu_phase_locked(s, e->parent) == GPU_PHASE_RECOVERING ? -EBUSY :
											  0;
}

/* "" or NULL: unknown; else a VF address other than vf's. */
static int parent_check(const char *vf, const char *parent)
{
	if (!vf_address_valid(vf))
		return -EINVAL;
	if (!parent || !*parent)
		return 0;
	bool unchanged;
	if (!vf_address_valid(parent) || rule_parent_set(vf, "", parent, &unchanged) < 0)
		return -EINVAL;
	return 0;
}

int store_vf_register(struct store *s, const char *vf, const char *parent)
{
	struct op op = { .kind = OP_REGISTER, .uid = -1 };

	if (parent_check(vf, parent) < 0)
		return -EINVAL;
	copy_string(op.vf, sizeof(op.vf), vf);
	copy_string(op.parent, sizeof(op.parent), parent);
	return mutate(s, &op, NULL);
}

static int decide_parent(const struct store *s, const struct vf_entry *e, struct op *op)
{
	if (!e)
		return -ENOENT;
	return rule_parent_set(op->vf, e->parent, op->parent, &op->noop);
}

int store_vf_set_parent(struct store *s, const char *vf, const char *parent, bool *unchanged)
{
	struct op op = { .kind = OP_SET_PARENT };
	int r;

	if (!parent || !*parent || parent_check(vf, parent) < 0)
		return -EINVAL;
	copy_string(op.vf, sizeof(op.vf), vf);
	copy_string(op.parent, sizeof(op.parent), parent);
	if ((r = mutate(s, &op, decide_parent)) < 0)
		return r;
	if (unchanged)
		*unchanged = op.noop;
	return 0;
}

int store_vf_unregister(struct store *s, const char *vf)
{
	return vf_action(s, OP_UNREGISTER, vf, decide_unregister);
}

/* Copy a VF's entry, by address (vf non-NULL) or by id, from the mirror. */
static int vf_read(struct store *s, const char *vf, uint64_t id, struct store_vf_info *ret)
{
	mirror_rdlock(s);
	struct vf_entry *e = vf ? mirror_find(s, vf) : mirror_find_by_id(s, id);
	if (e)
		mirror_fill_info(s, e, ret);
	mirror_unlock(s);
	return e ? 0 : -ENOENT;
}

int store_vf_get(struct store *s, const char *vf, enum store_read how, struct store_vf_info *ret)
{
	int r;

	if (!vf_address_valid(vf) || !ret)
		return -EINVAL;
	if ((r = read_ready(s, how)) < 0)
		return r;
	return vf_read(s, vf, 0, ret);
}

int store_vf_set_absent(struct store *s, const char *vf, bool absent, bool *changed)
{
	struct store_change change = { .bits = STORE_CHANGE_VFS };
	bool was = absent;
	int r = 0;

	if (!s || !vf_address_valid(vf))
		return -EINVAL;
	pthread_rwlock_rdlock(&s->index_lock);
	pthread_rwlock_wrlock(&s->mirror_lock);
	struct vf_entry *e = mirror_find(s, vf);
	if (e) {
		was = e->absent;
		e->absent = absent;
		copy_string(change.vf, sizeof(change.vf), vf);
		change.vf_id = e->id;
		copy_string(change.parent, sizeof(change.parent), e->parent);
	} else {
		r = -ENOENT;
	}
	pthread_rwlock_unlock(&s->mirror_lock);
	pthread_rwlock_unlock(&s->index_lock);
	if (changed)
		*changed = was != absent;
	if (was != absent)
		commit_publish(s, &change); /* allocatable changed */
	return r;
}

int store_vf_get_by_id(struct store *s, uint64_t id, struct store_vf_info *ret)
{
	if (!ret)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	return vf_read(s, NULL, id, ret);
}

int store_vf_list(struct store *s, struct store_vf_info **ret, size_t *count)
{
	if (!ret || !count)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	struct store_vf_info *list = calloc(MAX(s->n_vfs, (size_t)1), sizeof(*list));
	size_t n = list ? s->n_vfs : 0;
	for (size_t i = 0; i < n; i++)
		mirror_fill_info(s, s->by_addr[i], &list[i]);
	mirror_unlock(s);
	if (!list)
		return -ENOMEM;
	*ret = list;
	*count = n;
	return 0;
}

static bool listed_out_of_service(const struct store *s, const struct vf_entry *e)
{
	return rule_out_of_service(e->quarantined, e->held);
}

static bool listed_held_back(const struct store *s, const struct vf_entry *e)
{
	return rule_held_back(e->quarantined, e->held, e->n_failures, s->threshold);
}

/* The VFs `pick` selects, sorted; `expected` (a count the mirror keeps)
 * sizes the list. */
static int vf_select(struct store *s, const size_t *expected,
		     bool (*pick)(const struct store *, const struct vf_entry *),
		     enum store_read how, char (**ret)[VF_ADDR_BUFSZ], size_t *count)
{
	int r;

	if (!ret || !count)
		return -EINVAL;
	if ((r = read_ready(s, how)) < 0)
		return r;
	mirror_rdlock(s);
	size_t cap = *expected;
	char(*list)[VF_ADDR_BUFSZ] = calloc(MAX(cap, (size_t)1), sizeof(*list));
	size_t n = 0;
	for (size_t i = 0; list && i < s->n_vfs && n < cap; i++)
		if (pick(s, s->by_addr[i]))
			memcpy(list[n++], s->by_addr[i]->addr, VF_ADDR_BUFSZ);
	mirror_unlock(s);
	if (!list)
		return -ENOMEM;
	*ret = list;
	*count = n;
	return 0;
}

int store_quarantined_list(struct store *s, enum store_read how, char (**ret)[VF_ADDR_BUFSZ],
			   size_t *count)
{
	return vf_select(s, &s->n_out_of_service, listed_out_of_service, how, ret, count);
}

int store_held_back_list(struct store *s, enum store_read how, char (**ret)[VF_ADDR_BUFSZ],
			 size_t *count)
{
	return vf_select(s, &s->n_held_back, listed_held_back, how, ret, count);
}

/* The allocatable VFs in placement order (placement.c): what placement
 * needs of each VF is copied under the mirror's lock, the order is drawn
 * without it. */
int store_allocatable_list(struct store *s, enum store_read how, struct store_placement **ret,
			   size_t *count)
{
	_cleanup_free_ struct placement_vf *vfs = NULL;
	_cleanup_free_ struct store_placement *list = NULL;
	uint64_t seed;
	size_t n = 0;
	int r;

	if (!ret || !count)
		return -EINVAL;
	if ((r = read_ready(s, how)) < 0)
		return r;
	if ((r = placement_seed(&seed)) < 0)
		return r;
	enum store_mode mode = (enum store_mode)atomic_load(&s->mode);
	mirror_rdlock(s);
	vfs = calloc(MAX(s->n_vfs, (size_t)1), sizeof(*vfs));
	list = calloc(MAX(s->n_vfs, (size_t)1), sizeof(*list));
	for (size_t i = 0; vfs && list && i < s->n_vfs; i++) {
		const struct vf_entry *e = s->by_addr[i];
		if (gpu_refuses_claims_locked(s, e->parent) || e->absent)
			continue; /* its GPU is drained, or it is gone: no candidate, in any mode */
		memcpy(vfs[n].vf, e->addr, VF_ADDR_BUFSZ);
		memcpy(vfs[n].parent, e->parent, VF_ADDR_BUFSZ);
		vfs[n].out_of_service = listed_out_of_service(s, e);
		vfs[n].claimed = e->claim || e->reservation; /* a reservation is taken */
		vfs[n].held_back = listed_held_back(s, e);
		vfs[n].suspect = e->suspect_since[0] != '\0';
		vfs[n].failing = e->n_failures > 0; /* below the threshold when in service */
		vfs[n].probation = e->probation_since[0] != '\0';
		n++;
	}
	mirror_unlock(s);
	if (!vfs || !list)
		return -ENOMEM;
	if ((r = placement_order(mode, vfs, n, seed, list, count)) < 0)
		return r;
	*ret = move_ptr(list);
	return 0;
}

/* -- settings ------------------------------------------------------------------- */

static int setting_get(struct store *s, const int *field)
{
	if (!atomic_load(&s->loaded))
		return -EIO;
	pthread_rwlock_rdlock(&s->mirror_lock);
	int v = *field;
	pthread_rwlock_unlock(&s->mirror_lock);
	return v;
}

static int decide_setting(const struct store *s, const struct vf_entry *e, struct op *op)
{
	int current = op->kind == OP_THRESHOLD ? s->threshold : s->max_quarantined;

	op->noop = current == op->value;
	return 0;
}

static int setting_set(struct store *s, enum op_kind kind, int value)
{
	struct op op = { .kind = kind, .value = value };
	return mutate(s, &op, decide_setting);
}

int store_threshold_get(struct store *s)
{
	return setting_get(s, &s->threshold);
}

int store_threshold_set(struct store *s, int threshold)
{
	if (threshold < THRESHOLD_MIN || threshold > THRESHOLD_MAX)
		return -EINVAL;
	return setting_set(s, OP_THRESHOLD, threshold);
}

int store_max_quarantined_get(struct store *s)
{
	return setting_get(s, &s->max_quarantined);
}

int store_max_quarantined_set(struct store *s, int max_quarantined)
{
	if (max_quarantined < 0 || max_quarantined > VFS_MAX)
		return -EINVAL;
	return setting_set(s, OP_MAX_QUARANTINED, max_quarantined);
}

int atomic_setting_get(struct store *s, const atomic_int *field)
{
	if (!atomic_load(&s->loaded))
		return -EIO;
	return atomic_load(field);
}

int decide_atomic_setting(const struct store *s, const struct vf_entry *e, struct op *op)
{
	const atomic_int *field = op->kind == OP_MODE ? &s->mode : &s->auto_recover;

	op->noop = atomic_load(field) == op->value;
	return 0;
}

int store_mode_get(struct store *s)
{
	return atomic_setting_get(s, &s->mode);
}

int store_mode_set(struct store *s, enum store_mode mode)
{
	struct op op = { .kind = OP_MODE, .value = (int)mode };

	if (mode != STORE_MODE_ENFORCE && mode != STORE_MODE_OBSERVE)
		return -EINVAL;
	return mutate(s, &op, decide_atomic_setting);
}

/* -- reports ---------------------------------------------------------------------- */

/* A report's op: -EINVAL unless vf, instance_id and assigned_at (optional,
 * normalized into op->when) are well formed. */
static int report_op(struct op *op, const char *vf, const char *instance_id,
		     const char *assigned_at)
{
	if (!vf_address_valid(vf) || !instance_id_valid(instance_id) ||
	    rfc3339_normalize_optional(assigned_at, op->when) < 0)
		return -EINVAL;
	copy_string(op->vf, sizeof(op->vf), vf);
	copy_string(op->instance_id, sizeof(op->instance_id), instance_id);
	return 0;
}

static int decide_failure(const struct store *s, const struct vf_entry *e, struct op *op)
{
	if (!e)
		return -ENOENT;
	op->failure = (struct store_failure_result){ .outcome = STORE_OUTCOME_UNCHANGED,
						     .tally = (unsigned)e->n_failures,
						     .threshold = s->threshold };
	bool out = rule_out_of_service(e->quarantined, e->held);
	bool duplicate = !out && mirror_failure_recorded(e, op->instance_id, op->when);
	op->noop = rule_failure_unchanged(out, duplicate);
	return 0;
}

static void failure_counted(struct store *s, const struct store_failure_result *res)
{
	atomic_fetch_add(&s->failed_reports[res->outcome], 1);
	if (res->suspect_confirmed)
		atomic_fetch_add(&s->suspect_confirmed, 1);
}

int store_report_failure(struct store *s, const char *vf, const char *instance_id,
			 const char *assigned_at, const char *message,
			 struct store_failure_result *ret)
{
	struct op op = { .kind = OP_FAILURE, .uid = -1 };
	char clean_message[FAILURE_MESSAGE_MAX + 1];
	int r;

	if ((r = report_op(&op, vf, instance_id, assigned_at)) < 0)
		return r;
	message_sanitize(message, clean_message);
	op.message = clean_message;
	if ((r = mutate(s, &op, decide_failure)) < 0)
		return r;
	failure_counted(s, &op.failure);
	if (ret)
		*ret = op.failure;
	return 0;
}

/* A queued failure report: the op and what it points to, until answered. */
struct failure_submitted {
	struct op op;
	char message[FAILURE_MESSAGE_MAX + 1];
	store_failure_done_fn done;
	void *userdata;
};

static void failure_answer(struct store *s, struct op *op)
{
	struct failure_submitted *f = container_of(op, struct failure_submitted, op);

	if (op->rc == 0)
		failure_counted(s, &op->failure);
	f->done(f->userdata, op->rc, &op->failure);
	free(f);
}

int store_report_failure_submit(struct store *s, const char *vf, const char *instance_id,
				const char *assigned_at, const char *message,
				store_failure_done_fn done, void *userdata)
{
	int r;

	if (!s || !done)
		return -EINVAL;
	/* a hint, so that a lone report allocates nothing: commit_join decides */
	if (!store_commit_under_way(s))
		return -EAGAIN;
	_cleanup_free_ struct failure_submitted *f = calloc(1, sizeof(*f));
	if (!f)
		return -EAGAIN; /* the caller's own call needs no allocation */
	f->op = (struct op){ .kind = OP_FAILURE, .uid = -1, .answer = failure_answer };
	if ((r = report_op(&f->op, vf, instance_id, assigned_at)) < 0)
		return r;
	message_sanitize(message, f->message);
	f->op.message = f->message;
	f->done = done;
	f->userdata = userdata;
	if ((r = mutate_decide(s, &f->op, decide_failure)) < 0)
		return r;
	if (f->op.noop)
		return -EAGAIN; /* answered from the state, on the caller's thread */
	if ((r = commit_join(s, &f->op)) < 0)
		return r;
	f = NULL; /* the answerer's now: failure_answer() frees it */
	atomic_fetch_add(&s->reports_joined, 1);
	return 0;
}

static int decide_success(const struct store *s, const struct vf_entry *e, struct op *op)
{
	if (!e)
		return -ENOENT;
	op->noop = !mirror_failure_recorded(e, op->instance_id, op->when) && !e->suspect_since[0] &&
		   !e->probation_since[0];
	return 0;
}

int store_report_success(struct store *s, const char *vf, const char *instance_id,
			 const char *assigned_at, int64_t uid, struct store_success_result *ret)
{
	struct op op = { .kind = OP_SUCCESS, .uid = uid };
	int r;

	if ((r = report_op(&op, vf, instance_id, assigned_at)) < 0)
		return r;
	if (!atomic_load(&s->loaded))
		return -EIO;

	/* fast path: the index's read side and one atomic load; no lock a
	 * commit, claim or failure report holds, no SQLite */
	pthread_rwlock_rdlock(&s->index_lock);
	struct vf_entry *e = mirror_find(s, vf);
	unsigned failures = e ? atomic_load(&e->failure_count) : 0;
	bool suspect = e && (atomic_load(&e->suspect) || atomic_load(&e->probation));
	pthread_rwlock_unlock(&s->index_lock);
	if (!e)
		return -ENOENT;

	op.noop = true;
	if ((failures > 0 || suspect) && (r = mutate(s, &op, decide_success)) < 0)
		return r;
	if (op.noop || !op.success.cleared) {
		atomic_fetch_add(&s->ok_reports_noop, 1);
		op.success.cleared = 0;
		op.success.rescinded = false;
	} else {
		atomic_fetch_add(&s->ok_reports_cleared, 1);
	}
	if (op.noop)
		op.success.suspect_cleared = op.success.probation_ended = false;
	if (op.success.suspect_cleared)
		atomic_fetch_add(&s->suspect_cleared, 1);
	if (ret)
		*ret = op.success;
	return 0;
}

/* -- operator actions ------------------------------------------------------------- */

static int decide_operator(const struct store *s, const struct vf_entry *e, struct op *op)
{
	if (!e)
		return -ENOENT;
	op->noop = op->kind == OP_MANUAL ?
			   rule_hold_unchanged(e->held) :
			   rule_clear_unchanged(e->quarantined, e->held, e->n_failures,
						e->suspect_since[0] != '\0',
						e->probation_since[0] != '\0');
	op->operator=(struct store_operator_result){
		.unchanged = op->noop,
		.held = e->held,
		.auto_quarantined = e->quarantined,
		.quarantined = rule_out_of_service(e->quarantined, e->held),
		.tally = (unsigned)e->n_failures,
		.suspect = e->suspect_since[0] != '\0',
		.probation = e->probation_since[0] != '\0',
	};
	return 0;
}

static int operator_action(struct store *s, enum op_kind kind, const char *vf, int64_t uid,
			   struct store_operator_result *ret)
{
	struct op op = { .kind = kind, .uid = uid };
	int r;

	if (!vf_address_valid(vf))
		return -EINVAL;
	copy_string(op.vf, sizeof(op.vf), vf);
	if ((r = mutate(s, &op, decide_operator)) < 0)
		return r;
	if (kind == OP_CLEAR && !op.operator.unchanged && op.operator.suspect)
		atomic_fetch_add(&s->suspect_cleared, 1);
	if (ret)
		*ret = op.operator;
	return 0;
}

int store_quarantine_manual(struct store *s, const char *vf, int64_t uid,
			    struct store_operator_result *ret)
{
	return operator_action(s, OP_MANUAL, vf, uid, ret);
}

int store_clear(struct store *s, const char *vf, int64_t uid, struct store_operator_result *ret)
{
	return operator_action(s, OP_CLEAR, vf, uid, ret);
}

/* -- counters ---------------------------------------------------------------------- */

void store_get_stats(struct store *s, struct store_stats *ret)
{
	memset(ret, 0, sizeof(*ret));
	mirror_rdlock(s);
	size_t both = 0, drained = 0;
	for (size_t i = 0; i < s->n_vfs; i++) {
		const struct vf_entry *e = s->by_addr[i];
		bool out = listed_out_of_service(s, e), claimed = e->claim || e->reservation;
		both += out && claimed;
		/* a VF of a drained GPU, or an absent one, that would otherwise
		 * be allocatable */
		drained += !out && !claimed &&
			   (gpu_refuses_claims_locked(s, e->parent) || e->absent);
	}
	ret->vfs = s->n_vfs;
	ret->quarantined = s->n_out_of_service;
	ret->held = s->n_held;
	ret->held_back = s->n_held_back;
	ret->suspect = s->n_suspect;
	ret->probation = s->n_probation;
	ret->claimed = s->n_claimed;
	ret->available = atomic_load(&s->available);
	/* what enforcement would allocate, in observe mode too (resources) */
	ret->allocatable = ret->available ?
				   s->n_vfs - s->n_out_of_service - s->n_claimed + both - drained :
				   0;
	ret->breaker_engaged = mirror_breaker_engaged(s);
	mirror_unlock(s);
	for (size_t i = 0; i < ARRAY_SIZE(ret->failed_reports); i++)
		ret->failed_reports[i] = atomic_load(&s->failed_reports[i]);
	ret->ok_reports_cleared = atomic_load(&s->ok_reports_cleared);
	ret->ok_reports_noop = atomic_load(&s->ok_reports_noop);
	ret->suspect_confirmed = atomic_load(&s->suspect_confirmed);
	ret->suspect_cleared = atomic_load(&s->suspect_cleared);
	ret->commits = atomic_load(&s->commits);
	ret->reports_joined = atomic_load(&s->reports_joined);
	ret->commit_failures = atomic_load(&s->commit_failures);
	ret->repairs = atomic_load(&s->repairs);
}
