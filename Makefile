# SPDX-License-Identifier: Apache-2.0
#
# make run    dependencies + release build, then the proxy on 127.0.0.1:3128 (see README.md)
# make test   dependencies + a Docker daemon + the sandbox image + every test in the release and
#             the ASan+UBSan configurations
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

# Until `sluice up` (proxy + control plane) exists, make run starts the proxy alone: a CA in
# var/ (made once), the example policy copied to var/policy.json (edited there; reloaded on
# change), listening on 127.0.0.1:3128.
run: build
	@test -f var/ca.pem || $(BUILD)/sluice ca init --out var
	@test -f var/policy.json || cp examples/policy.json var/policy.json
	@echo
	@echo "sluice proxy on 127.0.0.1:3128 with the policy in var/policy.json (Ctrl-C stops it)."
	@echo "Try:  curl --proxy http://127.0.0.1:3128 --cacert var/ca.pem https://pypi.org/simple/"
	@echo "      curl --proxy http://127.0.0.1:3128 --cacert var/ca.pem https://example.org/  (403)"
	@echo "'sluice up' (proxy + control plane + containers) is not built yet; see README.md."
	@echo
	$(BUILD)/sluice proxy --data var --policy var/policy.json --audit-log var/audit.log

# A Docker daemon (tools/dockerd.sh starts one only when none answers) and the sandbox image
# (tools/sandbox-image.sh; cached), then release, ThreadSanitizer on the multi-threaded
# certificate cache, and ASan+UBSan with the fuzzers last, so the final CTest summary is the
# largest run. The daemon is stopped afterwards, pass or fail, if this run started it; the
# exit status is the tests'.
test: test-deps
	@rc=0; \
	tools/dockerd.sh start && tools/sandbox-image.sh \
		&& $(MAKE) test-release && $(MAKE) test-tsan && $(MAKE) test-asan || rc=$$?; \
	tools/dockerd.sh stop || { [ $$rc -ne 0 ] || rc=1; }; \
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

bench: build
	$(BUILD)/bench/policy_bench

lint: build
	tools/format.sh --check
	tools/checksrc.sh
	run-clang-tidy -quiet -p $(BUILD) -extra-arg=-Wno-unknown-warning-option '^$(CURDIR)/(base|http|policy|certs|cmd|proxy|control)/' >/dev/null

format:
	tools/format.sh

clean:
	rm -rf $(BUILD)
