# Each target installs what is missing (scripts/setup.sh), then hands over to ./sawmill.
.PHONY: run test lint bench hostile build clean setup setup-bench test-linux

SYSTEM ?= linux

setup:
	@bash scripts/setup.sh

setup-bench:
	@bash scripts/setup.sh bench

build: setup
	./sawmill build

run: setup
	./sawmill run $(SYSTEM)

test: setup
	./sawmill test

# The Linux test harness alone (busybox applets and tests/linux/*.c against the host's Linux).
test-linux: setup
	./sawmill test-linux

# Also part of `make test`.
lint: setup
	./sawmill lint

bench: setup-bench
	./sawmill bench

# The hostile client's long run: 100,000 messages per server (docs/hostile.md).
hostile: setup
	./sawmill hostile

clean:
	cargo clean
