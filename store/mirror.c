/* SPDX-License-Identifier: MIT */
/*
 * mirror.c - the store's in-memory mirror of the committed database: the VF
 * index (by address and by id), each VF's compact failure keys and live
 * claim, the counts, and applying a committed batch or a whole load to it.
 * Locks and what they guard: store-internal.h.
 *
 * The mirror keeps per failure only what decisions need (row id, instance
 * id, assigned_at as seconds + nanoseconds: struct failure_key, about 24
 * bytes plus the id); the messages stay in SQLite (listing.c).
 *
 * Breaker.  stats.breaker_engaged is derived from the mirror's counts
 * (rule_breaker_engaged), so it needs no persisted state and survives a
 * restart.  It counts automatic quarantines only (n_quarantined), never
 * operator holds.  Lifting a quarantine does not by itself quarantine a held-back
 * VF (its next failure report, or a re-evaluation, does).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/rules.h"
#include "store/store-internal.h"

/* -- compact failure keys ----------------------------------------------------- */

/* assigned_at text -> its key.  "" is ASSIGNED_UNKNOWN.  Canonical text
 * (rfc3339_normalize's output, fixed width, so one instant has exactly one
 * spelling) maps one-to-one onto (seconds, nanoseconds): comparing keys is
 * comparing the text, as SQL's "assigned_at = ?" does.  Anything else (a
 * hand-edited row) is ASSIGNED_FOREIGN, which matches nothing, as SQL would
 * never match it against canonical input either. */
static void assigned_key(const char *text, int64_t *sec, uint32_t *nsec)
{
	if (!*text) {
		*sec = 0;
		*nsec = ASSIGNED_UNKNOWN;
	} else if (rfc3339_canonical_split(text, sec, nsec) < 0) {
		*sec = 0;
		*nsec = ASSIGNED_FOREIGN;
	}
}

static bool failure_key_matches(const struct failure_key *k, const char *ids,
				const char *instance_id, int64_t sec, uint32_t nsec)
{
	return k->assigned_nsec != ASSIGNED_FOREIGN && k->assigned_nsec == nsec &&
	       k->assigned_sec == sec && strcmp(ids + k->instance_off, instance_id) == 0;
}

/* Collects one VF's keys (in any order) and ids in growable scratch buffers;
 * failure_block_finish() packs them, oldest first, into one exact block. */
int failure_builder_push(struct failure_builder *b, int64_t row_id, const char *instance_id,
			 size_t instance_len, const char *assigned_at)
{
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 64;
		struct failure_key *keys = reallocarray(b->keys, cap, sizeof(*keys));
		if (!keys)
			return -ENOMEM;
		b->keys = keys;
		b->cap = cap;
	}
	if (b->used > UINT32_MAX - instance_len - 1)
		return -EOVERFLOW; /* 4 GiB of ids for one VF: not what this code writes */
	if (b->ids_cap - b->used < instance_len + 1) {
		size_t cap = MAX(b->ids_cap ? 2 * b->ids_cap : 1024, b->used + instance_len + 1);
		char *ids = realloc(b->ids, cap);
		if (!ids)
			return -ENOMEM;
		b->ids = ids;
		b->ids_cap = cap;
	}
	struct failure_key *k = &b->keys[b->n++];
	k->row_id = row_id;
	assigned_key(assigned_at, &k->assigned_sec, &k->assigned_nsec);
	k->instance_off = (uint32_t)b->used;
	memcpy(b->ids + b->used, instance_id, instance_len);
	b->ids[b->used + instance_len] = '\0';
	b->used += instance_len + 1;
	return 0;
}

int failure_builder_push_key(struct failure_builder *b, const struct failure_key *k,
			     const char *instance_id)
{
	size_t len = strlen(instance_id);
	int r = failure_builder_push(b, k->row_id, instance_id, len, "");

	if (r == 0) {
		b->keys[b->n - 1].assigned_sec = k->assigned_sec;
		b->keys[b->n - 1].assigned_nsec = k->assigned_nsec;
	}
	return r;
}

/* Into an empty builder: a packed block's n keys and their ids, whole (the
 * ids' offsets stay valid: they start at 0 in both). */
static int failure_builder_copy_block(struct failure_builder *b, const struct failure_key *keys,
				      const char *ids, size_t n)
{
	size_t end = 0, used;

	for (size_t i = 1; i < n; i++) /* the ids are in no particular order */
		if (keys[i].instance_off > keys[end].instance_off)
			end = i;
	used = keys[end].instance_off + strlen(ids + keys[end].instance_off) + 1;
	if (b->cap < n) {
		struct failure_key *k = reallocarray(b->keys, n, sizeof(*k));
		if (!k)
			return -ENOMEM;
		b->keys = k;
		b->cap = n;
	}
	if (b->ids_cap < used) {
		char *v = realloc(b->ids, used);
		if (!v)
			return -ENOMEM;
		b->ids = v;
		b->ids_cap = used;
	}
	memcpy(b->keys, keys, n * sizeof(*keys));
	memcpy(b->ids, ids, used);
	b->n = n;
	b->used = used;
	return 0;
}

static int compare_row_id(const void *a, const void *b)
{
	const struct failure_key *x = a, *y = b;

	return x->row_id < y->row_id ? -1 : x->row_id > y->row_id;
}

/* Pack the collected keys into one block (NULL when none) and empty the
 * builder for the next VF, keeping its buffers. */
int failure_block_finish(struct failure_builder *b, struct failure_key **ret, const char **ret_ids,
			 size_t *ret_n)
{
	*ret = NULL;
	*ret_ids = NULL;
	*ret_n = 0;
	if (b->n == 0)
		return 0;
	/* Usually sorted already (the mirror's keys, then appended rows). */
	for (size_t i = 1; i < b->n; i++)
		if (b->keys[i - 1].row_id > b->keys[i].row_id) {
			qsort(b->keys, b->n, sizeof(*b->keys), compare_row_id);
			break;
		}
	struct failure_key *block = malloc(b->n * sizeof(*block) + b->used);
	if (!block)
		return -ENOMEM;
	memcpy(block, b->keys, b->n * sizeof(*block));
	memcpy((char *)(block + b->n), b->ids, b->used);
	*ret = block;
	*ret_ids = (const char *)(block + b->n);
	*ret_n = b->n;
	b->n = b->used = 0;
	return 0;
}

void failure_builder_free(struct failure_builder *b)
{
	free(b->keys);
	free(b->ids);
	memset(b, 0, sizeof(*b));
}

/* assigned_at is canonical or "" (rfc3339_normalize_optional). */
bool mirror_failure_recorded(const struct vf_entry *e, const char *instance_id,
			     const char *assigned_at)
{
	int64_t sec;
	uint32_t nsec;

	assigned_key(assigned_at, &sec, &nsec);
	for (size_t i = 0; i < e->n_failures; i++)
		if (failure_key_matches(&e->failures[i], e->failure_ids, instance_id, sec, nsec))
			return true;
	return false;
}

/* -- the index (callers hold index_lock) ------------------------------------- */

struct vf_entry *mirror_find(struct store *s, const char *addr)
{
	size_t lo = 0, hi = s->n_vfs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int cmp = strcmp(s->by_addr[mid]->addr, addr);
		if (cmp == 0)
			return s->by_addr[mid];
		if (cmp < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static size_t addr_insert_pos(struct store *s, const char *addr)
{
	size_t lo = 0, hi = s->n_vfs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (strcmp(s->by_addr[mid]->addr, addr) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static size_t id_insert_pos(struct store *s, uint64_t id)
{
	size_t lo = 0, hi = s->n_vfs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->by_id[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

struct vf_entry *mirror_find_by_id(struct store *s, uint64_t id)
{
	size_t pos = id_insert_pos(s, id);

	return pos < s->n_vfs && s->by_id[pos]->id == id ? s->by_id[pos] : NULL;
}

int mirror_failure_count(struct store *s, uint64_t id, uint64_t *ret)
{
	struct vf_entry *e;

	pthread_rwlock_rdlock(&s->index_lock);
	e = mirror_find_by_id(s, id);
	if (e)
		*ret = atomic_load(&e->failure_count);
	pthread_rwlock_unlock(&s->index_lock);
	return e ? 0 : -ENOENT;
}

void vf_entry_free(struct vf_entry *e)
{
	if (!e)
		return;
	free(e->failures);
	free(e->claim);
	free(e->reservation);
	free(e);
}

static bool entry_held_back(const struct store *s, const struct vf_entry *e)
{
	return rule_held_back(e->quarantined, e->held, e->n_failures, s->threshold);
}

static bool entry_out_of_service(const struct vf_entry *e)
{
	return rule_out_of_service(e->quarantined, e->held);
}

/* Counts follow the entries: subtract before changing one, add after. */
static void counts_sub(struct store *s, const struct vf_entry *e)
{
	s->n_quarantined -= e->quarantined;
	s->n_held -= e->held;
	s->n_out_of_service -= entry_out_of_service(e);
	s->n_claimed -= e->claim || e->reservation;
	s->n_held_back -= entry_held_back(s, e);
	s->n_suspect -= e->suspect_since[0] != '\0';
	s->n_probation -= e->probation_since[0] != '\0';
}

static void counts_add(struct store *s, const struct vf_entry *e)
{
	s->n_quarantined += e->quarantined;
	s->n_held += e->held;
	s->n_out_of_service += entry_out_of_service(e);
	s->n_claimed += e->claim || e->reservation;
	s->n_held_back += entry_held_back(s, e);
	s->n_suspect += e->suspect_since[0] != '\0';
	s->n_probation += e->probation_since[0] != '\0';
}

static void counts_recompute(struct store *s)
{
	s->n_quarantined = s->n_held = s->n_out_of_service = s->n_claimed = s->n_held_back = 0;
	s->n_suspect = 0;
	s->n_probation = 0;
	for (size_t i = 0; i < s->n_vfs; i++)
		counts_add(s, s->by_addr[i]);
}

bool mirror_breaker_engaged(const struct store *s)
{
	return rule_breaker_engaged(s->max_quarantined, s->n_quarantined, s->n_held_back);
}

void mirror_clear(struct store *s)
{
	for (size_t i = 0; i < s->n_vfs; i++)
		vf_entry_free(s->by_addr[i]);
	free(s->by_addr);
	free(s->by_id);
	s->by_addr = s->by_id = NULL;
	s->n_vfs = s->cap_vfs = 0;
}

int mirror_reserve(struct store *s, size_t want)
{
	if (want <= s->cap_vfs)
		return 0;
	size_t cap = MAX(want, MAX(s->cap_vfs * 2, (size_t)16));
	struct vf_entry **a = realloc(s->by_addr, cap * sizeof(*a));
	if (!a)
		return -ENOMEM;
	s->by_addr = a;
	struct vf_entry **b = realloc(s->by_id, cap * sizeof(*b));
	if (!b)
		return -ENOMEM;
	s->by_id = b;
	s->cap_vfs = cap;
	return 0;
}

/* Insert a new entry; the caller reserved room. */
static void index_insert(struct store *s, struct vf_entry *e)
{
	size_t pa = addr_insert_pos(s, e->addr), pi = id_insert_pos(s, e->id);

	memmove(&s->by_addr[pa + 1], &s->by_addr[pa], (s->n_vfs - pa) * sizeof(*s->by_addr));
	s->by_addr[pa] = e;
	memmove(&s->by_id[pi + 1], &s->by_id[pi], (s->n_vfs - pi) * sizeof(*s->by_id));
	s->by_id[pi] = e;
	s->n_vfs++;
}

static void index_remove(struct store *s, struct vf_entry *e)
{
	size_t pa = addr_insert_pos(s, e->addr), pi = id_insert_pos(s, e->id);

	memmove(&s->by_addr[pa], &s->by_addr[pa + 1], (s->n_vfs - pa - 1) * sizeof(*s->by_addr));
	memmove(&s->by_id[pi], &s->by_id[pi + 1], (s->n_vfs - pi - 1) * sizeof(*s->by_id));
	s->n_vfs--;
}

int mirror_copy_failures(struct store *s, const char *addr, uint64_t id, struct failure_builder *b)
{
	struct vf_entry *e;
	int r = 0;

	mirror_rdlock(s);
	e = mirror_find(s, addr);
	if (!e || e->id != id)
		r = -ENOENT;
	else if (b->n == 0 && e->n_failures)
		r = failure_builder_copy_block(b, e->failures, e->failure_ids, e->n_failures);
	else
		for (size_t i = 0; r == 0 && i < e->n_failures; i++)
			r = failure_builder_push_key(b, &e->failures[i],
						     e->failure_ids + e->failures[i].instance_off);
	mirror_unlock(s);
	return r;
}

void snapshot_release(struct vf_snapshot *snap)
{
	free(snap->failures);
	free(snap->claim);
	snap->failures = NULL;
	snap->failure_ids = NULL;
	snap->claim = NULL;
}

void mirror_fill_info(const struct store *s, const struct vf_entry *e, struct store_vf_info *info)
{
	memset(info, 0, sizeof(*info));
	copy_string(info->vf, sizeof(info->vf), e->addr);
	info->id = e->id;
	info->tally = (unsigned)e->n_failures;
	info->quarantined = entry_out_of_service(e);
	info->auto_quarantined = e->quarantined;
	info->held = e->held;
	info->suspect = e->suspect_since[0] != '\0';
	info->probation = e->probation_since[0] != '\0';
	info->state = rule_vf_state(e->quarantined, e->held, e->n_failures, s->threshold,
				    info->suspect, info->probation);
	if (info->quarantined)
		memcpy(info->since, e->since, sizeof(info->since));
	else if (info->state == STORE_VF_SUSPECT)
		memcpy(info->since, e->suspect_since, sizeof(info->since));
	else if (info->state == STORE_VF_PROBATION)
		memcpy(info->since, e->probation_since, sizeof(info->since));
	info->claimed = e->claim || e->reservation; /* placement: a reservation is taken */
	copy_string(info->parent, sizeof(info->parent), e->parent); /* no bytes past the NUL */
}

/* The instance holding e: its claim's, or its reservation's; NULL when free. */
const char *mirror_holder(const struct vf_entry *e)
{
	return e->claim       ? e->claim->a.instance_id :
	       e->reservation ? e->reservation->a.instance_id :
				NULL;
}

/* The one place a VF's reservation changes state (rule_reservation_next):
 * 0, or -EINVAL for no transition (nothing changes).  MADE takes res; a
 * transition to NONE hands the reservation back in *gone (to free after
 * the locks are dropped), NULL otherwise.  Under mirror_lock's write side. */
static int reservation_apply(struct vf_entry *e, enum reservation_event ev, struct store_claim *res,
			     struct store_claim **gone)
{
	int next = rule_reservation_next(e->reservation_state, ev);

	*gone = NULL;
	if (next < 0)
		return next;
	if (ev == RESERVATION_MADE)
		e->reservation = res;
	else if (next == RESERVATION_NONE)
		*gone = move_ptr(e->reservation);
	e->reservation_state = (enum reservation_state)next;
	return 0;
}

int mirror_reservation_add(struct store *s, struct store_claim *res)
{
	pthread_rwlock_rdlock(&s->index_lock);
	pthread_rwlock_wrlock(&s->mirror_lock);
	struct vf_entry *e = mirror_find(s, res->a.vf);
	int r = e ? rule_claim_refusal((enum store_mode)atomic_load(&s->mode),
				       rule_out_of_service(e->quarantined, e->held),
				       mirror_holder(e), res->a.instance_id) :
		    -ENOENT;

	if (r == 0 && gpu_refuses_claims_locked(s, e->parent))
		r = -EBUSY; /* its GPU is drained: a drain is the operator's, in any mode */
	if (r == 0 && e->absent)
		r = -EBUSY; /* sysfs no longer shows it (store_vf_set_absent) */

	if (r == 0 && !atomic_load(&s->available))
		r = -EIO; /* it could not be committed */
	if (r == 0) {
		struct store_claim *gone;

		counts_sub(s, e);
		r = reservation_apply(e, RESERVATION_MADE, res, &gone);
		if (r == 0)
			res->id = s->next_claim_id++;
		counts_add(s, e);
	}
	pthread_rwlock_unlock(&s->mirror_lock);
	pthread_rwlock_unlock(&s->index_lock);
	return r;
}

int mirror_reservation_orphan(struct store *s, const char *vf, uint64_t id)
{
	int r = -ENOENT;

	pthread_rwlock_rdlock(&s->index_lock);
	pthread_rwlock_wrlock(&s->mirror_lock);
	struct vf_entry *e = mirror_find(s, vf);
	if (e && e->reservation && e->reservation->id == id) {
		struct store_claim *gone;

		r = reservation_apply(e, RESERVATION_ABANDONED, NULL, &gone);
	}
	pthread_rwlock_unlock(&s->mirror_lock);
	pthread_rwlock_unlock(&s->index_lock);
	return r;
}

bool mirror_reservation_drop(struct store *s, const char *vf, uint64_t id,
			     char parent[static VF_ADDR_BUFSZ])
{
	struct store_claim *dropped = NULL;
	bool was = false;

	pthread_rwlock_rdlock(&s->index_lock);
	pthread_rwlock_wrlock(&s->mirror_lock);
	struct vf_entry *e = mirror_find(s, vf);
	if (e && e->reservation && e->reservation->id == id) {
		counts_sub(s, e);
		was = reservation_apply(e, RESERVATION_CANCELLED, NULL, &dropped) >= 0;
		counts_add(s, e);
		copy_string(parent, VF_ADDR_BUFSZ, e->parent);
	}
	pthread_rwlock_unlock(&s->mirror_lock);
	pthread_rwlock_unlock(&s->index_lock);
	free(dropped);
	return was;
}

void mirror_rdlock(struct store *s)
{
	pthread_rwlock_rdlock(&s->index_lock);
	pthread_rwlock_rdlock(&s->mirror_lock);
}

void mirror_unlock(struct store *s)
{
	pthread_rwlock_unlock(&s->mirror_lock);
	pthread_rwlock_unlock(&s->index_lock);
}

/* Apply a committed batch to the mirror.  Returns STORE_CHANGE_BREAKER
 * and/or STORE_CHANGE_HELD_BACK when those changed. */
unsigned mirror_apply(struct store *s, struct vf_snapshot *snaps, struct vf_entry **spares,
		      size_t n, int threshold, int max_quarantined, bool structural)
{
	bool held_back_changed = false;

	if (structural)
		pthread_rwlock_wrlock(&s->index_lock);
	else
		pthread_rwlock_rdlock(&s->index_lock);
	pthread_rwlock_wrlock(&s->mirror_lock);
	bool breaker_before = mirror_breaker_engaged(s);

	for (size_t i = 0; i < n; i++) {
		struct vf_snapshot *snap = &snaps[i];
		struct vf_entry *e = mirror_find(s, snap->addr);
		bool was_held_back = e && entry_held_back(s, e);
		if (!snap->exists) {
			if (e) {
				counts_sub(s, e);
				index_remove(s, e);
				vf_entry_free(e);
			}
			continue;
		}
		if (!e) {
			e = spares[i];
			spares[i] = NULL;
			copy_string(e->addr, sizeof(e->addr), snap->addr);
			e->id = snap->id;
			index_insert(s, e);
		} else {
			counts_sub(s, e);
			free(e->failures);
			free(e->claim);
		}
		e->quarantined = snap->quarantined;
		e->held = snap->held;
		memcpy(e->since, snap->since, sizeof(e->since));
		memcpy(e->parent, snap->parent, sizeof(e->parent));
		memcpy(e->suspect_since, snap->suspect_since, sizeof(e->suspect_since));
		memcpy(e->probation_since, snap->probation_since, sizeof(e->probation_since));
		e->failures = snap->failures;
		e->failure_ids = snap->failure_ids;
		e->n_failures = snap->n_failures;
		e->claim = snap->claim;
		/* a committed reservation is the claim now */
		if (e->reservation && e->claim && e->claim->id == e->reservation->id) {
			struct store_claim *gone;

			(void)reservation_apply(e, RESERVATION_COMMITTED, NULL, &gone);
			free(gone);
		}
		snap->failures = NULL;
		snap->claim = NULL;
		atomic_store(&e->failure_count, (unsigned)e->n_failures);
		atomic_store(&e->suspect, e->suspect_since[0] != '\0');
		atomic_store(&e->probation, e->probation_since[0] != '\0');
		counts_add(s, e);
		held_back_changed |= was_held_back != entry_held_back(s, e);
	}
	bool threshold_changed = s->threshold != threshold;
	size_t held_back_before = s->n_held_back;
	s->threshold = threshold;
	s->max_quarantined = max_quarantined;
	if (threshold_changed) {
		counts_recompute(s);
		/* a new threshold may move VFs in and out of the set; only the
		 * count is known cheaply, so say it changed unless both are 0 */
		held_back_changed |= held_back_before != 0 || s->n_held_back != 0;
	}
	unsigned changes = breaker_before != mirror_breaker_engaged(s) ? STORE_CHANGE_BREAKER : 0;
	if (held_back_changed)
		changes |= STORE_CHANGE_HELD_BACK;

	pthread_rwlock_unlock(&s->mirror_lock);
	pthread_rwlock_unlock(&s->index_lock);
	return changes;
}

void mirror_replace(struct store *s, struct vf_entry **by_addr, struct vf_entry **by_id, size_t n,
		    int threshold, int max_quarantined, uint64_t next_claim_id)
{
	pthread_rwlock_wrlock(&s->index_lock);
	pthread_rwlock_wrlock(&s->mirror_lock);
	/* a reservation lives in memory only: its creator may still commit it;
	 * so does absence */
	for (size_t i = 0, j = 0; i < s->n_vfs; i++) {
		struct vf_entry *old = s->by_addr[i];
		if (!old->reservation && !old->absent)
			continue;
		while (j < n && strcmp(by_addr[j]->addr, old->addr) < 0)
			j++;
		if (j < n && strcmp(by_addr[j]->addr, old->addr) == 0)
			by_addr[j]->absent = old->absent;
		if (!old->reservation)
			continue;
		if (j < n && strcmp(by_addr[j]->addr, old->addr) == 0 && !by_addr[j]->claim) {
			/* moved whole, state and all: no transition */
			by_addr[j]->reservation = move_ptr(old->reservation);
			by_addr[j]->reservation_state = old->reservation_state;
			old->reservation_state = RESERVATION_NONE;
		}
	}
	if (next_claim_id > s->next_claim_id)
		s->next_claim_id = next_claim_id;
	mirror_clear(s);
	s->by_addr = by_addr;
	s->by_id = by_id;
	s->n_vfs = s->cap_vfs = n;
	s->threshold = threshold;
	s->max_quarantined = max_quarantined;
	counts_recompute(s);
	s->reason[0] = '\0';
	atomic_store(&s->loaded, true);
	atomic_store(&s->available, true);
	pthread_rwlock_unlock(&s->mirror_lock);
	pthread_rwlock_unlock(&s->index_lock);
}
