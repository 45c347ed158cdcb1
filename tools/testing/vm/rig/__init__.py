# SPDX-License-Identifier: GPL-2.0
"""rstream's test rig: kernels, guests under QEMU, results."""
