// SPDX-License-Identifier: GPL-2.0-or-later
/* placeholder */
#include "config.h"
int zr_placeholder_store;
