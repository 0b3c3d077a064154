SHELL := /bin/bash
# The README's two commands: `make run` and `make test`.
GO      ?= go
PKG     := github.com/novox/postgres-provider
BIN     := bin/provisioner
# The release lives in app/version.go (app.Release), so that any build says it; the commit is
# stamped by the linker (GOFLAGS may say -buildvcs=false), with -dirty for uncommitted changes.
VERSION := $(shell sed -n 's/^const Release = "\(.*\)"$$/\1/p' app/version.go)
COMMIT  ?= $(shell git describe --match=NoTagMatches --always --abbrev=40 --dirty 2>/dev/null || echo unknown)
LDFLAGS := -X $(PKG)/app.Commit=$(COMMIT)

.PHONY: build dist test stress cover check lint deps bench compare fuzz run clean

build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/provisioner

# A release into $(DIST)/: static binaries (CGO_ENABLED=0) for each of ARCHES, a Debian package
# of each (nfpm, pinned in go.mod: go tool nfpm) with the systemd unit, the environment file,
# the system user and the alerting rules, and SHA256SUMS of them all. Names carry VERSION, the
# release in app/version.go; SOURCE_DATE_EPOCH (the commit's time) makes the packages
# reproducible.
DIST   ?= dist
ARCHES ?= amd64 arm64
dist:
	@test -n "$(VERSION)" || { echo "dist: no release found in app/version.go" >&2; exit 1; }
	rm -rf $(DIST) && mkdir -p $(DIST)
	@set -e; export SOURCE_DATE_EPOCH=$$(git log -1 --format=%ct 2>/dev/null || date +%s); \
	for arch in $(ARCHES); do \
		bin=$(DIST)/provisioner-$(VERSION)-linux-$$arch; \
		echo "build $$bin"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $$bin ./cmd/provisioner; \
		VERSION=$(VERSION) ARCH=$$arch BINARY=$$bin $(GO) tool nfpm package --config deploy/nfpm.yaml --packager deb --target $(DIST)/ >/dev/null; \
		echo "package $(DIST)/novox-provisioner_$(VERSION)_$$arch.deb"; \
	done
	cd $(DIST) && sha256sum provisioner-* *.deb > SHA256SUMS
	@ls -l $(DIST)

# The server the tests and make run start: PG=<major> (14, 16, 17, 18) for the binaries
# .ci/postgres-versions pins, fetched once a machine; without it, Debian's (15, with pgvector
# built from ../shared/third_party/). WITH_PG runs a command with PROVISIONER_TEST_PG_BIN set to
# the pinned binaries' folder (empty without PG), after saying which server it is.
PG ?=
WITH_PG = pgbin=$$(bash .ci/ensure-postgres $(if $(PG),--pg $(PG),--build)) || exit 1; \
	[ -z "$$pgbin" ] || echo "PostgreSQL $(PG): $$("$$pgbin/postgres" --version) from $$pgbin"; \
	PROVISIONER_TEST_PG_BIN=$$pgbin

# Every test, under the race detector, after the checks that need no server. PKGS narrows it
# (make test PG=14 PKGS='./adapters/postgres/ ./tests/...').
PKGS ?= ./...
test: check deps
	@$(WITH_PG) exec $(GO) test -race -count=1 -timeout 30m $(PKGS)

# The integration and end-to-end packages COUNT times over beside a CPU hog, one busy loop a
# core: the flakes that load brings out (make stress COUNT=10). The hog is stopped on every way
# out of the target.
COUNT ?= 10
stress:
	@$(WITH_PG) exec bash .ci/stress $(COUNT)

# The domain's statement coverage (the target is at least 95%).
cover:
	@$(GO) test -count=1 -coverprofile=.cover.out ./domain/ >/dev/null
	@$(GO) tool cover -func=.cover.out | tail -n 1
	@rm -f .cover.out

# gofmt and go vet: what every commit passes.
check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt wants to rewrite:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...

# check, and go.mod/go.sum as go mod tidy would leave them.
lint: check
	$(GO) mod tidy -diff

# The dependency rule: what the domain depends on, beyond the standard library, is the domain
# itself and what ports depends on; nothing else.
deps:
	@allowed=$$( { echo $(PKG)/domain; $(GO) list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./ports; } | sort -u); \
	got=$$($(GO) list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' ./domain | sort -u); \
	bad=$$(comm -13 <(echo "$$allowed") <(echo "$$got")); \
	if [ -n "$$bad" ]; then echo "domain depends on more than ports and the standard library:"; echo "$$bad"; exit 1; fi; \
	echo "deps: domain depends only on ports and the standard library"

# The main job on an embedded default: a throwaway PostgreSQL under .run/ (PG=<major> as for
# test), letta asking for vector, pg_trgm and dblink, the provisioner in the foreground. Ctrl-C
# stops everything.
run: build
	$(GO) build -o bin/run ./tests/run
	@$(WITH_PG) exec ./bin/run

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

# The provisioner against the least raw SQL that does the same work, on one throwaway server,
# rounds interleaved: make compare N=200 ROUNDS=3 [OUT=results.md] [COMPARE_FLAGS='-sweep 8'].
# Minutes long, so not part of make test.
N      ?= 200
ROUNDS ?= 3
compare: build
	$(GO) build -o bin/compare ./tests/compare
	@$(WITH_PG) exec ./bin/compare -bin $(BIN) -n $(N) -rounds $(ROUNDS) $(if $(OUT),-out $(OUT)) $(COMPARE_FLAGS)

# A minute of coverage-guided fuzzing of the contributions file; its seeds run in make test.
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzContributionsFile -fuzztime 60s ./domain/

clean:
	rm -rf bin .run dist
