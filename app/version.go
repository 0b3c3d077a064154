package app

import (
	"runtime"
	"runtime/debug"
	"strings"
)

// Release is this tree's version. It lives in the source, not in the build, so that a clone,
// `go build` and `go install .../cmd/provisioner@vX.Y.Z` all say it; a release commit raises
// it and is tagged v<Release> (make dist names its files after it).
const Release = "0.1.0"

// Commit is the commit the binary was built from, set by the linker (make build, make dist:
// -X github.com/novox/postgres-provider/app.Commit=...). Where it is not, the VCS stamp of
// `go build` stands in, else the hash a pseudo-version carries, else "unknown".
var Commit = ""

// build is what a binary knows of how it was made.
type build struct {
	version, commit, goversion string
}

func version() build {
	b := build{version: Release, commit: Commit, goversion: runtime.Version()}
	if b.commit != "" {
		return b
	}
	b.commit = "unknown"
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	modified := false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			b.commit = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if b.commit != "unknown" {
		if modified {
			b.commit += "-dirty"
		}
		return b
	}
	// go install ...@<commit> builds a pseudo-version, vX.Y.Z-0.yyyymmddhhmmss-<12 hex>;
	// a tagged release (vX.Y.Z) carries no commit.
	if v := info.Main.Version; strings.Count(v, "-") >= 2 {
		if h := v[strings.LastIndex(v, "-")+1:]; len(h) == 12 {
			b.commit = h
		}
	}
	return b
}
