/* SPDX-License-Identifier: MIT */
/*
 * claims.c - the store's claim entry points (store.h, "Claims",
 * "Reservations"): reserve, commit, abandon, cancel, update, release, and
 * the claim reads.
 *
 * Reservations (the first step of a claim) are decided and kept in the
 * mirror alone (mirror.c): a claim is committed only from one, so one VF
 * never has two holders.  reservation_lock is held across a commit's whole
 * mutate() and across a cancel, so a cancel (rm) either comes first (the
 * commit finds nothing: -ENOENT) or sees the claim (and releases it), and a
 * second commit of one reservation finds the first's claim (-EALREADY).
 * Lock order: reservation_lock, then the mirror's locks; the committer
 * (commit.c) never takes it: row 1b of the lock table in
 * docs/architecture.md.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "grammar/vf.h"
#include "store/rules.h"
#include "store/store-internal.h"

static int claim_check(const struct store_claim *c, char when[static RFC3339_BUFSZ])
{
	if (!c || !vf_address_valid(c->a.vf) || !instance_id_valid(c->a.instance_id))
		return -EINVAL;
	if (strnlen(c->a.claimed_at, sizeof(c->a.claimed_at)) >= sizeof(c->a.claimed_at) ||
	    rfc3339_normalize_optional(c->a.claimed_at, when) < 0)
		return -EINVAL;
	if (strnlen(c->a.agent, sizeof(c->a.agent)) >= sizeof(c->a.agent) ||
	    strnlen(c->a.control, sizeof(c->a.control)) >= sizeof(c->a.control) ||
	    strnlen(c->a.boot_id, sizeof(c->a.boot_id)) >= sizeof(c->a.boot_id))
		return -ENAMETOOLONG;
	if (c->a.pid < 0 || c->a.pid > INT32_MAX)
		return -EINVAL;
	return rule_claim_watch_refusal(c->a.agent, c->a.control, c->a.pid);
}

/* The op of a commit or an update of c, once c passes claim_check(). */
static int claim_op(struct op *op, const struct store_claim *c)
{
	int r = claim_check(c, op->when);

	if (r < 0)
		return r;
	op->claim_in = c;
	copy_string(op->vf, sizeof(op->vf), c->a.vf);
	copy_string(op->instance_id, sizeof(op->instance_id), c->a.instance_id);
	return 0;
}

/* The live claim of e when op's instance holds it, else NULL. */
static const struct store_claim *held_claim(const struct vf_entry *e, const struct op *op)
{
	return e && e->claim && strcmp(e->claim->a.instance_id, op->instance_id) == 0 ? e->claim :
											NULL;
}

int store_claim_reserve(struct store *s, const struct store_claim *c, struct store_claim *ret)
{
	char when[RFC3339_BUFSZ];
	int r;

	if (!ret)
		return -EINVAL;
	if ((r = claim_check(c, when)) < 0)
		return r;
	if (!atomic_load(&s->loaded))
		return -EIO;
	struct store_claim *res = malloc(sizeof(*res));
	if (!res)
		return -ENOMEM;
	*res = *c;
	res->reserved = true;
	if (when[0])
		memcpy(res->a.claimed_at, when, sizeof(when));
	else
		rfc3339_now(res->a.claimed_at);
	*ret = *res; /* before the mirror owns it */
	if ((r = mirror_reservation_add(s, res)) < 0) {
		free(res);
		return r;
	}
	ret->id = res->id; /* the mirror does not change it */
	return 0;
}

/* Commit: only the reservation named, of the same instance; the VF may have
 * been quarantined meanwhile. */
static int decide_commit(const struct store *s, const struct vf_entry *e, struct op *op)
{
	const struct store_claim *res = e ? e->reservation : NULL;

	if (e && e->claim && e->claim->id == op->claim_in->id &&
	    strcmp(e->claim->a.instance_id, op->instance_id) == 0)
		return -EALREADY; /* committed by a concurrent commit */
	if (!res || res->id != op->claim_in->id || strcmp(res->a.instance_id, op->instance_id) != 0)
		return -ENOENT;
	op->when_given = op->when[0] && strcmp(op->when, res->a.claimed_at) != 0;
	if (!op->when[0])
		memcpy(op->when, res->a.claimed_at, sizeof(op->when));
	return rule_commit_refusal(e->claim ? e->claim->a.instance_id : NULL, op->instance_id);
}

int store_claim_commit(struct store *s, const struct store_claim *c)
{
	struct op op = { .kind = OP_CLAIM };
	int r;

	if ((r = claim_op(&op, c)) < 0)
		return r;
	pthread_mutex_lock(&s->reservation_lock);
	r = mutate(s, &op, decide_commit);
	pthread_mutex_unlock(&s->reservation_lock);
	return r;
}

/* A reservation left: its GPU's state may change (store.h,
 * STORE_CHANGE_RESERVATION). */
static void reservation_dropped(struct store *s, const char *vf, const char *parent)
{
	struct store_change change = { .bits = STORE_CHANGE_RESERVATION,
				       .vf_id = commit_vf_id(s, vf) };

	copy_string(change.vf, sizeof(change.vf), vf);
	copy_string(change.parent, sizeof(change.parent), parent);
	commit_publish(s, &change);
}

void store_claim_cancel(struct store *s, const char *vf, uint64_t id)
{
	char parent[VF_ADDR_BUFSZ];
	bool dropped;

	if (!vf_address_valid(vf))
		return;
	pthread_mutex_lock(&s->reservation_lock);
	dropped = mirror_reservation_drop(s, vf, id, parent);
	pthread_mutex_unlock(&s->reservation_lock);
	if (dropped)
		reservation_dropped(s, vf, parent);
}

int store_claim_abandon(struct store *s, const struct store_claim *c, bool *kept)
{
	int r = store_claim_commit(s, c);

	*kept = false;
	if (r != -EIO)
		return r;
	/* reservation_lock: a commit or cancel in between is seen (-ENOENT) */
	pthread_mutex_lock(&s->reservation_lock);
	if (mirror_reservation_orphan(s, c->a.vf, c->id) == 0) {
		*kept = true;
		r = 0;
	}
	pthread_mutex_unlock(&s->reservation_lock);
	return r;
}

void claims_commit_orphaned(struct store *s)
{
	_cleanup_free_ struct store_claim *orphans = NULL;
	size_t n = 0;

	mirror_rdlock(s);
	for (size_t i = 0; i < s->n_vfs; i++)
		n += s->by_addr[i]->reservation_state == RESERVATION_KEPT;
	orphans = n ? calloc(n, sizeof(*orphans)) : NULL;
	n = 0;
	for (size_t i = 0; orphans && i < s->n_vfs; i++)
		if (s->by_addr[i]->reservation_state == RESERVATION_KEPT)
			orphans[n++] = *s->by_addr[i]->reservation;
	mirror_unlock(s);
	for (size_t i = 0; i < n; i++) {
		int r = store_claim_commit(s, &orphans[i]);
		if (r < 0 && r != -EIO && r != -EALREADY && r != -ENOENT) {
			log_warn("%s: reserved claim of instance %s not committed: %s",
				 orphans[i].a.vf, orphans[i].a.instance_id, strerror(-r));
			store_claim_cancel(s, orphans[i].a.vf, orphans[i].id);
		}
	}
}

/* Release (cancel) the reservation of op->instance_id on op->vf, if it holds
 * one (*held): 0 or a refusal (rule_release_refusal).  When it holds none,
 * the caller releases the claim, if any. */
static int release_reservation(struct store *s, const struct op *op, bool *held)
{
	char parent[VF_ADDR_BUFSZ];
	bool dropped = false;
	uint64_t id = 0;
	int r = 0;

	pthread_mutex_lock(&s->reservation_lock);
	mirror_rdlock(s);
	const struct vf_entry *e = mirror_find(s, op->vf);
	const struct store_claim *res = e ? e->reservation : NULL;
	*held = res && strcmp(res->a.instance_id, op->instance_id) == 0;
	if (*held) {
		r = rule_release_refusal(res->a.claimed_at, op->when);
		id = res->id;
	}
	mirror_unlock(s);
	if (*held && r == 0) /* no commit can come between: reservation_lock */
		dropped = mirror_reservation_drop(s, op->vf, id, parent);
	pthread_mutex_unlock(&s->reservation_lock);
	if (dropped)
		reservation_dropped(s, op->vf, parent);
	return r;
}

int store_claim(struct store *s, const struct store_claim *c, struct store_claim *ret)
{
	struct store_claim res;
	int r;

	if ((r = store_claim_reserve(s, c, &res)) < 0)
		return r;
	if ((r = store_claim_commit(s, &res)) < 0) {
		store_claim_cancel(s, res.a.vf, res.id);
		return r;
	}
	if (ret) {
		*ret = res;
		ret->reserved = false; /* committed */
	}
	return 0;
}

static int decide_claim_update(const struct store *s, const struct vf_entry *e, struct op *op)
{
	const struct store_claim *live = held_claim(e, op), *c = op->claim_in;

	if (!live)
		return -ENOENT;
	op->when_given = op->when[0] && strcmp(live->a.claimed_at, op->when) != 0;
	bool same = strcmp(live->a.agent, c->a.agent) == 0 &&
		    strcmp(live->a.control, c->a.control) == 0 && live->a.pid == c->a.pid &&
		    live->a.pid_starttime == c->a.pid_starttime &&
		    (!op->when[0] || strcmp(live->a.claimed_at, op->when) == 0);
	op->noop = same;
	return 0;
}

int store_claim_update(struct store *s, const struct store_claim *c)
{
	struct op op = { .kind = OP_CLAIM_UPDATE };
	int r;

	if ((r = claim_op(&op, c)) < 0)
		return r;
	return mutate(s, &op, decide_claim_update);
}

static int decide_release(const struct store *s, const struct vf_entry *e, struct op *op)
{
	const struct store_claim *live = held_claim(e, op), *vmm = op->if_vmm;
	int r = rule_release_refusal(live ? live->a.claimed_at : NULL, op->when);

	if (r == 0 && vmm &&
	    (live->a.pid != vmm->a.pid || live->a.pid_starttime != vmm->a.pid_starttime ||
	     strcmp(live->a.control, vmm->a.control) != 0))
		return -EBUSY; /* it names another VMM than the one judged gone */
	return r;
}

int store_release(struct store *s, const char *vf, const char *instance_id,
		  const struct store_release_opts *opt)
{
	static const struct store_release_opts plain = { .uid = -1 };
	struct op op = { .kind = OP_RELEASE };
	bool reserved;

	opt = opt ? opt : &plain;
	op.uid = opt->uid;
	op.how = opt->how        ? opt->how :
		 opt->crashed    ? "crashed" :
		 opt->claimed_at ? "released-if" :
				   "released";
	if (!vf_address_valid(vf) || !instance_id_valid(instance_id) || !op.how[0] ||
	    strlen(op.how) > STORE_HISTORY_WORD_MAX ||
	    (opt->claimed_at &&
	     (!opt->claimed_at[0] || rfc3339_normalize(opt->claimed_at, op.when) < 0)) ||
	    (opt->crashed && !opt->claimed_at) || (opt->died_at && !opt->crashed))
		return -EINVAL;
	op.crashed = opt->crashed;
	op.if_vmm = opt->if_vmm;
	if (opt->died_at) {
		/* a VMM does not die before its claim, nor in the future */
		char now[RFC3339_BUFSZ];
		int64_t claimed_ns, died_ns, now_ns;
		rfc3339_now(now);
		if (rfc3339_normalize(opt->died_at, op.died_at) < 0 ||
		    rfc3339_to_ns(op.when, &claimed_ns) < 0 ||
		    rfc3339_to_ns(op.died_at, &died_ns) < 0 || rfc3339_to_ns(now, &now_ns) < 0 ||
		    rule_crash_time_refusal(claimed_ns, died_ns, now_ns) < 0)
			return -EINVAL;
	}
	copy_string(op.vf, sizeof(op.vf), vf);
	copy_string(op.instance_id, sizeof(op.instance_id), instance_id);
	/* op.when "" = unconditional */
	if (!atomic_load(&s->loaded))
		return -EIO;
	int r = release_reservation(s, &op, &reserved);
	if (r < 0 || reserved)
		return r;
	if ((r = mutate(s, &op, decide_release)) < 0)
		return r;
	if (opt->suspect_began)
		*opt->suspect_began = op.suspect_began;
	if (opt->died_after_ms)
		*opt->died_after_ms = op.died_after_ms;
	return 0;
}

/* What holds e by name: its live claim, or its reservation (reserved set). */
static const struct store_claim *entry_holder(const struct vf_entry *e)
{
	return e->claim ? e->claim : e->reservation;
}

/* Copy the live claim (or reservation) of vf by instance_id from the mirror. */
static int claim_read(struct store *s, const char *vf, const char *instance_id,
		      struct store_claim *ret)
{
	mirror_rdlock(s);
	struct vf_entry *e = mirror_find(s, vf);
	const struct store_claim *c = e ? entry_holder(e) : NULL;
	bool held = c && strcmp(c->a.instance_id, instance_id) == 0;
	if (held)
		*ret = *c;
	mirror_unlock(s);
	return held ? 0 : -ENOENT;
}

int store_claim_get(struct store *s, const char *vf, const char *instance_id, enum store_read how,
		    struct store_claim *ret)
{
	int r;

	if (!vf_address_valid(vf) || !instance_id_valid(instance_id) || !ret)
		return -EINVAL;
	if ((r = read_ready(s, how)) < 0)
		return r;
	return claim_read(s, vf, instance_id, ret);
}

/* The claim (or reservation) `id` held on e, or NULL. */
static const struct store_claim *claim_with_id(const struct vf_entry *e, uint64_t id)
{
	if (e->claim && e->claim->id == id)
		return e->claim;
	return e->reservation && e->reservation->id == id ? e->reservation : NULL;
}

int store_claim_get_by_id(struct store *s, uint64_t vf_id, uint64_t id, struct store_claim *ret)
{
	const struct store_claim *c = NULL;

	if (!ret)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	if (vf_id) {
		const struct vf_entry *e = mirror_find_by_id(s, vf_id);
		c = e ? claim_with_id(e, id) : NULL;
	} else {
		/* live claims are few (one per VF); a scan keeps no second index */
		for (size_t i = 0; i < s->n_vfs && !c; i++)
			c = claim_with_id(s->by_addr[i], id);
	}
	if (c)
		*ret = *c;
	mirror_unlock(s);
	return c ? 0 : -ENOENT;
}

int store_claim_list(struct store *s, const char *vf, struct store_claim **ret, size_t *count)
{
	if ((vf && !vf_address_valid(vf)) || !ret || !count)
		return -EINVAL;
	if (!atomic_load(&s->loaded))
		return -EIO;
	mirror_rdlock(s);
	struct vf_entry *one = vf ? mirror_find(s, vf) : NULL;
	size_t n = vf ? (one && entry_holder(one)) : s->n_claimed;
	struct store_claim *list = calloc(MAX(n, (size_t)1), sizeof(*list));
	size_t filled = 0;
	for (size_t i = 0; list && i < s->n_vfs && filled < n; i++) {
		const struct vf_entry *e = s->by_addr[i];
		if (entry_holder(e) && (!vf || e == one))
			list[filled++] = *entry_holder(e);
	}
	mirror_unlock(s);
	if (vf && !one) {
		free(list);
		return -ENOENT;
	}
	if (!list)
		return -ENOMEM;
	*ret = list;
	*count = filled;
	return 0;
}
