// SPDX-License-Identifier: GPL-2.0-or-later
int main(void) { return 0; }
