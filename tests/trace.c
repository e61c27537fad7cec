// SPDX-License-Identifier: GPL-2.0-or-later
#include "config.h"
int zr_placeholder_trace;
