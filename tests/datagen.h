/* SPDX-License-Identifier: GPL-2.0-or-later */
#ifndef ZR_DATAGEN_H
#define ZR_DATAGEN_H
#endif
