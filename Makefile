# SPDX-License-Identifier: GPL-2.0
#
# make            build rstream.ko against the running kernel (KDIR= for another)
# make run        boot a guest with the module over soft-RoCE and show it working
# make check      every test, on every kernel (KERNELS="6.1 6.12 debug")
# make bench      the performance targets, measured in one guest (KERNEL=6.12)
# make vm-shell   an interactive guest with everything loaded (KERNEL=6.12)
# make deps       install what the above need (Debian 12, as root)
# make install    rstream(7), rstream(1) and rstream-run(8) (PREFIX=/usr/local);
#                 the module itself installs with DKMS (README)

KDIR ?= /lib/modules/$(shell uname -r)/build
PREFIX ?= /usr/local
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

install:
	install -D -m 0644 Documentation/rstream.7 \
		$(DESTDIR)$(PREFIX)/share/man/man7/rstream.7
	$(MAKE) -C tools/rstream install PREFIX=$(PREFIX)
	$(MAKE) -C tools/rstream-run install PREFIX=$(PREFIX)

.PHONY: all modules clean run check bench vm-shell deps install
