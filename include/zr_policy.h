/* SPDX-License-Identifier: GPL-2.0-or-later */
/* zr_policy.h - demotion policies of the block store (placeholder). */
#ifndef ZR_POLICY_H
#define ZR_POLICY_H
#endif
