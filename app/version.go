package app

import (
	"runtime"
	"runtime/debug"
)

// Version is the build's version, set by the linker (make build); where it is not, the module
// version `go install` recorded stands in.
var Version = "dev"

// build is what a binary knows of how it was made.
type build struct {
	version, revision, goversion string
}

func version() build {
	b := build{version: Version, revision: "unknown", goversion: runtime.Version()}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return b
	}
	if b.version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
		b.version = info.Main.Version
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			b.revision = s.Value
		}
	}
	return b
}
