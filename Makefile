# SPDX-License-Identifier: GPL-2.0
#
# make            build rstream.ko against the running kernel (KDIR= for another)
# make run        boot a guest with the module over soft-RoCE and show it working
# make check      every test, on every kernel (KERNELS="6.1 6.12 debug")
# make bench      the performance targets, measured in one guest (KERNEL=6.12)
# make vm-shell   an interactive guest with everything loaded (KERNEL=6.12)
# make deps       install what the above need (Debian 12, as root)

KDIR ?= /lib/modules/$(shell uname -r)/build
KERNELS ?= 6.1 6.12 debug
KERNEL ?= 6.12
VM := tools/testing/vm/rstream-vm

all: modules

modules:
	$(MAKE) -C $(KDIR) M=$(CURDIR) modules

clean:
	$(MAKE) -C $(KDIR) M=$(CURDIR) clean

run:
	$(VM) run --kernel $(KERNEL)

check:
	$(VM) check --kernels "$(KERNELS)"

bench:
	$(VM) bench --kernel $(KERNEL)

vm-shell:
	$(VM) shell --kernel $(KERNEL)

deps:
	$(VM) deps --kernels "$(KERNELS)"

.PHONY: all modules clean run check bench vm-shell deps
