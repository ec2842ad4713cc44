/* SPDX-License-Identifier: MIT */
/* Unit tests for guest-agent/state.c and guest-agent/pci.c: the answer's
 * transitions (OK is terminal) and the NVIDIA device scan. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/cleanup.h"
#include "guest-agent/pci.h"
#include "guest-agent/state.h"
#include "tests/common/check-main.h"

#define LINE1 "NVRM: GPU 0000:00:03.0: RmInitAdapter failed! (0x22:0x65:884)"
#define LINE2 "NVRM: GPU 0000:00:04.0: RmInitAdapter failed! (0x24:0x65:1437)"

START_TEST(test_transitions)
{
	struct agent_state s;

	agent_state_init(&s);
	ck_assert_int_eq(s.status.state, GPU_INIT_UNKNOWN);
	ck_assert_str_eq(s.status.message, "");

	ck_assert(agent_state_on_failure(&s, "  " LINE1 "  ", strlen(LINE1) + 4));
	ck_assert_int_eq(s.status.state, GPU_INIT_FAILED);
	ck_assert_str_eq(s.status.message, LINE1);                    /* trimmed */
	ck_assert(!agent_state_on_failure(&s, LINE1, strlen(LINE1))); /* same line: no change */

	/* the latest line wins */
	ck_assert(agent_state_on_failure(&s, LINE2, strlen(LINE2)));
	ck_assert_str_eq(s.status.message, LINE2);

	ck_assert(agent_state_on_probe_success(&s));
	ck_assert_int_eq(s.status.state, GPU_INIT_OK);
	ck_assert_str_eq(s.status.message, "");
	ck_assert(!agent_state_on_probe_success(&s));

	/* OK is terminal */
	ck_assert(!agent_state_on_failure(&s, LINE1, strlen(LINE1)));
	ck_assert_int_eq(s.status.state, GPU_INIT_OK);
	ck_assert_str_eq(s.status.message, "");
	ck_assert_uint_eq(s.failure_lines, 4);
}
END_TEST

START_TEST(test_ok_without_failure_and_long_line)
{
	struct agent_state s;
	char line[4000];

	agent_state_init(&s);
	ck_assert(agent_state_on_probe_success(&s));
	ck_assert_int_eq(s.status.state, GPU_INIT_OK);

	agent_state_init(&s);
	memset(line, 'x', sizeof(line));
	memcpy(line, "NVRM:", 5);
	line[100] = '\t'; /* control characters never reach the wire */
	ck_assert(agent_state_on_failure(&s, line, sizeof(line)));
	ck_assert_uint_eq(strlen(s.status.message), AGENT_MESSAGE_MAX);
	ck_assert_int_eq(s.status.message[100], ' ');
}
END_TEST

static void write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
}

START_TEST(test_pci_scan)
{
	char root[] = "/tmp/vfh-sysfs-XXXXXX", p[256];
	bool found = true;

	ck_assert_ptr_nonnull(mkdtemp(root));
	/* no bus/pci/devices at all: no device */
	ck_assert_int_eq(pci_has_vendor(root, PCI_VENDOR_NVIDIA, &found), 0);
	ck_assert(!found);

	snprintf(p, sizeof(p), "%s/bus", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/bus/pci", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/bus/pci/devices", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:00:01.0", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:00:01.0/vendor", root);
	write_file(p, "0x8086\n");
	snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:00:02.0", root);
	mkdir(p, 0755); /* no vendor file: ignored */
	ck_assert_int_eq(pci_has_vendor(root, PCI_VENDOR_NVIDIA, &found), 0);
	ck_assert(!found);

	snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:00:03.0", root);
	mkdir(p, 0755);
	snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:00:03.0/vendor", root);
	write_file(p, "0x10de\n");
	ck_assert_int_eq(pci_has_vendor(root, PCI_VENDOR_NVIDIA, &found), 0);
	ck_assert(found);

	/* clean up the tree */
	unlink(p);
	snprintf(p, sizeof(p), "%s/bus/pci/devices/0000:00:01.0/vendor", root);
	unlink(p);
	const char *dirs[] = { "devices/0000:00:01.0", "devices/0000:00:02.0",
			       "devices/0000:00:03.0", "devices", "" };
	for (size_t i = 0; i < 5; i++) {
		snprintf(p, sizeof(p), "%s/bus/pci/%s", root, dirs[i]);
		rmdir(p);
	}
	snprintf(p, sizeof(p), "%s/bus", root);
	rmdir(p);
	rmdir(root);
}
END_TEST

START_TEST(test_pci_parse_vendor)
{
	static const char *const bad[] = { "10de\n", "0x\n", "0x10de0\n", "0x10dg\n", "0x10de\nx" };
	uint16_t v = 1;

	ck_assert_int_eq(pci_parse_vendor("0x10de\n", &v), 0);
	ck_assert_uint_eq(v, 0x10de);
	ck_assert_int_eq(pci_parse_vendor("0x10DE", &v), 0);
	ck_assert_uint_eq(v, 0x10de);
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		v = 1;
		ck_assert_msg(pci_parse_vendor(bad[i], &v) == -EINVAL, "accepted '%s'", bad[i]);
		ck_assert_uint_eq(v, 1);
	}
}
END_TEST

static const struct check_case state_case = { .suite = "state", .tcase = "core", .timeout = 30 };
CHECK_CASE_MAIN(state_case, test_transitions, test_ok_without_failure_and_long_line, test_pci_scan,
		test_pci_parse_vendor)
