# `make test` is the one command that checks everything on a fresh machine:
# it creates the repo-local Python venv (the AWS emulator, moto, and the
# published standardwebhooks package the signature test verifies with),
# lints template.yaml with cfn-lint and `sam validate --lint` (their own venv),
# builds the hookline binary the end-to-end tests run, starts two emulators
# on free loopback ports, and runs every test of the workspace against both
# backends (tests/run.sh: what `cargo test --workspace` runs, the AWS suite
# split between the two emulators and the serve suite side by side). Once
# the serve suite is done, beside the AWS one, it checks the API's contract
# from outside (tests/contract/run.sh quick: a bounded schemathesis run
# against a running `hookline serve`, and the README walk-through through a
# client generated from docs/openapi.json), then the console in a real
# browser (tests/browser/run.sh: the system's Chromium, installed by
# infra/chromium.sh where missing, driven by Playwright against a running
# `hookline serve`). Then it stops the emulators.

VENV ?= .venv
PYTHON ?= python3
CARGO ?= cargo
# The Lambda functions (functions/<name>/), one bootstrap each.
FUNCTIONS := ingest router saga delivery requeue api reconciler

.PHONY: browser screenshots chromium test prepare rust build venv lint-template lint-rust docs openapi schemathesis contract fuzz bench bench-neighbours bench-slowloris bench-retention bench-cost bench-cold-start bench-bulk-requeue bench-recovery bench-compare lambda sam-build clean-venv

test: prepare
	@e1=$$(infra/emulator.sh start) && e2=$$(EMULATOR_DIR=$(EMULATOR_2) infra/emulator.sh start) || exit 1; \
	echo "AWS emulators at $$e1 $$e2"; \
	AWS_ENDPOINT_URL=$$e1 HOOKLINE_TEST_EMULATORS="$$e1 $$e2" AWS_REGION=us-east-1 \
	AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_EC2_METADATA_DISABLED=true \
	HOOKLINE_TEST_PYTHON=$(abspath $(VENV))/bin/python VENV=$(VENV) OUTSIDE_CHECKS=1 \
	CARGO=$(CARGO) tests/run.sh; status=$$?; \
	infra/emulator.sh stop; EMULATOR_DIR=$(EMULATOR_2) infra/emulator.sh stop; \
	exit $$status

# The second emulator of `make test` (tests/run.sh splits the AWS suite
# between the two: one moto process uses at most one core).
EMULATOR_2 := $(abspath target/emulator-2)

# The API's contract from outside (tests/contract/run.sh): schemathesis
# against a running `hookline serve` and the generated client's
# walk-through. `contract` is the bounded run of `make test`; `schemathesis`
# the long one (200 examples per operation, a random seed; ARGS e.g.
# "MAX_EXAMPLES=1000 SEED=7", SCHEMATHESIS_ARGS passed to schemathesis).
contract: venv build
	VENV=$(VENV) tests/contract/run.sh quick

# The system's Chromium for the browser tests (Debian's package, installed
# where missing).
chromium:
	infra/chromium.sh ensure

# The console's browser tests alone; `screenshots` also rewrites
# docs/screenshots/ (the pictures the README and docs/console.md show).
browser: venv build
	VENV=$(VENV) tests/browser/run.sh

screenshots: venv build
	HOOKLINE_SCREENSHOTS=1 BROWSER_BUDGET=400 VENV=$(VENV) tests/browser/run.sh

schemathesis: venv build
	VENV=$(VENV) CONTRACT_STEPS=fuzz $(ARGS) tests/contract/run.sh long

# docs/openapi.json and docs/api.md's route table regenerated from the code
# (a test fails while either differs).
openapi:
	HOOKLINE_UPDATE_OPENAPI=1 $(CARGO) test -p hookline-api --locked --lib -- --exact \
		openapi::tests::the_checked_in_openapi_is_the_generated_one openapi::tests::the_api_doc_holds_the_route_table

# Everything the test run needs, side by side: the Python venvs and the
# template lint wait mostly on the network and the disk while cargo keeps
# the cores busy (cargo runs its own steps one at a time on its lock).
# Output is grouped per step.
prepare:
	@$(MAKE) --no-print-directory -j3 --output-sync=target venv lint-template rust chromium

# The Rust checks, then the binary the serve suite runs.
rust: lint-rust docs
	$(CARGO) build -p hookline --features failpoints --locked

# The code's own docs, private items included (links between modules are
# how a reader finds the next hop): a broken or ambiguous link, or bad
# markup, is an error. Links from public to private items are allowed: every
# crate here is documented for the people who work on it.
docs:
	RUSTDOCFLAGS="-D warnings -A rustdoc::private_intra_doc_links" $(CARGO) doc --workspace --no-deps --locked --document-private-items

# Formatting and lints of every crate and target (warnings are errors).
lint-rust:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets --locked -- -D warnings

build:
	$(CARGO) build -p hookline --features failpoints --locked

venv: $(VENV)/.ok

$(VENV)/.ok: tests/python/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/python/requirements.txt
	touch $@

lint-template:
	infra/lint.sh

# The parsers under the fuzzer (fuzz/, docs/development.md#fuzzing):
# 1,000,000 inputs per target by default; ARGS e.g. "--target envelope
# --seed 7 --inputs 5000000". A short pass runs in `make test`.
fuzz:
	$(CARGO) run --profile fuzz -p hookline-fuzz -- $(ARGS)

# Benchmarks (commands that print figures; not part of `make test`).
bench:
	$(CARGO) build --release -p hookline
	$(CARGO) run --release -p hookline-bench --bin bench -- $(ARGS)

# The noisy-neighbour bound, round by round: alone, beside a hung and beside
# a failing neighbour, each against its own round (ROUNDS, ARGS e.g.
# "--events 20000"); prints every round and the median ratios. Two builds,
# as in `bench`: built together, the benchmark crate's features
# (`failpoints`, `aws`) would be compiled into the measured hookline too.
ROUNDS ?= 5
bench-neighbours:
	$(CARGO) build --release -p hookline
	$(CARGO) build --release -p hookline-bench --bin bench
	bench/neighbours.sh $(ROUNDS) $${CARGO_TARGET_DIR:-target}/release/bench $(ARGS)

# The BASE commit's hookline against the current tree's on the same load and
# the same driver (the current tree's `bench`), interleaved round by round in
# alternating order; prints each figure's ratio current/base per round and
# the medians (ROUNDS, ARGS passed to the driver; BENCH_DRIVER_PKG overrides
# the driver's package). See docs/benchmarks.md, "Comparing two builds".
bench-compare:
	BASE='$(BASE)' ROUNDS='$(ROUNDS)' ARGS='$(ARGS)' BENCH_DRIVER_PKG='$(BENCH_DRIVER_PKG)' CARGO='$(CARGO)' infra/bench-compare.sh

# Ingest latency of `hookline serve` with N slow/idle connections held open
# (ARGS e.g. "--connections 2000 --posts 2000"; target p99 under 50 ms).
bench-slowloris:
	$(CARGO) build --release -p hookline
	$(CARGO) run --release -p hookline-bench --bin slowloris -- $(ARGS)

# Bounded storage: database size every 30 s while events flow past a short
# retention (ARGS e.g. "--events 1000000 --rate 3000 --retention 5m"; add
# "--retention none" for the run without purging).
bench-retention:
	$(CARGO) build --release -p hookline
	$(CARGO) run --release -p hookline-bench --bin retention -- $(ARGS)

# AWS cost per delivery on the emulator (counts requests, DynamoDB units and
# invocations; prices from infra/prices.json). ARGS e.g. "--events 500
# --batch-events 1000 --fanout-events 500 --scenarios ABC".
bench-cost: venv
	@endpoint=$$(infra/emulator.sh start) || exit 1; \
	echo "AWS emulator at $$endpoint"; \
	AWS_ENDPOINT_URL=$$endpoint AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing \
	AWS_EC2_METADATA_DISABLED=true \
	$(CARGO) run --release -p hookline-bench --bin cost -- $(ARGS); status=$$?; \
	infra/emulator.sh stop; exit $$status

# Time to requeue N dead letters through the bulk job on `hookline serve`
# (release build; ARGS e.g. "--dead-letters 10000").
bench-bulk-requeue:
	$(CARGO) build --release -p hookline
	HOOKLINE_BIN=$${CARGO_TARGET_DIR:-target}/release/hookline $(CARGO) run --release -p hookline-bench --bin bulk_requeue -- $(ARGS)

# Start-up recovery of `hookline serve` with N accepted but undelivered
# events on disk (ARGS e.g. "--events 1000000 --dir /var/tmp/rec"): time to
# accept again, time to deliver the backlog, duplicates.
bench-recovery:
	$(CARGO) build --release -p hookline
	$(CARGO) run --release -p hookline-bench --bin recovery -- $(ARGS)

# The functions are built as `make lambda` builds them (LAMBDA_RUSTFLAGS,
# hence `--target`: the flags must not reach the host's proc macros), for
# this host, into target/<host>/release; the driver weighs target/lambda's
# arm64 bootstraps when they are there.
HOST_TRIPLE := $(shell rustc -vV 2>/dev/null | sed -n 's/^host: //p')
bench-cold-start:
	$(CARGO) build --release --target $(HOST_TRIPLE) --config 'target.$(HOST_TRIPLE).rustflags = "$(LAMBDA_RUSTFLAGS)"' $(foreach f,$(FUNCTIONS),-p $(f))
	$(CARGO) run --release -p hookline-bench --bin cold_start -- --dir $${CARGO_TARGET_DIR:-target}/$(HOST_TRIPLE)/release $(ARGS)

# The Lambda bootstraps for deployment, cross-compiled to arm64 (not in CI:
# cargo-lambda and zig come from PyPI into their own venv, ~500 MB; the arm64
# standard library from rustup). Output: target/lambda/<function>/bootstrap.
LAMBDA_VENV ?= .venv-lambda
# The bootstraps are position-dependent executables (not PIE): a PIE
# carries a relocation for every pointer in its data (`.rela.dyn`, 0.5 MB
# of the api bootstrap's 8.5) that the loader applies at every start. The
# cost: the executable's own addresses are not randomized (the stack, heap
# and shared libraries still are). docs/aws.md, "Cold start and bootstrap
# size". Empty (LAMBDA_RUSTFLAGS=) builds PIEs again.
LAMBDA_RUSTFLAGS ?= -C relocation-model=static

lambda: $(LAMBDA_VENV)/.ok
	rustup target add aarch64-unknown-linux-gnu
	PATH=$(abspath $(LAMBDA_VENV))/bin:$$PATH CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="$(LAMBDA_RUSTFLAGS)" \
	  cargo lambda build --release --arm64 $(foreach f,$(FUNCTIONS),-p $(f)) $(ARGS)
	@ls -l $${CARGO_TARGET_DIR:-target}/lambda/*/bootstrap

# `sam build` of template.yaml: SAM runs cargo-lambda once per function.
sam-build: $(LAMBDA_VENV)/.ok
	infra/lint.sh >/dev/null
	PATH=$(abspath $(LAMBDA_VENV))/bin:$$PATH CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUSTFLAGS="$(LAMBDA_RUSTFLAGS)" \
	  SAM_CLI_TELEMETRY=0 .venv-lint/bin/sam build --beta-features

$(LAMBDA_VENV)/.ok: infra/requirements-lambda.txt
	$(PYTHON) -m venv $(LAMBDA_VENV)
	$(LAMBDA_VENV)/bin/pip install --quiet --disable-pip-version-check -r infra/requirements-lambda.txt
	touch $@

clean-venv:
	rm -rf $(VENV) .venv-lint $(LAMBDA_VENV)
