/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef ZR_TRACE_H
#define ZR_TRACE_H
#endif
