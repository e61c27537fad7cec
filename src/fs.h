/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef ZR_FS_H
#define ZR_FS_H
#endif
