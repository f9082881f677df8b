# One entry point: make, make test, make bench, make install, make check-asan.
#
# Everything is built under $(B) (default build/); ASan/UBSan under build-asan/.

B        ?= build
PREFIX   ?= /usr/local
DESTDIR  ?=
CC       ?= cc
OPT      ?= -O2
SAN      ?=
CFLAGS   ?=
override CFLAGS += -std=c11 -Wall -Wextra -Werror $(OPT) -g -D_GNU_SOURCE -fPIC $(SAN) \
	-Iinclude -Ivipl/include -Ivipl/src -Ilanai-fw/include -Ilanai-fw -Ikdriver -Iextensions
LDFLAGS  += $(SAN)
SOVER    := 1
VERSION  := 0.1.0

# Debian packages the build, tests and benchmarks need (see README).
DEB_BUILD := gcc make libc6-dev
DEB_TEST  := libcunit1-dev
DEB_BENCH := gnuplot-nox libfabric-bin

LIB_SRCS   := $(wildcard vipl/src/*.c) $(wildcard lanai-fw/*.c) $(wildcard extensions/*.c) \
	kdriver/ctl_sock.c
VIPD_SRCS  := $(wildcard kdriver/kd_*.c) kdriver/ctl_sock.c lanai-fw/fw_profile.c
VIPCTL_SRCS:= kdriver/vipctl.c kdriver/ctl_sock.c
BENCH_SRCS := $(wildcard bench/*.c)
TEST_SRCS  := $(wildcard tests/test_*.c)
TEST_LIB   := $(wildcard tests/lib/*.c)

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

LIBSO  := $(B)/lib/libvipl.so.$(SOVER)
LIBA   := $(B)/lib/libvipl.a
VIPD   := $(B)/bin/vipd
VIPCTL := $(B)/bin/vipctl
BENCHES:= $(patsubst bench/%.c,$(B)/bin/%,$(BENCH_SRCS))
TESTS  := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRCS))

.PHONY: all progs test bench check-asan install clean deps deps-test deps-bench valgrind
all: progs $(TESTS)
# everything but the tests (which need CUnit)
progs: $(LIBSO) $(LIBA) $(VIPD) $(VIPCTL) $(BENCHES) $(B)/lib/pkgconfig/vipl.pc

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(LIBSO): $(call obj,$(LIB_SRCS))
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libvipl.so.$(SOVER) $(LDFLAGS) -o $@ $^ -lpthread -lm
	ln -sf libvipl.so.$(SOVER) $(B)/lib/libvipl.so

$(LIBA): $(call obj,$(LIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(VIPD): $(call obj,$(VIPD_SRCS))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ -lpthread -lm

$(VIPCTL): $(call obj,$(VIPCTL_SRCS))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

# Benchmarks and tests link the shared library and find it (and vipd beside
# it, in ../bin) through their rpath, as an installed program would.
$(B)/bin/%: $(B)/obj/bench/%.o $(LIBSO)
	$(CC) $(LDFLAGS) -o $@ $< -L$(B)/lib -lvipl -Wl,-rpath,'$$ORIGIN/../lib' -lm -lpthread

$(B)/tests/%: $(B)/obj/tests/%.o $(call obj,$(TEST_LIB)) $(LIBSO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(call obj,$(TEST_LIB)) -L$(B)/lib -lvipl \
		-Wl,-rpath,'$$ORIGIN/../lib' -lcunit -lpthread -lm

$(B)/lib/pkgconfig/vipl.pc: vipl/vipl.pc.in
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

# ---- set-up: install missing Debian packages, saying so ---------------------
define need_debs
	@missing=""; for p in $(1); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
	  echo "make: installing missing Debian packages:$$missing"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	fi
endef
deps:
	$(call need_debs,$(DEB_BUILD))
deps-test: deps
	$(call need_debs,$(DEB_TEST))
deps-bench: deps
	$(call need_debs,$(DEB_BENCH))

# ---- tests ------------------------------------------------------------------
test: deps-test
	$(MAKE) --no-print-directory all
	@B=$(B) tests/run_tests.sh

check-asan: deps-test
	$(MAKE) --no-print-directory B=build-asan OPT=-O1 \
		SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" all
	@B=build-asan ASAN_OPTIONS=detect_leaks=1 tests/run_tests.sh

valgrind: deps-test
	$(MAKE) --no-print-directory all
	@B=$(B) VALGRIND=1 tests/run_tests.sh

# ---- benchmarks ---------------------------------------------------------------
bench: deps-bench
	$(MAKE) --no-print-directory progs
	@B=$(B) bench/run_bench.sh $(if $(QUICK),--quick)

# ---- install --------------------------------------------------------------------
install: $(LIBSO) $(LIBA) $(VIPD) $(VIPCTL) $(B)/lib/pkgconfig/vipl.pc
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 vipl/include/vipl.h vipl/include/vipl_ext.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(LIBSO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libvipl.so.$(SOVER) $(DESTDIR)$(PREFIX)/lib/libvipl.so
	install -m 644 $(LIBA) $(DESTDIR)$(PREFIX)/lib/
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' vipl/vipl.pc.in \
		> $(DESTDIR)$(PREFIX)/lib/pkgconfig/vipl.pc
	install -m 755 $(VIPD) $(VIPCTL) $(DESTDIR)$(PREFIX)/bin/
	install -d $(DESTDIR)$(PREFIX)/share/vipl/profiles
	install -m 644 lanai-fw/profiles/*.conf $(DESTDIR)$(PREFIX)/share/vipl/profiles/

clean:
	rm -rf build build-asan

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
