# One entry point: make, make test, make bench, make install, make check-asan,
# make check-tsan.
#
# Everything is built under $(B) (default build/); ASan/UBSan under build-asan/,
# the libFuzzer targets (make fuzz) under build-fuzz/,
# TSan under build-tsan/.

B        ?= build
PREFIX   ?= /usr/local
DESTDIR  ?=
CC       ?= cc
OPT      ?= -O2
SAN      ?=
# The library (vipl/, lanai-fw/, extensions/: the data path) is built with
# -O3 and libvipl.so linked with link-time optimization: a message crosses
# some thirty small functions of those folders, and inlining them across
# files shows in the 8-byte message rate and the 4-byte latency
# (spec-notes/native-speed.md). Objects stay
# fat (their plain code is in them too), so libvipl.a and every other
# program link them as usual. An OPT given to make (the sanitizer builds:
# -O1) is used for the library too; LTO is off for the sanitizer builds and
# for compilers other than gcc.
LIB_OPT  ?= -O3
LTO      ?= $(if $(SAN),,$(if $(filter gcc cc,$(notdir $(CC))),-flto=auto -ffat-lto-objects))
CFLAGS   ?=
override CFLAGS += -std=c11 -Wall -Wextra -Werror $(OPT) $(LTO) -g -D_GNU_SOURCE -fPIC $(SAN)
# Each folder compiles with the include paths of the tiers below it and no
# others, so a header from above or beside is a compile error
# (tools/check_layers.sh states the tiers and checks every include);
# tests, benchmarks, examples and tools see every folder.
# The public headers, as a program sees them installed: vipl.h and the
# specification's via_spec.h it includes (include/).
INC_PUBLIC     := -Ivipl/include -Iinclude
INC_include    := -Iinclude
INC_ctlsock    := -Iinclude -Ictlsock
INC_lanai-fw   := -Iinclude -Ilanai-fw/include -Ilanai-fw
INC_extensions := -Iinclude -Ivipl/include -Ilanai-fw/include -Iextensions
INC_kdriver    := -Iinclude -Ictlsock -Ilanai-fw/include -Ikdriver
INC_vipl       := -Iinclude -Ictlsock -Ivipl/include -Ivipl/src -Ilanai-fw/include -Iextensions
INC_am2        := -Iam2/include $(INC_PUBLIC)
INC_ALL        := -Iinclude -Ictlsock -Ivipl/include -Ivipl/src -Ilanai-fw/include -Ilanai-fw \
	-Ilanai-fw/link -Ikdriver -Iextensions -Iam2/include
inc_of = $(or $(INC_$(firstword $(subst /, ,$(1)))),$(INC_ALL))
LDFLAGS  += $(SAN)
SOVER    := 1
VERSION  := 0.1.0

# Debian packages the build, tests and benchmarks need (see README).
DEB_BUILD := gcc make libc6-dev pkg-config libpci-dev libkmod-dev libfabric-dev libsodium-dev
DEB_TEST  := libcunit1-dev iproute2
DEB_BENCH := gnuplot-nox libfabric-bin ucx-utils
DEB_FUZZ  := clang libclang-rt-dev

LIB_SRCS   := $(wildcard vipl/src/*.c) $(wildcard lanai-fw/*.c) $(wildcard lanai-fw/link/*.c) \
	$(wildcard lanai-fw/timing/*.c) $(wildcard extensions/*.c) ctlsock/ctl_sock.c
VIPD_SRCS  := $(wildcard kdriver/kd_*.c) ctlsock/ctl_sock.c lanai-fw/timing/fw_profile.c \
	lanai-fw/link/fw_fault_spec.c
VIPCTL_SRCS:= $(wildcard kdriver/vipctl*.c) ctlsock/ctl_sock.c kdriver/kd_hostif.c kdriver/kd_auth.c
# libsodium: the hosts' authentication (kd_auth.c) and the UDP link's frame
# MACs (lanai-fw/link/fw_rtx.c).
SODIUM_LIBS := -lsodium
# vipctl alone links libpci and libkmod (nics, doctor: vipctl_hostdev.c).
HOSTDEV_PKGS := libpci libkmod
HOSTDEV_LIBS := $(shell pkg-config --libs $(HOSTDEV_PKGS) 2>/dev/null)
# fi_* are plain libfabric programs (references for the libfabric link), nothing of ours.
FI_BENCH_SRCS := $(wildcard bench/fi_*.c)
BENCH_SRCS := $(filter-out bench/am2_% bench/model_validate.c $(FI_BENCH_SRCS),$(wildcard bench/*.c))
AM2_BENCH_SRCS := $(wildcard bench/am2_*.c)
TEST_SRCS  := $(wildcard tests/test_*.c)
# The firmware tests' fixture calls internals: only INTERNAL_TESTS link it.
TFW_LIB    := tests/lib/tfw.c
TEST_LIB   := $(filter-out $(TFW_LIB),$(wildcard tests/lib/*.c))
# The symbols libvipl.so exports: the API of vipl.h and vipl_ext.h, nothing else.
LIB_MAP    := vipl/libvipl.map

# libam2: Active Messages II over the public VIPL API (am2/), its SPMD
# launcher amrun, and the programs that use it (tests/test_am2*, the
# helper programs tests/am2_*.c run by them, bench/am2_*).
AM2_SRCS   := $(wildcard am2/src/*.c)
AM2_MAP    := am2/libam2.map
AM2SO      := $(B)/lib/libam2.so.$(SOVER)
AM2A       := $(B)/lib/libam2.a
AMRUN      := $(B)/bin/amrun
AM2_HELPERS:= $(patsubst tests/%.c,$(B)/tests/%,$(wildcard tests/am2_*.c))
# Programs written for AMUDP (tests/amudp/), built as their users build
# them: against an installed prefix (a staged `make install` in STAGE) by
# `pkg-config --cflags --libs am2` and nothing else.
STAGE      := $(B)/stage
# The examples (examples/), built as a user builds a program: the public
# headers and libraries only, the flags of the README.
EXAMPLES   := $(patsubst examples/%.c,$(B)/examples/%,$(wildcard examples/*.c))
EXAMPLES_AM2 := $(filter $(B)/examples/am2_%,$(EXAMPLES))
AMUDP_PROGS:= $(patsubst tests/amudp/%.c,$(B)/tests/amudp/%,$(wildcard tests/amudp/*.c))

# Tests and benchmarks that call library internals (fw_*, vipl_*, ...), which
# libvipl.so does not export: they link libvipl.a instead.
INTERNAL_TESTS  := test_vclock test_fw_lock test_cma test_fw_link test_fw_ofi test_fw_pipeline test_fw_errors test_fw_rdma test_fw_hostile test_model test_fw_cq test_ext test_hostile_pages test_hostile_local
INTERNAL_BENCHES:= vip_model
# The multi-threaded tests, which check-tsan runs (those that exist).
TSAN_TESTS := test_threads test_fw_lock test_progress test_multi test_fw_cq test_cq test_am2_vipl

obj = $(patsubst %.c,$(B)/obj/%.o,$(1))

LIBSO  := $(B)/lib/libvipl.so.$(SOVER)
# (a make command line's OPT wins over this)
$(call obj,$(LIB_SRCS)) $(LIBSO): OPT = $(LIB_OPT)
LIBA   := $(B)/lib/libvipl.a
VIPD   := $(B)/bin/vipd
VIPCTL := $(B)/bin/vipctl
# the system vipd's start script (vipd --system; kdriver/vipd.service.in under systemd)
VIPD_START := $(B)/bin/vipd-start
VIPCLOCK_SO := $(B)/lib/libvipclock.so
VIPCLOCK    := $(B)/bin/vipclock
BENCHES:= $(patsubst bench/%.c,$(B)/bin/%,$(BENCH_SRCS))
TESTS  := $(patsubst tests/%.c,$(B)/tests/%,$(TEST_SRCS))
# An old VIPL program (tests/oldvia), built as its authors built theirs:
# vipl.h, -lvipl -lpthread, and nothing else of ours.
OLDVIA := $(B)/tests/mp_bench
# Programs as the 1990s wrote them (K&R, gnu89), built against vipl.h with
# every warning an error; test_compat runs them.
COMPAT_PROGS := $(patsubst tests/compat/%.c,$(B)/tests/compat/%,$(wildcard tests/compat/*.c))
BENCHES_A := $(filter $(patsubst %,$(B)/bin/%,$(INTERNAL_BENCHES)),$(BENCHES))
TESTS_A   := $(filter $(patsubst %,$(B)/tests/%,$(INTERNAL_TESTS)),$(TESTS))
TESTS_AM2 := $(filter $(B)/tests/test_am2%,$(TESTS))
AM2_BENCHES := $(patsubst bench/%.c,$(B)/bin/%,$(AM2_BENCH_SRCS))
FI_BENCHES := $(patsubst bench/%.c,$(B)/bin/%,$(FI_BENCH_SRCS))

# Empty when CUnit's header is missing: then `all` skips the tests.
HAVE_CUNIT := $(shell $(CC) $(CFLAGS) -E -include CUnit/CUnit.h -x c /dev/null >/dev/null 2>&1 && echo y)

.PHONY: all build-all install-files progs testprogs test check-layers soak bench bench-hosts check-asan check-tsan install clean deps deps-test hostdev-check \
	deps-bench deps-fuzz valgrind fuzz fuzzprogs fuzz-smoke fuzz-corpus bench-hostile bench-reg
# `make` (all) and `make install` first install the build's Debian
# packages when they are missing (deps), then build in a second make, so
# that no compile starts before the headers are there.
all: deps
	@$(MAKE) --no-print-directory build-all
ifeq ($(HAVE_CUNIT),)
build-all: progs
	@echo "make: skipping the tests: no CUnit/CUnit.h (Debian package $(DEB_TEST); make test installs it)"
else
build-all: progs testprogs
endif
# everything but the tests (which need CUnit)
progs: $(LIBSO) $(LIBA) $(VIPD) $(VIPCTL) $(VIPD_START) $(VIPCLOCK_SO) $(VIPCLOCK) $(BENCHES) \
	$(B)/lib/pkgconfig/vipl.pc \
	$(AM2SO) $(AM2A) $(AMRUN) $(AM2_BENCHES) $(B)/lib/pkgconfig/am2.pc $(FI_BENCHES) $(EXAMPLES)
testprogs: $(TESTS) $(OLDVIA) $(COMPAT_PROGS) $(AM2_HELPERS) $(AMUDP_PROGS)

$(B)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(call inc_of,$<) -MMD -MP -c $< -o $@

$(LIBSO): $(call obj,$(LIB_SRCS)) $(LIB_MAP)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libvipl.so.$(SOVER) -Wl,--version-script=$(LIB_MAP) $(OPT) $(LTO) $(LDFLAGS) \
		-o $@ $(filter %.o,$^) $(SODIUM_LIBS) -lpthread -lm
	ln -sf libvipl.so.$(SOVER) $(B)/lib/libvipl.so

$(LIBA): $(call obj,$(LIB_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(VIPD): $(call obj,$(VIPD_SRCS))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(SODIUM_LIBS) -lpthread -lm

$(call obj,$(filter kdriver/vipctl%,$(VIPCTL_SRCS))): \
	override CFLAGS += $(shell pkg-config --cflags $(HOSTDEV_PKGS) 2>/dev/null)
$(call obj,$(filter kdriver/vipctl%,$(VIPCTL_SRCS))): | hostdev-check
hostdev-check:
	@[ -n "$(HOSTDEV_LIBS)" ] || { echo "make: vipctl needs pkg-config, libpci-dev and \
	libkmod-dev (make deps installs them)"; exit 1; }
$(VIPCTL): $(call obj,$(VIPCTL_SRCS))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(HOSTDEV_LIBS) $(SODIUM_LIBS)

$(VIPD_START): kdriver/vipd-start.sh
	@mkdir -p $(dir $@)
	install -m 755 $< $@

# vipclock: an unmodified program's own clock calls read virtual time
# (LD_PRELOAD of libvipclock.so, which answers through libvipl).
$(VIPCLOCK_SO): $(B)/obj/vipl/clock/vipclock.o $(LIBSO)
	@mkdir -p $(dir $@)
	$(CC) -shared $(LDFLAGS) -o $@ $< -L$(B)/lib -lvipl -Wl,-rpath,'$$ORIGIN' -ldl -lpthread
$(VIPCLOCK): vipl/clock/vipclock.sh
	@mkdir -p $(dir $@)
	install -m 755 $< $@

# Benchmarks and tests link the shared library and find it (and vipd beside
# it, in ../bin) through their rpath, as an installed program would; those
# that use internals link the static library. Static pattern rules, so that
# make keeps their objects (it deletes intermediate files of a chain).
$(filter-out $(BENCHES_A),$(BENCHES)): $(B)/bin/%: $(B)/obj/bench/%.o $(LIBSO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< -L$(B)/lib -lvipl -Wl,-rpath,'$$ORIGIN/../lib' -lm -lpthread

$(FI_BENCHES): $(B)/bin/%: $(B)/obj/bench/%.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< -lfabric

$(BENCHES_A): $(B)/bin/%: $(B)/obj/bench/%.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $(filter %.o,$^) $(LIBA) $(SODIUM_LIBS) -lpthread -lm

# vip_model's table of published figures is a file of its own.
$(B)/bin/vip_model: $(B)/obj/bench/model_validate.o

$(filter-out $(TESTS_A) $(TESTS_AM2),$(TESTS)): $(B)/tests/%: $(B)/obj/tests/%.o $(call obj,$(TEST_LIB)) $(LIBSO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(call obj,$(TEST_LIB)) -L$(B)/lib -lvipl \
		-Wl,-rpath,'$$ORIGIN/../lib' -lcunit -lpthread -ldl -lm

$(TESTS_A): $(B)/tests/%: $(B)/obj/tests/%.o $(call obj,$(TEST_LIB) $(TFW_LIB)) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(call obj,$(TEST_LIB) $(TFW_LIB)) $(LIBA) $(SODIUM_LIBS) -lcunit -lpthread -lm

$(AM2SO): $(call obj,$(AM2_SRCS)) $(AM2_MAP) $(LIBSO)
	@mkdir -p $(dir $@)
	$(CC) -shared -Wl,-soname,libam2.so.$(SOVER) -Wl,--version-script=$(AM2_MAP) $(LDFLAGS) \
		-o $@ $(filter %.o,$^) -L$(B)/lib -lvipl -Wl,-rpath,'$$ORIGIN'
	ln -sf libam2.so.$(SOVER) $(B)/lib/libam2.so

$(AM2A): $(call obj,$(AM2_SRCS))
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(AMRUN): $(B)/obj/am2/tools/amrun.o $(B)/obj/am2/tools/amrun_rdv.o
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^

$(TESTS_AM2): $(B)/tests/%: $(B)/obj/tests/%.o $(call obj,$(TEST_LIB)) $(AM2SO) $(AMRUN)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< $(call obj,$(TEST_LIB)) -L$(B)/lib -lam2 -lvipl \
		-Wl,-rpath,'$$ORIGIN/../lib' -lcunit -lpthread -ldl -lm

$(AM2_HELPERS): $(B)/tests/%: $(B)/obj/tests/%.o $(AM2SO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< -L$(B)/lib -lam2 -lvipl -Wl,-rpath,'$$ORIGIN/../lib' -lm

$(STAGE)/.installed: $(LIBSO) $(LIBA) $(AM2SO) $(AM2A) $(AMRUN) $(VIPD) $(VIPCTL) $(VIPCLOCK_SO) \
		$(B)/bin/vip_model $(wildcard am2/include/*.h vipl/include/*.h) include/via_spec.h am2/am2.pc.in vipl/vipl.pc.in
	@$(MAKE) --no-print-directory install-files PREFIX=$(abspath $(STAGE)) DESTDIR= >/dev/null
	@touch $@

$(AMUDP_PROGS): $(B)/tests/amudp/%: tests/amudp/%.c $(STAGE)/.installed
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Werror -O2 $(SAN) -o $@ $< \
		$$(PKG_CONFIG_PATH=$(STAGE)/lib/pkgconfig pkg-config --cflags --libs am2)

$(filter-out $(EXAMPLES_AM2),$(EXAMPLES)): $(B)/examples/%: examples/%.c examples/example.h $(LIBSO)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Werror -O2 -g $(SAN) $(INC_PUBLIC) -o $@ $< \
		-L$(B)/lib -lvipl -Wl,-rpath,'$$ORIGIN/../lib'

$(EXAMPLES_AM2): $(B)/examples/%: examples/%.c $(AM2SO)
	@mkdir -p $(dir $@)
	$(CC) -std=c11 -Wall -Wextra -Werror -O2 -g $(SAN) -Iam2/include $(INC_PUBLIC) -o $@ $< \
		-L$(B)/lib -lam2 -lvipl -Wl,-rpath,'$$ORIGIN/../lib'

$(AM2_BENCHES): $(B)/bin/%: $(B)/obj/bench/%.o $(AM2SO)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $< -L$(B)/lib -lam2 -lvipl -Wl,-rpath,'$$ORIGIN/../lib' -lm

$(B)/lib/pkgconfig/am2.pc: am2/am2.pc.in
	@mkdir -p $(dir $@)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

$(OLDVIA): $(wildcard tests/oldvia/*.[ch]) $(LIBSO)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu99 -O2 -g -Wall -Wextra -Werror $(SAN) $(INC_PUBLIC) -o $@ \
		$(filter %.c,$^) -L$(B)/lib -lvipl -lpthread -Wl,-rpath,'$$ORIGIN/../lib'

$(COMPAT_PROGS): $(B)/tests/compat/%: tests/compat/%.c vipl/include/vipl.h include/via_spec.h $(LIBSO)
	@mkdir -p $(dir $@)
	$(CC) -std=gnu89 -Wall -Wextra -Werror $(OPT) -g $(SAN) $(INC_PUBLIC) -o $@ $< \
		-L$(B)/lib -lvipl -Wl,-rpath,'$$ORIGIN/../../lib'

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
deps-fuzz: deps
	$(call need_debs,$(DEB_FUZZ))

# ---- tests ------------------------------------------------------------------
test: deps-test
	$(MAKE) --no-print-directory progs testprogs
	@$(MAKE) --no-print-directory check-layers
	@B=$(B) tests/run_tests.sh
	@$(MAKE) --no-print-directory fuzz-smoke

# Every include and call between our folders goes down (tools/check_layers.sh
# says which tier may use which); make test runs it first.
check-layers: progs
	@B=$(B) tools/check_layers.sh

# The suite three times beside three CPU hogs and a parallel build (not
# part of `make test`; SOAK_ROUNDS=N for another count).
soak: deps-test
	$(MAKE) --no-print-directory progs testprogs
	@B=$(B) tests/soak.sh $${SOAK_ROUNDS:-3}

check-asan: deps-test
	$(MAKE) --no-print-directory B=build-asan OPT=-O1 \
		SAN="-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all" \
		progs testprogs
	@B=build-asan ASAN_OPTIONS=detect_leaks=1 TL_SCALE=$${TL_SCALE:-10} tests/run_tests.sh

# Only the multi-threaded tests (TSAN_TESTS that exist); vipd is built with
# TSan too. The tests fork peers from a process whose NIC thread runs, and
# the peers start NIC threads of their own: die_after_fork=0 lets them.
# TSan does not model the wake-up protocol's fences (fw_updt.c), and gcc
# says so at each one (-Wtsan): said once here instead of failing the build.
TSAN_RUN := $(filter $(TSAN_TESTS),$(patsubst tests/%.c,%,$(TEST_SRCS)))
check-tsan: deps-test
	$(MAKE) --no-print-directory B=build-tsan OPT=-O1 \
		SAN="-fsanitize=thread -fno-omit-frame-pointer -Wno-tsan" progs testprogs
	@$(if $(TSAN_RUN),B=build-tsan TL_SCALE=$${TL_SCALE:-10} TSAN_OPTIONS="second_deadlock_stack=1 die_after_fork=0" \
		tests/run_tests.sh $(TSAN_RUN),echo "make: none of $(TSAN_TESTS) exists")

valgrind: deps-test
	$(MAKE) --no-print-directory progs testprogs
	@B=$(B) VALGRIND=1 tests/run_tests.sh

# ---- fuzzing (tests/fuzz/, spec-notes/fuzzing.md) ------------------------------
# libFuzzer targets, built with clang under build-fuzz/ (the library and vipd
# instrumented, ASan + UBSan), so the gcc builds are untouched. `make fuzz`
# runs each for FUZZ_SECONDS from its corpus; `make test` runs each for a few
# seconds (fuzz-smoke). fuzzprogs is only meant for B=build-fuzz CC=clang.
FUZZ_SECONDS ?= 180
FUZZ_SAN  := -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all \
	-fno-omit-frame-pointer
FUZZ_MAKE  = $(MAKE) --no-print-directory B=build-fuzz CC=clang OPT=-O1 SAN="$(FUZZ_SAN)"
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(B)/fuzz/%,$(FUZZ_SRCS))
# vipd without kd_main.c and kd_core.c (the fuzzer stands in for its loop,
# its state, its log and its clock)
FUZZ_VIPD := $(filter-out kdriver/kd_main.c kdriver/kd_core.c,$(VIPD_SRCS))

fuzzprogs: $(FUZZ_BINS)

$(B)/fuzz/fuzz_ctl: $(B)/obj/tests/fuzz/fuzz_ctl.o $(call obj,$(FUZZ_VIPD))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(SODIUM_LIBS) -lpthread -lm

$(B)/fuzz/fuzz_host: $(B)/obj/tests/fuzz/fuzz_host.o $(call obj,$(FUZZ_VIPD))
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(SODIUM_LIBS) -lpthread -lm

$(B)/fuzz/fuzz_wire: $(B)/obj/tests/fuzz/fuzz_wire.o $(call obj,$(TEST_LIB) $(TFW_LIB)) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(SODIUM_LIBS) -lcunit -lpthread -lm

$(B)/fuzz/fuzz_net: $(B)/obj/tests/fuzz/fuzz_net.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(SODIUM_LIBS) -lpthread -lm

$(B)/fuzz/fuzz_profile: $(B)/obj/tests/fuzz/fuzz_profile.o $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -fsanitize=fuzzer -o $@ $^ $(SODIUM_LIBS) -lpthread -lm

# The seed inputs of fuzz_ctl and fuzz_wire (kept in tests/fuzz/corpus/):
# real requests and real packets, written by an ordinary (gcc) program.
$(B)/fuzz/gen_corpus: $(B)/obj/tests/fuzz/gen_corpus.o $(call obj,$(TEST_LIB) $(TFW_LIB)) $(LIBA)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -o $@ $^ $(SODIUM_LIBS) -lcunit -lpthread -lm

fuzz-corpus: deps-test
	$(MAKE) --no-print-directory $(B)/fuzz/gen_corpus
	mkdir -p tests/fuzz/corpus/ctl tests/fuzz/corpus/wire
	$(B)/fuzz/gen_corpus tests/fuzz/corpus

fuzz: deps-fuzz deps-test
	$(FUZZ_MAKE) fuzzprogs
	@B=build-fuzz FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run_fuzz.sh

fuzz-smoke:
	@if $(MAKE) --no-print-directory deps-fuzz && command -v clang >/dev/null; then \
		$(FUZZ_MAKE) fuzzprogs && B=build-fuzz tests/fuzz/run_fuzz.sh --smoke; \
	else \
		echo "make: skipping the fuzz targets: no clang/libFuzzer (Debian packages $(DEB_FUZZ))"; \
	fi

# ---- benchmarks ---------------------------------------------------------------
bench: deps-bench
	$(MAKE) --no-print-directory progs
	@B=$(B) bench/run_bench.sh $(if $(QUICK),--quick)
	@B=$(B) bench/run_hosts.sh $(if $(QUICK),--quick)
	@B=$(B) bench/run_hostile.sh $(if $(QUICK),--quick)
	@B=$(B) bench/run_reg.sh $(if $(QUICK),--quick)

# The UDP and libfabric links between emulated hosts against plain UDP and
# libfabric (bench/run_hosts.sh).
bench-hosts: progs
	@B=$(B) bench/run_hosts.sh $(if $(QUICK),--quick)

# Register-per-message ping-pongs and the cost of a registration
# (bench/run_reg.sh).
bench-reg: progs
	@B=$(B) bench/run_reg.sh $(if $(QUICK),--quick)

# A neighbour that forges a paced NIC's shared page, beside a ping-pong
# (bench/run_hostile.sh).
bench-hostile: progs
	@B=$(B) bench/run_hostile.sh $(if $(QUICK),--quick)

# ---- install --------------------------------------------------------------------
# Everything a user builds against or runs: both libraries (shared and
# static), every public header, the daemons and tools, amrun, vip_model,
# vipclock, both .pc files (whose Libs carry an rpath to $(PREFIX)/lib, so
# a program runs without ldconfig), the profiles and the systemd unit.
install: deps
	@$(MAKE) --no-print-directory install-files
install-files: $(LIBSO) $(LIBA) $(VIPD) $(VIPCTL) $(VIPCLOCK_SO) $(B)/lib/pkgconfig/vipl.pc \
		$(AM2SO) $(AM2A) $(AMRUN) $(B)/bin/vip_model
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 vipl/include/vipl.h include/via_spec.h vipl/include/vipl_ext.h am2/include/am2.h \
		am2/include/am2_spmd.h am2/include/amudp.h am2/include/amudp_spmd.h \
		$(DESTDIR)$(PREFIX)/include/
	install -m 755 $(LIBSO) $(AM2SO) $(DESTDIR)$(PREFIX)/lib/
	ln -sf libvipl.so.$(SOVER) $(DESTDIR)$(PREFIX)/lib/libvipl.so
	ln -sf libam2.so.$(SOVER) $(DESTDIR)$(PREFIX)/lib/libam2.so
	install -m 644 $(LIBA) $(AM2A) $(DESTDIR)$(PREFIX)/lib/
	for pc in vipl/vipl.pc.in am2/am2.pc.in; do \
		sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' $$pc \
			> $(DESTDIR)$(PREFIX)/lib/pkgconfig/$$(basename $$pc .in); done
	install -m 755 $(VIPD) $(VIPCTL) $(AMRUN) $(B)/bin/vip_model $(DESTDIR)$(PREFIX)/bin/
	install -m 755 kdriver/vipd-start.sh $(DESTDIR)$(PREFIX)/bin/vipd-start
	install -m 755 $(VIPCLOCK_SO) $(DESTDIR)$(PREFIX)/lib/
	install -m 755 vipl/clock/vipclock.sh $(DESTDIR)$(PREFIX)/bin/vipclock
	install -d $(DESTDIR)$(PREFIX)/lib/systemd/system
	sed -e 's|@PREFIX@|$(PREFIX)|' kdriver/vipd.service.in \
		> $(DESTDIR)$(PREFIX)/lib/systemd/system/vipd.service
	install -d $(DESTDIR)$(PREFIX)/share/vipl/profiles
	install -m 644 lanai-fw/profiles/*.conf $(DESTDIR)$(PREFIX)/share/vipl/profiles/

clean:
	rm -rf build build-asan build-tsan build-fuzz

-include $(shell find $(B)/obj -name '*.d' 2>/dev/null)
