/* SPDX-License-Identifier: MIT */
/* log.c - records to the journal (native protocol) or to stderr (log.h). */
#include "common/log.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define LINE_MAX_BYTES 2048
#define FIELD_MAX_BYTES 1024
#define JOURNAL_SOCKET "/run/systemd/journal/socket" /* sd_journal_sendv(3)'s */

static atomic_int max_priority = LOG_INFO;
static const char *log_ident;

/* sd_journal_sendv(3), from the program (log_set_journal_sender). */
static log_journal_sender_fn journal_sender;

/* What the target resolved to: -1 undecided, else 1 journal, 0 stderr. */
static atomic_int journal_on = -1;
/* Decided once, when stderr was looked at: a terminal shows no prefix. */
static atomic_bool stderr_tty;

static const struct {
	const char *name;
	const char *message_id;
} events[LOG_EVENT_COUNT] = {
#define LOG_EVENT_ROW(id, n, mid) [LOG_EVENT_##id] = { n, mid },
	LOG_EVENTS(LOG_EVENT_ROW)
#undef LOG_EVENT_ROW
};

const char *log_event_name(enum log_event e)
{
	return (unsigned)e < LOG_EVENT_COUNT ? events[e].name : NULL;
}

const char *log_event_message_id(enum log_event e)
{
	return (unsigned)e < LOG_EVENT_COUNT ? events[e].message_id : NULL;
}

static const char *const target_names[] = {
	[LOG_TARGET_AUTO] = "auto",
	[LOG_TARGET_JOURNAL] = "journal",
	[LOG_TARGET_STDERR] = "stderr",
};

int log_target_parse(const char *s, enum log_target *ret)
{
	for (size_t i = 0; i < sizeof(target_names) / sizeof(target_names[0]); i++)
		if (s && strcmp(s, target_names[i]) == 0) {
			*ret = (enum log_target)i;
			return 0;
		}
	return -EINVAL;
}

const char *log_target_name(enum log_target t)
{
	return (unsigned)t < sizeof(target_names) / sizeof(target_names[0]) ? target_names[t] :
									      "invalid";
}

/* $JOURNAL_STREAM is "DEVICE:INODE" of the stream systemd connected; it is
 * inherited by children whose stderr may be something else by now. */
static bool stderr_is_journal(void)
{
	const char *e = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	int end = 0;

	if (!e || sscanf(e, "%llu:%llu%n", &dev, &ino, &end) != 2 || e[end] != '\0')
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_set_journal_sender(log_journal_sender_fn send)
{
	journal_sender = send;
}

void log_set_target(enum log_target t)
{
	atomic_store(&stderr_tty, isatty(STDERR_FILENO) == 1);
	switch (t) {
	case LOG_TARGET_JOURNAL:
		/* sd_journal_sendv(3) drops records silently when journald is not
		 * there: then stderr, which someone may read. */
		atomic_store(&journal_on, access(JOURNAL_SOCKET, F_OK) == 0 ? 1 : 0);
		break;
	case LOG_TARGET_STDERR:
		atomic_store(&journal_on, 0);
		break;
	case LOG_TARGET_AUTO:
	default:
		atomic_store(&journal_on, stderr_is_journal() ? 1 : 0);
		break;
	}
}

bool log_to_journal(void)
{
	/* Two threads deciding at once decide the same. */
	if (atomic_load(&journal_on) < 0)
		log_set_target(LOG_TARGET_AUTO);
	return atomic_load(&journal_on) == 1;
}

void log_set_max_priority(int prio)
{
	atomic_store(&max_priority, prio);
}

int log_get_max_priority(void)
{
	return atomic_load(&max_priority);
}

void log_set_ident(const char *ident)
{
	log_ident = ident;
}

/* One event is one line, and no text a guest wrote reaches a terminal as
 * a control sequence: control characters become spaces. */
static void fold(char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
			s[i] = ' ';
}

static void write_stderr(int prio, const char *message)
{
	char line[LINE_MAX_BYTES + 64];
	int n;

	if (atomic_load(&stderr_tty))
		n = snprintf(line, sizeof(line) - 1, "%s%s%s", log_ident ? log_ident : "",
			     log_ident ? ": " : "", message);
	else
		n = snprintf(line, sizeof(line) - 1, "<%d>%s%s%s", prio & 7,
			     log_ident ? log_ident : "", log_ident ? ": " : "", message);
	if (n < 0)
		return;
	if (n > (int)sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, (size_t)n) < 0) {
		/* nowhere left to report it */
	}
}

struct field_buf {
	struct iovec iov[16];
	char text[16][FIELD_MAX_BYTES];
	int n;
};

static void add_field(struct field_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void add_field(struct field_buf *b, const char *fmt, ...)
{
	va_list ap;
	int len;

	if (b->n >= (int)(sizeof(b->iov) / sizeof(b->iov[0])))
		return;
	va_start(ap, fmt);
	len = vsnprintf(b->text[b->n], FIELD_MAX_BYTES, fmt, ap);
	va_end(ap);
	if (len < 0)
		return;
	if (len >= FIELD_MAX_BYTES)
		len = FIELD_MAX_BYTES - 1;
	b->iov[b->n] = (struct iovec){ b->text[b->n], (size_t)len };
	b->n++;
}

static int send_journal(int prio, enum log_event e, const struct log_fields *f, const char *message)
{
	/* Large: on the heap, not on a worker thread's stack. */
	struct field_buf *b;
	int r;

	if (!journal_sender)
		return -ENOSYS;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	add_field(b, "MESSAGE=%s", message);
	add_field(b, "PRIORITY=%d", prio & 7);
	if (log_ident)
		add_field(b, "SYSLOG_IDENTIFIER=%s", log_ident);
	if (log_event_name(e)) {
		add_field(b, "MESSAGE_ID=%s", log_event_message_id(e));
		add_field(b, "EVENT=%s", log_event_name(e));
	}
	if (f) {
		/* Values are sent as they are: sd_journal_sendv() frames one
		 * with a newline in the binary-safe form. */
		if (f->vf)
			add_field(b, "VF=%s", f->vf);
		if (f->parent && *f->parent)
			add_field(b, "PARENT=%s", f->parent);
		if (f->instance)
			add_field(b, "INSTANCE=%s", f->instance);
		if (f->claimed_at && *f->claimed_at)
			add_field(b, "CLAIMED_AT=%s", f->claimed_at);
		if (f->reason)
			add_field(b, "REASON=%s", f->reason);
		if (f->result)
			add_field(b, "RESULT=%s", f->result);
		if (f->has_writer) {
			add_field(b, "WRITER_UID=%" PRIu32, f->writer_uid);
			add_field(b, "WRITER_PID=%" PRId32, f->writer_pid);
		}
		if (f->has_tally) {
			add_field(b, "FAILURES=%u", f->tally);
			add_field(b, "THRESHOLD=%d", f->threshold);
		}
	}
	r = journal_sender(b->iov, b->n);
	free(b);
	return r;
}

static void vlog(int prio, enum log_event e, const struct log_fields *f, const char *fmt,
		 va_list ap) __attribute__((format(printf, 4, 0)));
static void vlog(int prio, enum log_event e, const struct log_fields *f, const char *fmt,
		 va_list ap)
{
	char message[LINE_MAX_BYTES];
	int n;

	n = vsnprintf(message, sizeof(message), fmt, ap);
	if (n < 0)
		return;
	fold(message, strlen(message));
	if (log_to_journal() && send_journal(prio, e, f, message) >= 0)
		return;
	write_stderr(prio, message);
}

void log_event(int prio, enum log_event e, const struct log_fields *f, const char *fmt, ...)
{
	int saved_errno = errno;
	va_list ap;

	if (prio > atomic_load(&max_priority))
		return;
	va_start(ap, fmt);
	vlog(prio, e, f, fmt, ap);
	va_end(ap);
	errno = saved_errno;
}
