# SPDX-License-Identifier: Apache-2.0
#
# make run    dependencies + release build, then what `sluice up` will start (see README.md)
# make test   dependencies + every test in the release and the ASan+UBSan configurations
# make build  dependencies + release build; the binary is build/sluice
# make fuzz   each libFuzzer target for FUZZ_SECONDS (default 60)
# make bench  the micro-benchmarks (numbers, not pass/fail)
# make lint   clang-format check, tools/checksrc.sh, clang-tidy
# make format reformat every C file

BUILD      ?= build
ASAN_BUILD ?= build/asan
TSAN_BUILD ?= build/tsan
JOBS       ?= $(shell nproc)
FUZZ_SECONDS ?= 60
CTEST      = ctest --output-on-failure -j $(JOBS)

.PHONY: all deps test-deps build run test test-release test-asan test-tsan fuzz bench lint format clean

all: build

deps:
	tools/deps.sh build

test-deps:
	tools/deps.sh test

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo

build: deps $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

run: build
	@$(BUILD)/sluice --version
	@echo
	@echo "make run will start 'sluice up' (proxy, control plane, container network and dashboard)"
	@echo "once those daemons are built; today 'sluice up' is not built yet (see README.md, Status)."
	@echo "What works now:"
	@echo "  $(BUILD)/sluice ca init --out var      # create the interception CA"
	@echo "  $(BUILD)/sluice policy check FILE      # validate a policy snapshot"
	@echo "  $(BUILD)/sluice policy explain FILE --client ID --url URL"

# Release first, then ThreadSanitizer on the multi-threaded certificate cache, then ASan+UBSan
# with the fuzzers last, so the final CTest summary is the largest run.
test: test-deps
	$(MAKE) test-release
	$(MAKE) test-tsan
	$(MAKE) test-asan

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

bench: build
	$(BUILD)/bench/policy_bench

lint: build
	tools/format.sh --check
	tools/checksrc.sh
	run-clang-tidy -quiet -p $(BUILD) '^$(CURDIR)/(base|policy|certs|cmd|proxy|control)/' >/dev/null

format:
	tools/format.sh

clean:
	rm -rf $(BUILD)
