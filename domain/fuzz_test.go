package domain_test

import (
	"testing"

	"github.com/novox/postgres-provider/domain"
)

// FuzzContributionsFile feeds the loop any bytes as the contributions file after letta was
// applied. Whatever the bytes, the pass must not panic; a file that was not read must apply and
// withdraw nothing; a file that was read withdraws letta exactly when it no longer lists it.
func FuzzContributionsFile(f *testing.F) {
	for _, seed := range []string{
		``, `{`, `null`, `[]`, `{"given": null}`, `{"given": {}}`, `{"given": []}`, `{"requirement": "redis", "given": []}`,
		`{"given": [{"as": "letta", "secret": "/s/letta"}]}`, `{"given": [{"as": "letta"}]}`, `{"given": [{"as": 7}]}`,
		`{"given": [{"as": "other", "secret": "/s/other", "values": {"extensions": ["x"]}}]}`,
		"{\"given\": [{\"as\": \"letta\", \"secret\": \"/s/letta\", \"values\": \"\xff\"}]}",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, content []byte) {
		w := newWorld(t)
		w.write("/s/letta", "pw")
		w.contributions(consumer("letta", "/s/letta"))
		w.pass(0)
		creates := len(w.backend.creates)

		w.write(receives, string(content))
		r := w.pass(0)
		if len(w.backend.removes) != 0 {
			t.Fatalf("withdrew before the file settled: %q", content)
		}
		r = w.pass(domain.DefaultWithdrawSettle)
		_, listed := r.Consumers["letta"]
		complete := r.FileRead && r.BadEntries == 0
		switch {
		case !r.FileRead && (len(w.backend.creates) != creates || len(w.backend.removes) != 0):
			t.Fatalf("a file that was not read applied or withdrew: %q", content)
		case r.FileRead && !complete && len(w.backend.removes) != 0:
			t.Fatalf("a file with a bad entry withdrew: %q", content)
		case complete && listed == (len(w.backend.removes) == 1):
			t.Fatalf("listed=%v but removes=%v for %q", listed, w.backend.removes, content)
		}
	})
}
