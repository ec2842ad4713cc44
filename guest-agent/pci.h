/* SPDX-License-Identifier: MIT */
/*
 * pci.h - is there a PCI device of a given vendor?  Reads
 * SYSFS_ROOT/bus/pci/devices/ * /vendor ("0x10de\n" for NVIDIA).  At most
 * PCI_DEVICES_MAX entries are looked at and each file's first bytes only, so
 * a strange sysfs (or a test tree) cannot make the agent read without bound.
 */
#ifndef VFHEALTH_AGENT_PCI_H
#define VFHEALTH_AGENT_PCI_H

#include <stdbool.h>
#include <stdint.h>

#define PCI_VENDOR_NVIDIA 0x10de
#define PCI_DEVICES_MAX 4096

/* *ret is true when a device of that vendor exists.  A missing
 * bus/pci/devices directory is "no device" (0, false); other errors -errno. */
int pci_has_vendor(const char *sysfs_root, uint16_t vendor, bool *ret);

/* Parse the text of a sysfs vendor file ("0x10de\n").  0 or -EINVAL. */
int pci_parse_vendor(const char *text, uint16_t *ret);

#endif
