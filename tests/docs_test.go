package tests

import (
	"os"
	"strings"
	"testing"

	"github.com/matryer/is"
)

// TestTheREADMEsUnitIsThePackagedOne: a deployer who copies the README's unit gets what the
// package installs, not an older one.
func TestTheREADMEsUnitIsThePackagedOne(t *testing.T) {
	is := is.New(t)
	readme, err := os.ReadFile("../README.md")
	is.NoErr(err)
	unit, err := os.ReadFile("../deploy/systemd/novox-provisioner.service")
	is.NoErr(err)
	is.True(strings.Contains(string(readme), "```ini\n"+string(unit)+"```\n")) // the packaged unit, word for word
}
