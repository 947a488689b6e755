# SPDX-License-Identifier: Apache-2.0
#
# make run    dependencies (with docker.io, nftables, mmdebstrap: tools/deps.sh run) + release
#             build + a Docker daemon when none answers, then sluice up --data var: proxy,
#             control plane, container network, dashboard (docs/up.md); ARGS go to sluice up
# make test   dependencies + a Docker daemon + the sandbox image + every test in the release and
#             the ASan+UBSan configurations
# make build  dependencies + release build; the binary is build/sluice
# make deb    the Debian package build/deb/sluice_VERSION_amd64.deb (tools/deb.sh: debhelper on a
#             copy of the tree, lintian; docs/install.md)
# make fuzz   each libFuzzer target for FUZZ_SECONDS (default 60)
# make fuzz-long  each libFuzzer target for FUZZ_LONG_SECONDS (default 3600), one after the
#             other, in $(FUZZ_BUILD); new inputs and crashes are kept in $(FUZZ_WORK)/<target>
# make bench  build, then bench/compare: the policy micro-benchmark and sluice side by side
#             with squid, mitmproxy and tinyproxy (~12 min; numbers, not pass/fail; installs the
#             peers from Debian when missing). ARGS are passed on: make bench ARGS=--quick
# make bench-quick  the same with --quick (~3 min)
# make bench-scale  bench/scale: the policy snapshot at 0, 1 000 and 10 000 clients (size, build,
#             change-to-acknowledgement time, memory; ~1 min)
# make lint   clang-format check, tools/checksrc.sh, clang-tidy
# make format reformat every C file

BUILD      ?= build
ASAN_BUILD ?= build/asan
TSAN_BUILD ?= build/tsan
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 60
FUZZ_LONG_SECONDS ?= 3600
FUZZ_BUILD ?= build/fuzz
FUZZ_WORK  ?= build/fuzz-work
CTEST      = ctest --output-on-failure -j $(JOBS)

.PHONY: all deps run-deps test-deps deb-deps deb build run test test-release test-asan test-tsan fuzz fuzz-long bench \
	bench-quick bench-scale lint format clean

all: build

deps:
	tools/deps.sh build

test-deps:
	tools/deps.sh test

deb-deps:
	tools/deps.sh deb

deb: deb-deps
	tools/deb.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# sluice up on the data directory var/ (docs/up.md). When docker.io is installed but no daemon
# answers, tools/dockerd.sh starts one first; unlike make test, make run leaves that daemon
# running afterwards (stop it with `tools/dockerd.sh stop run`; make test never stops it). Without docker.io, sluice up runs
# without sandboxes and says so. ARGS go to sluice up: make run ARGS='--control-listen 0.0.0.0:8080'
run-deps:
	tools/deps.sh run

run: run-deps build
	@if command -v dockerd >/dev/null 2>&1 && ! tools/dockerd.sh status 2>/dev/null; then \
		if tools/dockerd.sh start run; then \
			echo "make run: started dockerd; it keeps running after sluice up stops" \
				"(tools/dockerd.sh stop run ends it)"; \
		else \
			echo "make run: could not start dockerd; sluice up runs without sandboxes"; \
		fi; \
	fi
	$(BUILD)/sluice up --data var $(ARGS)

# A Docker daemon (tools/dockerd.sh starts one only when none answers) and the sandbox images,
# sluice/sandbox:bookworm and the agents' sluice/sandbox:bookworm-dev (tools/sandbox-image.sh;
# cached by content in /var/cache/sluice, so only a changed recipe builds again), then release,
# ThreadSanitizer on the multi-threaded certificate cache, and ASan+UBSan with the fuzzers last,
# so the final CTest summary is the largest run. The daemon is stopped afterwards, pass or fail, only if this run started it
# (tools/dockerd.sh records who started it: a daemon make run started keeps running); the exit
# status is the tests'.
test: test-deps
	@rc=0; \
	tools/dockerd.sh start test && tools/sandbox-image.sh \
		&& tools/sandbox-image.sh --image sluice/sandbox:bookworm-dev \
		&& $(MAKE) test-release && $(MAKE) test-tsan && $(MAKE) test-asan || rc=$$?; \
	tools/dockerd.sh stop test || { [ $$rc -ne 0 ] || rc=1; }; \
	exit $$rc

test-release: build
	cd $(BUILD) && $(CTEST)

test-asan:
	CC=clang cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=ON \
		-DSLUICE_FUZZ=ON -DSLUICE_FUZZ_SECONDS=$(FUZZ_SECONDS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && $(CTEST)

test-tsan:
	CC=clang cmake -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSLUICE_TSAN=ON
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target test_certs
	cd $(TSAN_BUILD) && $(CTEST) -R '^unit\.certs$$'

fuzz: test-deps
	CC=clang cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=ON \
		-DSLUICE_FUZZ=ON -DSLUICE_FUZZ_SECONDS=$(FUZZ_SECONDS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && $(CTEST) -L '^fuzz$$'

# Hours of fuzzing: every target in turn, starting from its committed corpus (read only) and the
# work directory of earlier runs, which collects what each run finds. A failing target does not
# stop the others; the exit status says whether any failed. Promote useful inputs from the work
# directory into tests/fuzz/<target>/corpus by hand (libFuzzer -merge=1 keeps it small).
fuzz-long: test-deps
	CC=clang cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DSLUICE_SANITIZE=ON \
		-DSLUICE_FUZZ=ON -DSLUICE_FUZZ_SECONDS=$(FUZZ_LONG_SECONDS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@rc=0; for src in tests/fuzz/fuzz_*.c; do \
		t=$$(basename $$src .c); t=$${t#fuzz_}; work=$(FUZZ_WORK)/$$t; \
		dict=tests/fuzz/$$t/$$t.dict; mkdir -p $$work; \
		echo "fuzz-long: $$t for $(FUZZ_LONG_SECONDS) s (inputs in $$work)"; \
		ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 $(FUZZ_BUILD)/tests/fuzz_$$t \
			-max_total_time=$(FUZZ_LONG_SECONDS) -timeout=10 -rss_limit_mb=2048 \
			-print_final_stats=1 -artifact_prefix=$$work/ \
			$$(test -f $$dict && echo -dict=$$dict) $$work tests/fuzz/$$t/corpus \
			|| { echo "fuzz-long: $$t FAILED (see $$work/crash-*)"; rc=1; }; \
	done; exit $$rc

# Results in $(BENCH_OUT)/latest.md and latest.json (bench/README.md says what each figure means).
BENCH_OUT ?= $(BUILD)/bench-results

bench: build
	bench/compare --build $(BUILD) --out $(BENCH_OUT) $(ARGS)

bench-quick: build
	bench/compare --build $(BUILD) --out $(BENCH_OUT) --quick $(ARGS)

bench-scale: build
	bench/scale --build $(BUILD) --out $(BENCH_OUT) $(ARGS)

lint: build
	tools/format.sh --check
	tools/checksrc.sh
	run-clang-tidy -quiet -p $(BUILD) -extra-arg=-Wno-unknown-warning-option '^$(CURDIR)/(base|http|policy|certs|cmd|proxy|control)/' >/dev/null

format:
	tools/format.sh

clean:
	rm -rf $(BUILD)
