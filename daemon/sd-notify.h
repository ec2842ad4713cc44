/* SPDX-License-Identifier: MIT */
/*
 * sd-notify.h - what vfhealthd tells its service manager (sd_notify(3) of
 * libsystemd: one datagram to $NOTIFY_SOCKET per message): READY=1 once it
 * serves, with a STATUS= line that shows the store's state ("store
 * available" or "store unavailable: REASON"), and a new STATUS= line on
 * every availability transition after that (`systemctl status` shows it).
 *
 * The transitions come from the store: sd_notifier_store_changed() is a
 * subscriber (store_subscribe, which daemon/main.c calls), called from the
 * store thread that changed the state; on STORE_CHANGE_STATUS it
 * re-reads the state and sends only a changed
 * text (sd_notify(3)'s send waits only while the service manager's socket
 * queue is full, as every Type=notify service's does); the last message
 * sent always shows the latest state, whatever order hooks run in
 * (sd-notify.c says how).
 * Without $NOTIFY_SOCKET every call does nothing.
 */
#ifndef VFHEALTH_DAEMON_SD_NOTIFY_H
#define VFHEALTH_DAEMON_SD_NOTIFY_H

struct store;
struct store_change;
struct sd_notifier;

/* Notes whether $NOTIFY_SOCKET is set.  -ENOMEM. */
int sd_notifier_new(struct sd_notifier **ret);
/* READY=1, MAINPID= (this process: call it after daemonizing) and the
 * STATUS= of store, which later transitions report.  0 or -errno. */
int sd_notifier_ready(struct sd_notifier *n, struct store *store);
/* The store's subscriber (userdata: the sd_notifier): on a change of the
 * store's availability, a STATUS= line when the state differs from the
 * last one sent.  Before ready: nothing. */
void sd_notifier_store_changed(void *userdata, const struct store_change *change);
void sd_notifier_free(struct sd_notifier *n);

#endif
